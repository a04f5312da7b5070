package io.cv.hadoop;

import java.io.IOException;
import java.net.URI;
import java.net.URISyntaxException;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.DelegateToFileSystem;

/**
 * cv for Hadoop's FileContext ({@code fs.AbstractFileSystem.cv.impl=io.cv.hadoop.CvAbstractFileSystem}):
 * every call goes to a {@link CvHadoopFileSystem}, as HDFS's and S3A's do. No authority is
 * required ({@code cv:///path} works); cv has no default port.
 */
public class CvAbstractFileSystem extends DelegateToFileSystem {
    /** FileContext instantiates it reflectively with these two arguments. */
    public CvAbstractFileSystem(URI uri, Configuration conf) throws IOException, URISyntaxException {
        super(uri, new CvHadoopFileSystem(), conf, io.cv.CvFileSystem.SCHEME, false);
    }

    @Override
    public int getUriDefaultPort() {
        return -1;
    }
}
