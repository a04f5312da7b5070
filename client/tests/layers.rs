//! The modules of cv-client are layered (see `lib.rs` and `client/README.md`): each uses only
//! modules below it, so no two import each other, and the modules above the route reach the
//! cluster only through it. Read from the sources: every `crate::` path outside comments and
//! outside a file's `#[cfg(test)] mod tests`, resolved through `lib.rs`'s re-exports.

use std::collections::BTreeMap;
use std::path::Path;

/// Bottom-up: a module may use only those before it.
const LAYERS: &[&str] = &[
    "error",
    "config",
    "config_file",
    "hint",
    "retry",
    "pool",
    "block",
    "leader",
    "call",
    "local",
    "route",
    "file",
    "writer",
    "reader",
    "client",
    "heartbeats",
];

/// What the modules above the route must not use: they go through the route.
const BENEATH_THE_ROUTE: &[&str] = &["pool", "call", "leader", "retry"];

/// Each top-level module's code (all its files), tests and comments left out.
fn modules(src: &Path) -> BTreeMap<String, String> {
    let mut out: BTreeMap<String, String> = BTreeMap::new();
    let mut visit = vec![src.to_path_buf()];
    while let Some(dir) = visit.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                visit.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let rel = path.strip_prefix(src).unwrap();
            let first = rel.components().next().unwrap().as_os_str().to_str().unwrap();
            let module = first.trim_end_matches(".rs").to_string();
            if module == "lib" {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            out.entry(module).or_default().push_str(&code_of(&text));
        }
    }
    out
}

/// `text` without comment lines and without its unit tests.
fn code_of(text: &str) -> String {
    let end = text.find("#[cfg(test)]\nmod tests").unwrap_or(text.len());
    text[..end].lines().filter(|l| !l.trim_start().starts_with("//")).map(|l| format!("{l}\n")).collect()
}

/// The names `lib.rs` re-exports from the crate's own modules, and from which.
fn reexports(lib: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for line in lib.lines().filter_map(|l| l.strip_prefix("pub use ")) {
        let line = line.trim_end_matches(';');
        let Some((module, names)) = line.split_once("::") else { continue };
        if !LAYERS.contains(&module) {
            continue;
        }
        for name in names.trim_matches(|c| c == '{' || c == '}').split(',') {
            out.insert(name.trim().to_string(), module.to_string());
        }
    }
    out
}

/// The modules `code` names through `crate::`.
fn uses(code: &str, reexports: &BTreeMap<String, String>, module: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (at, _) in code.match_indices("crate::") {
        let rest = &code[at + "crate::".len()..];
        assert!(!rest.starts_with('{'), "{module}: write `use crate::a::..` once per module, not `crate::{{..}}`");
        let name: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
        let used = if LAYERS.contains(&name.as_str()) {
            name
        } else if let Some(m) = reexports.get(&name) {
            m.clone()
        } else {
            // A re-export of another crate's type (`crate::FileStatus`) is no edge.
            continue;
        };
        if used != module && !out.contains(&used) {
            out.push(used);
        }
    }
    out
}

#[test]
fn each_module_uses_only_those_below_it() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let lib = std::fs::read_to_string(src.join("lib.rs")).unwrap();
    let reexports = reexports(&lib);
    assert!(reexports.get("File").is_some_and(|m| m == "file"), "lib.rs's re-exports were not read: {reexports:?}");
    let modules = modules(&src);
    let found: Vec<&str> = modules.keys().map(String::as_str).collect();
    let mut listed: Vec<&str> = LAYERS.to_vec();
    listed.sort_unstable();
    assert_eq!(found, listed, "every module of src/ has its place in LAYERS, and only those");

    let rank = |m: &str| LAYERS.iter().position(|l| *l == m).unwrap();
    let route = rank("route");
    let mut wrong = Vec::new();
    for (module, code) in &modules {
        for used in uses(code, &reexports, module) {
            if rank(&used) > rank(module) {
                wrong.push(format!("{module} uses {used}, which is above it"));
            }
            if rank(module) > route && BENEATH_THE_ROUTE.contains(&used.as_str()) {
                wrong.push(format!("{module} uses {used} instead of the route"));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn an_upward_use_is_found() {
    // The check itself: a module that uses one above it, by module or by re-exported name.
    let reexports = reexports("pub use client::Client;\npub use local::{LocalRead, LocalStats};\n");
    let code = code_of(
        "use crate::route::Route;\n// crate::client::Client in a comment\nfn f(_: crate::LocalStats) {}\n#[cfg(test)]\nmod tests {\n    use crate::Client;\n}\n",
    );
    assert_eq!(uses(&code, &reexports, "pool"), ["route", "local"]);
}
