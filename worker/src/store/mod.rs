//! Per-shard block store: O_DIRECT files through io_uring, chunk checksums, tiers, eviction.
//!
//! One [`BlockStore`] lives on one shard runtime (it is `!Send`). Blocks are written in
//! pieces through a [`BlockWriter`] and become visible only when committed. A request looks
//! its block up once ([`BlockStore::lookup`], a [`BlockRef`]) and reads that incarnation
//! ([`BlockStore::read_block`], the range cut by [`clamp`]); every chunk read is checked
//! against its crc32, by the store or by the reader ([`Verify`]). The block index
//! is an append-only log, so a restarted store serves its blocks at once. Byte formats:
//! `worker/STORE-FORMAT.md`.
//!
//! Layout: [`dma`] is the only O_DIRECT code; [`format`](mod@format) the byte formats;
//! `journal` the index log file; `damage` what makes
//! a bad index record damage rather than a torn tail; `extent` free space; [`policy`] S3-FIFO; `memtier` hot
//! chunks in RAM; `lease` extents leased to short-circuit readers; `block_ref` a lookup and the rule of a read's range; `read` the read path.

mod block_ref;
mod block_store;
mod config;
mod damage;
pub mod dma;
mod error;
mod extent;
pub mod format;
mod journal;
mod lease;
mod memtier;
pub mod policy;
mod read;
mod report;
mod stats;
mod view;
mod writer;

pub use block_ref::{BlockRef, clamp};
pub use block_store::{BlockStat, BlockStore};
pub use config::{DataDir, StoreConfig, Watermarks};
pub use damage::{IndexDamage, RecordFault};
pub use dma::DiskBytes;
pub use error::{ErrorKind, Result, StoreError};
pub use read::Verify;
pub use report::BlockReport;
pub use stats::{StoreStats, TierStats, Usage};
pub use view::BlockBytes;
pub use writer::BlockWriter;
