package sluice.bench;

import java.io.DataInput;
import java.io.DataOutput;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.io.BytesWritable;
import org.apache.hadoop.io.IntWritable;
import org.apache.hadoop.io.NullWritable;
import org.apache.hadoop.io.Writable;
import org.apache.hadoop.mapreduce.InputFormat;
import org.apache.hadoop.mapreduce.InputSplit;
import org.apache.hadoop.mapreduce.Job;
import org.apache.hadoop.mapreduce.JobContext;
import org.apache.hadoop.mapreduce.Mapper;
import org.apache.hadoop.mapreduce.Partitioner;
import org.apache.hadoop.mapreduce.RecordReader;
import org.apache.hadoop.mapreduce.Reducer;
import org.apache.hadoop.mapreduce.TaskAttemptContext;
import org.apache.hadoop.mapreduce.lib.output.NullOutputFormat;

/**
 * The OSU HiBD shuffle micro-benchmarks (MR-AVG, MR-RAND, MR-SKEW) as a
 * Hadoop job, at the same parameters and with the same pairs as
 * {@code sluice bench ohb --type bytes}: a synthetic input format of MAPS
 * splits that read no file, maps that emit PAIRS pairs of PAIR_SIZE bytes
 * (a 16-byte key: destination reducer, map index, pair number, big-endian;
 * the value fills the rest), a partitioner that reads the destination from
 * the key, reducers that count and write nothing (NullOutputFormat).
 *
 * Usage: Ohb avg|rand|skew MAPS REDUCES PAIRS PAIR_SIZE THREADS
 * Prints: elapsed_s, pairs received, pairs received by reducer 0.
 */
public final class Ohb {
  private Ohb() {}

  /** A split that names its map and reads no file. */
  public static class SyntheticSplit extends InputSplit implements Writable {
    int index;

    public SyntheticSplit() {}

    SyntheticSplit(int index) {
      this.index = index;
    }

    @Override
    public long getLength() {
      return 0;
    }

    @Override
    public String[] getLocations() {
      return new String[0];
    }

    @Override
    public void write(DataOutput out) throws IOException {
      out.writeInt(index);
    }

    @Override
    public void readFields(DataInput in) throws IOException {
      index = in.readInt();
    }
  }

  /** MAPS synthetic splits, each one record: its index. */
  public static class SyntheticInput extends InputFormat<IntWritable, NullWritable> {
    @Override
    public List<InputSplit> getSplits(JobContext ctx) {
      int maps = ctx.getConfiguration().getInt("ohb.maps", 1);
      List<InputSplit> splits = new ArrayList<>();
      for (int i = 0; i < maps; i++) {
        splits.add(new SyntheticSplit(i));
      }
      return splits;
    }

    @Override
    public RecordReader<IntWritable, NullWritable> createRecordReader(
        InputSplit split, TaskAttemptContext ctx) {
      return new RecordReader<>() {
        int index;
        boolean done;

        @Override
        public void initialize(InputSplit s, TaskAttemptContext c) {
          index = ((SyntheticSplit) s).index;
        }

        @Override
        public boolean nextKeyValue() {
          if (done) {
            return false;
          }
          done = true;
          return true;
        }

        @Override
        public IntWritable getCurrentKey() {
          return new IntWritable(index);
        }

        @Override
        public NullWritable getCurrentValue() {
          return NullWritable.get();
        }

        @Override
        public float getProgress() {
          return done ? 1 : 0;
        }

        @Override
        public void close() {}
      };
    }
  }

  /** Emits the map's pairs, destinations by the pattern. */
  public static class PairMapper
      extends Mapper<IntWritable, NullWritable, BytesWritable, BytesWritable> {
    @Override
    protected void map(IntWritable index, NullWritable v, Context ctx)
        throws IOException, InterruptedException {
      Configuration conf = ctx.getConfiguration();
      String pattern = conf.get("ohb.pattern");
      int reduces = conf.getInt("ohb.reduces", 1);
      long pairs = conf.getLong("ohb.pairs", 1);
      int size = conf.getInt("ohb.pair.size", 1024);
      int map = index.get();
      Random rng = new Random(7L * 1_000_003 + map);
      byte[] value = new byte[size - 16];
      rng.nextBytes(value);
      BytesWritable val = new BytesWritable(value);
      byte[] key = new byte[16];
      BytesWritable k = new BytesWritable(key);
      ByteBuffer b = ByteBuffer.wrap(key);
      long start = 0;
      long share = pairs;
      int skewReducer = 0;
      for (long i = 0; i < pairs; i++) {
        int dest;
        if ("avg".equals(pattern)) {
          dest = (int) ((map * pairs + i) % reduces);
        } else if ("rand".equals(pattern)) {
          dest = rng.nextInt(reduces);
        } else {
          // Half to reducer 0, a quarter to 1, ...; the rest to the last.
          while (skewReducer < reduces - 1) {
            share = Math.min((pairs - start + 1) / 2, pairs - start);
            if (i < start + share) {
              break;
            }
            start += share;
            skewReducer++;
          }
          dest = skewReducer;
        }
        b.clear();
        b.putInt(dest).putInt(map).putLong(i);
        k.set(key, 0, 16);
        ctx.write(k, val);
      }
    }
  }

  /** The reducer the key names. */
  public static class DestinationPartitioner extends Partitioner<BytesWritable, BytesWritable> {
    @Override
    public int getPartition(BytesWritable key, BytesWritable value, int n) {
      return Math.floorMod(ByteBuffer.wrap(key.getBytes()).getInt(0), n);
    }
  }

  /** Counts what it receives; writes nothing. */
  public static class CountingReducer
      extends Reducer<BytesWritable, BytesWritable, NullWritable, NullWritable> {
    @Override
    protected void reduce(BytesWritable key, Iterable<BytesWritable> values, Context ctx) {
      long n = 0;
      for (BytesWritable v : values) {
        n++;
      }
      int dest = ByteBuffer.wrap(key.getBytes()).getInt(0);
      ctx.getCounter("OHB", "PAIRS").increment(n);
      ctx.getCounter("OHB", "PAIRS_R" + dest).increment(n);
    }
  }

  public static void main(String[] args) throws Exception {
    Configuration conf = new Configuration();
    conf.set("mapreduce.framework.name", "local");
    conf.set("fs.defaultFS", "file:///");
    // waitForCompletion polls every 5 s by default: a job would seem to
    // take a multiple of 5 s.
    conf.setInt("mapreduce.client.completion.pollinterval", 20);
    conf.set("ohb.pattern", args[0]);
    conf.setInt("ohb.maps", Integer.parseInt(args[1]));
    conf.setInt("ohb.reduces", Integer.parseInt(args[2]));
    conf.setLong("ohb.pairs", Long.parseLong(args[3]));
    conf.setInt("ohb.pair.size", Integer.parseInt(args[4]));
    conf.setInt("mapreduce.local.map.tasks.maximum", Integer.parseInt(args[5]));
    conf.setInt("mapreduce.local.reduce.tasks.maximum", Integer.parseInt(args[5]));
    Job job = Job.getInstance(conf, "ohb-" + args[0]);
    job.setJarByClass(Ohb.class);
    job.setInputFormatClass(SyntheticInput.class);
    job.setMapperClass(PairMapper.class);
    job.setPartitionerClass(DestinationPartitioner.class);
    job.setReducerClass(CountingReducer.class);
    job.setNumReduceTasks(Integer.parseInt(args[2]));
    job.setMapOutputKeyClass(BytesWritable.class);
    job.setMapOutputValueClass(BytesWritable.class);
    job.setOutputFormatClass(NullOutputFormat.class);
    long t0 = System.nanoTime();
    boolean ok = job.waitForCompletion(false);
    double secs = (System.nanoTime() - t0) / 1e9;
    if (!ok) {
      System.exit(1);
    }
    System.out.printf("elapsed_s %.3f%n", secs);
    System.out.println("pairs " + job.getCounters().findCounter("OHB", "PAIRS").getValue());
    System.out.println("pairs_r0 " + job.getCounters().findCounter("OHB", "PAIRS_R0").getValue());
  }
}
