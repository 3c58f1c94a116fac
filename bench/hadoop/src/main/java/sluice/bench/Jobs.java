package sluice.bench;

import java.io.IOException;
import java.util.StringTokenizer;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.io.DoubleWritable;
import org.apache.hadoop.io.IntWritable;
import org.apache.hadoop.io.LongWritable;
import org.apache.hadoop.io.NullWritable;
import org.apache.hadoop.io.Text;
import org.apache.hadoop.mapreduce.Job;
import org.apache.hadoop.mapreduce.Mapper;
import org.apache.hadoop.mapreduce.Reducer;
import org.apache.hadoop.mapreduce.lib.input.FileInputFormat;
import org.apache.hadoop.mapreduce.lib.output.FileOutputFormat;

/**
 * The jobs of Hadoop's own examples (WordCount with its reducer as the
 * combiner, a grep, a sort) and the Pavlo aggregations, written the way the
 * examples are, for LocalJobRunner.
 *
 * Usage: Jobs wordcount|grep|sort|agg-large|agg-small INPUT OUTPUT THREADS [PATTERN]
 */
public final class Jobs {
  private Jobs() {}

  /** Hadoop's WordCount mapper. */
  public static class TokenizerMapper extends Mapper<Object, Text, Text, IntWritable> {
    private static final IntWritable ONE = new IntWritable(1);
    private final Text word = new Text();

    @Override
    public void map(Object key, Text value, Context ctx) throws IOException, InterruptedException {
      StringTokenizer itr = new StringTokenizer(value.toString());
      while (itr.hasMoreTokens()) {
        word.set(itr.nextToken());
        ctx.write(word, ONE);
      }
    }
  }

  /** Hadoop's IntSumReducer, also the combiner. */
  public static class IntSumReducer extends Reducer<Text, IntWritable, Text, IntWritable> {
    private final IntWritable result = new IntWritable();

    @Override
    public void reduce(Text key, Iterable<IntWritable> values, Context ctx)
        throws IOException, InterruptedException {
      int sum = 0;
      for (IntWritable v : values) {
        sum += v.get();
      }
      result.set(sum);
      ctx.write(key, result);
    }
  }

  /** Map-only grep: lines containing the pattern (a regular expression). */
  public static class GrepMapper extends Mapper<LongWritable, Text, Text, NullWritable> {
    private java.util.regex.Pattern pattern;

    @Override
    protected void setup(Context ctx) {
      pattern = java.util.regex.Pattern.compile(ctx.getConfiguration().get("grep.pattern"));
    }

    @Override
    public void map(LongWritable key, Text value, Context ctx) throws IOException, InterruptedException {
      if (pattern.matcher(value.toString()).find()) {
        ctx.write(value, NullWritable.get());
      }
    }
  }

  /** Sort: lines as keys, written once per occurrence. */
  public static class LineMapper extends Mapper<LongWritable, Text, Text, NullWritable> {
    @Override
    public void map(LongWritable key, Text value, Context ctx) throws IOException, InterruptedException {
      ctx.write(value, NullWritable.get());
    }
  }

  /** Writes each key once per value. */
  public static class RepeatReducer extends Reducer<Text, NullWritable, Text, NullWritable> {
    @Override
    public void reduce(Text key, Iterable<NullWritable> values, Context ctx)
        throws IOException, InterruptedException {
      for (NullWritable v : values) {
        ctx.write(key, v);
      }
    }
  }

  /** Pavlo aggregation: sourceIP (or its first 7 bytes) and adRevenue. */
  public static class RevenueMapper extends Mapper<LongWritable, Text, Text, DoubleWritable> {
    private final Text ip = new Text();
    private final DoubleWritable revenue = new DoubleWritable();
    private int prefix;

    @Override
    protected void setup(Context ctx) {
      prefix = ctx.getConfiguration().getInt("agg.prefix", 0);
    }

    @Override
    public void map(LongWritable key, Text value, Context ctx) throws IOException, InterruptedException {
      String[] f = value.toString().split("\\|");
      String k = prefix > 0 ? f[0].substring(0, Math.min(prefix, f[0].length())) : f[0];
      ip.set(k);
      revenue.set(Double.parseDouble(f[3]));
      ctx.write(ip, revenue);
    }
  }

  /** Sums revenues; also the combiner. */
  public static class DoubleSumReducer extends Reducer<Text, DoubleWritable, Text, DoubleWritable> {
    private final DoubleWritable result = new DoubleWritable();

    @Override
    public void reduce(Text key, Iterable<DoubleWritable> values, Context ctx)
        throws IOException, InterruptedException {
      double sum = 0;
      for (DoubleWritable v : values) {
        sum += v.get();
      }
      result.set(sum);
      ctx.write(key, result);
    }
  }

  public static void main(String[] args) throws Exception {
    String which = args[0];
    Configuration conf = Iterative.conf(Integer.parseInt(args[3]));
    if (args.length > 4) {
      conf.set("grep.pattern", args[4]);
    }
    conf.setInt("agg.prefix", "agg-small".equals(which) ? 7 : 0);
    Job job = Job.getInstance(conf, which);
    job.setJarByClass(Jobs.class);
    switch (which) {
      case "wordcount" -> {
        job.setMapperClass(TokenizerMapper.class);
        job.setCombinerClass(IntSumReducer.class);
        job.setReducerClass(IntSumReducer.class);
        job.setOutputKeyClass(Text.class);
        job.setOutputValueClass(IntWritable.class);
      }
      case "grep" -> {
        job.setMapperClass(GrepMapper.class);
        job.setNumReduceTasks(0);
        job.setOutputKeyClass(Text.class);
        job.setOutputValueClass(NullWritable.class);
      }
      case "sort" -> {
        job.setMapperClass(LineMapper.class);
        job.setReducerClass(RepeatReducer.class);
        job.setNumReduceTasks(1);
        job.setOutputKeyClass(Text.class);
        job.setOutputValueClass(NullWritable.class);
      }
      case "agg-large", "agg-small" -> {
        job.setMapperClass(RevenueMapper.class);
        job.setCombinerClass(DoubleSumReducer.class);
        job.setReducerClass(DoubleSumReducer.class);
        job.setOutputKeyClass(Text.class);
        job.setOutputValueClass(DoubleWritable.class);
      }
      default -> throw new IllegalArgumentException("unknown job " + which);
    }
    FileInputFormat.addInputPath(job, new Path(args[1]));
    FileOutputFormat.setOutputPath(job, new Path(args[2]));
    System.exit(job.waitForCompletion(false) ? 0 : 1);
  }
}
