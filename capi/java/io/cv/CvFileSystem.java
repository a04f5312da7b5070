package io.cv;

import java.io.Closeable;
import java.io.FileNotFoundException;
import java.io.IOException;
import java.lang.ref.Cleaner;
import java.lang.ref.Reference;
import java.net.URI;

/**
 * A connection to a cv cluster, with the operations of Hadoop's FileSystem
 * (same names, one to one), so that an adapter for {@code cv://authority/path}
 * can wrap it without logic of its own. Paths are absolute cv paths
 * ("/a/b"); {@link #pathOf(URI)} strips the scheme and authority.
 * Thread-safe: one instance serves every thread of the process.
 *
 * <p>Close it when done. One that becomes unreachable (with every stream opened from it) is
 * closed by a {@link Cleaner}, so that a caller that cannot close it, such as Hadoop's
 * FileContext, does not keep its connections and sockets forever.
 */
public final class CvFileSystem implements Closeable {
    /** The URI scheme of cv paths. */
    public static final String SCHEME = "cv";

    /** One thread for the whole process, closing clients nobody can reach any more. */
    private static final Cleaner CLEANER = Cleaner.create();

    private final long client;
    private final Cleaner.Cleanable cleanable;

    private CvFileSystem(long client) {
        this.client = client;
        this.cleanable = CLEANER.register(this, new Closer(client));
    }

    /** Closes the native client once: on close(), or after the file system became unreachable. */
    private static final class Closer implements Runnable {
        private final long client;

        Closer(long client) {
            this.client = client; // the handle only: a reference to the file system would keep it reachable
        }

        @Override
        public void run() {
            try {
                Native.clientClose(client);
            } catch (CvException e) {
                // Already closed: nothing left to free.
            }
        }
    }

    /** Connects with the cv config file at {@code configPath} ([tls], [client], [transport]). */
    public static CvFileSystem fromConfigFile(String configPath) throws IOException {
        return new CvFileSystem(Native.clientOpenFile(configPath));
    }

    /** Connects with the config given as TOML text. */
    public static CvFileSystem fromConfigToml(String configToml) throws IOException {
        return new CvFileSystem(Native.clientOpenToml(configToml));
    }

    /**
     * Connects with the config file at {@code configPath} (or none, if null) and the TOML text
     * {@code overridesToml} laid over it, key by key inside each section: settings given some
     * other way (Hadoop's {@code fs.cv.*} keys) win over the file's.
     */
    public static CvFileSystem fromConfigLayers(String configPath, String overridesToml) throws IOException {
        return new CvFileSystem(Native.clientOpenLayers(configPath, overridesToml));
    }

    /** Version of the native library. */
    public static String nativeVersion() {
        return Native.version();
    }

    /** The cv path of a {@code cv://authority/path} URI (or of a bare path). */
    public static String pathOf(URI uri) {
        if (uri.getScheme() != null && !SCHEME.equals(uri.getScheme())) {
            throw new IllegalArgumentException("not a cv URI: " + uri);
        }
        String p = uri.getPath();
        return (p == null || p.isEmpty()) ? "/" : p;
    }

    /** Opens a file: one round trip, which also brings its footer. */
    public CvInputStream open(String path) throws IOException {
        try {
            return new CvInputStream(this, Native.open(client, path), path);
        } finally {
            Reference.reachabilityFence(this); // not cleaned mid-call
        }
    }

    /** Creates a file; fails with CvFileAlreadyExistsException if it exists and !overwrite. */
    public CvOutputStream create(String path, boolean overwrite) throws IOException {
        try {
            return new CvOutputStream(this, Native.create(client, path, overwrite), path);
        } finally {
            Reference.reachabilityFence(this);
        }
    }

    /** Creates a file that must not exist yet. */
    public CvOutputStream create(String path) throws IOException {
        return create(path, false);
    }

    /** Metadata of a path; FileNotFoundException if there is none. */
    public CvFileStatus getFileStatus(String path) throws IOException {
        try {
            return Native.stat(client, path);
        } finally {
            Reference.reachabilityFence(this);
        }
    }

    /** Whether the path exists. */
    public boolean exists(String path) throws IOException {
        try {
            getFileStatus(path);
            return true;
        } catch (FileNotFoundException e) {
            return false;
        }
    }

    /** Entries of a directory, in name order. */
    public CvFileStatus[] listStatus(String path) throws IOException {
        try {
            return Native.list(client, path);
        } finally {
            Reference.reachabilityFence(this);
        }
    }

    /** Creates a directory and its missing parents. */
    public boolean mkdirs(String path) throws IOException {
        try {
            Native.mkdir(client, path, true);
        } finally {
            Reference.reachabilityFence(this);
        }
        return true;
    }

    /** Renames atomically; failures are exceptions, so the result is always true. */
    public boolean rename(String src, String dst) throws IOException {
        try {
            Native.rename(client, src, dst);
        } finally {
            Reference.reachabilityFence(this);
        }
        return true;
    }

    /** Deletes a path; false if it did not exist. A non-empty directory needs recursive. */
    public boolean delete(String path, boolean recursive) throws IOException {
        try {
            Native.delete(client, path, recursive);
            return true;
        } catch (FileNotFoundException e) {
            return false;
        } finally {
            Reference.reachabilityFence(this);
        }
    }

    /** Capacity, use and free space of the cluster's live workers (one round trip to the master). */
    public CvUsage getUsage() throws IOException {
        try {
            long[] u = Native.usage(client);
            return new CvUsage(u[0], u[1], u[2]);
        } finally {
            Reference.reachabilityFence(this);
        }
    }

    /** Closes the connections; streams opened from it fail from now on. Idempotent. */
    @Override
    public void close() throws IOException {
        cleanable.clean();
    }
}
