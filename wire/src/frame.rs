//! Frame header, encoding and validated decoding. Layout: `wire/FORMAT.md`.

use crate::PROTOCOL_VERSION;
use crate::error::{WireError, WireErrorKind};
use crate::kinds::{Kind, Message};
use crate::limits::Limits;
use rkyv::util::AlignedVec;

/// First four bytes of every frame.
pub const MAGIC: [u8; 4] = *b"CVWF";
/// Fixed header length. A multiple of 16, so a body archived right after the
/// header in one buffer keeps the alignment it has when received on its own.
pub const HEADER_LEN: usize = 32;
/// Bytes of the header covered by the crc (all but the crc field itself).
const CRC_COVERED: usize = 28;

/// Bytes of the payload checksum that follows the payload of a [`Flags::PAYLOAD_CRC_AFTER`] frame.
pub const TRAILER_LEN: usize = 4;

/// Header flag bits. A bit this version does not know is refused, so that a later version
/// can give it meaning safely.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Flags(pub u16);

impl Flags {
    /// The header crc covers the header and the body only; the payload's own crc32 follows
    /// the payload ([`TRAILER_LEN`] bytes). For a reply sent while its bytes still arrive
    /// (a block streamed from object storage), whose checksum is unknown when the header goes.
    pub const PAYLOAD_CRC_AFTER: u16 = 1;
    /// Bits this version understands.
    pub const KNOWN: u16 = Flags::PAYLOAD_CRC_AFTER;

    /// Whether the payload's crc32 follows the payload.
    pub fn payload_crc_after(self) -> bool {
        self.0 & Flags::PAYLOAD_CRC_AFTER != 0
    }
}

/// The fixed 32-byte frame header, decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameHeader {
    /// Protocol version of the frame: this build's, save on an `Error` frame, which is read
    /// whatever its version.
    pub version: u16,
    /// Which message the body holds.
    pub kind: Kind,
    /// Flag bits.
    pub flags: Flags,
    /// Length of the rkyv body.
    pub body_len: u32,
    /// Length of the raw payload after the body.
    pub payload_len: u32,
    /// Chosen by the requester, echoed in the reply; for tracing.
    pub request_id: u64,
    /// crc32 (IEEE) over header bytes 0..28, the body and the payload.
    pub crc32: u32,
}

impl FrameHeader {
    /// Parses and checks a header: magic, version, reserved bits, kind, and the
    /// declared lengths against `limits` — before anything is allocated.
    pub fn parse(bytes: &[u8], limits: &Limits) -> Result<FrameHeader, WireError> {
        let Some(h) = bytes.get(..HEADER_LEN) else {
            return Err(WireError::new(
                WireErrorKind::Truncated,
                format!("header needs {HEADER_LEN} bytes, got {}", bytes.len()),
            ));
        };
        if h[0..4] != MAGIC {
            return Err(WireError::new(WireErrorKind::BadMagic, "not a cv frame"));
        }
        let u16_at = |i: usize| u16::from_le_bytes([h[i], h[i + 1]]);
        let u32_at = |i: usize| u32::from_le_bytes([h[i], h[i + 1], h[i + 2], h[i + 3]]);
        let version = u16_at(4);
        // An `Error` frame is read whatever its version: its header and body are frozen
        // (FORMAT.md, "Compatibility"), so a peer of another version can say why it refuses.
        if version != PROTOCOL_VERSION && u16_at(6) != Kind::Error as u16 {
            return Err(WireError::unsupported_version(version));
        }
        let flags = u16_at(8);
        if flags & !Flags::KNOWN != 0 || u16_at(10) != 0 {
            return Err(WireError::new(WireErrorKind::BadHeader, "reserved header bits set"));
        }
        let kind = Kind::from_u16(u16_at(6))?;
        let body_len = u32_at(12);
        let payload_len = u32_at(16);
        if body_len > limits.max_body {
            return Err(WireError::new(
                WireErrorKind::LimitExceeded,
                format!("body {body_len} > limit {}", limits.max_body),
            ));
        }
        if payload_len > limits.max_payload {
            return Err(WireError::new(
                WireErrorKind::LimitExceeded,
                format!("payload {payload_len} > limit {}", limits.max_payload),
            ));
        }
        let mut id = [0u8; 8];
        id.copy_from_slice(&h[20..28]);
        Ok(FrameHeader {
            version,
            kind,
            flags: Flags(flags),
            body_len,
            payload_len,
            request_id: u64::from_le_bytes(id),
            crc32: u32_at(28),
        })
    }

    fn write(&self, out: &mut [u8]) {
        out[0..4].copy_from_slice(&MAGIC);
        out[4..6].copy_from_slice(&self.version.to_le_bytes());
        out[6..8].copy_from_slice(&(self.kind as u16).to_le_bytes());
        out[8..10].copy_from_slice(&self.flags.0.to_le_bytes());
        out[10..12].copy_from_slice(&0u16.to_le_bytes());
        out[12..16].copy_from_slice(&self.body_len.to_le_bytes());
        out[16..20].copy_from_slice(&self.payload_len.to_le_bytes());
        out[20..28].copy_from_slice(&self.request_id.to_le_bytes());
        out[28..32].copy_from_slice(&self.crc32.to_le_bytes());
    }

    /// Bytes after the body: the payload, and its crc32 when it follows the payload.
    pub fn after_body_len(&self) -> usize {
        self.payload_len as usize + if self.flags.payload_crc_after() { TRAILER_LEN } else { 0 }
    }

    /// Total bytes of the frame on the wire.
    pub fn frame_len(&self) -> usize {
        HEADER_LEN + self.body_len as usize + self.after_body_len()
    }

    /// Bytes a server holds in memory while it serves this request: the whole frame, less
    /// a payload its kind streams elsewhere ([`Kind::streams_payload`]: a block write's
    /// payload goes to the store as it arrives).
    pub fn buffered_len(&self) -> u64 {
        let streamed = if self.kind.streams_payload() { self.after_body_len() } else { 0 };
        (self.frame_len() - streamed) as u64
    }
}

/// An encoded frame's header and body in one aligned buffer. The payload is
/// not copied: send [`EncodedFrame::head`] and then the payload slices.
#[derive(Clone, Debug)]
pub struct EncodedFrame {
    head: AlignedVec,
    header: FrameHeader,
}

impl EncodedFrame {
    /// Header followed by body: the bytes to send before the payload.
    pub fn head(&self) -> &[u8] {
        &self.head
    }

    /// The header that was written.
    pub fn header(&self) -> &FrameHeader {
        &self.header
    }

    /// Header and body as an owned aligned buffer.
    pub fn into_head(self) -> AlignedVec {
        self.head
    }
}

/// Encodes `msg` with a payload held in one slice.
pub fn encode<M: Message>(msg: &M, request_id: u64, payload: &[u8]) -> Result<EncodedFrame, WireError> {
    encode_with(msg, request_id, &[payload])
}

/// Encodes `msg` with a payload held in several slices (e.g. DMA chunks),
/// which are checksummed in place and never copied.
pub fn encode_with<M: Message>(msg: &M, request_id: u64, payload: &[&[u8]]) -> Result<EncodedFrame, WireError> {
    let mut crc = crc32fast::Hasher::new();
    payload.iter().for_each(|p| crc.update(p));
    let len: usize = payload.iter().map(|p| p.len()).sum();
    encode_with_crc(msg, request_id, len as u64, crc.finalize())
}

/// Encodes `msg` for a payload of `payload_len` bytes whose crc32 the caller already holds
/// (e.g. combined from verified chunk checksums), so the payload is not read again here.
/// The caller must send exactly the bytes that `payload_crc` was computed over.
pub fn encode_with_crc<M: Message>(
    msg: &M,
    request_id: u64,
    payload_len: u64,
    payload_crc: u32,
) -> Result<EncodedFrame, WireError> {
    encode_as(PROTOCOL_VERSION, msg, request_id, payload_len, payload_crc)
}

/// [`encode_with_crc`] with the header stamped `version`: only a hello's refusal is written
/// in another version than this build's ([`crate::hello`]).
pub(crate) fn encode_as<M: Message>(
    version: u16,
    msg: &M,
    request_id: u64,
    payload_len: u64,
    payload_crc: u32,
) -> Result<EncodedFrame, WireError> {
    let mut head = AlignedVec::with_capacity(256);
    head.extend_from_slice(&[0u8; HEADER_LEN]);
    let mut head = msg.archive_into(head)?;
    let body_len =
        u32::try_from(head.len() - HEADER_LEN).map_err(|_| WireError::new(WireErrorKind::Encode, "body over 4 GiB"))?;
    let payload_len =
        u32::try_from(payload_len).map_err(|_| WireError::new(WireErrorKind::Encode, "payload over 4 GiB"))?;
    let mut header =
        FrameHeader { version, kind: M::KIND, flags: Flags::default(), body_len, payload_len, request_id, crc32: 0 };
    header.write(&mut head[..HEADER_LEN]);
    let mut crc = crc32fast::Hasher::new();
    crc.update(&head[..CRC_COVERED]);
    crc.update(&head[HEADER_LEN..]);
    crc.combine(&crc32fast::Hasher::new_with_initial_len(payload_crc, u64::from(payload_len)));
    header.crc32 = crc.finalize();
    head[CRC_COVERED..HEADER_LEN].copy_from_slice(&header.crc32.to_le_bytes());
    Ok(EncodedFrame { head, header })
}

/// Encodes `msg` for a payload of `payload_len` bytes that are not all at hand yet: the frame
/// carries [`Flags::PAYLOAD_CRC_AFTER`], so its header crc covers header and body only. The
/// caller sends the head, exactly `payload_len` bytes, then [`trailer`] of their crc32.
pub fn encode_streamed<M: Message>(msg: &M, request_id: u64, payload_len: u64) -> Result<EncodedFrame, WireError> {
    let mut frame = encode_with_crc(msg, request_id, payload_len, 0)?;
    frame.header.flags = Flags(Flags::PAYLOAD_CRC_AFTER);
    let head = &mut frame.head;
    head[8..10].copy_from_slice(&Flags::PAYLOAD_CRC_AFTER.to_le_bytes());
    let mut crc = crc32fast::Hasher::new();
    crc.update(&head[..CRC_COVERED]);
    crc.update(&head[HEADER_LEN..]);
    frame.header.crc32 = crc.finalize();
    head[CRC_COVERED..HEADER_LEN].copy_from_slice(&frame.header.crc32.to_le_bytes());
    Ok(frame)
}

/// The bytes that end a [`Flags::PAYLOAD_CRC_AFTER`] frame: the payload's crc32.
pub fn trailer(payload_crc: u32) -> [u8; TRAILER_LEN] {
    payload_crc.to_le_bytes()
}

/// The checksums of a frame checked while its payload is read piece by piece, for a
/// receiver that does not gather the payload into a [`Frame`] (it streams it into a block,
/// or into a caller's buffer). Every received frame is checked through it.
#[derive(Debug, Clone)]
pub struct FrameCheck {
    /// Header (all but the crc field) and body: all the header crc covers when the
    /// payload's crc follows it, else its start.
    head: crc32fast::Hasher,
    payload: crc32fast::Hasher,
    header_crc: u32,
    crc_after: bool,
}

impl FrameCheck {
    /// Starts the check of a frame whose header and body have been read. With
    /// [`Flags::PAYLOAD_CRC_AFTER`] the header crc covers only them, and is checked now.
    pub fn new(raw_header: &[u8; HEADER_LEN], header: &FrameHeader, body: &[u8]) -> Result<FrameCheck, WireError> {
        let mut head = crc32fast::Hasher::new();
        head.update(&raw_header[..CRC_COVERED]);
        head.update(body);
        let crc_after = header.flags.payload_crc_after();
        if crc_after {
            crc_matches(head.clone().finalize(), header.crc32, "header")?;
        }
        Ok(FrameCheck { head, payload: crc32fast::Hasher::new(), header_crc: header.crc32, crc_after })
    }

    /// The next payload bytes, in order.
    pub fn update(&mut self, payload: &[u8]) {
        self.payload.update(payload);
    }

    /// crc32 of the payload bytes so far.
    pub fn payload_crc(&self) -> u32 {
        self.payload.clone().finalize()
    }

    /// Bytes to read after the payload for [`FrameCheck::finish`]: the trailer, or none.
    pub fn trailer_len(&self) -> usize {
        if self.crc_after { TRAILER_LEN } else { 0 }
    }

    /// After the whole payload: checks it against the header crc, or against `trailer`
    /// (the [`FrameCheck::trailer_len`] bytes that followed it).
    pub fn finish(mut self, trailer: &[u8]) -> Result<(), WireError> {
        if trailer.len() != self.trailer_len() {
            return Err(WireError::new(WireErrorKind::Truncated, "payload crc trailer missing"));
        }
        if self.crc_after {
            let sent = u32::from_le_bytes([trailer[0], trailer[1], trailer[2], trailer[3]]);
            return crc_matches(self.payload.finalize(), sent, "trailer");
        }
        self.head.combine(&self.payload);
        crc_matches(self.head.finalize(), self.header_crc, "header")
    }
}

fn crc_matches(got: u32, sent: u32, place: &str) -> Result<(), WireError> {
    if got == sent {
        return Ok(());
    }
    Err(WireError::new(WireErrorKind::Checksum, format!("crc32 {got:08x}, {place} says {sent:08x}")))
}

/// A received frame whose header and checksum have been verified. Its body is
/// only readable through [`Frame::access`], which validates the archive.
#[derive(Debug)]
pub struct Frame {
    header: FrameHeader,
    raw_header: [u8; HEADER_LEN],
    body: AlignedVec,
    payload: Vec<u8>,
    limits: Limits,
}

impl Frame {
    /// Decodes a frame held in one contiguous buffer of exactly its length.
    pub fn decode(bytes: &[u8], limits: &Limits) -> Result<Frame, WireError> {
        let header = FrameHeader::parse(bytes, limits)?;
        if bytes.len() != header.frame_len() {
            let kind =
                if bytes.len() < header.frame_len() { WireErrorKind::Truncated } else { WireErrorKind::BadHeader };
            return Err(WireError::new(
                kind,
                format!("frame declares {} bytes, got {}", header.frame_len(), bytes.len()),
            ));
        }
        let body_end = HEADER_LEN + header.body_len as usize;
        let mut body = AlignedVec::with_capacity(header.body_len as usize);
        body.extend_from_slice(&bytes[HEADER_LEN..body_end]);
        let mut raw = [0u8; HEADER_LEN];
        raw.copy_from_slice(&bytes[..HEADER_LEN]);
        Frame::assemble(raw, header, body, bytes[body_end..].to_vec(), limits)
    }

    /// Completes a frame whose header has been parsed (once, by the caller) from
    /// `raw_header`: exactly `body_len` body bytes, then the [`FrameHeader::after_body_len`]
    /// bytes after the body (the payload, and its crc32 when the frame carries it there).
    /// Verifies the checksums. Receivers reach it through [`crate::Inbound::finish`].
    pub(crate) fn assemble(
        raw_header: [u8; HEADER_LEN],
        header: FrameHeader,
        body: AlignedVec,
        mut after_body: Vec<u8>,
        limits: &Limits,
    ) -> Result<Frame, WireError> {
        if body.len() != header.body_len as usize || after_body.len() != header.after_body_len() {
            return Err(WireError::new(WireErrorKind::Truncated, "body or payload length differs from header"));
        }
        let trailer = after_body.split_off(header.payload_len as usize);
        let mut check = FrameCheck::new(&raw_header, &header, &body)?;
        check.update(&after_body);
        check.finish(&trailer)?;
        Ok(Frame { header, raw_header, body, payload: after_body, limits: *limits })
    }

    /// The verified header.
    pub fn header(&self) -> &FrameHeader {
        &self.header
    }

    /// The frame kind.
    pub fn kind(&self) -> Kind {
        self.header.kind
    }

    /// The raw payload (block bytes, tail bytes).
    pub fn payload(&self) -> &[u8] {
        &self.payload
    }

    /// Takes the payload without copying.
    pub fn into_payload(self) -> Vec<u8> {
        self.payload
    }

    /// Validates the body as an `M` and checks its semantic limits.
    pub fn access<M: Message>(&self) -> Result<&M::Archived, WireError> {
        if self.header.kind != M::KIND {
            return Err(WireError::new(
                WireErrorKind::UnexpectedKind,
                format!("expected {}, got {}", M::KIND.name(), self.header.kind.name()),
            ));
        }
        let archived = M::access(&self.body)?;
        M::check(archived, &self.limits)?;
        Ok(archived)
    }

    /// Validates the body as whatever message its kind names.
    pub fn validate(&self) -> Result<(), WireError> {
        self.header.kind.validate_body(&self.body, &self.limits)
    }

    /// Validates the body and copies it into an owned `M`.
    pub fn decode_body<M: Message>(&self) -> Result<M, WireError> {
        M::to_owned(self.access::<M>()?)
    }

    /// The whole frame as bytes (header, body, payload, trailer), e.g. to forward it.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.header.frame_len());
        out.extend_from_slice(&self.raw_header);
        out.extend_from_slice(&self.body);
        out.extend_from_slice(&self.payload);
        if self.header.flags.payload_crc_after() {
            out.extend_from_slice(&trailer(crc32fast::hash(&self.payload)));
        }
        out
    }
}
