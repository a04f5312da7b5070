//! cv.h is written by hand; this test holds it to the code. It parses the
//! `extern "C"` functions, `#[repr(C)]` structs, the callback type and the
//! constants of `src/ffi`, maps each Rust type to its C spelling, and
//! compares them one by one with the prototypes, structs and `#define`s of
//! the header. It also compares the exported symbols of the built library
//! with the header and with `io.cv.Native`, the Java error kinds with the
//! Rust ones, and compiles the header as C and as C++.
//! (cbindgen would generate the header, but as a build dependency it costs
//! more than this check, and a written header can carry the contract.)

mod common;

use common::{crate_dir, run, shared_lib};
use cv_capi::ErrorKind;
use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

/// A function (or function-pointer type): C return type and (name, C type) params.
#[derive(Debug, PartialEq, Eq)]
struct Sig {
    ret: String,
    params: Vec<(String, String)>,
}

fn ffi_sources() -> String {
    let mut all = String::new();
    let mut files: Vec<_> =
        std::fs::read_dir(crate_dir().join("src/ffi")).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    for f in files {
        all += &std::fs::read_to_string(f).unwrap();
        all.push('\n');
    }
    all
}

fn header() -> String {
    std::fs::read_to_string(crate_dir().join("include/cv.h")).unwrap()
}

/// Rust type → C spelling (`*const c_char` → `const char *`, `CvStat` → `cv_stat_t`).
fn c_type(rust: &str) -> String {
    let t = rust.trim();
    if let Some(rest) = t.strip_prefix("*const ") {
        return format!("const {} *", c_type(rest));
    }
    if let Some(rest) = t.strip_prefix("*mut ") {
        return format!("{} *", c_type(rest));
    }
    match t {
        "u64" => "uint64_t".into(),
        "u32" => "uint32_t".into(),
        "i32" => "int32_t".into(),
        "u8" => "uint8_t".into(),
        "usize" => "size_t".into(),
        "c_char" => "char".into(),
        "c_void" => "void".into(),
        "" => "void".into(),
        other => {
            let name = other.strip_prefix("Cv").unwrap_or_else(|| panic!("unmapped Rust type {other}"));
            let mut snake = String::from("cv");
            for ch in name.chars() {
                if ch.is_ascii_uppercase() {
                    snake.push('_');
                }
                snake.push(ch.to_ascii_lowercase());
            }
            snake + "_t"
        }
    }
}

/// Normalizes a C type: single spaces, `T *` for pointers.
fn norm_c(t: &str) -> String {
    let spaced = t.replace('*', " * ");
    let words: Vec<&str> = spaced.split_whitespace().collect();
    words.join(" ").replace("* *", "**")
}

fn split_top(s: &str) -> Vec<String> {
    let (mut out, mut cur, mut depth) = (Vec::new(), String::new(), 0i32);
    for ch in s.chars() {
        match ch {
            '(' | '<' => depth += 1,
            ')' | '>' => depth -= 1,
            _ => {}
        }
        if ch == ',' && depth == 0 {
            out.push(std::mem::take(&mut cur));
        } else {
            cur.push(ch);
        }
    }
    out.push(cur);
    out.into_iter().map(|p| p.trim().to_string()).filter(|p| !p.is_empty()).collect()
}

/// The text between the parenthesis at `open` and its match, and the index after it.
fn parens(s: &str, open: usize) -> (&str, usize) {
    let mut depth = 0;
    for (i, ch) in s[open..].char_indices() {
        match ch {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth == 0 {
                    return (&s[open + 1..open + i], open + i + 1);
                }
            }
            _ => {}
        }
    }
    panic!("unbalanced parentheses");
}

fn rust_sig(params: &str, after: &str) -> Sig {
    let params = split_top(params)
        .into_iter()
        .map(|p| {
            let (name, ty) = p.split_once(':').unwrap_or_else(|| panic!("param {p}"));
            (name.trim().to_string(), norm_c(&c_type(ty)))
        })
        .collect();
    let after = after.trim_start();
    let ret = match after.strip_prefix("->") {
        Some(r) => r.split(['{', '>', ';']).next().unwrap().trim().to_string(),
        None => String::new(),
    };
    Sig { ret: norm_c(&c_type(&ret)), params }
}

/// `extern "C" fn`s and `extern "C" fn` pointer types of src/ffi.
fn rust_fns(src: &str) -> BTreeMap<String, Sig> {
    let mut out = BTreeMap::new();
    let key = "extern \"C\" fn";
    let mut at = 0;
    while let Some(i) = src[at..].find(key) {
        let start = at + i + key.len();
        let open = start + src[start..].find('(').unwrap();
        let name = src[start..open].trim().to_string();
        let (params, end) = parens(src, open);
        let sig = rust_sig(params, &src[end..]);
        let name = if name.is_empty() {
            // `pub type CvListFn = Option<unsafe extern "C" fn(...)>`
            let line_start = src[..at + i].rfind("pub type ").unwrap();
            let alias = src[line_start + 9..].split_whitespace().next().unwrap();
            c_type(alias)
        } else {
            name
        };
        out.insert(name, sig);
        at = end;
    }
    out
}

fn strip_comments(c: &str) -> String {
    let mut out = String::new();
    let mut rest = c;
    while let Some(i) = rest.find("/*") {
        out += &rest[..i];
        rest = &rest[i + rest[i..].find("*/").unwrap() + 2..];
    }
    out + rest
}

fn c_params(params: &str) -> Vec<(String, String)> {
    if params.trim() == "void" {
        return Vec::new();
    }
    split_top(params)
        .into_iter()
        .map(|p| {
            let name_at = p.rfind(|c: char| !(c.is_alphanumeric() || c == '_')).map_or(0, |i| i + 1);
            (p[name_at..].to_string(), norm_c(&p[..name_at]))
        })
        .collect()
}

/// Prototypes and function-pointer typedefs of cv.h.
fn c_fns(h: &str) -> BTreeMap<String, Sig> {
    let mut out = BTreeMap::new();
    let body: String =
        strip_comments(h).lines().filter(|l| !l.trim_start().starts_with('#')).collect::<Vec<_>>().join(" ");
    for stmt in body.split(';').map(str::trim) {
        let Some(open) = stmt.find('(') else { continue };
        if let Some(rest) = stmt.strip_prefix("typedef ") {
            let Some(star) = rest.find("(*") else { continue };
            let name_end = rest[star..].find(')').unwrap() + star;
            let name = rest[star + 2..name_end].trim().to_string();
            let popen = name_end + 1 + rest[name_end + 1..].find('(').unwrap();
            let (params, _) = parens(rest, popen);
            out.insert(name, Sig { ret: norm_c(&rest[..star]), params: c_params(params) });
        } else if !stmt.starts_with("typedef") && !stmt.contains('{') && !stmt.contains('}') {
            let head = stmt[..open].trim();
            let name_at = head.rfind(|c: char| !(c.is_alphanumeric() || c == '_')).map_or(0, |i| i + 1);
            let (params, _) = parens(stmt, open);
            out.insert(head[name_at..].to_string(), Sig { ret: norm_c(&head[..name_at]), params: c_params(params) });
        }
    }
    out
}

/// `#[repr(C)] pub struct` fields of src/ffi, keyed by C name.
fn rust_structs(src: &str) -> BTreeMap<String, Vec<(String, String)>> {
    let mut out = BTreeMap::new();
    for part in src.split("#[repr(C)]").skip(1) {
        let s = &part[part.find("pub struct ").unwrap() + 11..];
        let name = s.split_whitespace().next().unwrap();
        let body = &s[s.find('{').unwrap() + 1..s.find('}').unwrap()];
        let fields = split_top(body)
            .into_iter()
            .map(|f| {
                let (n, t) = f.trim_start_matches("pub ").split_once(':').unwrap();
                (n.trim().to_string(), norm_c(&c_type(t)))
            })
            .collect();
        out.insert(c_type(name), fields);
    }
    out
}

/// `typedef struct x { ... } x_t;` fields of cv.h.
fn c_structs(h: &str) -> BTreeMap<String, Vec<(String, String)>> {
    let h = strip_comments(h);
    let mut out = BTreeMap::new();
    for part in h.split("typedef struct").skip(1) {
        let body = &part[part.find('{').unwrap() + 1..part.find('}').unwrap()];
        let after = &part[part.find('}').unwrap() + 1..];
        let name = after[..after.find(';').unwrap()].trim().to_string();
        let fields = body
            .split(';')
            .map(str::trim)
            .filter(|f| !f.is_empty())
            .map(|f| {
                let at = f.rfind(|c: char| !(c.is_alphanumeric() || c == '_')).map_or(0, |i| i + 1);
                (f[at..].to_string(), norm_c(&f[..at]))
            })
            .collect();
        out.insert(name, fields);
    }
    out
}

fn c_defines(h: &str) -> BTreeMap<String, i64> {
    strip_comments(h)
        .lines()
        .filter_map(|l| {
            let mut w = l.trim().strip_prefix("#define ")?.split_whitespace();
            Some((w.next()?.to_string(), w.next()?.parse().ok()?))
        })
        .collect()
}

#[test]
fn header_functions_and_types_match_the_code() {
    let (src, h) = (ffi_sources(), header());
    let (rust, c) = (rust_fns(&src), c_fns(&h));
    assert!(rust.len() >= 20, "parsed only {} Rust functions", rust.len());
    assert_eq!(rust.keys().collect::<Vec<_>>(), c.keys().collect::<Vec<_>>(), "function sets differ");
    for (name, sig) in &rust {
        assert_eq!(Some(sig), c.get(name), "signature of {name}");
    }
    let (rs, cs) = (rust_structs(&src), c_structs(&h));
    assert_eq!(rs.keys().collect::<Vec<_>>(), vec!["cv_range_t", "cv_stat_t"]);
    assert_eq!(rs, cs, "struct layouts differ");
}

#[test]
fn header_constants_match_the_code() {
    let d = c_defines(&header());
    assert_eq!(d.get("CV_OK"), Some(&0));
    for k in ErrorKind::ALL {
        assert_eq!(d.get(k.c_name()), Some(&i64::from(k.code())), "{}", k.c_name());
    }
    let codes = d.keys().filter(|n| n.starts_with("CV_ERR_")).count();
    assert_eq!(codes, ErrorKind::ALL.len(), "a CV_ERR_ code in cv.h that the code does not have");
    let src = ffi_sources();
    for (name, c) in [("KIND_FILE", "CV_KIND_FILE"), ("KIND_DIR", "CV_KIND_DIR")] {
        let decl = format!("pub const {name}: u32 = {};", d[c]);
        assert!(src.contains(&decl), "{c} = {} but Rust lacks `{decl}`", d[c]);
    }
}

#[test]
fn java_error_kinds_match_the_code() {
    let java = std::fs::read_to_string(crate_dir().join("java/io/cv/CvErrorKind.java")).unwrap();
    let declared: Vec<(String, i32)> = java
        .lines()
        .filter_map(|l| {
            let l = l.trim();
            let (name, rest) = l.split_once('(')?;
            if !name.chars().all(|c| c.is_ascii_uppercase() || c == '_') || name.is_empty() {
                return None;
            }
            Some((name.to_string(), rest.split(')').next()?.parse().ok()?))
        })
        .collect();
    let want: Vec<(String, i32)> = ErrorKind::ALL.iter().map(|k| (k.java_name().to_string(), k.code())).collect();
    assert_eq!(declared, want);
}

#[test]
fn exported_symbols_match_header_and_java() {
    let out = run(Command::new("nm").args(["-D", "--defined-only"]).arg(shared_lib()));
    let text = String::from_utf8_lossy(&out.stdout);
    let syms: BTreeSet<&str> = text.lines().filter_map(|l| l.split_whitespace().nth(2)).collect();
    let c_syms: BTreeSet<String> = syms.iter().filter(|s| s.starts_with("cv_")).map(|s| s.to_string()).collect();
    let header_fns: BTreeSet<String> = c_fns(&header()).into_keys().filter(|n| !n.ends_with("_t")).collect();
    assert_eq!(c_syms, header_fns, "exported cv_ symbols vs cv.h");

    let native = std::fs::read_to_string(crate_dir().join("java/io/cv/Native.java")).unwrap();
    let java_fns: BTreeSet<String> = native
        .split("static native ")
        .skip(1)
        .map(|s| {
            let head = &s[..s.find('(').unwrap()];
            format!("Java_io_cv_Native_{}", head.split_whitespace().last().unwrap())
        })
        .collect();
    let jni_syms: BTreeSet<String> =
        syms.iter().filter(|s| s.starts_with("Java_io_cv_Native_")).map(|s| s.to_string()).collect();
    assert_eq!(jni_syms, java_fns, "exported JNI symbols vs Native.java");
}

#[test]
fn header_compiles_as_c_and_cpp() {
    let h = crate_dir().join("include/cv.h");
    run(Command::new("cc")
        .args(["-fsyntax-only", "-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic", "-x", "c"])
        .arg(&h));
    if Command::new("c++").arg("--version").output().is_ok_and(|o| o.status.success()) {
        run(Command::new("c++").args(["-fsyntax-only", "-Wall", "-Wextra", "-Werror", "-x", "c++"]).arg(&h));
    }
}
