//! `io.cv.Native` methods behind `CvInputStream` and `CvOutputStream`.

use super::convert::{as_jbytes, as_jbytes_mut, direct_region, range, status, string};
use super::throw::run;
use crate::error::{Error, Result};
use crate::ops;
use jni::JNIEnv;
use jni::objects::{JByteArray, JByteBuffer, JClass, JIntArray, JLongArray, JObject, JObjectArray, JString};
use jni::sys::{jboolean, jint, jintArray, jlong, jlongArray, jobject, jobjectArray};

#[unsafe(no_mangle)]
pub extern "system" fn Java_io_cv_Native_open<'l>(
    mut env: JNIEnv<'l>,
    _c: JClass<'l>,
    client: jlong,
    path: JString<'l>,
) -> jlong {
    run(&mut env, 0, |env| Ok(ops::open(client as u64, &string(env, &path)?)? as jlong))
}

/// `{length, version, tailOffset}`.
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_cv_Native_fileInfo<'l>(mut env: JNIEnv<'l>, _c: JClass<'l>, file: jlong) -> jlongArray {
    run(&mut env, std::ptr::null_mut(), |env| {
        let i = ops::file_info(file as u64)?;
        let arr = env.new_long_array(3)?;
        env.set_long_array_region(&arr, 0, &[i.length as i64, i.version as i64, i.tail_offset as i64])?;
        Ok(arr.into_raw())
    })
}

/// The file's blocks, one string each: `"offset len host1,host2"` (no hosts: every copy lost).
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_cv_Native_fileBlocks<'l>(
    mut env: JNIEnv<'l>,
    _c: JClass<'l>,
    file: jlong,
) -> jobjectArray {
    run(&mut env, std::ptr::null_mut(), |env| {
        let blocks = ops::file_blocks(file as u64)?;
        let arr = env.new_object_array(blocks.len() as i32, "java/lang/String", JObject::null())?;
        for (i, (offset, len, hosts)) in blocks.iter().enumerate() {
            let s = env.new_string(format!("{offset} {len} {}", hosts.join(",")))?;
            env.set_object_array_element(&arr, i as i32, &s)?;
        }
        Ok(arr.into_raw())
    })
}

/// Reads into a direct buffer's `[off, off+len)`; returns the bytes read
/// (0 at the end). With `fully`, all `len` bytes or an `EOFException`.
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_cv_Native_pread<'l>(
    mut env: JNIEnv<'l>,
    _c: JClass<'l>,
    file: jlong,
    position: jlong,
    mut buf: JByteBuffer<'l>,
    off: jint,
    len: jint,
    fully: jboolean,
) -> jint {
    run(&mut env, -1, |env| {
        let position = offset(position)?;
        let dst = direct_region(env, &mut buf, off, len)?;
        if fully != 0 {
            ops::pread_fully(file as u64, position, dst)?;
            return Ok(len);
        }
        Ok(ops::pread(file as u64, position, dst)? as jint)
    })
}

/// As `pread`, into a heap array (one copy through a native buffer).
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_cv_Native_preadArray<'l>(
    mut env: JNIEnv<'l>,
    _c: JClass<'l>,
    file: jlong,
    position: jlong,
    arr: JByteArray<'l>,
    off: jint,
    len: jint,
    fully: jboolean,
) -> jint {
    run(&mut env, -1, |env| {
        let position = offset(position)?;
        let cap = env.get_array_length(&arr)? as usize;
        let (_, l) = range(off, len, cap, "array")?;
        let mut tmp = vec![0u8; l];
        let n = if fully != 0 {
            ops::pread_fully(file as u64, position, &mut tmp)?;
            l
        } else {
            ops::pread(file as u64, position, &mut tmp)?
        };
        env.set_byte_array_region(&arr, off, as_jbytes(&tmp[..n]))?;
        Ok(n as jint)
    })
}

/// Vectored read into direct buffers: range `i` is `lengths[i]` bytes at
/// `positions[i]` into `bufs[i]` at `offsets[i]`. Returns the bytes read per
/// range (short at the end of the file).
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_cv_Native_preadv<'l>(
    mut env: JNIEnv<'l>,
    _c: JClass<'l>,
    file: jlong,
    positions: JLongArray<'l>,
    bufs: JObjectArray<'l>,
    offsets: JIntArray<'l>,
    lengths: JIntArray<'l>,
) -> jintArray {
    run(&mut env, std::ptr::null_mut(), |env| {
        let n = env.get_array_length(&positions)?;
        if env.get_array_length(&bufs)? != n
            || env.get_array_length(&offsets)? != n
            || env.get_array_length(&lengths)? != n
        {
            return Err(Error::invalid("preadv: arrays of different lengths"));
        }
        let count = n as usize;
        let mut pos = vec![0i64; count];
        let mut offs = vec![0i32; count];
        let mut lens = vec![0i32; count];
        env.get_long_array_region(&positions, 0, &mut pos)?;
        env.get_int_array_region(&offsets, 0, &mut offs)?;
        env.get_int_array_region(&lengths, 0, &mut lens)?;
        let mut want = Vec::with_capacity(count);
        for i in 0..count {
            let l = usize::try_from(lens[i]).map_err(|_| Error::invalid(format!("preadv: length {}", lens[i])))?;
            want.push((offset(pos[i])?, l));
        }
        let got = ops::preadv(file as u64, &want)?;
        let mut read = vec![0i32; count];
        for (i, bytes) in got.iter().enumerate() {
            let mut buf = JByteBuffer::from(env.get_object_array_element(&bufs, i as i32)?);
            direct_region(env, &mut buf, offs[i], lens[i])?[..bytes.len()].copy_from_slice(bytes);
            env.delete_local_ref(buf)?;
            read[i] = bytes.len() as i32;
        }
        let out = env.new_int_array(n)?;
        env.set_int_array_region(&out, 0, &read)?;
        Ok(out.into_raw())
    })
}

#[unsafe(no_mangle)]
pub extern "system" fn Java_io_cv_Native_fileClose<'l>(mut env: JNIEnv<'l>, _c: JClass<'l>, file: jlong) {
    run(&mut env, (), |_| ops::file_close(file as u64))
}

#[unsafe(no_mangle)]
pub extern "system" fn Java_io_cv_Native_create<'l>(
    mut env: JNIEnv<'l>,
    _c: JClass<'l>,
    client: jlong,
    path: JString<'l>,
    overwrite: jboolean,
) -> jlong {
    run(&mut env, 0, |env| Ok(ops::create(client as u64, &string(env, &path)?, overwrite != 0)? as jlong))
}

/// Appends a direct buffer's `[off, off+len)`, without copying to the heap.
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_cv_Native_write<'l>(
    mut env: JNIEnv<'l>,
    _c: JClass<'l>,
    writer: jlong,
    mut buf: JByteBuffer<'l>,
    off: jint,
    len: jint,
) {
    run(&mut env, (), |env| ops::write(writer as u64, direct_region(env, &mut buf, off, len)?))
}

/// Appends `arr[off..off+len]`.
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_cv_Native_writeArray<'l>(
    mut env: JNIEnv<'l>,
    _c: JClass<'l>,
    writer: jlong,
    arr: JByteArray<'l>,
    off: jint,
    len: jint,
) {
    run(&mut env, (), |env| {
        let cap = env.get_array_length(&arr)? as usize;
        let (_, l) = range(off, len, cap, "array")?;
        let mut tmp = vec![0u8; l];
        env.get_byte_array_region(&arr, off, as_jbytes_mut(&mut tmp))?;
        ops::write(writer as u64, &tmp)
    })
}

#[unsafe(no_mangle)]
pub extern "system" fn Java_io_cv_Native_writerClose<'l>(
    mut env: JNIEnv<'l>,
    _c: JClass<'l>,
    writer: jlong,
) -> jobject {
    run(&mut env, std::ptr::null_mut(), |env| {
        let st = ops::writer_close(writer as u64)?;
        Ok(status(env, &st)?.into_raw())
    })
}

#[unsafe(no_mangle)]
pub extern "system" fn Java_io_cv_Native_writerBlockSize<'l>(
    mut env: JNIEnv<'l>,
    _c: JClass<'l>,
    writer: jlong,
) -> jlong {
    run(&mut env, 0, |_| Ok(i64::try_from(ops::writer_block_size(writer as u64)?).unwrap_or(i64::MAX)))
}

#[unsafe(no_mangle)]
pub extern "system" fn Java_io_cv_Native_writerAbort<'l>(mut env: JNIEnv<'l>, _c: JClass<'l>, writer: jlong) {
    run(&mut env, (), |_| ops::writer_abort(writer as u64))
}

fn offset(position: jlong) -> Result<u64> {
    u64::try_from(position).map_err(|_| Error::invalid(format!("negative position {position}")))
}
