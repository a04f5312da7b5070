package io.cv;

/** A non-recursive delete of a directory with content (Hadoop: PathIsNotEmptyDirectoryException). */
public class CvPathIsNotEmptyDirectoryException extends CvException {
    private static final long serialVersionUID = 1L;

    /** Called by the native library with a CV_ERR_* code. */
    public CvPathIsNotEmptyDirectoryException(String message, int code, boolean retryable) {
        super(message, code, retryable);
    }
}
