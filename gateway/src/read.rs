//! GetObject's body: a range of a cv file as a stream of chunks. The first
//! chunk is read at once (a footer is served from the open reply's tail, with
//! no block read); the rest of a longer range is read by a task that keeps
//! `prefetch_depth` chunk reads in flight, ahead of a client that takes them,
//! and stops when the client goes away.

use crate::cache::{CHUNK, ChunkCache};
use bytes::Bytes;
use cv_client::File;
use futures::{Stream, StreamExt};
use s3s::StdError;
use s3s::dto::StreamingBlob;
use s3s::stream::{ByteStream, RemainingLength};
use std::ops::Range;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::sync::mpsc;

/// Reads `[range)` of `file` fully (short reads are continued).
pub(crate) async fn read_range(file: &File, range: Range<u64>) -> cv_client::Result<Bytes> {
    let mut buf = vec![0u8; (range.end - range.start) as usize];
    let mut done = 0;
    while done < buf.len() {
        let n = file.read_at(range.start + done as u64, &mut buf[done..]).await?;
        if n == 0 {
            return Err(cv_client::Error::new(
                cv_client::ErrorKind::Protocol,
                format!("{}: ended at {} of {}", file.status().path, range.start + done as u64, range.end),
            ));
        }
        done += n;
    }
    Ok(Bytes::from(buf))
}

/// How a long body is read: `chunk` bytes a read, `depth` reads in flight.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Pacing {
    pub chunk: u64,
    pub depth: usize,
}

impl Pacing {
    pub fn of(client: &cv_client::Client) -> Self {
        let s = client.settings();
        Pacing { chunk: s.read_chunk.bytes().max(64 << 10), depth: (s.prefetch_depth as usize).max(1) }
    }
}

/// The body of `[range)` of `file`. The first piece is read before this returns, so a
/// read that fails at once (a stale handle, a lost block) is an error response rather than a
/// body cut short; the rest is read by a task, `depth` reads in flight. With a `cache`, the
/// pieces are its chunks (from memory when hot), else `chunk`-sized reads.
pub(crate) async fn body(
    file: File,
    range: Range<u64>,
    pace: Pacing,
    cache: Option<Arc<ChunkCache>>,
    what: String,
) -> cv_client::Result<StreamingBlob> {
    let len = range.end - range.start;
    // A footer is served from the open reply's tail: no block read, nothing to cache.
    if let Some((at, tail)) = file.tail()
        && range.start >= at
        && range.end > range.start
    {
        let b = Bytes::copy_from_slice(&tail[(range.start - at) as usize..(range.end - at) as usize]);
        return Ok(StreamingBlob::new(Body { rx: None, first: Some(b), remaining: len as usize }));
    }
    let step = if cache.is_some() { CHUNK } else { pace.chunk };
    // Pieces aligned to `step` (cache chunks must be), the first and last cut to the range.
    let first_piece = range.start / step;
    let pieces: Vec<(u64, Range<u64>)> = (first_piece..range.end.div_ceil(step))
        .map(|i| (i, (i * step).max(range.start)..((i + 1) * step).min(range.end)))
        .collect();
    let read = move |file: File, cache: Option<Arc<ChunkCache>>, (i, r): (u64, Range<u64>)| async move {
        match cache {
            Some(c) => {
                let chunk = c.chunk(&file, i).await?;
                let at = (r.start - i * CHUNK) as usize;
                Ok(chunk.slice(at..at + (r.end - r.start) as usize))
            }
            None => read_range(&file, r).await,
        }
    };
    let mut pieces = pieces.into_iter();
    let Some(head) = pieces.next() else {
        return Ok(StreamingBlob::new(Body { rx: None, first: None, remaining: 0 }));
    };
    let first = read(file.clone(), cache.clone(), head.clone()).await?;
    // The first chunk the cache lacks is read before answering too: a handle kept from an
    // earlier request (`open_ttl`) whose version has gone fails here, as an error the caller
    // answers by opening afresh, not midway through a body begun from memory.
    if let Some(c) = &cache
        && let Some((i, _)) = pieces.as_slice().iter().find(|(i, _)| !c.holds(&file, *i))
    {
        c.chunk(&file, *i).await?;
    }
    if pieces.len() == 0 {
        return Ok(StreamingBlob::new(Body { rx: None, first: Some(first), remaining: len as usize }));
    }
    let (tx, rx) = mpsc::channel::<Result<Bytes, StdError>>(2);
    tokio::spawn(async move {
        let mut reads =
            futures::stream::iter(pieces).map(|p| read(file.clone(), cache.clone(), p)).buffered(pace.depth);
        while let Some(r) = reads.next().await {
            let failed = r.is_err();
            let item = r.map_err(|e| {
                // The status line is sent: the client sees a body cut short.
                tracing::warn!(object = %what, error = %e, "gateway: a GET body failed midway");
                Box::new(e) as StdError
            });
            if tx.send(item).await.is_err() || failed {
                break;
            }
        }
    });
    Ok(StreamingBlob::new(Body { rx: Some(rx), first: Some(first), remaining: len as usize }))
}

/// A body with an exact length (so the response carries Content-Length).
struct Body {
    rx: Option<mpsc::Receiver<Result<Bytes, StdError>>>,
    first: Option<Bytes>,
    remaining: usize,
}

impl Stream for Body {
    type Item = Result<Bytes, StdError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if let Some(b) = self.first.take() {
            self.remaining -= b.len();
            return Poll::Ready(Some(Ok(b)));
        }
        let Some(rx) = self.rx.as_mut() else { return Poll::Ready(None) };
        match rx.poll_recv(cx) {
            Poll::Ready(Some(Ok(b))) => {
                self.remaining = self.remaining.saturating_sub(b.len());
                Poll::Ready(Some(Ok(b)))
            }
            other => other,
        }
    }
}

impl ByteStream for Body {
    fn remaining_length(&self) -> RemainingLength {
        RemainingLength::new_exact(self.remaining)
    }
}
