//! Java arguments to Rust values and back. The only raw memory access of
//! the JNI binding is here: direct `ByteBuffer` memory and byte views.

use crate::error::{Error, Result};
use cv_client::{FileKind, FileStatus};
use jni::JNIEnv;
use jni::objects::{JByteBuffer, JObject, JString, JValue};
use jni::sys::{jbyte, jint};

/// A Java string argument; null is an `InvalidArgument`.
pub(super) fn string(env: &mut JNIEnv, s: &JString) -> Result<String> {
    if s.is_null() {
        return Err(Error::invalid("null string argument"));
    }
    Ok(env.get_string(s)?.into())
}

/// Checks `[off, off+len)` against a length of `cap` and returns it as usizes.
pub(super) fn range(off: jint, len: jint, cap: usize, what: &str) -> Result<(usize, usize)> {
    let (Ok(o), Ok(l)) = (usize::try_from(off), usize::try_from(len)) else {
        return Err(Error::invalid(format!("{what}: negative offset {off} or length {len}")));
    };
    if o.checked_add(l).is_none_or(|end| end > cap) {
        return Err(Error::invalid(format!("{what}: offset {off} + length {len} exceed the capacity {cap}")));
    }
    Ok((o, l))
}

/// Bytes `[off, off+len)` of a direct buffer, without copying.
///
/// The memory belongs to the buffer object, which the caller's local
/// reference keeps alive for the whole native call; as with any
/// `ByteBuffer` I/O, Java must not touch the region meanwhile.
pub(super) fn direct_region<'a>(env: &JNIEnv, buf: &'a mut JByteBuffer, off: jint, len: jint) -> Result<&'a mut [u8]> {
    if buf.is_null() {
        return Err(Error::invalid("null buffer"));
    }
    let addr = env
        .get_direct_buffer_address(buf)
        .map_err(|_| Error::invalid("the ByteBuffer is not direct (allocate it with allocateDirect)"))?;
    let cap = env.get_direct_buffer_capacity(buf)?;
    let (o, l) = range(off, len, cap, "buffer")?;
    if l == 0 {
        return Ok(&mut []);
    }
    // SAFETY: the JVM guarantees `addr` points to `cap` bytes owned by the
    // direct buffer, alive while `buf` is referenced (for 'a, the call);
    // `o + l <= cap` is checked above and bytes have no alignment needs.
    Ok(unsafe { std::slice::from_raw_parts_mut(addr.add(o), l) })
}

/// A byte slice seen as JNI's signed bytes.
pub(super) fn as_jbytes(b: &[u8]) -> &[jbyte] {
    // SAFETY: u8 and i8 have the same size, alignment and validity.
    unsafe { std::slice::from_raw_parts(b.as_ptr().cast::<jbyte>(), b.len()) }
}

/// A mutable byte slice seen as JNI's signed bytes.
pub(super) fn as_jbytes_mut(b: &mut [u8]) -> &mut [jbyte] {
    // SAFETY: u8 and i8 have the same size, alignment and validity; the
    // exclusive borrow moves to the result.
    unsafe { std::slice::from_raw_parts_mut(b.as_mut_ptr().cast::<jbyte>(), b.len()) }
}

/// Constructor signature of `io.cv.CvFileStatus`:
/// `(String path, long length, boolean isDirectory, long modificationTime,
///   long version, long blockSize, int permission, boolean complete, long id)`.
pub(super) const STATUS_CLASS: &str = "io/cv/CvFileStatus";
const STATUS_SIG: &str = "(Ljava/lang/String;JZJJJIZJ)V";

/// A `CvFileStatus` object.
pub(super) fn status<'l>(env: &mut JNIEnv<'l>, s: &FileStatus) -> Result<JObject<'l>> {
    let path = env.new_string(&s.path)?;
    let args = [
        JValue::Object(&path),
        JValue::Long(s.length as i64),
        JValue::Bool(u8::from(s.kind == FileKind::Dir)),
        JValue::Long(s.mtime_ms as i64),
        JValue::Long(s.version as i64),
        JValue::Long(s.block_size as i64),
        JValue::Int(s.mode as i32),
        JValue::Bool(u8::from(s.complete)),
        JValue::Long(s.id as i64),
    ];
    let obj = env.new_object(STATUS_CLASS, STATUS_SIG, &args)?;
    env.delete_local_ref(path)?;
    Ok(obj)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_are_checked() {
        assert_eq!(range(2, 3, 5, "b").unwrap(), (2, 3));
        assert_eq!(range(5, 0, 5, "b").unwrap(), (5, 0));
        assert!(range(-1, 3, 5, "b").is_err());
        assert!(range(0, -3, 5, "b").is_err());
        assert!(range(3, 3, 5, "b").is_err());
        assert!(range(jint::MAX, jint::MAX, usize::MAX, "b").is_ok());
    }

    #[test]
    fn byte_views_keep_values() {
        let mut b = [0u8, 127, 128, 255];
        assert_eq!(as_jbytes(&b), &[0, 127, -128, -1]);
        as_jbytes_mut(&mut b)[0] = -1;
        assert_eq!(b[0], 255);
    }
}
