package io.cv;

import java.io.Closeable;
import java.io.FileNotFoundException;
import java.io.IOException;
import java.net.URI;

/**
 * A connection to a cv cluster, with the operations of Hadoop's FileSystem
 * (same names, one to one), so that an adapter for {@code cv://authority/path}
 * can wrap it without logic of its own. Paths are absolute cv paths
 * ("/a/b"); {@link #pathOf(URI)} strips the scheme and authority.
 * Thread-safe: one instance serves every thread of the process.
 */
public final class CvFileSystem implements Closeable {
    /** The URI scheme of cv paths. */
    public static final String SCHEME = "cv";

    private final long client;
    private volatile boolean closed;

    private CvFileSystem(long client) {
        this.client = client;
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
        return new CvInputStream(Native.open(client, path), path);
    }

    /** Creates a file; fails with CvFileAlreadyExistsException if it exists and !overwrite. */
    public CvOutputStream create(String path, boolean overwrite) throws IOException {
        return new CvOutputStream(Native.create(client, path, overwrite), path);
    }

    /** Creates a file that must not exist yet. */
    public CvOutputStream create(String path) throws IOException {
        return create(path, false);
    }

    /** Metadata of a path; FileNotFoundException if there is none. */
    public CvFileStatus getFileStatus(String path) throws IOException {
        return Native.stat(client, path);
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
        return Native.list(client, path);
    }

    /** Creates a directory and its missing parents. */
    public boolean mkdirs(String path) throws IOException {
        Native.mkdir(client, path, true);
        return true;
    }

    /** Renames atomically; failures are exceptions, so the result is always true. */
    public boolean rename(String src, String dst) throws IOException {
        Native.rename(client, src, dst);
        return true;
    }

    /** Deletes a path; false if it did not exist. A non-empty directory needs recursive. */
    public boolean delete(String path, boolean recursive) throws IOException {
        try {
            Native.delete(client, path, recursive);
            return true;
        } catch (FileNotFoundException e) {
            return false;
        }
    }

    /** Capacity, use and free space of the cluster's live workers (one round trip to the master). */
    public CvUsage getUsage() throws IOException {
        long[] u = Native.usage(client);
        return new CvUsage(u[0], u[1], u[2]);
    }

    /** Closes the connections; streams opened from it fail from now on. Idempotent. */
    @Override
    public void close() throws IOException {
        if (!closed) {
            closed = true;
            Native.clientClose(client);
        }
    }
}
