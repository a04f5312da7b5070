package io.cv;

/** Where one block of a file is: its byte range and the hosts of the workers holding a copy. */
public final class CvBlock {
    private final long offset;
    private final long length;
    private final String[] hosts;

    CvBlock(long offset, long length, String[] hosts) {
        this.offset = offset;
        this.length = length;
        this.hosts = hosts;
    }

    /** Parses the native library's "offset length host1,host2". */
    static CvBlock parse(String s) {
        String[] p = s.split(" ", 3);
        String[] hosts = p.length < 3 || p[2].isEmpty() ? new String[0] : p[2].split(",");
        return new CvBlock(Long.parseLong(p[0]), Long.parseLong(p[1]), hosts);
    }

    public long getOffset() {
        return offset;
    }

    public long getLength() {
        return length;
    }

    /** The hosts holding a copy, the block's owner first; empty when every copy is lost. */
    public String[] getHosts() {
        return hosts.clone();
    }
}
