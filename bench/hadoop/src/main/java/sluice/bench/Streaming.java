package sluice.bench;

import java.io.BufferedInputStream;
import java.io.BufferedOutputStream;
import java.io.File;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.util.Map;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.io.LongWritable;
import org.apache.hadoop.io.Text;
import org.apache.hadoop.mapreduce.Job;
import org.apache.hadoop.mapreduce.Mapper;
import org.apache.hadoop.mapreduce.Reducer;
import org.apache.hadoop.mapreduce.TaskAttemptContext;
import org.apache.hadoop.mapreduce.lib.input.FileInputFormat;
import org.apache.hadoop.mapreduce.lib.input.FileSplit;
import org.apache.hadoop.mapreduce.lib.output.FileOutputFormat;
import org.apache.hadoop.util.LineReader;

/**
 * Hadoop Streaming's contract as a Hadoop MapReduce job, for LocalJobRunner:
 * the hadoop-streaming jar is not on the registry this project uses, so this
 * job follows its PipeMapRed, PipeMapper and PipeReducer as its
 * documentation and source describe them, on Hadoop's own input format,
 * partitioner, sort, shuffle and TextOutputFormat.
 *
 * <ul>
 *   <li>A task runs its command once ({@code sh -c CMD}) in the working
 *       directory given, with {@code mapreduce_task_id},
 *       {@code mapreduce_task_partition}, {@code mapreduce_task_ismap} and,
 *       for maps, {@code mapreduce_map_input_file}, {@code _start} and
 *       {@code _length} in its environment.
 *   <li>A mapper gets each line of TextInputFormat's values (the offset key
 *       is not sent, as {@code stream.map.input.ignoreKey} does for text
 *       input); a reducer or combiner gets {@code key TAB value} lines, the
 *       values of a key on consecutive lines.
 *   <li>Each output line (Hadoop's LineReader: a line ends at LF, CR LF or
 *       CR) is split at its first tab into a Text key and
 *       value; a line without one is a key with an empty value (which
 *       TextOutputFormat then writes with a trailing tab).
 *   <li>A command that exits non-zero fails the task.
 * </ul>
 *
 * Usage: Streaming INPUT OUTPUT THREADS REDUCERS WORKDIR MAPPER REDUCER|NONE [COMBINER]
 */
public final class Streaming {
  private Streaming() {}

  /** Where the lines a command writes go. */
  interface Emit {
    void emit(Text key, Text value) throws IOException, InterruptedException;
  }

  /** A running command: lines in through a buffer, lines out on a thread. */
  static final class Pipe {
    private final Process proc;
    private final OutputStream in;
    private final Thread out;
    private final String command;
    private volatile Throwable failure;

    Pipe(String command, Configuration conf, Map<String, String> env, Emit emit)
        throws IOException {
      this.command = command;
      ProcessBuilder pb = new ProcessBuilder("sh", "-c", command);
      pb.directory(new File(conf.get("sluice.streaming.dir")));
      pb.environment().putAll(env);
      pb.redirectError(ProcessBuilder.Redirect.INHERIT);
      proc = pb.start();
      in = new BufferedOutputStream(proc.getOutputStream(), 1 << 16);
      InputStream stdout = new BufferedInputStream(proc.getInputStream(), 1 << 16);
      out = new Thread(() -> drain(stdout, emit), "streaming output");
      out.start();
    }

    /** Hadoop Streaming's TextOutputReader: LineReader's lines (ending in
     * LF, CR LF or CR), each split at its first tab. */
    private void drain(InputStream stdout, Emit emit) {
      try {
        LineReader reader = new LineReader(stdout, 1 << 16);
        Text line = new Text();
        while (reader.readLine(line) > 0) {
          byte[] bytes = line.getBytes();
          int len = line.getLength();
          int tab = -1;
          for (int i = 0; i < len; i++) {
            if (bytes[i] == '\t') {
              tab = i;
              break;
            }
          }
          Text key = new Text();
          Text value = new Text();
          if (tab < 0) {
            key.set(bytes, 0, len);
          } else {
            key.set(bytes, 0, tab);
            value.set(bytes, tab + 1, len - tab - 1);
          }
          emit.emit(key, value);
        }
      } catch (Throwable t) {
        failure = t;
      }
    }

    void write(byte[] bytes, int len) throws IOException {
      in.write(bytes, 0, len);
    }

    void writeByte(int b) throws IOException {
      in.write(b);
    }

    void finish() throws IOException, InterruptedException {
      in.close();
      out.join();
      int code = proc.waitFor();
      if (failure != null) {
        throw new IOException("reading the output of `" + command + "`", failure);
      }
      if (code != 0) {
        throw new IOException("`" + command + "` exited with status " + code);
      }
    }
  }

  private static Map<String, String> env(TaskAttemptContext ctx, boolean isMap) {
    return new java.util.HashMap<>(Map.of(
        "mapreduce_task_id", ctx.getTaskAttemptID().getTaskID().toString(),
        "mapreduce_task_partition", Integer.toString(ctx.getTaskAttemptID().getTaskID().getId()),
        "mapreduce_task_ismap", Boolean.toString(isMap)));
  }

  /** PipeMapper: each input line to the command. */
  public static class PipeMapper extends Mapper<LongWritable, Text, Text, Text> {
    private Pipe pipe;

    @Override
    protected void setup(Context ctx) throws IOException {
      Map<String, String> env = env(ctx, true);
      if (ctx.getInputSplit() instanceof FileSplit split) {
        env.put("mapreduce_map_input_file", split.getPath().toString());
        env.put("mapreduce_map_input_start", Long.toString(split.getStart()));
        env.put("mapreduce_map_input_length", Long.toString(split.getLength()));
      }
      Configuration conf = ctx.getConfiguration();
      pipe = new Pipe(conf.get("sluice.streaming.mapper"), conf, env, (k, v) -> ctx.write(k, v));
    }

    @Override
    public void map(LongWritable offset, Text line, Context ctx) throws IOException {
      pipe.write(line.getBytes(), line.getLength());
      pipe.writeByte('\n');
    }

    @Override
    protected void cleanup(Context ctx) throws IOException, InterruptedException {
      pipe.finish();
    }
  }

  /** PipeReducer (and PipeCombiner): {@code key TAB value} lines to the command. */
  public static class PipeReducer extends Reducer<Text, Text, Text, Text> {
    private Pipe pipe;

    /** The configuration key of this task's command. */
    protected String commandKey() {
      return "sluice.streaming.reducer";
    }

    @Override
    protected void setup(Context ctx) throws IOException {
      Configuration conf = ctx.getConfiguration();
      pipe = new Pipe(conf.get(commandKey()), conf, env(ctx, false), (k, v) -> ctx.write(k, v));
    }

    @Override
    public void reduce(Text key, Iterable<Text> values, Context ctx) throws IOException {
      for (Text v : values) {
        pipe.write(key.getBytes(), key.getLength());
        pipe.writeByte('\t');
        pipe.write(v.getBytes(), v.getLength());
        pipe.writeByte('\n');
      }
    }

    @Override
    protected void cleanup(Context ctx) throws IOException, InterruptedException {
      pipe.finish();
    }
  }

  /** The combiner's command through PipeReducer. */
  public static class PipeCombiner extends PipeReducer {
    @Override
    protected String commandKey() {
      return "sluice.streaming.combiner";
    }
  }

  public static void main(String[] args) throws Exception {
    Configuration conf = Iterative.conf(Integer.parseInt(args[2]));
    conf.set("sluice.streaming.dir", args[4]);
    conf.set("sluice.streaming.mapper", args[5]);
    boolean reduces = !"NONE".equals(args[6]);
    conf.set("sluice.streaming.reducer", args[6]);
    if (args.length > 7) {
      conf.set("sluice.streaming.combiner", args[7]);
    }
    Job job = Job.getInstance(conf, "streaming");
    job.setJarByClass(Streaming.class);
    job.setMapperClass(PipeMapper.class);
    job.setMapOutputKeyClass(Text.class);
    job.setMapOutputValueClass(Text.class);
    job.setOutputKeyClass(Text.class);
    job.setOutputValueClass(Text.class);
    if (reduces) {
      job.setReducerClass(PipeReducer.class);
      job.setNumReduceTasks(Integer.parseInt(args[3]));
      if (args.length > 7) {
        job.setCombinerClass(PipeCombiner.class);
      }
    } else {
      job.setNumReduceTasks(0);
    }
    FileInputFormat.addInputPath(job, new Path(args[0]));
    FileOutputFormat.setOutputPath(job, new Path(args[1]));
    System.exit(job.waitForCompletion(false) ? 0 : 1);
  }
}
