//! Request handlers of a shard: read (filling missing blocks from object storage), write,
//! delete and stat blocks, ping.
//!
//! Every block id is checked against its owning shard (`cv_wire::block_shard`) first; a
//! block of a sibling shard is refused with `WrongShard` naming that shard's address.

use cv_wire::msg::{
    ArchivedBlockCap, ArchivedBlockSource, BlockSource, DeleteBlocks, Done, LeaseBlock, LeaseBlockOk, LocalHello,
    LocalHelloOk, Ping, Pong, ReadBlock, ReadBlockOk, StatBlock, StatBlockOk, UfsRef, WriteBlock, WriteBlockOk,
};
use cv_wire::{ErrorCode, Frame, Inbound, Kind, Message, block_shard};

use super::codes::store_code;
use super::conn::ShardCtx;
use super::fill::FillError;
use super::frame_io::{ReadFail, read_payload};
use super::reply::Reply;
use crate::store::{ErrorKind, StoreError, Verify, clamp};
use crate::trace::format::Access as TraceAccess;
use cv_net::capability::{self, Access, now_ms, source_digest};
use cv_net::identity::PeerCert;
use cv_rt::quic::{RecvStream, VarInt};

/// Answers one request whose header and body have been read.
pub(crate) async fn dispatch(ctx: &ShardCtx, peer: &PeerCert, head: Inbound, recv: &mut RecvStream) -> Reply {
    let id = head.header().request_id;
    if head.header().kind == Kind::WriteBlock {
        return write_block(ctx, peer, head, recv).await;
    }
    // Only a ping carries a payload besides writes (echoed, to measure transfer).
    let payload = if head.header().kind == Kind::Ping {
        match read_payload(recv, &head).await {
            Ok(p) => p,
            Err(e) => return Reply::error(id, e.code(), &e.to_string(), None),
        }
    } else if head.header().payload_len > 0 {
        let _ = recv.stop(VarInt::from_u32(0));
        let msg = format!("{} carries no payload", head.header().kind.name());
        return Reply::error(id, ErrorCode::Malformed, &msg, None);
    } else {
        Vec::new()
    };
    let frame = match head.finish(payload, &ctx.limits) {
        Ok(f) => f,
        Err(e) => return Reply::error(id, e.code(), &e.to_string(), None),
    };
    let result = match frame.kind() {
        Kind::ReadBlock => read_block(ctx, peer, &frame).await,
        Kind::StatBlock => stat_block(ctx, peer, &frame),
        Kind::LocalHello => local_hello(ctx, &frame),
        Kind::LeaseBlock => lease_block(ctx, peer, &frame),
        Kind::DeleteBlocks => delete_blocks(ctx, peer, &frame).await,
        Kind::Ping => match frame.access::<Ping>() {
            Ok(p) => {
                let nonce = p.nonce.to_native();
                Ok(Reply::with_bytes(id, &Pong { nonce }, frame.into_payload()))
            }
            Err(e) => Err(e.into()),
        },
        other => Err(Refusal::new(ErrorCode::Unsupported, format!("{} is not served by a worker shard", other.name()))),
    };
    result.unwrap_or_else(|r| r.reply(id))
}

/// A request refused with an error code.
#[derive(Debug)]
struct Refusal {
    code: ErrorCode,
    message: String,
    redirect: Option<String>,
}

impl Refusal {
    fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self { code, message: message.into(), redirect: None }
    }

    fn reply(self, request_id: u64) -> Reply {
        Reply::error(request_id, self.code, &self.message, self.redirect)
    }
}

impl From<cv_wire::WireError> for Refusal {
    fn from(e: cv_wire::WireError) -> Self {
        Refusal::new(e.code(), e.to_string())
    }
}

impl From<StoreError> for Refusal {
    fn from(e: StoreError) -> Self {
        Refusal::new(store_code(&e), e.to_string())
    }
}

/// Refuses a block request without the master's capability for this block and access
/// (`cv_net::capability`). Workers and masters, whose certificates are their right (copies,
/// exports, tail checks), need none. Expired or signed with a key this worker lacks is
/// `StaleCapability` (open the file again); anything else `PermissionDenied`.
fn allowed(
    ctx: &ShardCtx,
    peer: &PeerCert,
    cap: &ArchivedBlockCap,
    access: Access,
    block_id: u64,
) -> Result<(), Refusal> {
    if peer.role.is_node() {
        return Ok(());
    }
    crate::lock_keys(&ctx.keys)
        .check(&capability::native(cap), access, block_id, now_ms())
        .map_err(|r| refused(block_id, r))
}

/// Refuses a fill from another source than the one the (checked) capability names: a block is
/// filled from its own object and range only. Asked only when a fill is about to start.
fn fill_allowed(peer: &PeerCert, cap: &ArchivedBlockCap, block_id: u64, s: &BlockSource) -> Result<(), Refusal> {
    if peer.role.is_node() {
        return Ok(());
    }
    let digest = source_digest(&s.object.mount, &s.object.key, &s.object.version, s.offset, s.len);
    capability::same_source(&capability::native(cap), digest).map_err(|r| refused(block_id, r))
}

fn refused(block_id: u64, r: capability::Refusal) -> Refusal {
    let code = if r.stale() { ErrorCode::StaleCapability } else { ErrorCode::PermissionDenied };
    Refusal::new(code, format!("block {block_id}: {r}"))
}

/// Refuses a block this shard does not own: `WrongShard` with the owner's address, or
/// `NotFound` when no shard of this worker has that index.
fn owned(ctx: &ShardCtx, block_id: u64) -> Result<(), Refusal> {
    let owner = block_shard(block_id);
    if owner == ctx.index {
        return Ok(());
    }
    match ctx.routes.get(usize::from(owner)) {
        Some(addr) => Err(Refusal {
            code: ErrorCode::WrongShard,
            message: format!("block {block_id} belongs to shard {owner}, not {}", ctx.index),
            redirect: Some(addr.clone()),
        }),
        None => Err(Refusal::new(
            ErrorCode::NotFound,
            format!("block {block_id} names shard {owner}; this worker has {} shards", ctx.routes.len()),
        )),
    }
}

/// Serves a read from the store. A block the store does not hold is fetched from object
/// storage when the request names its `source` (each byte once however many readers ask;
/// see `fill.rs`); without a source it is `NotFound`. `fill_only` answers without bytes.
async fn read_block(ctx: &ShardCtx, peer: &PeerCert, frame: &Frame) -> Result<Reply, Refusal> {
    let req = frame.access::<ReadBlock>()?;
    let (block_id, offset, len) = (req.block_id.to_native(), req.offset.to_native(), req.len.to_native());
    let fill_only = req.fill_only;
    let request_id = frame.header().request_id;
    owned(ctx, block_id)?;
    allowed(ctx, peer, &req.cap, Access::Read, block_id)?;
    let source = match req.source.as_ref() {
        Some(s) => Some(checked_source(ctx, block_id, offset, s)?),
        None => None,
    };
    // One lookup: its length answers `fill_only`, and the read reads that incarnation.
    let held = match ctx.store.lookup(block_id) {
        Ok(block) => Some(block),
        Err(e) if e.kind() == ErrorKind::NotFound && source.is_some() => None,
        Err(e) => return Err(e.into()),
    };
    if let Some(block) = held {
        let block_len = block.len();
        if fill_only {
            ctx.traced(block_id, (0, 0), block_len, TraceAccess::DiskHit);
            return Ok(Reply::ok(request_id, &ReadBlockOk { block_len }));
        }
        // The reader checks chunks sent whole against their stored crcs (the frame crc) and
        // asks again with `verify` if that fails: checking them here too would hash them twice.
        let verify = if req.verify { Verify::Here } else { Verify::ByReader };
        match ctx.store.read_block(&block, offset, len, verify).await {
            Ok(bytes) => {
                ctx.traced(block_id, (offset, len), block_len, TraceAccess::DiskHit);
                return Ok(Reply::with_block(request_id, &ReadBlockOk { block_len }, bytes));
            }
            Err(e) => {
                if e.kind() == ErrorKind::Corrupt {
                    tracing::warn!(shard = ctx.index, block = block_id, error = %e, "corrupt block dropped");
                }
                // Evicted meanwhile, or dropped as corrupt: fetched again if we know from where.
                if source.is_none() || !matches!(e.kind(), ErrorKind::NotFound | ErrorKind::Corrupt) {
                    return Err(e.into());
                }
            }
        }
    }
    let Some(source) = source else {
        return Err(Refusal::new(ErrorCode::NotFound, format!("block {block_id} is not stored here")));
    };
    fill_allowed(peer, &req.cap, block_id, &source)?;
    let block_len = source.len;
    ctx.traced(block_id, if fill_only { (0, 0) } else { (offset, len) }, block_len, TraceAccess::Miss);
    let refused = |e: FillError| Refusal::new(e.code, e.message);
    if fill_only {
        ctx.fills.load(&ctx.gate, block_id, source).await.map_err(refused)?;
        return Ok(Reply::ok(request_id, &ReadBlockOk { block_len }));
    }
    let range = clamp(block_id, block_len, offset, len)?;
    let n = range.end - range.start;
    let mut filling = ctx.fills.read(&ctx.gate, block_id, source, range).map_err(refused)?;
    // Until the first bytes come, a failure is still an error reply.
    let first = match filling.next().await {
        None => bytes::Bytes::new(),
        Some(first) => first.map_err(refused)?,
    };
    if filling.is_done() {
        return Ok(Reply::with_shared(request_id, &ReadBlockOk { block_len }, first));
    }
    Ok(Reply::streamed(request_id, &ReadBlockOk { block_len }, n, first, filling))
}

/// A request's source, checked: a block of 1 to `block_size` bytes at an offset that does
/// not overflow, and the read's offset inside it.
fn checked_source(ctx: &ShardCtx, block_id: u64, offset: u64, s: &ArchivedBlockSource) -> Result<BlockSource, Refusal> {
    let (src_off, src_len) = (s.offset.to_native(), s.len.to_native());
    let max = ctx.store.config().block_size;
    let bad = |why: String| Err(Refusal::new(ErrorCode::InvalidArgument, format!("block {block_id}: source {why}")));
    if src_len == 0 || src_len > max {
        return bad(format!("length {src_len} is not between 1 and the block size {max}"));
    }
    if src_off.checked_add(src_len).is_none() {
        return bad(format!("range {src_off}+{src_len} overflows"));
    }
    if offset > src_len {
        return bad(format!("is {src_len} bytes long; the read starts at {offset}"));
    }
    let o = &s.object;
    let object = UfsRef { mount: o.mount.to_string(), key: o.key.to_string(), version: o.version.to_string() };
    Ok(BlockSource { object, offset: src_off, len: src_len })
}

/// For workers and masters only: it carries no capability (no cv component needs it).
fn stat_block(ctx: &ShardCtx, peer: &PeerCert, frame: &Frame) -> Result<Reply, Refusal> {
    let block_id = frame.access::<StatBlock>()?.block_id.to_native();
    owned(ctx, block_id)?;
    if !peer.role.is_node() {
        let msg = format!("StatBlock is for workers and masters; this peer holds a {peer}");
        return Err(Refusal::new(ErrorCode::PermissionDenied, msg));
    }
    let block = ctx.store.lookup(block_id)?;
    let ok = StatBlockOk { len: block.len(), pinned: block.pinned(), in_memory: ctx.store.in_memory(&block) };
    Ok(Reply::ok(frame.header().request_id, &ok))
}

/// Short-circuit reads as this worker serves them; `Unsupported` when it does not.
fn local(ctx: &ShardCtx) -> Result<&crate::local::LocalServe, Refusal> {
    ctx.local
        .as_deref()
        .ok_or_else(|| Refusal::new(ErrorCode::Unsupported, "this worker does not serve short-circuit reads"))
}

/// How a client on this host reaches the data files (`wire/FORMAT.md`, short-circuit reads).
fn local_hello(ctx: &ShardCtx, frame: &Frame) -> Result<Reply, Refusal> {
    frame.access::<LocalHello>()?;
    let local = local(ctx)?;
    let ok = LocalHelloOk {
        boot_id: local.boot_id.clone(),
        socket: local.socket.clone(),
        token: local.token.to_vec(),
        shard: ctx.index,
    };
    Ok(Reply::ok(frame.header().request_id, &ok))
}

/// Leases a committed block's extent to a short-circuit reader. A block not stored here is
/// `NotFound`: the reader reads it over QUIC, which fills it.
fn lease_block(ctx: &ShardCtx, peer: &PeerCert, frame: &Frame) -> Result<Reply, Refusal> {
    let req = frame.access::<LeaseBlock>()?;
    let block_id = req.block_id.to_native();
    owned(ctx, block_id)?;
    allowed(ctx, peer, &req.cap, Access::Read, block_id)?;
    let local = local(ctx)?;
    let (stat, crcs) = ctx.store.lease(block_id, local.lease)?;
    // The reader reads the block's file itself: the lease stands for its reads (whole block).
    ctx.traced(block_id, (0, stat.len), stat.len, TraceAccess::DiskHit);
    let ok = LeaseBlockOk {
        dir: stat.dir,
        disk_offset: stat.disk_offset,
        len: stat.len,
        chunk_size: stat.chunk_size,
        crcs: crcs.to_vec(),
        lease_ms: u32::try_from(local.lease.as_millis()).unwrap_or(u32::MAX),
    };
    Ok(Reply::ok(frame.header().request_id, &ok))
}

/// Deletes every listed block, or none if any belongs to another shard.
/// Deletes are the master's orders (sent at once, and again in heartbeat replies): no client
/// and no other worker may drop a block.
async fn delete_blocks(ctx: &ShardCtx, peer: &PeerCert, frame: &Frame) -> Result<Reply, Refusal> {
    if !peer.role.may_lead() {
        let msg = format!("DeleteBlocks is the master's order; this peer holds a {peer}");
        return Err(Refusal::new(ErrorCode::PermissionDenied, msg));
    }
    let req = frame.access::<DeleteBlocks>()?;
    let ids: Vec<u64> = req.block_ids.iter().map(|id| id.to_native()).collect();
    for &id in &ids {
        owned(ctx, id)?;
    }
    let mut freed = false;
    for id in ids {
        freed |= ctx.store.delete(id).await?;
    }
    // Blocks deleted twice (sent at once, then in a heartbeat reply) ask for nothing more.
    if freed {
        ctx.space_changed();
    }
    Ok(Reply::ok(frame.header().request_id, &Done {}))
}

/// Streams the payload into a block writer, verifies the frame checksum over everything
/// received, and only then commits. Any failure drops the writer: nothing becomes visible.
async fn write_block(ctx: &ShardCtx, peer: &PeerCert, head: Inbound, recv: &mut RecvStream) -> Reply {
    let id = head.header().request_id;
    let refuse = |recv: &mut RecvStream, r: Refusal| {
        // The rest of the payload is not wanted: give the stream's credit back.
        let _ = recv.stop(VarInt::from_u32(0));
        if r.code == ErrorCode::NoSpace {
            ctx.space_changed();
        }
        r.reply(id)
    };
    let (block_id, pinned) = match WriteBlock::access(head.body())
        .and_then(|a| WriteBlock::check(a, &ctx.limits).map(|_| a))
    {
        Ok(req) => {
            let block_id = req.block_id.to_native();
            if let Err(r) = owned(ctx, block_id).and_then(|_| allowed(ctx, peer, &req.cap, Access::Write, block_id)) {
                return refuse(recv, r);
            }
            // A block written through cv is its only copy until the master unpins it
            // (after its export): only a worker or master may store one evictable.
            (block_id, req.pinned || !peer.role.is_node())
        }
        Err(e) => return refuse(recv, e.into()),
    };
    let len = u64::from(head.header().payload_len);
    let mut writer = match ctx.store.begin_write(block_id, len, pinned).await {
        Ok(w) => w,
        Err(e) => return refuse(recv, e.into()),
    };
    let mut check = match head.check() {
        Ok(c) => c,
        Err(e) => return refuse(recv, e.into()),
    };
    let mut remaining = len;
    while remaining > 0 {
        let chunk = match recv.read_chunk(usize::try_from(remaining).unwrap_or(usize::MAX)).await {
            Ok(Some(c)) => c,
            Ok(None) => {
                let fail = ReadFail::Truncated("payload");
                return Reply::error(id, fail.code(), &format!("{fail}: {remaining} bytes missing"), None);
            }
            Err(e) => return Reply::error(id, ErrorCode::Malformed, &format!("payload: {e}"), None),
        };
        remaining -= chunk.len() as u64;
        check.update(&chunk);
        if let Err(e) = writer.append(&chunk).await {
            return refuse(recv, e.into());
        }
    }
    let mut trailer = [0u8; cv_wire::TRAILER_LEN];
    let trailer = &mut trailer[..check.trailer_len()];
    if let Err(e) = recv.read_exact(trailer).await {
        let fail = ReadFail::from_quic(e, "payload crc");
        return Reply::error(id, fail.code(), &fail.to_string(), None);
    }
    let data_crc = check.payload_crc();
    if let Err(e) = check.finish(trailer) {
        return Reply::error(id, ErrorCode::Malformed, &format!("{e}; block {block_id} not stored"), None);
    }
    match writer.commit().await {
        Ok(stat) => {
            ctx.traced(block_id, (0, stat.len), stat.len, TraceAccess::Write);
            Reply::ok(id, &WriteBlockOk { len: stat.len, crc32: data_crc })
        }
        Err(e) => refuse(recv, e.into()),
    }
}
