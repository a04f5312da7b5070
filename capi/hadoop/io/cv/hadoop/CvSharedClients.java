package io.cv.hadoop;

import io.cv.CvFileSystem;
import java.io.IOException;
import java.lang.ref.WeakReference;
import java.util.concurrent.ConcurrentHashMap;

/**
 * Native clients shared by the file systems FileContext makes ({@link CvAbstractFileSystem}),
 * one per URI authority and client settings. FileContext never closes its file systems (every
 * FileContext made one that kept a client, its connections and sockets, for good: issue 40), so
 * these are not closed by their users: the client is held weakly here, strongly by each file
 * system and stream using it, and the {@link CvFileSystem}'s Cleaner closes it once none can
 * reach it.
 *
 * <p>Why both: sharing alone would keep a client of settings no longer used until the JVM exits;
 * the Cleaner alone would tie native sockets to the garbage collector, which runs on heap
 * pressure, not descriptor pressure (40 FileContexts between two collections held 40 clients).
 * Shared, the clients alive at any moment are at most one per settings in use, and a settings'
 * client goes away once unreachable.
 */
final class CvSharedClients {
    /** Connects a new client. */
    interface Connect {
        CvFileSystem connect() throws IOException;
    }

    /** One key's client, connected on first use; a slot is a few bytes and holds no native state. */
    private static final class Slot {
        private WeakReference<CvFileSystem> client = new WeakReference<>(null);

        synchronized CvFileSystem get(Connect connect) throws IOException {
            CvFileSystem fs = client.get();
            if (fs == null) {
                fs = connect.connect();
                client = new WeakReference<>(fs);
            }
            return fs;
        }
    }

    private static final ConcurrentHashMap<String, Slot> SLOTS = new ConcurrentHashMap<>();

    private CvSharedClients() {}

    /**
     * The client of {@code authority} and {@code settings}, connecting one if none is reachable.
     * Connecting holds only this key's slot, so a slow cluster does not stall the others.
     */
    static CvFileSystem get(String authority, CvHadoopConfig settings, Connect connect) throws IOException {
        String key = authority + '\0' + settings.clientKey();
        return SLOTS.computeIfAbsent(key, k -> new Slot()).get(connect);
    }
}
