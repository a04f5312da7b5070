package io.cv.hadoop;

import java.util.ArrayList;
import java.util.List;
import org.apache.hadoop.conf.Configuration;

/**
 * The {@code fs.cv.*} keys of a Hadoop Configuration, read once when a file system is
 * initialized. {@code fs.cv.config} names a cv client config file (else the environment's
 * CV_CONFIG); every other key is laid over that file's settings, so a Spark job can set
 * {@code spark.hadoop.fs.cv.deadline=5s} and keep the cluster's file. Without a file the keys
 * are the whole config (then {@code fs.cv.master} and {@code fs.cv.tls.*} are required, as the
 * native side checks and reports).
 */
final class CvHadoopConfig {
    static final String CONFIG = "fs.cv.config";
    /** Bytes a sequential-policy stream reads ahead of small reads (not of positioned ones). */
    static final String READAHEAD = "fs.cv.readahead.range";
    /** Bytes a random-policy stream reads ahead of small reads. */
    static final String READAHEAD_RANDOM = "fs.cv.readahead.random.range";
    static final long DEFAULT_READAHEAD = 1 << 20;
    static final long DEFAULT_READAHEAD_RANDOM = 64 << 10;
    /** The default block size reported to Hadoop; unset, the cluster's (see CvHadoopFileSystem). */
    static final String BLOCK_SIZE = "fs.cv.block.size";

    /** Hadoop key, cv section, cv key, and how the value is written in TOML. */
    private enum Key {
        MASTER("fs.cv.master", "client", "master", Kind.STRING),
        MASTERS("fs.cv.masters", "client", "masters", Kind.LIST),
        DEADLINE("fs.cv.deadline", "client", "deadline", Kind.STRING),
        RETRIES("fs.cv.retries", "client", "retries", Kind.INT),
        BACKOFF("fs.cv.backoff", "client", "backoff", Kind.STRING),
        PREFETCH_DEPTH("fs.cv.prefetch.depth", "client", "prefetch_depth", Kind.INT),
        READ_CHUNK("fs.cv.read.chunk", "client", "read_chunk", Kind.STRING),
        NODE("fs.cv.node", "client", "node", Kind.STRING),
        SHORT_CIRCUIT("fs.cv.short-circuit", "client", "short_circuit", Kind.BOOL),
        TLS_CA("fs.cv.tls.ca", "tls", "ca", Kind.STRING),
        TLS_CERT("fs.cv.tls.cert", "tls", "cert", Kind.STRING),
        TLS_KEY("fs.cv.tls.key", "tls", "key", Kind.STRING);

        final String hadoop;
        final String section;
        final String cv;
        final Kind kind;

        Key(String hadoop, String section, String cv, Kind kind) {
            this.hadoop = hadoop;
            this.section = section;
            this.cv = cv;
            this.kind = kind;
        }
    }

    private enum Kind {
        STRING,
        INT,
        BOOL,
        LIST
    }

    /** The client config file, or null when the keys are the whole config. */
    final String configFile;
    /** The keys as TOML, laid over the file by the native side. */
    final String overridesToml;
    final long readahead;
    final long readaheadRandom;
    /** {@link #BLOCK_SIZE}, or 0 when not set. */
    final long blockSize;

    private CvHadoopConfig(String configFile, String overridesToml, long readahead, long readaheadRandom,
            long blockSize) {
        this.configFile = configFile;
        this.overridesToml = overridesToml;
        this.readahead = readahead;
        this.readaheadRandom = readaheadRandom;
        this.blockSize = blockSize;
    }

    /** What makes two native clients interchangeable: the config file and the keys laid over it. */
    String clientKey() {
        return (configFile == null ? "" : configFile) + '\0' + overridesToml;
    }

    static CvHadoopConfig from(Configuration conf) {
        String file = conf.getTrimmed(CONFIG, System.getenv("CV_CONFIG"));
        if (file != null && file.isEmpty()) {
            file = null;
        }
        StringBuilder client = new StringBuilder();
        StringBuilder tls = new StringBuilder();
        for (Key k : Key.values()) {
            String v = conf.getTrimmed(k.hadoop);
            if (v == null || v.isEmpty()) {
                continue;
            }
            StringBuilder to = k.section.equals("tls") ? tls : client;
            to.append(k.cv).append(" = ").append(value(k, v)).append('\n');
        }
        if (file == null && tls.length() == 0) {
            throw new IllegalArgumentException("cv: set " + CONFIG + " (or CV_CONFIG) to the cv client config file, "
                    + "or give fs.cv.master and fs.cv.tls.ca, fs.cv.tls.cert and fs.cv.tls.key");
        }
        String toml = (client.length() == 0 ? "" : "[client]\n" + client)
                + (tls.length() == 0 ? "" : "[tls]\n" + tls);
        long blockSize = conf.getLongBytes(BLOCK_SIZE, 0);
        if (blockSize < 0) {
            throw new IllegalArgumentException("cv: " + BLOCK_SIZE + " = " + blockSize + ": must not be negative");
        }
        return new CvHadoopConfig(file, toml, bytes(conf, READAHEAD, DEFAULT_READAHEAD),
                bytes(conf, READAHEAD_RANDOM, DEFAULT_READAHEAD_RANDOM), blockSize);
    }

    private static long bytes(Configuration conf, String key, long dflt) {
        long n = conf.getLongBytes(key, dflt);
        if (n < 0 || n > (64 << 20)) {
            throw new IllegalArgumentException("cv: " + key + " = " + n + ": must be between 0 and 64 MiB");
        }
        return n;
    }

    private static String value(Key k, String v) {
        switch (k.kind) {
            case INT:
                try {
                    return Long.toString(Long.parseLong(v));
                } catch (NumberFormatException e) {
                    throw new IllegalArgumentException("cv: " + k.hadoop + " = '" + v + "' is not a whole number");
                }
            case BOOL:
                if (v.trim().equalsIgnoreCase("true") || v.trim().equalsIgnoreCase("false")) {
                    return v.trim().toLowerCase(java.util.Locale.ROOT);
                }
                throw new IllegalArgumentException("cv: " + k.hadoop + " = '" + v + "' is not true or false");
            case LIST:
                List<String> items = new ArrayList<>();
                for (String s : v.split(",")) {
                    if (!s.trim().isEmpty()) {
                        items.add(quoted(s.trim()));
                    }
                }
                return "[" + String.join(", ", items) + "]";
            default:
                return quoted(v);
        }
    }

    /** A TOML basic string: quotes, backslashes and control characters escaped. */
    static String quoted(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') {
                b.append('\\').append(c);
            } else if (c < 0x20 || c == 0x7f) {
                b.append(String.format("\\u%04x", (int) c));
            } else {
                b.append(c);
            }
        }
        return b.append('"').toString();
    }
}
