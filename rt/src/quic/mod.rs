//! QUIC endpoint driven from one shard runtime ([`crate::Runtime`]; quinn-proto + quinn-udp), no tokio.
//!
//! A shard calls [`Endpoint::bind`] on its executor thread; two local tasks then move
//! datagrams (batched with GRO/GSO through quinn-udp) between the socket and quinn-proto,
//! and handlers use [`Endpoint::accept`], [`Connection::accept_bi`] and the stream halves.
//! Nothing is `Send`: per-connection state lives in `Rc<RefCell<..>>`, borrowed only for
//! synchronous steps.

mod config;
mod conn;
mod driver;
mod endpoint;
mod error;
mod notify;
mod readiness;
mod stream;
mod timers;
mod udp;

pub use config::EndpointOptions;
pub use conn::Connection;
pub use endpoint::Endpoint;
pub use error::{ErrorKind, QuicError};
pub use stream::{RecvStream, SendStream};

/// Re-exported so handlers can name codes, configs and close reasons without a direct dependency.
pub use quinn_proto::{ConnectionError, ServerConfig, TransportConfig, VarInt};
