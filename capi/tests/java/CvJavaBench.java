import io.cv.CvFileSystem;
import io.cv.CvInputStream;
import java.nio.ByteBuffer;
import java.util.Arrays;

/**
 * Latency of open + footer and of 64 KiB preads through JNI, run by
 * capi/tests/bench.rs. Usage: CvJavaBench <config> <parquet path> <data path> <iters>.
 * Prints: RESULT java <op> <p50 ns> <p99 ns> <mean ns>
 */
public final class CvJavaBench {
    static final ByteBuffer FOOTER = ByteBuffer.allocateDirect(1 << 20);
    static final ByteBuffer BLOCK = ByteBuffer.allocateDirect(64 * 1024);

    static void report(String op, long[] ns) {
        long sum = 0;
        for (long v : ns) {
            sum += v;
        }
        Arrays.sort(ns);
        System.out.println("RESULT java " + op + " " + ns[ns.length / 2] + " " + ns[ns.length * 99 / 100] + " "
                + sum / ns.length);
    }

    static void openFooter(CvFileSystem fs, String path) throws Exception {
        try (CvInputStream in = fs.open(path)) {
            FOOTER.clear().limit((int) (in.length() - in.getTailOffset()));
            in.readFully(in.getTailOffset(), FOOTER);
        }
    }

    public static void main(String[] args) throws Exception {
        int iters = Integer.parseInt(args[3]);
        long[] ns = new long[iters];
        try (CvFileSystem fs = CvFileSystem.fromConfigFile(args[0])) {
            for (int i = 0; i < iters / 4; i++) {
                openFooter(fs, args[1]);
            }
            for (int i = 0; i < iters; i++) {
                long t = System.nanoTime();
                openFooter(fs, args[1]);
                ns[i] = System.nanoTime() - t;
            }
            report("open_footer", ns);

            // A 4 KiB read inside the tail: no network, the binding's own cost.
            try (CvInputStream in = fs.open(args[1])) {
                int n = (int) Math.min(4096, in.length() - in.getTailOffset());
                long[] tns = new long[iters * 10];
                for (int i = -tns.length / 4; i < tns.length; i++) {
                    long t = System.nanoTime();
                    FOOTER.clear().limit(n);
                    in.readFully(in.getTailOffset(), FOOTER);
                    if (i >= 0) {
                        tns[i] = System.nanoTime() - t;
                    }
                }
                report("tail_read_4k", tns);
            }

            try (CvInputStream in = fs.open(args[2])) {
                long slots = in.length() / BLOCK.capacity();
                long x = 42;
                for (int i = -iters / 4; i < iters; i++) {
                    x = x * 6364136223846793005L + 1442695040888963407L;
                    long off = Long.remainderUnsigned(x >>> 33, slots) * BLOCK.capacity();
                    long t = System.nanoTime();
                    BLOCK.clear();
                    in.readFully(off, BLOCK);
                    if (i >= 0) {
                        ns[i] = System.nanoTime() - t;
                    }
                }
                report("pread_64k", ns);
            }
        }
    }
}
