//! `io.cv.Native` methods behind `CvFileSystem`: clients and namespace.

use super::convert::{STATUS_CLASS, status, string};
use super::throw::run;
use crate::ops;
use jni::JNIEnv;
use jni::objects::{JClass, JObject, JString};
use jni::sys::{jboolean, jlong, jlongArray, jobject, jobjectArray, jstring};

#[unsafe(no_mangle)]
pub extern "system" fn Java_io_cv_Native_version<'l>(mut env: JNIEnv<'l>, _c: JClass<'l>) -> jstring {
    run(&mut env, std::ptr::null_mut(), |env| Ok(env.new_string(env!("CARGO_PKG_VERSION"))?.into_raw()))
}

#[unsafe(no_mangle)]
pub extern "system" fn Java_io_cv_Native_clientOpenFile<'l>(
    mut env: JNIEnv<'l>,
    _c: JClass<'l>,
    path: JString<'l>,
) -> jlong {
    run(&mut env, 0, |env| Ok(ops::client_from_file(&string(env, &path)?)? as jlong))
}

#[unsafe(no_mangle)]
pub extern "system" fn Java_io_cv_Native_clientOpenToml<'l>(
    mut env: JNIEnv<'l>,
    _c: JClass<'l>,
    text: JString<'l>,
) -> jlong {
    run(&mut env, 0, |env| Ok(ops::client_from_toml(&string(env, &text)?)? as jlong))
}

#[unsafe(no_mangle)]
pub extern "system" fn Java_io_cv_Native_clientOpenLayers<'l>(
    mut env: JNIEnv<'l>,
    _c: JClass<'l>,
    path: JString<'l>,
    overrides: JString<'l>,
) -> jlong {
    run(&mut env, 0, |env| {
        let path = if path.is_null() { None } else { Some(string(env, &path)?) };
        Ok(ops::client_from_layers(path.as_deref(), &string(env, &overrides)?)? as jlong)
    })
}

#[unsafe(no_mangle)]
pub extern "system" fn Java_io_cv_Native_clientClose<'l>(mut env: JNIEnv<'l>, _c: JClass<'l>, client: jlong) {
    run(&mut env, (), |_| ops::client_close(client as u64))
}

#[unsafe(no_mangle)]
pub extern "system" fn Java_io_cv_Native_stat<'l>(
    mut env: JNIEnv<'l>,
    _c: JClass<'l>,
    client: jlong,
    path: JString<'l>,
) -> jobject {
    run(&mut env, std::ptr::null_mut(), |env| {
        let st = ops::stat(client as u64, &string(env, &path)?)?;
        Ok(status(env, &st)?.into_raw())
    })
}

#[unsafe(no_mangle)]
pub extern "system" fn Java_io_cv_Native_list<'l>(
    mut env: JNIEnv<'l>,
    _c: JClass<'l>,
    client: jlong,
    path: JString<'l>,
) -> jobjectArray {
    run(&mut env, std::ptr::null_mut(), |env| {
        let entries = ops::list(client as u64, &string(env, &path)?)?;
        let len = i32::try_from(entries.len()).map_err(|_| crate::Error::invalid("too many entries for Java"))?;
        let arr = env.new_object_array(len, STATUS_CLASS, JObject::null())?;
        for (i, e) in entries.iter().enumerate() {
            let obj = status(env, e)?;
            env.set_object_array_element(&arr, i as i32, &obj)?;
            // Keep the local reference table small for long listings.
            env.delete_local_ref(obj)?;
        }
        Ok(arr.into_raw())
    })
}

#[unsafe(no_mangle)]
pub extern "system" fn Java_io_cv_Native_mkdir<'l>(
    mut env: JNIEnv<'l>,
    _c: JClass<'l>,
    client: jlong,
    path: JString<'l>,
    parents: jboolean,
) {
    run(&mut env, (), |env| ops::mkdir(client as u64, &string(env, &path)?, parents != 0))
}

#[unsafe(no_mangle)]
pub extern "system" fn Java_io_cv_Native_rename<'l>(
    mut env: JNIEnv<'l>,
    _c: JClass<'l>,
    client: jlong,
    src: JString<'l>,
    dst: JString<'l>,
) {
    run(&mut env, (), |env| ops::rename(client as u64, &string(env, &src)?, &string(env, &dst)?))
}

#[unsafe(no_mangle)]
pub extern "system" fn Java_io_cv_Native_delete<'l>(
    mut env: JNIEnv<'l>,
    _c: JClass<'l>,
    client: jlong,
    path: JString<'l>,
    recursive: jboolean,
) {
    run(&mut env, (), |env| ops::delete(client as u64, &string(env, &path)?, recursive != 0))
}

/// `{capacity, used, remaining}` of the cluster, in bytes.
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_cv_Native_usage<'l>(mut env: JNIEnv<'l>, _c: JClass<'l>, client: jlong) -> jlongArray {
    run(&mut env, std::ptr::null_mut(), |env| {
        let u = ops::usage(client as u64)?;
        let longs = [u.capacity, u.used, u.remaining].map(|v| i64::try_from(v).unwrap_or(i64::MAX));
        let arr = env.new_long_array(3)?;
        env.set_long_array_region(&arr, 0, &longs)?;
        Ok(arr.into_raw())
    })
}
