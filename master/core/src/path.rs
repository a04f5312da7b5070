//! cv paths: absolute, normalized, bounded. Every namespace operation takes a [`CvPath`], so
//! the state machine never sees `.`/`..`/`//`, a NUL, or an oversized name.

use std::fmt;

/// Longest accepted path, in bytes (input and normalized form).
pub const MAX_PATH_BYTES: usize = 4096;
/// Longest accepted component, in bytes.
pub const MAX_NAME_BYTES: usize = 255;
/// Most components in a normalized path.
pub const MAX_DEPTH: usize = 128;

/// Why a path was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PathError {
    #[error("path is empty")]
    Empty,
    #[error("path is not absolute: {0:?}")]
    NotAbsolute(String),
    #[error("path longer than {MAX_PATH_BYTES} bytes ({0})")]
    TooLong(usize),
    #[error("path component longer than {MAX_NAME_BYTES} bytes ({0})")]
    NameTooLong(usize),
    #[error("path deeper than {MAX_DEPTH} components")]
    TooDeep,
    #[error("path contains a NUL byte")]
    Nul,
    #[error("path escapes the root through '..'")]
    EscapesRoot,
    #[error("name {0:?} contains a control character (U+0000 to U+001F, U+007F)")]
    ControlChar(String),
}

/// A validated, normalized absolute path: "/" or "/a/b" (no trailing slash).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CvPath(String);

impl CvPath {
    /// The root directory.
    pub fn root() -> Self {
        Self("/".to_owned())
    }

    /// Validates and normalizes: collapses `//`, drops `.`, resolves `..` (never above root).
    pub fn parse(raw: &str) -> Result<Self, PathError> {
        if raw.is_empty() {
            return Err(PathError::Empty);
        }
        if raw.len() > MAX_PATH_BYTES {
            return Err(PathError::TooLong(raw.len()));
        }
        if raw.as_bytes().contains(&0) {
            return Err(PathError::Nul);
        }
        if !raw.starts_with('/') {
            return Err(PathError::NotAbsolute(raw.chars().take(64).collect()));
        }
        let mut parts: Vec<&str> = Vec::new();
        for part in raw.split('/') {
            match part {
                "" | "." => {}
                ".." => {
                    if parts.pop().is_none() {
                        return Err(PathError::EscapesRoot);
                    }
                }
                name => {
                    if name.len() > MAX_NAME_BYTES {
                        return Err(PathError::NameTooLong(name.len()));
                    }
                    parts.push(name);
                }
            }
        }
        if parts.len() > MAX_DEPTH {
            return Err(PathError::TooDeep);
        }
        Ok(Self::from_parts(&parts))
    }

    /// [`CvPath::parse`] for a name being made (create, mkdir, a rename's destination, a
    /// mount point): control characters are refused too, since a newline in a name splits
    /// every line-oriented listing of it. Names already in the namespace (from an earlier
    /// version, or an object key under a mount) are still read through `parse`.
    pub fn parse_new(raw: &str) -> Result<Self, PathError> {
        let p = Self::parse(raw)?;
        if let Some(name) = p.components().find(|c| c.chars().any(|ch| ch.is_ascii_control())) {
            return Err(PathError::ControlChar(name.chars().take(64).collect()));
        }
        Ok(p)
    }

    fn from_parts(parts: &[&str]) -> Self {
        if parts.is_empty() {
            return Self::root();
        }
        let mut s = String::with_capacity(parts.iter().map(|p| p.len() + 1).sum());
        for p in parts {
            s.push('/');
            s.push_str(p);
        }
        Self(s)
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn is_root(&self) -> bool {
        self.0 == "/"
    }

    /// Components from the root down; empty for "/".
    pub fn components(&self) -> impl Iterator<Item = &str> {
        self.0.split('/').filter(|c| !c.is_empty())
    }

    pub fn depth(&self) -> usize {
        self.components().count()
    }

    /// The last component; `None` for the root.
    pub fn name(&self) -> Option<&str> {
        if self.is_root() { None } else { self.0.rsplit('/').next() }
    }

    /// The parent directory; `None` for the root.
    pub fn parent(&self) -> Option<CvPath> {
        if self.is_root() {
            return None;
        }
        let cut = self.0.rfind('/').unwrap_or(0);
        Some(if cut == 0 { Self::root() } else { Self(self.0[..cut].to_owned()) })
    }

    /// Whether `self` is `ancestor` or lies below it (component-wise, so "/ab" is not under "/a").
    pub fn is_under(&self, ancestor: &CvPath) -> bool {
        self.is_under_str(&ancestor.0)
    }

    /// [`Self::is_under`] for an ancestor kept as the string of a parsed path (a mount
    /// point): no parse per call.
    pub fn is_under_str(&self, ancestor: &str) -> bool {
        if ancestor == "/" {
            return true;
        }
        self.0 == ancestor || (self.0.starts_with(ancestor) && self.0.as_bytes().get(ancestor.len()) == Some(&b'/'))
    }

    /// Appends one component, checking the limits again.
    pub fn child(&self, name: &str) -> Result<CvPath, PathError> {
        if name.is_empty() || name == "." || name == ".." || name.contains('/') {
            return Err(PathError::NotAbsolute(name.chars().take(64).collect()));
        }
        let joined = if self.is_root() { format!("/{name}") } else { format!("{}/{name}", self.0) };
        Self::parse(&joined)
    }
}

impl fmt::Display for CvPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::str::FromStr for CvPath {
    type Err = PathError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> String {
        CvPath::parse(s).unwrap().as_str().to_owned()
    }

    #[test]
    fn normalizes() {
        assert_eq!(p("/"), "/");
        assert_eq!(p("//a///b/"), "/a/b");
        assert_eq!(p("/a/./b/."), "/a/b");
        assert_eq!(p("/a/b/../c"), "/a/c");
        assert_eq!(p("/a/.."), "/");
    }

    #[test]
    fn refuses_bad_input() {
        assert_eq!(CvPath::parse(""), Err(PathError::Empty));
        assert!(matches!(CvPath::parse("a/b"), Err(PathError::NotAbsolute(_))));
        assert_eq!(CvPath::parse("/.."), Err(PathError::EscapesRoot));
        assert_eq!(CvPath::parse("/a/../../b"), Err(PathError::EscapesRoot));
        assert_eq!(CvPath::parse("/a\0b"), Err(PathError::Nul));
        assert!(CvPath::parse("/a\nb").is_ok(), "names already held stay readable");
        assert_eq!(CvPath::parse_new("/d/a\nb"), Err(PathError::ControlChar("a\nb".into())));
        assert!(matches!(CvPath::parse_new("/t\x7f"), Err(PathError::ControlChar(_))));
        assert_eq!(CvPath::parse_new("/d/é b").unwrap().as_str(), "/d/é b");
        let long = format!("/{}", "x".repeat(256));
        assert_eq!(CvPath::parse(&long), Err(PathError::NameTooLong(256)));
        assert!(CvPath::parse(&format!("/{}", "x".repeat(255))).is_ok());
        let deep = "/d".repeat(129);
        assert_eq!(CvPath::parse(&deep), Err(PathError::TooDeep));
        assert!(CvPath::parse(&"/d".repeat(128)).is_ok());
        let huge = "/abcdefg".repeat(600);
        assert!(matches!(CvPath::parse(&huge), Err(PathError::TooLong(_))));
    }

    #[test]
    fn parent_name_under() {
        let a = CvPath::parse("/a/b/c").unwrap();
        assert_eq!(a.name(), Some("c"));
        assert_eq!(a.parent().unwrap().as_str(), "/a/b");
        assert_eq!(CvPath::parse("/a").unwrap().parent(), Some(CvPath::root()));
        assert_eq!(CvPath::root().parent(), None);
        assert!(a.is_under(&CvPath::parse("/a").unwrap()));
        assert!(a.is_under(&a));
        assert!(!CvPath::parse("/ab").unwrap().is_under(&CvPath::parse("/a").unwrap()));
        assert_eq!(a.depth(), 3);
        assert_eq!(a.child("d").unwrap().as_str(), "/a/b/c/d");
        assert!(a.child("..").is_err());
    }
}
