package sluice.bench;

import java.io.BufferedReader;
import java.io.DataInput;
import java.io.DataOutput;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.io.BytesWritable;
import org.apache.hadoop.io.IntWritable;
import org.apache.hadoop.io.LongWritable;
import org.apache.hadoop.io.NullWritable;
import org.apache.hadoop.io.Text;
import org.apache.hadoop.io.Writable;
import org.apache.hadoop.mapreduce.Job;
import org.apache.hadoop.mapreduce.Mapper;
import org.apache.hadoop.mapreduce.Reducer;
import org.apache.hadoop.mapreduce.lib.input.FileInputFormat;
import org.apache.hadoop.mapreduce.lib.input.SequenceFileInputFormat;
import org.apache.hadoop.mapreduce.lib.output.FileOutputFormat;
import org.apache.hadoop.mapreduce.lib.output.SequenceFileOutputFormat;

/**
 * k-means and PageRank as chains of Hadoop MapReduce jobs, the same logic
 * as Sluice's built-in ones, for LocalJobRunner.
 *
 * <p>k-means: a map-only job writing the text points once as binary
 * vectors (a SequenceFile of little-endian doubles, as Sluice's points job
 * writes them and as HiBench's Mahout input is binary), then one job per
 * iteration over them from the given initial centres (lines
 * {@code index TAB coordinates}), passed to the job in its Configuration;
 * the mapper adds each point to its nearest centre (squared Euclidean
 * distance, lowest index on a tie), the combiner sums partial sums, one
 * reducer writes the new centres; a centre no point chose stays.
 *
 * <p>PageRank: a build job (each page's out-links, deduplicated), then per
 * iteration a contribute job (ranks split over out-links, summed per page,
 * a combiner summing them per map as Sluice's does;
 * the dangling pages' rank counted in fixed point, 2^60 a unit) and a
 * map-only rank job: rank' = (1 - d) / N + d * (sum + D / N), networkx's
 * formula.
 *
 * <p>Prints one line per job: {@code job NAME SECONDS}.
 *
 * <p>Usage: Iterative kmeans POINTS CENTRES OUTPUT THREADS ITERATIONS
 * <br>Iterative pagerank EDGES OUTPUT THREADS ITERATIONS DAMPING
 */
public final class Iterative {
  private Iterative() {}

  static final double FIXED_ONE = (double) (1L << 60);

  static void parsePoint(String line, double[] out, int dims) throws IOException {
    int n = 0;
    int i = 0;
    int len = line.length();
    while (i < len) {
      char ch = line.charAt(i);
      if (ch == ' ' || ch == '\t') {
        i++;
        continue;
      }
      int j = i;
      while (j < len && line.charAt(j) != ' ' && line.charAt(j) != '\t') {
        j++;
      }
      if (n == dims) {
        throw new IOException("a point with more than " + dims + " coordinates");
      }
      out[n++] = Double.parseDouble(line.substring(i, j));
      i = j;
    }
    if (n != dims) {
      throw new IOException("a point with " + n + " coordinates; the centres have " + dims);
    }
  }

  static double[][] parseCentres(String text) throws IOException {
    List<double[]> rows = new ArrayList<>();
    List<Integer> idx = new ArrayList<>();
    for (String line : text.split("\n")) {
      if (line.isEmpty()) {
        continue;
      }
      int tab = line.indexOf('\t');
      idx.add(Integer.parseInt(line.substring(0, tab)));
      String[] xs = line.substring(tab + 1).trim().split("[ \t]+");
      double[] p = new double[xs.length];
      for (int d = 0; d < xs.length; d++) {
        p[d] = Double.parseDouble(xs[d]);
      }
      rows.add(p);
    }
    double[][] c = new double[rows.size()][];
    for (int r = 0; r < rows.size(); r++) {
      c[idx.get(r)] = rows.get(r);
    }
    return c;
  }

  static String centreLine(int index, double[] p) {
    StringBuilder b = new StringBuilder();
    b.append(index).append('\t');
    for (int d = 0; d < p.length; d++) {
      if (d > 0) {
        b.append(' ');
      }
      b.append(p[d]);
    }
    return b.toString();
  }

  /** A centre's partial sum: points and coordinate sums. */
  public static class PartialSum implements Writable {
    long count;
    double[] sum = new double[0];

    @Override
    public void write(DataOutput out) throws IOException {
      out.writeLong(count);
      out.writeInt(sum.length);
      for (double x : sum) {
        out.writeDouble(x);
      }
    }

    @Override
    public void readFields(DataInput in) throws IOException {
      count = in.readLong();
      int n = in.readInt();
      if (sum.length != n) {
        sum = new double[n];
      }
      for (int i = 0; i < n; i++) {
        sum[i] = in.readDouble();
      }
    }
  }

  /** The index of the centre nearest to {@code point} (lowest on a tie). */
  static int nearest(double[][] centres, double[] point) {
    int best = 0;
    double bestD = Double.POSITIVE_INFINITY;
    for (int c = 0; c < centres.length; c++) {
      double[] q = centres[c];
      double d = 0;
      for (int i = 0; i < q.length; i++) {
        double t = q[i] - point[i];
        d += t * t;
      }
      if (d < bestD) {
        bestD = d;
        best = c;
      }
    }
    return best;
  }

  /** Each text point as its coordinates in binary (little-endian doubles). */
  public static class PointsMapper extends Mapper<LongWritable, Text, NullWritable, BytesWritable> {
    private double[] point;
    private ByteBuffer buf;
    private final BytesWritable value = new BytesWritable();

    @Override
    protected void setup(Context ctx) {
      int dims = ctx.getConfiguration().getInt("kmeans.dims", 0);
      point = new double[dims];
      buf = ByteBuffer.allocate(8 * dims).order(ByteOrder.LITTLE_ENDIAN);
    }

    @Override
    public void map(LongWritable offset, Text line, Context ctx) throws IOException, InterruptedException {
      parsePoint(line.toString(), point, point.length);
      buf.clear();
      for (double x : point) {
        buf.putDouble(x);
      }
      value.set(buf.array(), 0, buf.capacity());
      ctx.write(NullWritable.get(), value);
    }
  }

  /** Each binary point to its nearest centre, as a partial sum of one point. */
  public static class NearestMapper extends Mapper<NullWritable, BytesWritable, IntWritable, PartialSum> {
    private double[][] centres;
    private double[] point;
    private final IntWritable key = new IntWritable();
    private final PartialSum value = new PartialSum();

    @Override
    protected void setup(Context ctx) throws IOException {
      centres = parseCentres(ctx.getConfiguration().get("kmeans.centres"));
      point = new double[centres[0].length];
      value.count = 1;
      value.sum = point;
    }

    @Override
    public void map(NullWritable none, BytesWritable bytes, Context ctx) throws IOException, InterruptedException {
      if (bytes.getLength() != 8 * point.length) {
        throw new IOException("a binary point of " + bytes.getLength() + " bytes");
      }
      ByteBuffer b = ByteBuffer.wrap(bytes.getBytes(), 0, bytes.getLength()).order(ByteOrder.LITTLE_ENDIAN);
      for (int i = 0; i < point.length; i++) {
        point[i] = b.getDouble();
      }
      key.set(nearest(centres, point));
      ctx.write(key, value);
    }
  }

  /** Sums partial sums (the combiner). */
  public static class SumCombiner extends Reducer<IntWritable, PartialSum, IntWritable, PartialSum> {
    private final PartialSum out = new PartialSum();

    @Override
    public void reduce(IntWritable key, Iterable<PartialSum> values, Context ctx)
        throws IOException, InterruptedException {
      out.count = 0;
      boolean first = true;
      for (PartialSum v : values) {
        if (first) {
          out.sum = new double[v.sum.length];
          first = false;
        }
        out.count += v.count;
        for (int i = 0; i < v.sum.length; i++) {
          out.sum[i] += v.sum[i];
        }
      }
      ctx.write(key, out);
    }
  }

  /** The new centres: each sum over its count; unchosen centres stay. */
  public static class CentreReducer extends Reducer<IntWritable, PartialSum, Text, NullWritable> {
    private double[][] centres;
    private int next;
    private final Text line = new Text();

    @Override
    protected void setup(Context ctx) throws IOException {
      centres = parseCentres(ctx.getConfiguration().get("kmeans.centres"));
      next = 0;
    }

    private void unchosen(int until, Context ctx) throws IOException, InterruptedException {
      for (; next < until; next++) {
        line.set(centreLine(next, centres[next]));
        ctx.write(line, NullWritable.get());
      }
    }

    @Override
    public void reduce(IntWritable key, Iterable<PartialSum> values, Context ctx)
        throws IOException, InterruptedException {
      int c = key.get();
      unchosen(c, ctx);
      long n = 0;
      double[] sum = new double[centres[c].length];
      for (PartialSum v : values) {
        n += v.count;
        for (int i = 0; i < sum.length; i++) {
          sum[i] += v.sum[i];
        }
      }
      for (int i = 0; i < sum.length; i++) {
        sum[i] /= n;
      }
      line.set(centreLine(c, sum));
      ctx.write(line, NullWritable.get());
      next = c + 1;
    }

    @Override
    protected void cleanup(Context ctx) throws IOException, InterruptedException {
      unchosen(centres.length, ctx);
    }
  }

  // PageRank.

  static long pageNumber(String s, String what) throws IOException {
    try {
      return Long.parseLong(s.trim());
    } catch (NumberFormatException e) {
      throw new IOException(what + " \"" + s + "\" is not a page number");
    }
  }

  /** Edges to (src, dst) and (dst, -1): every page gets a state line. */
  public static class EdgeMapper extends Mapper<LongWritable, Text, LongWritable, LongWritable> {
    private final LongWritable k = new LongWritable();
    private final LongWritable v = new LongWritable();

    @Override
    public void map(LongWritable offset, Text line, Context ctx) throws IOException, InterruptedException {
      String[] f = line.toString().trim().split("[ \t]+");
      if (f.length != 2) {
        throw new IOException("an edge is `src TAB dst`");
      }
      long s = pageNumber(f[0], "source");
      long d = pageNumber(f[1], "destination");
      k.set(s);
      v.set(d);
      ctx.write(k, v);
      k.set(d);
      v.set(-1);
      ctx.write(k, v);
    }
  }

  /** A page's state: {@code page TAB TAB dst,dst,...} (no rank yet: 1/N). */
  public static class BuildReducer extends Reducer<LongWritable, LongWritable, Text, NullWritable> {
    private final Text line = new Text();

    @Override
    public void reduce(LongWritable page, Iterable<LongWritable> values, Context ctx)
        throws IOException, InterruptedException {
      long[] dsts = new long[8];
      int n = 0;
      for (LongWritable v : values) {
        if (v.get() >= 0) {
          if (n == dsts.length) {
            dsts = Arrays.copyOf(dsts, n * 2);
          }
          dsts[n++] = v.get();
        }
      }
      Arrays.sort(dsts, 0, n);
      StringBuilder b = new StringBuilder();
      b.append(page.get()).append("\t\t");
      long last = -1;
      boolean first = true;
      for (int i = 0; i < n; i++) {
        if (dsts[i] != last) {
          if (!first) {
            b.append(',');
          }
          b.append(dsts[i]);
          first = false;
          last = dsts[i];
        }
      }
      ctx.getCounter("PAGERANK", "PAGES").increment(1);
      line.set(b.toString());
      ctx.write(line, NullWritable.get());
    }
  }

  /** A contribute value: the page's out-links, or a share of a rank. */
  public static class Contribution implements Writable {
    boolean structure;
    double share;
    String dsts = "";

    @Override
    public void write(DataOutput out) throws IOException {
      out.writeBoolean(structure);
      out.writeDouble(share);
      if (structure) {
        Text.writeString(out, dsts);
      }
    }

    @Override
    public void readFields(DataInput in) throws IOException {
      structure = in.readBoolean();
      share = in.readDouble();
      if (structure) {
        dsts = Text.readString(in);
      }
    }
  }

  /** Splits each page's rank over its out-links; counts the dangling rank. */
  public static class ContributeMapper extends Mapper<LongWritable, Text, LongWritable, Contribution> {
    private long pages;
    private final LongWritable k = new LongWritable();
    private final Contribution v = new Contribution();

    @Override
    protected void setup(Context ctx) {
      pages = ctx.getConfiguration().getLong("pagerank.pages", 1);
    }

    @Override
    public void map(LongWritable offset, Text line, Context ctx) throws IOException, InterruptedException {
      String[] f = line.toString().split("\t", 3);
      if (f.length != 3) {
        throw new IOException("a PageRank state line is `page TAB rank TAB dsts`");
      }
      long page = pageNumber(f[0], "page");
      double rank = f[1].isEmpty() ? 1.0 / pages : Double.parseDouble(f[1]);
      k.set(page);
      v.structure = true;
      v.share = 0;
      v.dsts = f[2];
      ctx.write(k, v);
      if (f[2].isEmpty()) {
        ctx.getCounter("PAGERANK", "DANGLING").increment(Math.round(rank * FIXED_ONE));
        return;
      }
      String[] dsts = f[2].split(",");
      v.structure = false;
      v.share = rank / dsts.length;
      for (String d : dsts) {
        k.set(pageNumber(d, "destination"));
        ctx.write(k, v);
      }
    }
  }

  /** Sums a page's shares, keeping its state line's destinations (the combiner). */
  public static class ContributeCombiner extends Reducer<LongWritable, Contribution, LongWritable, Contribution> {
    private final Contribution out = new Contribution();

    @Override
    public void reduce(LongWritable page, Iterable<Contribution> values, Context ctx)
        throws IOException, InterruptedException {
      out.structure = false;
      out.share = 0;
      for (Contribution v : values) {
        out.share += v.share;
        if (v.structure) {
          out.structure = true;
          out.dsts = v.dsts;
        }
      }
      ctx.write(page, out);
    }
  }

  /** Each page's summed shares: {@code page TAB sum TAB dsts}. */
  public static class ContributeReducer extends Reducer<LongWritable, Contribution, Text, NullWritable> {
    private final Text line = new Text();

    @Override
    public void reduce(LongWritable page, Iterable<Contribution> values, Context ctx)
        throws IOException, InterruptedException {
      double sum = 0;
      String dsts = null;
      for (Contribution v : values) {
        sum += v.share;
        if (v.structure) {
          dsts = v.dsts;
        }
      }
      if (dsts == null) {
        throw new IOException("page " + page.get() + " is linked to but has no state line");
      }
      line.set(page.get() + "\t" + sum + "\t" + dsts);
      ctx.write(line, NullWritable.get());
    }
  }

  /** The new ranks (map-only); the last iteration writes {@code page TAB rank}. */
  public static class RankMapper extends Mapper<LongWritable, Text, Text, NullWritable> {
    private double base;
    private double damping;
    private boolean last;
    private final Text out = new Text();

    @Override
    protected void setup(Context ctx) {
      Configuration c = ctx.getConfiguration();
      double n = c.getLong("pagerank.pages", 1);
      damping = Double.parseDouble(c.get("pagerank.damping"));
      double dangling = c.getLong("pagerank.dangling", 0) / FIXED_ONE;
      base = (1 - damping) / n + damping * dangling / n;
      last = c.getBoolean("pagerank.last", false);
    }

    @Override
    public void map(LongWritable offset, Text line, Context ctx) throws IOException, InterruptedException {
      String[] f = line.toString().split("\t", 3);
      double sum = f[1].isEmpty() ? 0.0 : Double.parseDouble(f[1]);
      double rank = base + damping * sum;
      out.set(last ? f[0] + "\t" + rank : f[0] + "\t" + rank + "\t" + f[2]);
      ctx.write(out, NullWritable.get());
    }
  }

  // The driver.

  /** LocalJobRunner with {@code threads} map and reduce slots, every
   * bench/hadoop job's configuration. */
  static Configuration conf(int threads) {
    Configuration conf = new Configuration();
    conf.set("mapreduce.framework.name", "local");
    conf.set("fs.defaultFS", "file:///");
    conf.setInt("mapreduce.local.map.tasks.maximum", threads);
    conf.setInt("mapreduce.local.reduce.tasks.maximum", threads);
    // waitForCompletion polls the job every 5 s by default: a job would
    // seem to take whole multiples of 5 s.
    conf.setInt("mapreduce.client.completion.pollinterval", 20);
    return conf;
  }

  static Job run(Job job, String name) throws Exception {
    long t = System.nanoTime();
    if (!job.waitForCompletion(false)) {
      throw new IOException(name + " failed");
    }
    System.out.printf("job %s %.3f%n", name, (System.nanoTime() - t) / 1e9);
    return job;
  }

  static String readParts(FileSystem fs, Path dir) throws IOException {
    StringBuilder b = new StringBuilder();
    FileStatus[] files = fs.isDirectory(dir) ? fs.listStatus(dir) : fs.listStatus(dir.getParent(),
        p -> p.equals(dir));
    Arrays.sort(files);
    for (FileStatus f : files) {
      String name = f.getPath().getName();
      if (f.isDirectory() || name.startsWith("_") || name.startsWith(".")) {
        continue;
      }
      try (BufferedReader r = new BufferedReader(
          new InputStreamReader(fs.open(f.getPath()), StandardCharsets.UTF_8))) {
        String line;
        while ((line = r.readLine()) != null) {
          b.append(line).append('\n');
        }
      }
    }
    return b.toString();
  }

  static void kmeans(String[] a) throws Exception {
    Path pointsText = new Path(a[1]);
    int threads = Integer.parseInt(a[4]);
    int iterations = Integer.parseInt(a[5]);
    Configuration base = conf(threads);
    FileSystem fs = FileSystem.getLocal(base);
    String centres = readParts(fs, new Path(a[2]));
    Path out = new Path(a[3]);
    fs.delete(out, true);
    Path binary = new Path(out.toString() + ".points");
    fs.delete(binary, true);
    Configuration pc = new Configuration(base);
    pc.setInt("kmeans.dims", parseCentres(centres)[0].length);
    Job points = Job.getInstance(pc, "kmeans-points");
    points.setJarByClass(Iterative.class);
    points.setMapperClass(PointsMapper.class);
    points.setNumReduceTasks(0);
    points.setOutputKeyClass(NullWritable.class);
    points.setOutputValueClass(BytesWritable.class);
    points.setOutputFormatClass(SequenceFileOutputFormat.class);
    FileInputFormat.addInputPath(points, pointsText);
    FileOutputFormat.setOutputPath(points, binary);
    run(points, "kmeans-points");
    for (int i = 1; i <= iterations; i++) {
      Configuration c = new Configuration(base);
      c.set("kmeans.centres", centres);
      Job job = Job.getInstance(c, "kmeans-" + i);
      job.setJarByClass(Iterative.class);
      job.setInputFormatClass(SequenceFileInputFormat.class);
      job.setMapperClass(NearestMapper.class);
      job.setCombinerClass(SumCombiner.class);
      job.setReducerClass(CentreReducer.class);
      job.setMapOutputKeyClass(IntWritable.class);
      job.setMapOutputValueClass(PartialSum.class);
      job.setOutputKeyClass(Text.class);
      job.setOutputValueClass(NullWritable.class);
      job.setNumReduceTasks(1);
      FileInputFormat.addInputPath(job, binary);
      Path o = i == iterations ? out : new Path(out.toString() + ".iter" + i);
      FileOutputFormat.setOutputPath(job, o);
      run(job, "kmeans-iterate");
      centres = readParts(fs, o);
      if (i != iterations) {
        fs.delete(o, true);
      }
    }
    fs.delete(binary, true);
  }

  static void pagerank(String[] a) throws Exception {
    Path edges = new Path(a[1]);
    Path out = new Path(a[2]);
    int threads = Integer.parseInt(a[3]);
    int iterations = Integer.parseInt(a[4]);
    String damping = a[5];
    Configuration base = conf(threads);
    FileSystem fs = FileSystem.getLocal(base);
    fs.delete(out, true);
    String tmp = out.toString() + ".tmp";
    Job build = Job.getInstance(base, "pagerank-build");
    build.setJarByClass(Iterative.class);
    build.setMapperClass(EdgeMapper.class);
    build.setReducerClass(BuildReducer.class);
    build.setMapOutputKeyClass(LongWritable.class);
    build.setMapOutputValueClass(LongWritable.class);
    build.setOutputKeyClass(Text.class);
    build.setOutputValueClass(NullWritable.class);
    build.setNumReduceTasks(threads);
    FileInputFormat.addInputPath(build, edges);
    Path state = new Path(tmp + "/state0");
    FileOutputFormat.setOutputPath(build, state);
    run(build, "pagerank-build");
    long pages = build.getCounters().findCounter("PAGERANK", "PAGES").getValue();
    for (int i = 1; i <= iterations; i++) {
      Configuration c = new Configuration(base);
      c.setLong("pagerank.pages", pages);
      Job contribute = Job.getInstance(c, "pagerank-contribute");
      contribute.setJarByClass(Iterative.class);
      contribute.setMapperClass(ContributeMapper.class);
      contribute.setCombinerClass(ContributeCombiner.class);
      contribute.setReducerClass(ContributeReducer.class);
      contribute.setMapOutputKeyClass(LongWritable.class);
      contribute.setMapOutputValueClass(Contribution.class);
      contribute.setOutputKeyClass(Text.class);
      contribute.setOutputValueClass(NullWritable.class);
      contribute.setNumReduceTasks(threads);
      FileInputFormat.addInputPath(contribute, state);
      Path sums = new Path(tmp + "/sums" + i);
      FileOutputFormat.setOutputPath(contribute, sums);
      run(contribute, "pagerank-contribute");
      long dangling = contribute.getCounters().findCounter("PAGERANK", "DANGLING").getValue();
      Configuration r = new Configuration(c);
      r.set("pagerank.damping", damping);
      r.setLong("pagerank.dangling", dangling);
      r.setBoolean("pagerank.last", i == iterations);
      Job rank = Job.getInstance(r, "pagerank-rank");
      rank.setJarByClass(Iterative.class);
      rank.setMapperClass(RankMapper.class);
      rank.setNumReduceTasks(0);
      rank.setOutputKeyClass(Text.class);
      rank.setOutputValueClass(NullWritable.class);
      FileInputFormat.addInputPath(rank, sums);
      state = i == iterations ? out : new Path(tmp + "/state" + i);
      FileOutputFormat.setOutputPath(rank, state);
      run(rank, "pagerank-rank");
    }
    fs.delete(new Path(tmp), true);
  }

  public static void main(String[] args) throws Exception {
    switch (args[0]) {
      case "kmeans" -> kmeans(args);
      case "pagerank" -> pagerank(args);
      default -> throw new IllegalArgumentException("unknown job " + args[0]);
    }
  }
}
