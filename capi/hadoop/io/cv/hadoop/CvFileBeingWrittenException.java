package io.cv.hadoop;

import io.cv.CvError;
import io.cv.CvErrorKind;
import io.cv.CvException;
import org.apache.hadoop.fs.PathIOException;

/**
 * open() of a file whose writer has not closed it (cv's FILE_INCOMPLETE). HDFS would open it and
 * serve the bytes written so far; cv serves a file only once its writer completes it. The file
 * exists (getFileStatus and listStatus show it, as HDFS does), so this is not a
 * FileNotFoundException, which S3A throws only because an upload in progress is invisible there
 * to every call. A PathIOException naming the path, and not retryable: the writer may take hours.
 */
public class CvFileBeingWrittenException extends PathIOException implements CvError {
    private static final long serialVersionUID = 1L;

    CvFileBeingWrittenException(String path, CvException cause) {
        super(path, "is being written: cv opens it once its writer completes it");
        initCause(cause);
    }

    @Override
    public CvErrorKind kind() {
        return CvErrorKind.FILE_INCOMPLETE;
    }

    @Override
    public boolean retryable() {
        return false;
    }
}
