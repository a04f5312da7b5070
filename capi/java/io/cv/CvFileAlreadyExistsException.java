package io.cv;

/** The target exists (Hadoop: FileAlreadyExistsException). */
public class CvFileAlreadyExistsException extends CvException {
    private static final long serialVersionUID = 1L;

    /** Called by the native library with a CV_ERR_* code. */
    public CvFileAlreadyExistsException(String message, int code, boolean retryable) {
        super(message, code, retryable);
    }
}
