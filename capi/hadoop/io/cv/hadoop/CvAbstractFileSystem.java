package io.cv.hadoop;

import java.io.IOException;
import java.net.URI;
import java.net.URISyntaxException;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.DelegateToFileSystem;

/**
 * cv for Hadoop's FileContext ({@code fs.AbstractFileSystem.cv.impl=io.cv.hadoop.CvAbstractFileSystem}):
 * every call goes to a {@link CvHadoopFileSystem}, as HDFS's and S3A's do. No authority is
 * required ({@code cv:///path} works); cv has no default port. FileContext makes one per
 * context and never closes it, so all those of one authority and settings share one native
 * client, closed once none of them (nor any stream of theirs) is reachable.
 */
public class CvAbstractFileSystem extends DelegateToFileSystem {
    /** FileContext instantiates it reflectively with these two arguments. */
    public CvAbstractFileSystem(URI uri, Configuration conf) throws IOException, URISyntaxException {
        // FileContext never closes this: the delegate shares its native client (CvSharedClients).
        super(uri, new CvHadoopFileSystem(true), conf, io.cv.CvFileSystem.SCHEME, false);
    }

    @Override
    public int getUriDefaultPort() {
        return -1;
    }
}
