//! The Unix socket of short-circuit reads (`wire/FORMAT.md`, kinds 75–77): frames over a
//! stream socket, with descriptors passed as `SCM_RIGHTS` beside a frame's first bytes.
//! The worker serves it; a client on the worker's host connects to it.

use std::io::{self, IoSlice, IoSliceMut, Read, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;

use cv_wire::{Frame, FrameHeader, HEADER_LEN, Limits};
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::socket::{ControlMessage, ControlMessageOwned, MsgFlags, recvmsg, sendmsg};

use crate::error::{NetError, NetErrorKind};

/// Sends one frame (`bytes`, header and body) with `fds` beside its first byte.
pub fn send_frame(stream: &UnixStream, bytes: &[u8], fds: &[BorrowedFd<'_>]) -> Result<(), NetError> {
    let raw: Vec<RawFd> = fds.iter().map(AsRawFd::as_raw_fd).collect();
    let cmsgs: Vec<ControlMessage<'_>> =
        if raw.is_empty() { Vec::new() } else { vec![ControlMessage::ScmRights(&raw)] };
    let sent = sendmsg::<()>(stream.as_raw_fd(), &[IoSlice::new(bytes)], &cmsgs, MsgFlags::MSG_NOSIGNAL, None)
        .map_err(|e| io_err("send on the local socket", e.into()))?;
    // The descriptors went with the first bytes; the rest is plain stream data.
    let mut w = stream;
    w.write_all(&bytes[sent..]).map_err(|e| io_err("send on the local socket", e))
}

/// Receives one frame and the descriptors that came with it (at most `max_fds`; more, or
/// any other control message, is a protocol error: their descriptors are closed).
pub fn recv_frame(stream: &UnixStream, limits: &Limits, max_fds: usize) -> Result<(Frame, Vec<OwnedFd>), NetError> {
    let mut head = [0u8; HEADER_LEN];
    let mut cmsg = nix::cmsg_space!([RawFd; cv_wire::msg::MAX_LOCAL_DIRS]);
    let (got, fds, truncated) = {
        let mut iov = [IoSliceMut::new(&mut head)];
        let msg = recvmsg::<()>(stream.as_raw_fd(), &mut iov, Some(&mut cmsg), MsgFlags::MSG_CMSG_CLOEXEC)
            .map_err(|e| io_err("receive on the local socket", e.into()))?;
        let mut fds = Vec::new();
        let mut other = false;
        for c in msg.cmsgs().map_err(|e| io_err("control message", e.into()))? {
            match c {
                ControlMessageOwned::ScmRights(raw) => fds.extend(raw.into_iter().map(owned)),
                _ => other = true,
            }
        }
        (msg.bytes, fds, other || msg.flags.contains(MsgFlags::MSG_CTRUNC))
    };
    if got == 0 {
        return Err(NetError::new(NetErrorKind::Connect, "the local socket was closed by its peer"));
    }
    if truncated || fds.len() > max_fds {
        return Err(NetError::new(
            NetErrorKind::Protocol,
            format!(
                "{} descriptors (or other control data) on the local socket, at most {max_fds} expected",
                fds.len()
            ),
        ));
    }
    let mut r = stream;
    r.read_exact(&mut head[got..]).map_err(|e| io_err("receive on the local socket", e))?;
    let header = FrameHeader::parse(&head, limits).map_err(NetError::from)?;
    let mut bytes = vec![0u8; header.frame_len()];
    bytes[..HEADER_LEN].copy_from_slice(&head);
    r.read_exact(&mut bytes[HEADER_LEN..]).map_err(|e| io_err("receive on the local socket", e))?;
    Ok((Frame::decode(&bytes, limits).map_err(NetError::from)?, fds))
}

/// Whether the peer has closed its end (or it broke): the worker never writes after its
/// reply, so anything to read is its end closing. One `poll`, no waiting.
pub fn hung_up(stream: &UnixStream) -> bool {
    let mut fds = [PollFd::new(stream.as_fd(), PollFlags::POLLIN)];
    match poll(&mut fds, PollTimeout::ZERO) {
        Ok(0) => false,
        Ok(_) => true,
        Err(nix::errno::Errno::EINTR) => hung_up(stream),
        Err(_) => true,
    }
}

fn io_err(what: &str, e: io::Error) -> NetError {
    NetError::new(NetErrorKind::Io, format!("{what}: {e}")).with_source(e)
}

#[allow(unsafe_code)]
fn owned(fd: RawFd) -> OwnedFd {
    use std::os::fd::FromRawFd;
    // SAFETY: `fd` came in an SCM_RIGHTS message just received: the kernel installed it in
    // this process for us, nothing else knows it, so it is ours to own and close.
    unsafe { OwnedFd::from_raw_fd(fd) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cv_wire::msg::{LocalOpen, LocalOpenOk};

    #[test]
    fn a_frame_and_its_descriptors_cross_the_socket() {
        let (a, b) = UnixStream::pair().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, b"cv short-circuit").unwrap();
        let file = std::fs::File::open(&path).unwrap();
        let frame = cv_wire::encode(&LocalOpenOk { dirs: 1 }, 7, &[]).unwrap();
        send_frame(&a, frame.head(), &[file.as_fd()]).unwrap();
        let (got, fds) = recv_frame(&b, &Limits::DEFAULT, 4).unwrap();
        assert_eq!(got.header().request_id, 7);
        assert_eq!(got.access::<LocalOpenOk>().unwrap().dirs.to_native(), 1);
        let mut text = String::new();
        std::fs::File::from(fds.into_iter().next().unwrap()).read_to_string(&mut text).unwrap();
        assert_eq!(text, "cv short-circuit");

        let req = cv_wire::encode(&LocalOpen { token: vec![1; 32], shard: 0 }, 8, &[]).unwrap();
        send_frame(&b, req.head(), &[]).unwrap();
        let (got, fds) = recv_frame(&a, &Limits::DEFAULT, 0).unwrap();
        assert!(fds.is_empty());
        assert_eq!(got.access::<LocalOpen>().unwrap().token.len(), 32);

        assert!(!hung_up(&a));
        drop(b);
        assert!(hung_up(&a), "the peer's close is seen at once");
    }

    #[test]
    fn more_descriptors_than_expected_are_refused() {
        let (a, b) = UnixStream::pair().unwrap();
        let f = std::fs::File::open("/dev/null").unwrap();
        let frame = cv_wire::encode(&LocalOpenOk { dirs: 2 }, 1, &[]).unwrap();
        send_frame(&a, frame.head(), &[f.as_fd(), f.as_fd()]).unwrap();
        let err = recv_frame(&b, &Limits::DEFAULT, 1).unwrap_err();
        assert_eq!(err.kind(), NetErrorKind::Protocol);
    }
}
