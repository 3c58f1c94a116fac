package sluice.minidfs;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.io.BytesWritable;
import org.apache.hadoop.io.IntWritable;
import org.apache.hadoop.io.LongWritable;
import org.apache.hadoop.io.SequenceFile;
import org.apache.hadoop.io.Text;
import org.apache.hadoop.io.Writable;
import org.apache.hadoop.io.compress.BZip2Codec;
import org.apache.hadoop.io.compress.CompressionCodec;
import org.apache.hadoop.io.compress.DefaultCodec;
import org.apache.hadoop.io.compress.GzipCodec;
import org.apache.hadoop.io.compress.Lz4Codec;
import org.apache.hadoop.io.compress.SnappyCodec;
import org.apache.hadoop.io.compress.ZStandardCodec;
import org.apache.hadoop.util.ReflectionUtils;

/**
 * Hadoop's own SequenceFile writer and reader, the oracle of Sluice's
 * SequenceFile tests.
 *
 * <p>Usage:
 * <ul>
 * <li>{@code SeqFiles write OUT none|record|block CODEC KEY VALUE [BLOCK_BYTES]}:
 *     writes the lines of standard input as records, the value of record i
 *     its line and its key made from i. CODEC: {@code default} (zlib),
 *     {@code gzip}, {@code bzip2}, {@code snappy}, {@code lz4},
 *     {@code zstd}. KEY and VALUE: {@code text}, {@code long},
 *     {@code int}, {@code bytes} (the value of a number type is the line's
 *     length). BLOCK_BYTES: {@code io.seqfile.compress.blocksize}, the
 *     bytes of records a compressed block gathers. Prints {@code ok} or
 *     {@code error MESSAGE} (the writer refused, as without native code).
 * <li>{@code SeqFiles read IN}: prints the header's classes and codec on
 *     one line ({@code KEYCLASS VALUECLASS COMPRESSION CODEC}), then each
 *     record as {@code key TAB value}, each by its {@code toString}.
 * </ul>
 */
public final class SeqFiles {
    private SeqFiles() {}

    public static void main(String[] args) throws Exception {
        PrintStream out = new PrintStream(System.out, false, StandardCharsets.UTF_8);
        System.setOut(System.err);
        Configuration conf = new Configuration();
        if (args.length >= 6 && args[0].equals("write")) {
            if (args.length > 6) {
                conf.set("io.seqfile.compress.blocksize", args[6]);
            }
            try {
                write(conf, new Path(args[1]), args[2], args[3], args[4], args[5]);
                out.println("ok");
            } catch (RuntimeException | LinkageError e) {
                out.println("error " + e);
            }
        } else if (args.length == 2 && args[0].equals("read")) {
            read(conf, new Path(args[1]), out);
        } else {
            System.err.println("usage: SeqFiles write OUT none|record|block CODEC KEY VALUE"
                + " [BLOCK_BYTES] | read IN");
            System.exit(2);
        }
        out.flush();
    }

    private static void write(Configuration conf, Path path, String kind, String codec,
            String key, String value) throws Exception {
        SequenceFile.CompressionType type = switch (kind) {
            case "none" -> SequenceFile.CompressionType.NONE;
            case "record" -> SequenceFile.CompressionType.RECORD;
            case "block" -> SequenceFile.CompressionType.BLOCK;
            default -> throw new IllegalArgumentException("compression " + kind);
        };
        Writable k = writable(key);
        Writable v = writable(value);
        BufferedReader in = new BufferedReader(
            new InputStreamReader(System.in, StandardCharsets.UTF_8));
        try (SequenceFile.Writer w = SequenceFile.createWriter(conf,
                SequenceFile.Writer.file(path),
                SequenceFile.Writer.keyClass(k.getClass()),
                SequenceFile.Writer.valueClass(v.getClass()),
                SequenceFile.Writer.compression(type, codec(conf, codec)))) {
            long i = 0;
            for (String line; (line = in.readLine()) != null; i++) {
                set(k, "k" + i, i);
                set(v, line, line.length());
                w.append(k, v);
            }
        }
    }

    private static Writable writable(String name) {
        return switch (name) {
            case "text" -> new Text();
            case "long" -> new LongWritable();
            case "int" -> new IntWritable();
            case "bytes" -> new BytesWritable();
            default -> throw new IllegalArgumentException("type " + name);
        };
    }

    private static void set(Writable w, String s, long n) {
        if (w instanceof Text t) {
            t.set(s);
        } else if (w instanceof LongWritable l) {
            l.set(n);
        } else if (w instanceof IntWritable i) {
            i.set((int) n);
        } else if (w instanceof BytesWritable b) {
            byte[] bytes = s.getBytes(StandardCharsets.UTF_8);
            b.set(bytes, 0, bytes.length);
        }
    }

    private static CompressionCodec codec(Configuration conf, String name) {
        Class<? extends CompressionCodec> c = switch (name) {
            case "default" -> DefaultCodec.class;
            case "gzip" -> GzipCodec.class;
            case "bzip2" -> BZip2Codec.class;
            case "snappy" -> SnappyCodec.class;
            case "lz4" -> Lz4Codec.class;
            case "zstd" -> ZStandardCodec.class;
            default -> throw new IllegalArgumentException("codec " + name);
        };
        return ReflectionUtils.newInstance(c, conf);
    }

    private static void read(Configuration conf, Path path, PrintStream out) throws Exception {
        try (SequenceFile.Reader r = new SequenceFile.Reader(conf,
                SequenceFile.Reader.file(path))) {
            String codec = r.getCompressionCodec() == null
                ? "none" : r.getCompressionCodec().getClass().getSimpleName();
            out.println(r.getKeyClassName() + " " + r.getValueClassName() + " "
                + r.getCompressionType() + " " + codec);
            Writable k = (Writable) ReflectionUtils.newInstance(r.getKeyClass(), conf);
            Writable v = (Writable) ReflectionUtils.newInstance(r.getValueClass(), conf);
            while (r.next(k, v)) {
                out.println(k + "\t" + v);
            }
        }
    }
}
