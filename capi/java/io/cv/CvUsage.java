package io.cv;

/** Space of a cv cluster: what its live workers hold, as Hadoop's FsStatus wants it. */
public final class CvUsage {
    private final long capacity;
    private final long used;
    private final long remaining;

    CvUsage(long capacity, long used, long remaining) {
        this.capacity = capacity;
        this.used = used;
        this.remaining = remaining;
    }

    /** Bytes the live workers can hold. */
    public long getCapacity() {
        return capacity;
    }

    /** Bytes in use on them. */
    public long getUsed() {
        return used;
    }

    /** Bytes new blocks can still take (draining workers take none). */
    public long getRemaining() {
        return remaining;
    }

    @Override
    public String toString() {
        return "CvUsage{capacity=" + capacity + ", used=" + used + ", remaining=" + remaining + "}";
    }
}
