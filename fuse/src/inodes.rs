//! Inode numbers for the kernel. cv addresses files by path, the kernel by
//! number: each path the kernel has looked up gets a number that stays the
//! same across renames and truncation (a write-once file is replaced when it
//! is truncated, so cv's own id would change), and is dropped when the
//! kernel forgets it.

use crate::paths::is_under;
use std::collections::HashMap;

/// The mount root's number, fixed by FUSE.
pub(crate) const ROOT_INO: u64 = 1;

#[derive(Debug)]
struct Node {
    path: String,
    /// Lookups the kernel holds; the number lives while this is > 0.
    lookups: u64,
    /// False once the path was removed or renamed over while still known.
    linked: bool,
}

/// Number ↔ path, both ways.
#[derive(Debug)]
pub(crate) struct Inodes {
    by_ino: HashMap<u64, Node>,
    by_path: HashMap<String, u64>,
    next: u64,
}

impl Inodes {
    pub(crate) fn new(root: &str) -> Self {
        let mut t = Inodes { by_ino: HashMap::new(), by_path: HashMap::new(), next: ROOT_INO + 1 };
        t.by_ino.insert(ROOT_INO, Node { path: root.to_string(), lookups: 1, linked: true });
        t.by_path.insert(root.to_string(), ROOT_INO);
        t
    }

    /// The path of a known number.
    pub(crate) fn path(&self, ino: u64) -> Option<&str> {
        self.by_ino.get(&ino).map(|n| n.path.as_str())
    }

    /// Whether the number still names a path (not removed since).
    pub(crate) fn linked(&self, ino: u64) -> bool {
        self.by_ino.get(&ino).is_some_and(|n| n.linked)
    }

    /// The number of `path` without counting a lookup.
    pub(crate) fn peek(&self, path: &str) -> Option<u64> {
        self.by_path.get(path).copied()
    }

    /// The number of `path`, made if new; counts one kernel lookup.
    pub(crate) fn remember(&mut self, path: &str) -> u64 {
        if let Some(&ino) = self.by_path.get(path)
            && let Some(n) = self.by_ino.get_mut(&ino)
        {
            n.lookups += 1;
            return ino;
        }
        let ino = self.next;
        self.next += 1;
        self.by_ino.insert(ino, Node { path: path.to_string(), lookups: 1, linked: true });
        self.by_path.insert(path.to_string(), ino);
        ino
    }

    /// The kernel dropped `n` lookups of `ino`.
    pub(crate) fn forget(&mut self, ino: u64, n: u64) {
        if ino == ROOT_INO {
            return;
        }
        let Some(node) = self.by_ino.get_mut(&ino) else { return };
        node.lookups = node.lookups.saturating_sub(n);
        if node.lookups == 0 {
            let node = self.by_ino.remove(&ino).expect("present: just borrowed");
            if self.by_path.get(&node.path) == Some(&ino) {
                self.by_path.remove(&node.path);
            }
        }
    }

    /// `path` is gone: its number, if any, no longer names it.
    pub(crate) fn unlinked(&mut self, path: &str) {
        if let Some(ino) = self.by_path.remove(path)
            && let Some(n) = self.by_ino.get_mut(&ino)
        {
            n.linked = false;
        }
    }

    /// `from` was renamed to `to`: it and everything under it move; what was
    /// at `to` is unlinked.
    pub(crate) fn renamed(&mut self, from: &str, to: &str) {
        self.unlinked(to);
        let moved: Vec<(String, u64)> =
            self.by_path.iter().filter(|(p, _)| is_under(p, from)).map(|(p, &i)| (p.clone(), i)).collect();
        for (old, ino) in moved {
            let new = format!("{to}{}", &old[from.len()..]);
            self.by_path.remove(&old);
            self.by_path.insert(new.clone(), ino);
            if let Some(n) = self.by_ino.get_mut(&ino) {
                n.path = new;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_stable_and_forgotten() {
        let mut t = Inodes::new("/");
        let a = t.remember("/a");
        assert_eq!(t.remember("/a"), a);
        assert_ne!(t.remember("/b"), a);
        t.forget(a, 1);
        assert_eq!(t.path(a), Some("/a"), "one lookup still held");
        t.forget(a, 1);
        assert_eq!(t.path(a), None);
        assert_ne!(t.remember("/a"), a, "a forgotten number is not reused");
        t.forget(ROOT_INO, 100);
        assert_eq!(t.path(ROOT_INO), Some("/"));
    }

    #[test]
    fn rename_moves_the_subtree_only() {
        let mut t = Inodes::new("/");
        let d = t.remember("/d");
        let f = t.remember("/d/f");
        let other = t.remember("/dx");
        let target = t.remember("/e");
        t.renamed("/d", "/e");
        assert_eq!(t.path(d), Some("/e"));
        assert_eq!(t.path(f), Some("/e/f"));
        assert_eq!(t.path(other), Some("/dx"));
        assert!(!t.linked(target));
        assert_eq!(t.peek("/e"), Some(d));
        assert_eq!(t.peek("/d/f"), None);
    }

    #[test]
    fn unlinked_number_lives_until_forgotten() {
        let mut t = Inodes::new("/r");
        let a = t.remember("/r/a");
        t.unlinked("/r/a");
        assert!(!t.linked(a));
        let b = t.remember("/r/a");
        assert_ne!(a, b, "a new file at the same path is a new inode");
        t.forget(a, 1);
        assert_eq!(t.peek("/r/a"), Some(b), "forgetting the old one keeps the new one");
    }
}
