//! Block capabilities: what the master's signature lets a caller do with one block
//! (docs/security.md, "Block capabilities"). The master mints them with the current key of its
//! [`KeySchedule`] into opens (read) and `AddBlock` replies (write); it hands its keys to its
//! workers (`CapKeys`, at registration and in heartbeat replies), and a shard checks every
//! capability against the keys of its [`KeyRing`]. Like HDFS's block access tokens: an
//! HMAC-SHA-256 (truncated to 16 bytes) over
//!
//! `"cvcap1\0\0" | access u8 | block id u64 | expires_ms u64 | key id u32 | source [16]`
//!
//! (integers little-endian), where `source` is [`source_digest`] of the block's object and
//! range for a block of a cached object (so a fill reads that object only) and zeros for a
//! block cv holds alone.

use cv_wire::msg::{ArchivedBlockCap, BlockCap, CapKey, CapKeys};
use ring::hmac;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// What a capability allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Read the block (and fill it from its source, and lease it for short-circuit reads).
    Read = 1,
    /// Write it (once: a committed block is never overwritten).
    Write = 2,
}

/// A worker keeps at most this many keys; past it the ones that expire first go.
pub const MAX_KEYS: usize = 64;

/// Milliseconds since the Unix epoch now (capabilities and keys expire by the wall clock:
/// a skew of seconds between master and workers is nothing against hours of validity).
pub fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// The first 16 bytes of SHA-256 over a block's source: its object (mount, key, version,
/// each length-prefixed) and its range in it.
pub fn source_digest(mount: &str, key: &str, version: &str, offset: u64, len: u64) -> [u8; 16] {
    ObjectDigest::new(mount, key, version).range(offset, len)
}

/// [`source_digest`] for the blocks of one object, its object part hashed once (the blocks
/// of an open share it; a long key costs a SHA-256 block per block otherwise).
#[derive(Clone)]
pub struct ObjectDigest(ring::digest::Context);

impl std::fmt::Debug for ObjectDigest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ObjectDigest")
    }
}

impl ObjectDigest {
    pub fn new(mount: &str, key: &str, version: &str) -> Self {
        let mut d = ring::digest::Context::new(&ring::digest::SHA256);
        for s in [mount, key, version] {
            d.update(&(s.len() as u64).to_le_bytes());
            d.update(s.as_bytes());
        }
        Self(d)
    }

    /// The digest of the block at `offset`, `len` bytes long, of this object.
    pub fn range(&self, offset: u64, len: u64) -> [u8; 16] {
        let mut d = self.0.clone();
        d.update(&offset.to_le_bytes());
        d.update(&len.to_le_bytes());
        let mut out = [0u8; 16];
        out.copy_from_slice(&d.finish().as_ref()[..16]);
        out
    }
}

const DOMAIN: &[u8; 8] = b"cvcap1\0\0";

fn tag(key: &hmac::Key, access: Access, block_id: u64, expires_ms: u64, key_id: u32, source: &[u8; 16]) -> [u8; 16] {
    let mut msg = [0u8; 45];
    msg[..8].copy_from_slice(DOMAIN);
    msg[8] = access as u8;
    msg[9..17].copy_from_slice(&block_id.to_le_bytes());
    msg[17..25].copy_from_slice(&expires_ms.to_le_bytes());
    msg[25..29].copy_from_slice(&key_id.to_le_bytes());
    msg[29..45].copy_from_slice(source);
    let mut out = [0u8; 16];
    out.copy_from_slice(&hmac::sign(key, &msg).as_ref()[..16]);
    out
}

/// One of the master's keys, with what it is for.
#[derive(Clone)]
struct Signing {
    /// The period it signs in (wall-clock time divided by the period).
    epoch: u64,
    id: u32,
    secret: [u8; 32],
    not_after_ms: u64,
    key: hmac::Key,
}

/// The master's keys: one per wall-clock period, signing in its period and valid `lifetime`
/// after it (the last capability minted with it lives that long). Each key is made, and handed
/// to workers, a period before it signs, so a rotation never meets a worker without it.
///
/// With a group secret (`[master] capability_key`, the same file on every master of a group),
/// a period's key and its id are derived from it (HMAC-SHA-256 of the period), so every master
/// makes the same keys and a failover changes none. Without one, keys are random and in this
/// master's memory only: workers add a new leader's keys to those they hold, so capabilities
/// minted before stay good, but a worker serves the new leader's only once it registered there.
pub struct KeySchedule {
    period_ms: u64,
    lifetime_ms: u64,
    group: Option<hmac::Key>,
    /// High half of every generation: tells this set from another master's (random), or the
    /// group's sets from any other (derived).
    instance: u64,
    keys: Vec<Signing>,
}

impl std::fmt::Debug for KeySchedule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ids: Vec<u32> = self.keys.iter().map(|k| k.id).collect();
        f.debug_struct("KeySchedule")
            .field("generation", &self.generation())
            .field("key_ids", &ids)
            .field("group", &self.group.is_some())
            .finish()
    }
}

impl KeySchedule {
    /// Keys of `period`, capabilities good for `lifetime`; derived from `group` if given.
    pub fn new(period: Duration, lifetime: Duration, group: Option<&[u8; 32]>) -> Self {
        let ms = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX).max(1);
        let group = group.map(|g| hmac::Key::new(hmac::HMAC_SHA256, g));
        let instance = match &group {
            Some(g) => u64::from(u32::from_le_bytes(derive(g, b"generation", 0)[..4].try_into().expect("4 bytes"))),
            None => u64::from(rand::random::<u32>()),
        };
        Self {
            period_ms: ms(period),
            lifetime_ms: ms(lifetime),
            group,
            instance: (instance | 1) << 32,
            keys: Vec::new(),
        }
    }

    /// The signer for capabilities minted at `now_ms` (the keys of this period and the next
    /// made first if missing, and the keys past their end dropped).
    pub fn signer(&mut self, now_ms: u64) -> Signer {
        let epoch = now_ms / self.period_ms;
        // Sorted by period, the newest is the next period's once this one's is made: the set
        // changes once a period, not on every open.
        if self.keys.last().is_none_or(|k| k.epoch != epoch + 1) {
            self.rotate(epoch, now_ms);
        }
        let k = self.keys.iter().rev().find(|k| k.epoch == epoch).expect("this period's key was made");
        Signer { key_id: k.id, key: k.key.clone(), expires_ms: now_ms.saturating_add(self.lifetime_ms) }
    }

    /// Makes this period's and the next period's keys if missing and drops the keys past
    /// their end (every key some capability may still name stays: a worker that starts afresh
    /// is handed them all).
    fn rotate(&mut self, epoch: u64, now_ms: u64) {
        self.keys.retain(|k| k.not_after_ms > now_ms);
        for e in [epoch, epoch + 1] {
            if !self.keys.iter().any(|k| k.epoch == e) {
                let k = self.make(e);
                self.keys.push(k);
            }
        }
        self.keys.sort_by_key(|k| k.epoch);
    }

    fn make(&self, epoch: u64) -> Signing {
        let (secret, id) = match &self.group {
            Some(g) => {
                let id = u32::from_le_bytes(derive(g, b"key id", epoch)[..4].try_into().expect("4 bytes"));
                (derive(g, b"key", epoch), id)
            }
            None => (rand::random(), rand::random()),
        };
        let end_of_period = (epoch + 1).saturating_mul(self.period_ms);
        Signing {
            epoch,
            id,
            secret,
            not_after_ms: end_of_period.saturating_add(self.lifetime_ms),
            key: hmac::Key::new(hmac::HMAC_SHA256, &secret),
        }
    }

    /// Names the current key set: the newest key's period under this master's (or the
    /// group's) tag. Masters of a group with one secret name the same set alike.
    pub fn generation(&self) -> u64 {
        self.instance | self.keys.last().map_or(0, |k| k.epoch & 0xffff_ffff)
    }

    /// The keys as workers are handed them.
    pub fn keys(&self) -> CapKeys {
        CapKeys {
            generation: self.generation(),
            keys: self
                .keys
                .iter()
                .map(|k| CapKey { key_id: k.id, secret: k.secret, not_after_ms: k.not_after_ms })
                .collect(),
        }
    }
}

/// HMAC-SHA-256 under the group secret of `what` and `epoch`.
fn derive(group: &hmac::Key, what: &[u8], epoch: u64) -> [u8; 32] {
    let mut ctx = hmac::Context::with_key(group);
    ctx.update(b"cv capability ");
    ctx.update(what);
    ctx.update(&epoch.to_le_bytes());
    let mut out = [0u8; 32];
    out.copy_from_slice(ctx.sign().as_ref());
    out
}

/// Reads a group secret: 64 hex digits (whitespace around them ignored).
pub fn parse_group_secret(text: &str) -> Result<[u8; 32], String> {
    let hex = text.trim();
    if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(format!("expected 64 hex digits, found {} characters", hex.len()));
    }
    let mut out = [0u8; 32];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).map_err(|e| e.to_string())?;
    }
    Ok(out)
}

/// A new group secret as its file holds it.
pub fn new_group_secret() -> String {
    let bytes: [u8; 32] = rand::random();
    bytes.iter().map(|b| format!("{b:02x}")).collect::<String>() + "\n"
}

/// Mints capabilities with one key, all expiring at the same time (one per open or `AddBlock`).
#[derive(Clone)]
pub struct Signer {
    key_id: u32,
    key: hmac::Key,
    expires_ms: u64,
}

impl std::fmt::Debug for Signer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Signer").field("key_id", &self.key_id).field("expires_ms", &self.expires_ms).finish()
    }
}

impl Signer {
    /// A capability for `access` to `block_id`, whose source digests to `source` (zeros for none).
    pub fn mint(&self, access: Access, block_id: u64, source: [u8; 16]) -> BlockCap {
        let tag = tag(&self.key, access, block_id, self.expires_ms, self.key_id, &source);
        BlockCap { key_id: self.key_id, expires_ms: self.expires_ms, source, tag }
    }
}

/// Why a shard did not accept a capability.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// Past its expiry (`StaleCapability`: open again).
    Expired { expires_ms: u64 },
    /// Signed with a key this worker does not hold: another master's it has not been handed
    /// yet, or one long gone (`StaleCapability`).
    UnknownKey { key_id: u32 },
    /// No capability, or its tag is not the key's over this block and access
    /// (`PermissionDenied`).
    Forged,
    /// Genuine, but for another source than the request names (`PermissionDenied`).
    OtherSource,
}

impl Refusal {
    /// Whether a fresh capability from the master may be accepted (open the file again).
    pub fn stale(&self) -> bool {
        matches!(self, Refusal::Expired { .. } | Refusal::UnknownKey { .. })
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::Expired { expires_ms } => write!(f, "the capability expired ({expires_ms} ms since the epoch)"),
            Refusal::UnknownKey { key_id } => {
                write!(f, "the capability's key {key_id:#010x} is not one this worker holds")
            }
            Refusal::Forged => f.write_str("no valid capability for this block and access"),
            Refusal::OtherSource => f.write_str("the capability names another source than the request"),
        }
    }
}

/// The keys a worker checks capabilities with (shared by its shards).
#[derive(Default)]
pub struct KeyRing {
    generation: u64,
    keys: Vec<(u32, hmac::Key, u64)>,
}

impl std::fmt::Debug for KeyRing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ids: Vec<u32> = self.keys.iter().map(|k| k.0).collect();
        f.debug_struct("KeyRing").field("generation", &self.generation).field("key_ids", &ids).finish()
    }
}

impl KeyRing {
    /// The generation of the set handed last (0: none yet).
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Adds the keys of `set` it lacks, drops those past their end, and keeps at most
    /// [`MAX_KEYS`] (the ones that end last).
    pub fn merge(&mut self, set: &CapKeys, now_ms: u64) {
        for k in &set.keys {
            if k.not_after_ms > now_ms && !self.keys.iter().any(|(id, _, _)| *id == k.key_id) {
                self.keys.push((k.key_id, hmac::Key::new(hmac::HMAC_SHA256, &k.secret), k.not_after_ms));
            }
        }
        self.keys.retain(|k| k.2 > now_ms);
        if self.keys.len() > MAX_KEYS {
            self.keys.sort_by_key(|k| std::cmp::Reverse(k.2));
            self.keys.truncate(MAX_KEYS);
        }
        self.generation = set.generation;
    }

    /// Whether `cap` allows `access` to `block_id` at `now_ms` (a fill checks its source with
    /// [`same_source`] as well).
    pub fn check(&self, cap: &BlockCap, access: Access, block_id: u64, now_ms: u64) -> Result<(), Refusal> {
        let (key_id, expires_ms) = (cap.key_id, cap.expires_ms);
        let Some((_, key, _)) = self.keys.iter().find(|(id, _, _)| *id == key_id) else {
            return Err(if cap.tag == [0; 16] { Refusal::Forged } else { Refusal::UnknownKey { key_id } });
        };
        if !same(&tag(key, access, block_id, expires_ms, key_id, &cap.source), &cap.tag) {
            return Err(Refusal::Forged);
        }
        if expires_ms <= now_ms {
            return Err(Refusal::Expired { expires_ms });
        }
        Ok(())
    }
}

/// Whether a fill's source (its [`source_digest`]) is the one `cap`, already checked, was
/// minted for: only a fill needs it, so a read of a block held pays no digest.
pub fn same_source(cap: &BlockCap, source: [u8; 16]) -> Result<(), Refusal> {
    if source == cap.source { Ok(()) } else { Err(Refusal::OtherSource) }
}

/// A capability as a request archived it.
pub fn native(a: &ArchivedBlockCap) -> BlockCap {
    BlockCap { key_id: a.key_id.to_native(), expires_ms: a.expires_ms.to_native(), source: a.source, tag: a.tag }
}

/// Compares in time independent of where the bytes differ.
fn same(a: &[u8; 16], b: &[u8; 16]) -> bool {
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Through the archived form, as a shard sees it.
    fn archived(cap: &BlockCap) -> BlockCap {
        use cv_wire::rkyv;
        let bytes = rkyv::to_bytes::<rkyv::rancor::Error>(cap).unwrap();
        native(rkyv::access::<ArchivedBlockCap, rkyv::rancor::Error>(&bytes).unwrap())
    }

    #[test]
    fn a_minted_capability_allows_its_access_to_its_block_and_nothing_else() {
        let mut sched = KeySchedule::new(Duration::from_secs(3600), Duration::from_secs(36_000), None);
        let now = 1_000_000;
        let src = source_digest("/m", "a/b", "\"e\"", 0, 4096);
        assert_eq!(ObjectDigest::new("/m", "a/b", "\"e\"").range(0, 4096), src);
        let read = archived(&sched.signer(now).mint(Access::Read, 7, src));
        let mut ring = KeyRing::default();
        assert_eq!(ring.check(&read, Access::Read, 7, now), Err(Refusal::UnknownKey { key_id: read.key_id }));
        ring.merge(&sched.keys(), now);
        assert_eq!(ring.generation(), sched.generation());
        assert_eq!(ring.check(&read, Access::Read, 7, now), Ok(()));
        assert_eq!(ring.check(&read, Access::Read, 7, now).and_then(|_| same_source(&read, src)), Ok(()));
        assert_eq!(ring.check(&read, Access::Write, 7, now), Err(Refusal::Forged));
        assert_eq!(ring.check(&read, Access::Read, 8, now), Err(Refusal::Forged));
        let other = source_digest("/m", "a/b", "\"e\"", 4096, 4096);
        assert_eq!(
            ring.check(&read, Access::Read, 7, now).and_then(|_| same_source(&read, other)),
            Err(Refusal::OtherSource)
        );
        let later = now + 36_000_000;
        assert_eq!(ring.check(&read, Access::Read, 7, later), Err(Refusal::Expired { expires_ms: later }));
        // Any field changed breaks the tag, and none at all is refused.
        let mut forged = sched.signer(now).mint(Access::Read, 7, src);
        forged.expires_ms += 1;
        assert_eq!(ring.check(&archived(&forged), Access::Read, 7, now), Err(Refusal::Forged));
        let none = archived(&BlockCap::default());
        assert_eq!(ring.check(&none, Access::Read, 7, now), Err(Refusal::Forged));
        assert!(!Refusal::Forged.stale() && Refusal::UnknownKey { key_id: 1 }.stale());
    }

    #[test]
    fn keys_rotate_every_period_are_announced_a_period_ahead_and_stay_good_until_they_expire() {
        let (period, life) = (Duration::from_secs(10), Duration::from_secs(100));
        let mut sched = KeySchedule::new(period, life, None);
        let t0 = 5_000_000;
        let first = sched.signer(t0);
        let g0 = sched.generation();
        let cap0 = archived(&first.mint(Access::Write, 1, [0; 16]));
        let mut ring = KeyRing::default();
        ring.merge(&sched.keys(), t0);
        assert_eq!(sched.signer(t0 + 9_999).key_id, first.key_id, "rotated within the period");
        // The next period's key was handed over with the first: a rotation needs no new hand-over.
        let second = sched.signer(t0 + 10_000);
        assert_ne!(second.key_id, first.key_id);
        assert_ne!(sched.generation(), g0);
        let cap1 = archived(&second.mint(Access::Read, 2, [0; 16]));
        assert_eq!(ring.check(&cap1, Access::Read, 2, t0 + 10_000), Ok(()));
        assert_eq!(ring.check(&cap0, Access::Write, 1, t0 + 50_000), Ok(()));
        // After both keys' ends a new set drops them.
        let end = t0 + 120_000;
        let _ = sched.signer(end);
        ring.merge(&sched.keys(), end);
        let kept: Vec<u32> = sched.keys().keys.iter().map(|k| k.key_id).collect();
        assert!(!kept.contains(&first.key_id) && !kept.contains(&second.key_id), "{kept:?}");
        assert!(matches!(ring.check(&cap0, Access::Write, 1, end), Err(Refusal::UnknownKey { .. })));
        // Another master's keys are added beside, never instead.
        let mut other = KeySchedule::new(period, life, None);
        let cap2 = archived(&other.signer(end).mint(Access::Read, 2, [0; 16]));
        ring.merge(&other.keys(), end);
        assert_eq!(ring.check(&cap2, Access::Read, 2, end), Ok(()));
        let cap3 = archived(&sched.signer(end).mint(Access::Read, 2, [0; 16]));
        assert_eq!(ring.check(&cap3, Access::Read, 2, end), Ok(()));
        let shown = format!("{:?}{:?}{:?}", sched.keys(), ring, sched);
        assert!(!shown.contains(&format!("{:?}", sched.keys.last().unwrap().secret)), "{shown}");
    }

    #[test]
    fn masters_with_one_group_secret_make_the_same_keys() {
        let secret = parse_group_secret(&new_group_secret()).unwrap();
        let (period, life) = (Duration::from_secs(3600), Duration::from_secs(36_000));
        let now = 1_765_000_000_000;
        let (mut a, mut b) =
            (KeySchedule::new(period, life, Some(&secret)), KeySchedule::new(period, life, Some(&secret)));
        let cap = archived(&a.signer(now).mint(Access::Read, 9, [1; 16]));
        let _ = b.signer(now + 5);
        assert_eq!(a.keys(), b.keys());
        assert_eq!(a.generation(), b.generation());
        // A worker handed the keys by one master takes the other's capabilities.
        let mut ring = KeyRing::default();
        ring.merge(&b.keys(), now);
        assert_eq!(ring.check(&cap, Access::Read, 9, now).and_then(|_| same_source(&cap, [1; 16])), Ok(()));
        // Another secret, other keys.
        let mut c = KeySchedule::new(period, life, Some(&[7; 32]));
        let _ = c.signer(now);
        assert_ne!(c.keys(), a.keys());
        assert!(parse_group_secret("abc").is_err() && parse_group_secret(&"zz".repeat(32)).is_err());
    }
}
