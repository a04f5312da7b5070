//! One block read on one connection: the `ReadBlock` request, and a reply whose payload is
//! copied from quinn's chunks straight to where the caller wants it (or kept as those chunks
//! until it is copied there), checksummed in the same pass. Every check of
//! [`cv_net::rpc::read_frame`] is made (header and limits, frame
//! crc over header, body and payload — or, for a reply streamed from object storage
//! (`PAYLOAD_CRC_AFTER`), over header and body with the payload's crc after it — body
//! validation); a reply that is not a `ReadBlockOk` (an error, another kind) is read and
//! checked as any frame is.

use crate::error::{Error, ErrorKind, Result};
use crate::pool::LIMITS;
use bytes::{Buf, Bytes};
use cv_net::rpc::{self, Conn};
use cv_net::{NetError, NetErrorKind, timeline};
use cv_wire::msg::{ArchivedBlockSource, ArchivedReadBlock, BlockCap, ReadBlock, ReadBlockOk, UfsRef};
use cv_wire::rkyv::{self, Archive, Place, Resolver, Serialize, munge::munge, rancor::Fallible};
use cv_wire::{Flags, Inbound, Kind, Limits, Message, TRAILER_LEN, WireError, WireErrorKind};
use std::collections::VecDeque;

/// A `ReadBlock` request that borrows its object reference from the open file instead of
/// owning a copy: a read of a cached object's block sends the object's mount, key and
/// version, and cloning those three strings for every read cost more than the read's own
/// bookkeeping. It archives as [`ReadBlock`] (the same archived type, so the same bytes on the
/// wire: `a_borrowed_request_is_encoded_as_the_owned_one`); it is only ever sent, never
/// received.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ReadBlockRef<'a> {
    pub(crate) block_id: u64,
    pub(crate) offset: u64,
    pub(crate) len: u64,
    pub(crate) source: Option<SourceRef<'a>>,
    pub(crate) fill_only: bool,
    pub(crate) verify: bool,
    pub(crate) cap: BlockCap,
}

/// A `BlockSource` borrowing its object reference (see [`ReadBlockRef`]).
#[derive(Clone, Copy, Debug)]
pub(crate) struct SourceRef<'a> {
    pub(crate) object: &'a UfsRef,
    pub(crate) offset: u64,
    pub(crate) len: u64,
}

// By hand: rkyv's derive cannot archive a type with a lifetime as another type (`as = ..`).
// Each field is resolved into the same field of the owned message's archived form.
impl Archive for ReadBlockRef<'_> {
    type Archived = ArchivedReadBlock;
    type Resolver = (Option<Resolver<UfsRef>>, Resolver<BlockCap>);

    fn resolve(&self, (source, cap_resolver): Self::Resolver, out: Place<ArchivedReadBlock>) {
        munge!(let ArchivedReadBlock { block_id, offset, len, source: out_source, fill_only, verify, cap } = out);
        self.block_id.resolve((), block_id);
        self.offset.resolve((), offset);
        self.len.resolve((), len);
        self.source.resolve(source, out_source);
        self.fill_only.resolve((), fill_only);
        self.verify.resolve((), verify);
        self.cap.resolve(cap_resolver, cap);
    }
}

impl<S: Fallible + ?Sized> Serialize<S> for ReadBlockRef<'_>
where
    UfsRef: Serialize<S>,
    BlockCap: Serialize<S>,
{
    fn serialize(&self, s: &mut S) -> std::result::Result<Self::Resolver, S::Error> {
        Ok((self.source.serialize(s)?, self.cap.serialize(s)?))
    }
}

impl Archive for SourceRef<'_> {
    type Archived = ArchivedBlockSource;
    type Resolver = Resolver<UfsRef>;

    fn resolve(&self, object: Self::Resolver, out: Place<ArchivedBlockSource>) {
        munge!(let ArchivedBlockSource { object: out_object, offset, len } = out);
        self.object.resolve(object, out_object);
        self.offset.resolve((), offset);
        self.len.resolve((), len);
    }
}

impl<S: Fallible + ?Sized> Serialize<S> for SourceRef<'_>
where
    UfsRef: Serialize<S>,
{
    fn serialize(&self, s: &mut S) -> std::result::Result<Self::Resolver, S::Error> {
        self.object.serialize(s)
    }
}

impl Message for ReadBlockRef<'_> {
    const KIND: Kind = Kind::ReadBlock;

    fn archive_into(&self, out: rkyv::util::AlignedVec) -> std::result::Result<rkyv::util::AlignedVec, WireError> {
        rkyv::api::high::to_bytes_in::<_, rkyv::rancor::Error>(self, out)
            .map_err(|e| WireError::new(WireErrorKind::Encode, e.to_string()))
    }

    fn access(body: &[u8]) -> std::result::Result<&ArchivedReadBlock, WireError> {
        ReadBlock::access(body)
    }

    /// Never received: a borrowed request has nothing to own its strings.
    fn to_owned(_: &ArchivedReadBlock) -> std::result::Result<Self, WireError> {
        Err(WireError::new(WireErrorKind::UnexpectedKind, "a borrowed ReadBlock is only sent"))
    }

    fn check(archived: &ArchivedReadBlock, limits: &Limits) -> std::result::Result<(), WireError> {
        ReadBlock::check(archived, limits)
    }
}

/// Where a block read's bytes go.
pub(crate) enum Dst<'a> {
    /// Exactly this many bytes, into the caller's buffer.
    Slice(&'a mut [u8]),
    /// Kept as quinn delivered them (cleared first): for bytes that are copied out later
    /// (read-ahead, pieces of a range spanning blocks), so they are copied once, not twice.
    Received(&'a mut Received),
}

impl Dst<'_> {
    /// The same destination, borrowed again for one more attempt.
    pub(crate) fn reborrow(&mut self) -> Dst<'_> {
        match self {
            Dst::Slice(s) => Dst::Slice(s),
            Dst::Received(r) => Dst::Received(r),
        }
    }

    /// Puts `bytes`, exactly the length asked for, there.
    pub(crate) fn put(&mut self, bytes: Bytes) {
        match self {
            Dst::Slice(s) => s.copy_from_slice(&bytes),
            Dst::Received(r) => {
                r.clear();
                if !bytes.is_empty() {
                    r.push(bytes);
                }
            }
        }
    }

    fn len(&self, want: usize) -> usize {
        match self {
            Dst::Slice(s) => s.len(),
            Dst::Received(_) => want,
        }
    }
}

/// A reply's payload as the pieces of received packets it arrived in (shared, not copied).
#[derive(Debug, Default, Clone)]
pub(crate) struct Received {
    chunks: VecDeque<Bytes>,
    len: usize,
}

impl Received {
    /// Bytes not yet taken.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn clear(&mut self) {
        self.chunks.clear();
        self.len = 0;
    }

    fn push(&mut self, b: Bytes) {
        self.len += b.len();
        self.chunks.push_back(b);
    }

    /// Copies all bytes into `out`, which must be exactly [`Self::len`] long.
    pub(crate) fn copy_to(&self, out: &mut [u8]) {
        debug_assert_eq!(out.len(), self.len);
        let mut at = 0;
        for c in &self.chunks {
            out[at..at + c.len()].copy_from_slice(c);
            at += c.len();
        }
    }

    /// Appends `len` bytes starting `from` bytes in to `out`; the range must be inside.
    pub(crate) fn extend_range(&self, mut from: usize, mut len: usize, out: &mut Vec<u8>) {
        debug_assert!(from + len <= self.len);
        for c in &self.chunks {
            if len == 0 {
                break;
            }
            if from >= c.len() {
                from -= c.len();
                continue;
            }
            let n = (c.len() - from).min(len);
            out.extend_from_slice(&c[from..from + n]);
            (from, len) = (0, len - n);
        }
    }

    /// Moves the first bytes into `out` (as many as fit); returns how many.
    pub(crate) fn take_into(&mut self, out: &mut [u8]) -> usize {
        let mut filled = 0;
        while filled < out.len() {
            let Some(front) = self.chunks.front_mut() else { break };
            let n = front.len().min(out.len() - filled);
            out[filled..filled + n].copy_from_slice(&front[..n]);
            filled += n;
            if n == front.len() {
                self.chunks.pop_front();
            } else {
                front.advance(n);
            }
        }
        self.len -= filled;
        filled
    }
}

impl From<Vec<u8>> for Received {
    fn from(v: Vec<u8>) -> Received {
        let mut r = Received::default();
        if !v.is_empty() {
            r.push(Bytes::from(v));
        }
        r
    }
}

fn net(what: &str, e: impl std::error::Error + Send + Sync + 'static) -> Error {
    Error::from(NetError::new(NetErrorKind::Connect, what.to_string()).with_source(e))
}

fn read_exact_err(e: quinn::ReadExactError) -> Error {
    match e {
        quinn::ReadExactError::FinishedEarly(n) => {
            Error::new(ErrorKind::Protocol, format!("stream ended {n} bytes into a frame part"))
        }
        quinn::ReadExactError::ReadError(e) => net("read", e),
    }
}

fn wire(e: WireError) -> Error {
    Error::from(NetError::from(e))
}

/// A block reply whose bytes fail their checksum. QUIC's AEAD rules out damage in transit,
/// so the worker sent bytes that are not what was stored: `Corrupt` (retryable), and the
/// retry asks the worker to check the block itself (`ReadBlock.verify`), which drops it.
fn bad_bytes(block_id: u64, e: WireError) -> Error {
    if e.kind() == WireErrorKind::Checksum {
        return Error::new(ErrorKind::Corrupt, format!("block {block_id}: {e}"));
    }
    wire(e)
}

/// Sends `req` on `conn` and puts the `req.len` bytes of its reply into `dst`. A reply
/// of another length is a protocol error (the caller asked for bytes inside the block).
pub(crate) async fn read_block(conn: &Conn, req: &ReadBlockRef<'_>, dst: Dst<'_>) -> Result<()> {
    let id = conn.next_request_id();
    read_block_as(conn, id, req, dst).await.map_err(|e| e.with_request(id))
}

async fn read_block_as(conn: &Conn, id: u64, req: &ReadBlockRef<'_>, mut dst: Dst<'_>) -> Result<()> {
    let want = usize::try_from(req.len).map_err(|_| Error::new(ErrorKind::InvalidArgument, "read over usize"))?;
    debug_assert_eq!(dst.len(want), want);
    // Evaluated only when a mark is recorded: the address takes the connection's lock.
    let port = || conn.quinn().remote_address().port();
    let frame = cv_wire::encode(req, id, &[]).map_err(wire)?;
    cv_net::timeline_mark!(timeline::ISSUE, port(), id);
    let (mut send, mut recv) = conn.quinn().open_bi().await.map_err(|e| net("open stream", e))?;
    rpc::write_frame(&mut send, &frame, &[]).await?;

    let inbound = rpc::read_head(&mut recv, &LIMITS).await?;
    cv_net::timeline_mark!(timeline::FIRST, port(), id);
    let header = *inbound.header();
    let known = [Flags::default(), Flags(Flags::PAYLOAD_CRC_AFTER)];
    if header.kind != Kind::ReadBlockOk || !known.contains(&header.flags) {
        return Err(other_reply(&mut recv, inbound).await);
    }
    let got = header.payload_len as usize;
    if got != want {
        return Err(Error::new(
            ErrorKind::Protocol,
            format!("block {} returned {got} bytes, asked {want}", req.block_id),
        ));
    }

    let mut check = inbound.check().map_err(wire)?;
    if let Dst::Received(r) = &mut dst {
        r.clear();
    }
    let mut filled = 0;
    while filled < want {
        let Some(chunk) = recv.read_chunk(want - filled, true).await.map_err(|e| net("read", e))? else {
            return Err(read_exact_err(quinn::ReadExactError::FinishedEarly(filled)));
        };
        let bytes = chunk.bytes;
        let n = bytes.len();
        match &mut dst {
            // Checksummed right after the copy, which leaves them in cache.
            Dst::Slice(s) => {
                s[filled..filled + n].copy_from_slice(&bytes);
                check.update(&bytes);
            }
            // Checksummed while still in cache from decryption, then kept as they are.
            Dst::Received(r) => {
                check.update(&bytes);
                r.push(bytes);
            }
        }
        filled += n;
    }
    let mut trailer = [0u8; TRAILER_LEN];
    let trailer = &mut trailer[..check.trailer_len()];
    recv.read_exact(trailer).await.map_err(read_exact_err)?;
    check.finish(trailer).map_err(|e| bad_bytes(req.block_id, e))?;
    let ok = ReadBlockOk::access(inbound.body()).map_err(wire)?;
    ReadBlockOk::check(ok, &LIMITS).map_err(wire)?;
    rpc::end_read(recv)?;
    cv_net::timeline_mark!(timeline::DONE, port(), id);
    Ok(())
}

/// The rest of a reply that is not a plain `ReadBlockOk`, read and verified as any frame,
/// turned into the error it is: the server's error, or an unexpected kind.
async fn other_reply(recv: &mut quinn::RecvStream, head: Inbound) -> Error {
    let flags = head.header().flags;
    let checked = rpc::read_rest(recv, head, &LIMITS)
        .await
        .and_then(rpc::check_reply)
        .and_then(|f| f.access::<ReadBlockOk>().map(|_| ()).map_err(NetError::from));
    match checked {
        Err(e) => Error::from(e),
        // Only flags this build does not read block replies with can get here.
        Ok(()) => Error::new(ErrorKind::Protocol, format!("block reply with flags {flags:?}")),
    }
}

#[cfg(test)]
mod tests {
    //! Block reads against a real QUIC server on loopback that answers `ReadBlock` as told:
    //! right, with a corrupt payload, too short, with bytes after the frame, or with a
    //! retryable error.

    use super::Received;
    use crate::config::ClientSettings;
    use crate::error::ErrorKind;
    use crate::{Client, File};
    use bytes::Bytes;
    use cv_net::config::Dur;
    use cv_net::identity::CertRole;
    use cv_net::quic::TransportSettings;
    use cv_net::rpc;
    use cv_net::tls::{ClusterCa, Identity};
    use cv_wire::msg::{BlockLoc, ErrorReply, FileKind, FileStatus, ReadBlock, ReadBlockOk, Role};
    use cv_wire::{ErrorCode, Limits, Message};
    use std::collections::VecDeque;
    use std::net::SocketAddr;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Arc, Mutex};

    const BLOCK: u64 = 64 << 10;

    #[derive(Clone, Copy, Debug)]
    enum Answer {
        Right,
        CorruptPayload,
        Short,
        Trailing,
        Unavailable,
        /// As a shard streams a block from object storage: the payload's crc after it.
        Streamed,
        StreamedBadTrailer,
    }

    /// Byte `at` of block `id`.
    fn byte(id: u64, at: u64) -> u8 {
        (at.wrapping_mul(31) ^ id.wrapping_mul(131) ^ (at >> 8)) as u8
    }

    struct Server {
        addr: SocketAddr,
        requests: Arc<AtomicUsize>,
        /// `ReadBlock.verify` of each request, in arrival order.
        verifies: Arc<Mutex<Vec<bool>>>,
        script: Arc<Mutex<VecDeque<Answer>>>,
        ca: ClusterCa,
    }

    fn identity(ca: &ClusterCa, usage: CertRole) -> Identity {
        let issued = ca.issue("test", &usage, &[]).unwrap();
        Identity::from_pem(&ca.cert_pem(), &issued.cert_pem, &issued.key_pem).unwrap()
    }

    /// Answers each `ReadBlock` with the next scripted answer (`Right` once the script is out).
    async fn start() -> Server {
        let ca = ClusterCa::generate("t").unwrap();
        let ep =
            rpc::server_endpoint("127.0.0.1:0".parse().unwrap(), &identity(&ca, CertRole::Node), &Default::default())
                .unwrap();
        let (requests, script) = (Arc::new(AtomicUsize::new(0)), Arc::new(Mutex::new(VecDeque::new())));
        let verifies = Arc::new(Mutex::new(Vec::new()));
        let addr = ep.local_addr().unwrap();
        let server =
            Server { addr, requests: requests.clone(), verifies: verifies.clone(), script: script.clone(), ca };
        tokio::spawn(async move {
            while let Some(incoming) = ep.accept().await {
                let (requests, script, verifies) = (requests.clone(), script.clone(), verifies.clone());
                tokio::spawn(async move {
                    let conn = incoming.await.unwrap();
                    // The client dials it as its master too (connect checks the role), then reads
                    // blocks from it; shards do not check the role a reader sees.
                    rpc::accept_hello(&conn, Role::Master, "shard", &Limits::DEFAULT).await.unwrap();
                    while let Ok((mut send, mut recv)) = conn.accept_bi().await {
                        let frame = rpc::read_frame(&mut recv, &Limits::DEFAULT).await.unwrap();
                        let req: ReadBlock = frame.decode_body().unwrap();
                        requests.fetch_add(1, Ordering::SeqCst);
                        verifies.lock().unwrap().push(req.verify);
                        let answer = script.lock().unwrap().pop_front().unwrap_or(Answer::Right);
                        let id = frame.header().request_id;
                        let mut payload: Vec<u8> =
                            (req.offset..req.offset + req.len).map(|at| byte(req.block_id, at)).collect();
                        if let Answer::Short = answer {
                            payload.pop();
                        }
                        let reply = match answer {
                            Answer::Unavailable => {
                                let e = ErrorReply {
                                    code: ErrorCode::Unavailable as u16,
                                    message: "busy".into(),
                                    redirect: None,
                                };
                                payload.clear();
                                cv_wire::encode(&e, id, &[]).unwrap()
                            }
                            Answer::Streamed | Answer::StreamedBadTrailer => {
                                let ok = ReadBlockOk { block_len: BLOCK };
                                let enc = cv_wire::encode_streamed(&ok, id, payload.len() as u64).unwrap();
                                let bad = u32::from(matches!(answer, Answer::StreamedBadTrailer));
                                let trailer = cv_wire::trailer(crc32fast::hash(&payload) ^ bad);
                                payload.extend_from_slice(&trailer);
                                enc
                            }
                            _ => cv_wire::encode(&ReadBlockOk { block_len: BLOCK }, id, &payload).unwrap(),
                        };
                        if let Answer::CorruptPayload = answer {
                            payload[req.len as usize / 2] ^= 1;
                        }
                        if let Answer::Trailing = answer {
                            // In the same write as the payload's end, so it arrives with it.
                            payload.push(b'x');
                        }
                        send.write_all(reply.head()).await.unwrap();
                        send.write_all(&payload).await.unwrap();
                        send.finish().unwrap();
                    }
                });
            }
        });
        server
    }

    /// A client of `server` (its master too, for the hello) and a two-block file on it.
    async fn open(server: &Server) -> (Client, File) {
        let settings = ClientSettings {
            master: server.addr,
            deadline: Dur::secs(10),
            backoff: Dur::millis(1),
            ..ClientSettings::default()
        };
        let client = Client::connect(settings, &identity(&server.ca, CertRole::Client), &TransportSettings::default())
            .await
            .unwrap();
        let loc = |i: u64| BlockLoc {
            block_id: 10 + i,
            offset: i * BLOCK,
            len: BLOCK,
            worker_id: 1,
            shard: 0,
            addr: cv_wire::msg::ShardAddr::new(server.addr),
            lost: false,
            replicas: Vec::new(),
            cap: Default::default(),
        };
        let status = FileStatus {
            id: 1,
            path: "/f".into(),
            kind: FileKind::File,
            length: 2 * BLOCK,
            mtime_ms: 0,
            version: 1,
            mode: 0o644,
            complete: true,
            block_size: BLOCK,
        };
        let opened = crate::route::Opened::new(status, vec![loc(0), loc(1)], None, None).unwrap();
        let file = File::new(client.route().clone(), opened);
        (client, file)
    }

    fn expected(off: u64, len: u64) -> Vec<u8> {
        (off..off + len).map(|o| byte(10 + o / BLOCK, o % BLOCK)).collect()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn block_reads_land_in_the_callers_buffer_and_stop_no_stream() {
        let server = start().await;
        let (client, file) = open(&server).await;
        // Inside one block (straight into the buffer), across the two (a buffer per piece).
        for (off, len) in [(0, BLOCK), (1, 1), (BLOCK - 100, 100), (4097, 30_000), (BLOCK - 10, 20), (0, 2 * BLOCK)] {
            let mut buf = vec![0u8; len as usize];
            assert_eq!(file.read_at(off, &mut buf).await.unwrap(), len as usize);
            assert!(buf == expected(off, len), "read_at({off}, {len})");
        }
        let all = file.sequential(0).read_to_end().await.unwrap();
        assert!(all == expected(0, 2 * BLOCK));
        let requests = server.requests.load(Ordering::SeqCst);
        assert_eq!(requests, 1 + 1 + 1 + 1 + 2 + 2 + 2, "one request per block piece");
        let conn = client.route().conn_for_test(server.addr).await.unwrap();
        let stats = conn.quinn().stats();
        assert_eq!(stats.frame_tx.stop_sending, 0, "a read stopped its reply stream: {:?}", stats.frame_tx);
    }

    #[tokio::test]
    async fn a_corrupt_payload_is_read_again_with_the_worker_checking() {
        let server = start().await;
        let (_client, file) = open(&server).await;
        server.script.lock().unwrap().push_back(Answer::CorruptPayload);
        let mut buf = vec![0u8; 1000];
        assert_eq!(file.read_at(500, &mut buf).await.unwrap(), 1000);
        assert!(buf == expected(500, 1000));
        assert_eq!(*server.verifies.lock().unwrap(), [false, true], "the retry asks the worker to verify");
        // Bytes that keep failing: `Corrupt` (retryable: the caller may refetch) once the
        // retries are spent, never the bytes.
        server.script.lock().unwrap().extend([Answer::CorruptPayload; 4]);
        let err = file.read_at(500, &mut buf).await.unwrap_err();
        assert_eq!((err.kind(), err.retryable()), (ErrorKind::Corrupt, true), "{err}");
        assert!(err.message().contains("block 10") && err.message().contains("crc32"), "{err}");
        assert_eq!(*server.verifies.lock().unwrap(), [false, true, false, true, true, true]);
        // The next reply is right again, and so is the read.
        assert_eq!(file.read_at(500, &mut buf).await.unwrap(), 1000);
        assert!(buf == expected(500, 1000));
    }

    #[tokio::test]
    async fn a_streamed_reply_is_checked_against_its_trailer() {
        let server = start().await;
        let (_client, file) = open(&server).await;
        let mut buf = vec![0u8; 3000];
        server.script.lock().unwrap().extend([Answer::Streamed, Answer::Streamed]);
        assert_eq!(file.read_at(BLOCK - 1000, &mut buf).await.unwrap(), 3000);
        assert!(buf == expected(BLOCK - 1000, 3000));
        // A bad trailer is bad bytes like any other: read again, then refused as `Corrupt`.
        server.script.lock().unwrap().extend([Answer::StreamedBadTrailer; 4]);
        let err = file.read_at(7, &mut buf).await.unwrap_err();
        assert_eq!((err.kind(), err.retryable()), (ErrorKind::Corrupt, true), "{err}");
        assert!(err.message().contains("trailer says"), "{err}");
        assert_eq!(server.requests.load(Ordering::SeqCst), 2 + 4);
        server.script.lock().unwrap().extend([Answer::StreamedBadTrailer, Answer::Streamed]);
        assert_eq!(file.read_at(7, &mut buf).await.unwrap(), 3000);
        assert!(buf == expected(7, 3000));
    }

    #[tokio::test]
    async fn a_retryable_error_reply_is_retried_into_the_same_buffer() {
        let server = start().await;
        let (_client, file) = open(&server).await;
        server.script.lock().unwrap().extend([Answer::Unavailable, Answer::Unavailable]);
        let mut buf = vec![0u8; 5000];
        assert_eq!(file.read_at(BLOCK + 3, &mut buf).await.unwrap(), 5000);
        assert!(buf == expected(BLOCK + 3, 5000));
        assert_eq!(server.requests.load(Ordering::SeqCst), 3);
        // Retries are bounded: more failures than retries give the server's error.
        server.script.lock().unwrap().extend([Answer::Unavailable; 4]);
        let err = file.read_at(0, &mut buf).await.unwrap_err();
        assert_eq!((err.kind(), err.retryable()), (ErrorKind::Unavailable, true), "{err}");
        assert_eq!(server.requests.load(Ordering::SeqCst), 3 + 4);
    }

    #[tokio::test]
    async fn replies_of_the_wrong_length_or_with_bytes_after_them_are_refused() {
        let server = start().await;
        let (_client, file) = open(&server).await;
        server.script.lock().unwrap().extend([Answer::Short, Answer::Trailing]);
        let mut buf = vec![0u8; 4096];
        let short = file.read_at(0, &mut buf).await.unwrap_err();
        assert_eq!(short.kind(), ErrorKind::Protocol, "{short}");
        assert!(short.message().contains("returned 4095 bytes, asked 4096"), "{short}");
        let trailing = file.read_owned(0, 4096).await.unwrap_err();
        assert_eq!(trailing.kind(), ErrorKind::Protocol, "{trailing}");
        assert!(trailing.message().contains("1 bytes after the frame"), "{trailing}");
        assert_eq!(server.requests.load(Ordering::SeqCst), 2);
    }

    #[test]
    fn a_borrowed_request_is_encoded_as_the_owned_one() {
        let object = cv_wire::msg::UfsRef { mount: "/m".into(), key: "a/b.parquet".into(), version: "\"etag\"".into() };
        for with_source in [false, true] {
            let source = with_source.then_some(super::SourceRef { object: &object, offset: 1 << 26, len: 1 << 22 });
            let cap = super::BlockCap { key_id: 3, expires_ms: 1 << 41, source: [5; 16], tag: [6; 16] };
            let borrowed =
                super::ReadBlockRef { block_id: 77, offset: 5, len: 4096, source, fill_only: false, verify: true, cap };
            let owned = ReadBlock {
                block_id: 77,
                offset: 5,
                len: 4096,
                source: with_source.then(|| cv_wire::msg::BlockSource {
                    object: object.clone(),
                    offset: 1 << 26,
                    len: 1 << 22,
                }),
                fill_only: false,
                verify: true,
                cap,
            };
            let (a, b) = (cv_wire::encode(&borrowed, 9, &[]).unwrap(), cv_wire::encode(&owned, 9, &[]).unwrap());
            assert_eq!(a.head(), b.head(), "source: {with_source}");
            // And the bytes read back as the request they were made from.
            let body = &a.head()[cv_wire::HEADER_LEN..];
            let back = <ReadBlock as Message>::to_owned(ReadBlock::access(body).unwrap()).unwrap();
            assert_eq!(back, owned);
        }
    }

    #[test]
    fn received_bytes_are_taken_in_order_across_chunk_boundaries() {
        let mut r = Received::default();
        for piece in [&b"abc"[..], b"", b"defgh", b"ij"] {
            r.push(Bytes::copy_from_slice(piece));
        }
        assert_eq!(r.len(), 10);
        let mut all = [0u8; 10];
        r.copy_to(&mut all);
        assert_eq!(&all, b"abcdefghij");
        // Any range, across chunk boundaries and empty chunks, without taking it.
        for (from, len) in [(0, 10), (2, 2), (3, 5), (8, 2), (9, 0), (4, 1)] {
            let mut out = b"x".to_vec();
            r.extend_range(from, len, &mut out);
            assert_eq!(out[1..], all[from..from + len], "{from}+{len}");
        }
        assert_eq!(r.len(), 10);
        let mut out = [0u8; 4];
        assert_eq!(r.take_into(&mut out), 4);
        assert_eq!(&out, b"abcd");
        assert_eq!(r.take_into(&mut out[..1]), 1);
        assert_eq!(&out[..1], b"e");
        assert_eq!(r.take_into(&mut out), 4);
        assert_eq!(&out, b"fghi");
        assert_eq!((r.take_into(&mut out), r.len(), r.is_empty()), (1, 0, true));
        assert_eq!(out[0], b'j');
        assert_eq!(r.take_into(&mut out), 0);
        assert_eq!(Received::from(Vec::new()).len(), 0);
    }

    #[test]
    fn the_crc_covers_what_the_wire_crate_says() {
        // The piecewise check this file makes (`FrameCheck`) agrees with the format: the crc
        // covers header bytes 0..28, the body and the payload.
        let payload = vec![3u8; 1000];
        let enc = cv_wire::encode(&ReadBlockOk { block_len: 1 }, 7, &payload).unwrap();
        let head = enc.head();
        let mut crc = crc32fast::Hasher::new();
        crc.update(&head[..cv_wire::HEADER_LEN - 4]);
        crc.update(&head[cv_wire::HEADER_LEN..]);
        crc.update(&payload);
        assert_eq!(crc.finalize(), enc.header().crc32);
        let raw: [u8; cv_wire::HEADER_LEN] = head[..cv_wire::HEADER_LEN].try_into().unwrap();
        let mut check = cv_wire::FrameCheck::new(&raw, enc.header(), &head[cv_wire::HEADER_LEN..]).unwrap();
        check.update(&payload[..400]);
        check.update(&payload[400..]);
        check.finish(&[]).unwrap();
        assert_eq!(ReadBlockOk::KIND, cv_wire::Kind::ReadBlockOk);
    }
}
