//! Errors to Java exceptions, in one place, and the guard every native
//! method runs under.

use crate::error::{Error, ErrorKind, Result};
use crate::guard;
use cv_client::ErrorKind as K;
use jni::JNIEnv;
use jni::objects::{JThrowable, JValue};

/// Runs a native method body: a panic or an error becomes a pending Java
/// exception and the method returns `default` (which Java never sees).
pub(super) fn run<'l, T>(env: &mut JNIEnv<'l>, default: T, f: impl FnOnce(&mut JNIEnv<'l>) -> Result<T>) -> T {
    match guard::run(|| f(env)) {
        Ok(v) => v,
        Err(e) => {
            throw(env, &e);
            default
        }
    }
}

/// The exception class of each kind. Every class has the constructor
/// `(String message, int code, boolean retryable)` and implements
/// `io.cv.CvError`; NotFound and Eof extend the JDK types Hadoop callers
/// catch (`FileNotFoundException`, `EOFException`). NotADirectory (a path
/// below a file, `file/child`) is a `FileNotFoundException` too, as the JDK
/// reports ENOTDIR and as Hadoop's contract wants for such a path: what is
/// asked for does not exist (issue 40).
fn class_of(kind: ErrorKind) -> &'static str {
    match kind {
        ErrorKind::Client(K::NotFound) => "io/cv/CvFileNotFoundException",
        ErrorKind::Client(K::NotADirectory) => "io/cv/CvNotADirectoryException",
        ErrorKind::Eof => "io/cv/CvEOFException",
        ErrorKind::Client(K::AlreadyExists) => "io/cv/CvFileAlreadyExistsException",
        ErrorKind::Client(K::NotEmpty) => "io/cv/CvPathIsNotEmptyDirectoryException",
        _ => "io/cv/CvException",
    }
}

/// Throws the Java exception for `e`, unless one is already pending (e.g.
/// raised by a JNI call inside the method), which then stays.
pub(super) fn throw(env: &mut JNIEnv, e: &Error) {
    if env.exception_check().unwrap_or(true) {
        return;
    }
    let thrown = (|| -> jni::errors::Result<()> {
        let msg = env.new_string(e.message())?;
        let args = [JValue::Object(&msg), JValue::Int(e.kind().code()), JValue::Bool(u8::from(e.retryable()))];
        let obj = env.new_object(class_of(e.kind()), "(Ljava/lang/String;IZ)V", &args)?;
        env.throw(JThrowable::from(obj))
    })();
    if thrown.is_err() && !env.exception_check().unwrap_or(true) {
        // The cv classes are missing from the class path: still fail loudly.
        let _ = env.throw_new("java/io/IOException", e.to_string());
    }
}

impl From<jni::errors::Error> for Error {
    fn from(e: jni::errors::Error) -> Self {
        match e {
            jni::errors::Error::NullPtr(what) | jni::errors::Error::NullDeref(what) => {
                Error::invalid(format!("null argument ({what})"))
            }
            // An exception is pending; `throw` keeps it.
            jni::errors::Error::JavaException => Error::new(K::Other, "Java exception"),
            other => Error::new(ErrorKind::Internal, format!("JNI: {other}")),
        }
    }
}
