//! Golden frames: one encoded frame of every message kind, checked in under
//! `tests/fixtures/v<version>/`, decoded by today's decoder and compared with the values
//! they were made from, and compared byte for byte with today's encoding of those values.
//! A change to a message's layout (a field added, removed, reordered or retyped; a new rkyv)
//! without a protocol version bump fails here. A bump keeps the old directory: it is the
//! compatibility window's test data (wire/FORMAT.md, "Compatibility").
//!
//! The values are the samples of `common/samples.rs`. Regenerate after adding a kind (a
//! sample there) or an error code, with the version unchanged:
//!
//! ```sh
//! CV_WIRE_GOLDEN=write cargo test -p cv-wire --test golden
//! ```
//!
//! Writing adds the new lines and refuses to change an existing one: a changed layout
//! needs a new version, whose directory is written afresh.

#[path = "common/samples.rs"]
mod samples;

use cv_wire::{ErrorCode, Frame, Kind, Limits, PROTOCOL_VERSION};
use samples::{Sample, Visit};
use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;

/// Checks that a decoded frame holds the values a golden frame was made from.
type Check = Box<dyn Fn(&Frame) -> Result<(), String>>;

/// One golden frame: its label in the fixture file, its bytes as encoded today, and a check
/// that a decoded frame holds the values it was made from.
struct Golden {
    label: String,
    kind: Kind,
    bytes: Vec<u8>,
    check: Check,
}

/// A frame of `msg` with `payload`; its request id is its kind's number. `streamed`, the
/// payload's crc after the payload (`PAYLOAD_CRC_AFTER`), labelled `<kind>.streamed`.
fn golden<M: Sample>(msg: M, payload: &[u8], streamed: bool) -> Golden {
    let bytes = samples::frame(&msg, M::KIND as u64, payload, streamed);
    let want = payload.to_vec();
    Golden {
        label: format!("{} {}{}", M::KIND as u16, M::KIND.name(), if streamed { ".streamed" } else { "" }),
        kind: M::KIND,
        bytes,
        check: Box::new(move |f| same(f, &msg, &want)),
    }
}

fn same<M: Sample>(f: &Frame, msg: &M, payload: &[u8]) -> Result<(), String> {
    let got: M = f.decode_body().map_err(|e| e.to_string())?;
    if &got != msg {
        return Err(format!("decoded {got:?}, made from {msg:?}"));
    }
    if f.payload() != payload {
        return Err("the payload differs".into());
    }
    if f.header().request_id != M::KIND as u64 {
        return Err(format!("request id {}", f.header().request_id));
    }
    Ok(())
}

/// Collects a golden frame of every sample.
struct Catalogue(Vec<Golden>);

impl Visit for Catalogue {
    fn sample<M: Sample>(&mut self, msg: M, payload: &[u8], streamed: bool) {
        self.0.push(golden(msg, payload, streamed));
    }
}

/// Every kind with values in every field (`samples.rs`). The values are part of the
/// fixtures: do not edit them for a version that has fixtures (add a sample instead).
fn catalogue() -> Vec<Golden> {
    let mut c = Catalogue(Vec::new());
    samples::visit(&mut c);
    c.0
}

/// The error codes as the fixture file lists them: number, name, whether retryable.
fn codes() -> Vec<String> {
    ErrorCode::ALL
        .iter()
        .map(|&c| format!("{} {} {}", c as u16, c.name(), if c.retryable() { "retry" } else { "permanent" }))
        .collect()
}

fn dir(version: u16) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("tests/fixtures/v{version}"))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex")).collect()
}

/// `label hex` lines of a fixture file (comments and blank lines skipped), by label.
fn read_frames(text: &str) -> BTreeMap<String, Vec<u8>> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let (label, hex) = l.rsplit_once(' ').expect("a `label hex` line");
            (label.to_string(), unhex(hex))
        })
        .collect()
}

const FRAMES: &str = "frames.txt";
const CODES: &str = "codes.txt";

#[test]
fn the_catalogue_covers_every_kind() {
    let covered: HashSet<Kind> = catalogue().iter().map(|g| g.kind).collect();
    for k in Kind::ALL {
        assert!(covered.contains(k), "no golden frame of {}: add one to the catalogue and regenerate", k.name());
    }
}

#[test]
fn golden_frames_of_this_version_decode_to_their_values_and_encode_the_same() {
    write_if_asked();
    let d = dir(PROTOCOL_VERSION);
    let text = std::fs::read_to_string(d.join(FRAMES)).unwrap_or_else(|e| {
        panic!("{}: {e}; a new protocol version needs its golden frames: CV_WIRE_GOLDEN=write", d.display())
    });
    let fixtures = read_frames(&text);
    let catalogue = catalogue();
    let labels: HashSet<&str> = catalogue.iter().map(|g| g.label.as_str()).collect();
    for label in fixtures.keys() {
        assert!(
            labels.contains(label.as_str()),
            "fixture {label} is no longer in the catalogue (kinds are never removed)"
        );
    }
    for g in &catalogue {
        let Some(bytes) = fixtures.get(&g.label) else {
            panic!("no golden frame {} in {}: regenerate with CV_WIRE_GOLDEN=write", g.label, d.display());
        };
        let frame = Frame::decode(bytes, &Limits::DEFAULT).unwrap_or_else(|e| panic!("{}: {e}", g.label));
        assert_eq!(frame.header().version, PROTOCOL_VERSION, "{}", g.label);
        assert_eq!(frame.kind(), g.kind, "{}", g.label);
        frame.validate().unwrap_or_else(|e| panic!("{}: {e}", g.label));
        (g.check)(&frame).unwrap_or_else(|e| panic!("{}: {e}", g.label));
        assert!(
            *bytes == g.bytes,
            "{}: today's encoding differs from the golden frame of version {PROTOCOL_VERSION}: a changed \
             layout needs a new protocol version (wire/FORMAT.md, \"Compatibility\")",
            g.label
        );
    }
}

#[test]
fn error_codes_of_this_version_keep_their_numbers_and_retry_flags() {
    write_if_asked();
    let d = dir(PROTOCOL_VERSION);
    let text = std::fs::read_to_string(d.join(CODES)).unwrap_or_else(|e| panic!("{}: {e}", d.display()));
    let fixed: Vec<&str> = text.lines().filter(|l| !l.starts_with('#') && !l.trim().is_empty()).collect();
    let today = codes();
    // Codes are only added: the fixture's lines are today's first lines, unchanged.
    assert!(fixed.len() <= today.len(), "an error code was removed");
    for (f, t) in fixed.iter().zip(&today) {
        assert_eq!(f, t, "an error code changed its number, name or retry flag");
    }
}

/// With `CV_WIRE_GOLDEN=write`, writes the fixtures once, before any test reads them.
fn write_if_asked() {
    static WRITE: std::sync::Once = std::sync::Once::new();
    if std::env::var("CV_WIRE_GOLDEN").as_deref() == Ok("write") {
        WRITE.call_once(write_fixtures);
    }
}

/// Writes this version's fixtures: new lines are added, existing ones must not change.
fn write_fixtures() {
    let d = dir(PROTOCOL_VERSION);
    std::fs::create_dir_all(&d).expect("fixture directory");
    let old = std::fs::read_to_string(d.join(FRAMES)).map(|t| read_frames(&t)).unwrap_or_default();
    let mut out = format!(
        "# cv wire protocol version {PROTOCOL_VERSION}: one frame of every message kind, `<kind> <name> <hex>`.\n\
         # Written by `CV_WIRE_GOLDEN=write cargo test -p cv-wire --test golden` (wire/tests/golden.rs);\n\
         # never edited by hand. Lines are only added within a version.\n"
    );
    for g in catalogue() {
        if let Some(before) = old.get(&g.label) {
            assert!(
                *before == g.bytes,
                "{}: its layout changed under version {PROTOCOL_VERSION}: bump PROTOCOL_VERSION",
                g.label
            );
        }
        out.push_str(&format!("{} {}\n", g.label, hex(&g.bytes)));
    }
    std::fs::write(d.join(FRAMES), out).expect("write frames");
    let mut codes_text = format!(
        "# cv wire protocol version {PROTOCOL_VERSION}: error codes, `<number> <name> <retry|permanent>`.\n\
         # Written with frames.txt; codes are only added.\n"
    );
    for line in codes() {
        codes_text.push_str(&line);
        codes_text.push('\n');
    }
    std::fs::write(d.join(CODES), codes_text).expect("write codes");
}
