//! The frame-kind table: every message of the protocol, declared once.
//!
//! A kind number identifies the rkyv type of a frame's body. Numbers are part
//! of the protocol: never renumber, only add. Ranges: 1–15 connection,
//! 16–47 namespace (master), 48–63 worker registry (master), 64–95 blocks
//! (worker shards), 96–111 cluster administration.

use crate::error::{WireError, WireErrorKind};
use crate::limits::Limits;
use crate::msg;
use rkyv::rancor;
use rkyv::util::AlignedVec;

/// A message that can travel in a frame body.
///
/// Implemented by the table below for every catalogued type; the methods pin
/// down the rkyv strategy so generic callers need no rkyv bounds.
pub trait Message: rkyv::Archive + Sized + std::fmt::Debug {
    /// The frame kind this message travels as.
    const KIND: Kind;

    /// Appends the archived form of `self` to `out` (which may already hold a
    /// header: positions stay relative, and the header length keeps alignment).
    fn archive_into(&self, out: AlignedVec) -> Result<AlignedVec, WireError>;

    /// Validates `body` as an archive of this message. The only way network
    /// bytes become a typed view.
    fn access(body: &[u8]) -> Result<&Self::Archived, WireError>;

    /// Copies an archived view into an owned value.
    fn to_owned(archived: &Self::Archived) -> Result<Self, WireError>;

    /// Checks semantic limits (path lengths, list sizes) on a validated view,
    /// before anything is allocated from it.
    fn check(archived: &Self::Archived, limits: &Limits) -> Result<(), WireError>;
}

/// Semantic limit checks for one archived message type.
pub(crate) trait CheckLimits {
    fn check_limits(&self, limits: &Limits) -> Result<(), WireError>;
}

macro_rules! kinds {
    ($($name:ident = $num:literal => $ty:ty,)*) => {
        /// The kind of a frame: which message its body holds.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        #[repr(u16)]
        pub enum Kind {
            $(#[doc = concat!("Body is [`", stringify!($ty), "`].")] $name = $num,)*
        }

        impl Kind {
            /// Every kind, in table order.
            pub const ALL: &'static [Kind] = &[$(Kind::$name),*];

            /// Decodes a kind number; unknown numbers are refused.
            pub fn from_u16(n: u16) -> Result<Kind, WireError> {
                match n {
                    $($num => Ok(Kind::$name),)*
                    _ => Err(WireError::new(WireErrorKind::UnknownKind, format!("frame kind {n}"))),
                }
            }

            /// Stable name, for logs.
            pub const fn name(self) -> &'static str {
                match self { $(Kind::$name => stringify!($name),)* }
            }

            /// Validates `body` (16-byte aligned) as an archive of the message
            /// this kind names, and checks its limits. Used by servers to vet
            /// a frame before dispatch, and by the fuzz targets.
            pub fn validate_body(self, body: &[u8], limits: &Limits) -> Result<(), WireError> {
                match self {
                    $(Kind::$name => {
                        let archived = <$ty as Message>::access(body)?;
                        <$ty as Message>::check(archived, limits)
                    })*
                }
            }
        }

        $(
        impl Message for $ty {
            const KIND: Kind = Kind::$name;

            fn archive_into(&self, out: AlignedVec) -> Result<AlignedVec, WireError> {
                rkyv::api::high::to_bytes_in::<_, rancor::Error>(self, out)
                    .map_err(|e| WireError::new(WireErrorKind::Encode, e.to_string()))
            }

            fn access(body: &[u8]) -> Result<&Self::Archived, WireError> {
                rkyv::access::<Self::Archived, rancor::Error>(body).map_err(|e| {
                    WireError::new(
                        WireErrorKind::Malformed,
                        format!("{} body: {e}", stringify!($name)),
                    )
                })
            }

            fn to_owned(archived: &Self::Archived) -> Result<Self, WireError> {
                rkyv::deserialize::<Self, rancor::Error>(archived)
                    .map_err(|e| WireError::new(WireErrorKind::Malformed, e.to_string()))
            }

            fn check(archived: &Self::Archived, limits: &Limits) -> Result<(), WireError> {
                CheckLimits::check_limits(archived, limits)
            }
        }
        )*
    };
}

kinds! {
    Hello = 1 => msg::Hello,
    HelloOk = 2 => msg::HelloOk,
    Error = 3 => msg::ErrorReply,
    Ping = 4 => msg::Ping,
    Pong = 5 => msg::Pong,
    Done = 6 => msg::Done,

    Open = 16 => msg::Open,
    OpenOk = 17 => msg::OpenOk,
    Stat = 18 => msg::Stat,
    StatOk = 19 => msg::StatOk,
    List = 20 => msg::List,
    ListOk = 21 => msg::ListOk,
    Mkdir = 22 => msg::Mkdir,
    Create = 23 => msg::Create,
    CreateOk = 24 => msg::CreateOk,
    AddBlock = 25 => msg::AddBlock,
    AddBlockOk = 26 => msg::AddBlockOk,
    Complete = 27 => msg::Complete,
    Rename = 28 => msg::Rename,
    Delete = 29 => msg::Delete,
    Abandon = 30 => msg::Abandon,
    CompleteIf = 31 => msg::CompleteIf,
    Mount = 32 => msg::Mount,
    Unmount = 33 => msg::Unmount,
    ListMounts = 34 => msg::ListMounts,
    ListMountsOk = 35 => msg::ListMountsOk,
    GetMount = 36 => msg::GetMount,
    GetMountOk = 37 => msg::GetMountOk,
    SyncMount = 38 => msg::SyncMount,
    Free = 39 => msg::Free,
    FreeOk = 40 => msg::FreeOk,
    Compose = 41 => msg::Compose,

    RegisterWorker = 48 => msg::RegisterWorker,
    RegisterOk = 49 => msg::RegisterOk,
    Heartbeat = 50 => msg::Heartbeat,
    HeartbeatOk = 51 => msg::HeartbeatOk,

    ReadBlock = 64 => msg::ReadBlock,
    ReadBlockOk = 65 => msg::ReadBlockOk,
    WriteBlock = 66 => msg::WriteBlock,
    WriteBlockOk = 67 => msg::WriteBlockOk,
    DeleteBlocks = 68 => msg::DeleteBlocks,
    StatBlock = 69 => msg::StatBlock,
    StatBlockOk = 70 => msg::StatBlockOk,
    LocalHello = 71 => msg::LocalHello,
    LocalHelloOk = 72 => msg::LocalHelloOk,
    LeaseBlock = 73 => msg::LeaseBlock,
    LeaseBlockOk = 74 => msg::LeaseBlockOk,
    LocalOpen = 75 => msg::LocalOpen,
    LocalOpenOk = 76 => msg::LocalOpenOk,
    LocalRevoke = 77 => msg::LocalRevoke,

    Report = 96 => msg::Report,
    ReportOk = 97 => msg::ReportOk,
    DrainWorker = 98 => msg::DrainWorker,
    ChangeMasters = 99 => msg::ChangeMasters,
    ListMasters = 100 => msg::ListMasters,
    ListMastersOk = 101 => msg::ListMastersOk,
    MasterTime = 102 => msg::MasterTime,
    MasterTimeOk = 103 => msg::MasterTimeOk,
    RevokeCert = 104 => msg::RevokeCert,
    RevokeCertOk = 105 => msg::RevokeCertOk,
    ListRevoked = 106 => msg::ListRevoked,
    RevokedList = 107 => msg::RevokedList,

    RaftAppend = 112 => msg::RaftAppend,
    RaftAppendOk = 113 => msg::RaftAppendOk,
    RaftVoteReq = 114 => msg::RaftVoteReq,
    RaftVoteOk = 115 => msg::RaftVoteOk,
    RaftSnapshot = 116 => msg::RaftSnapshot,
    RaftSnapshotOk = 117 => msg::RaftSnapshotOk,
    RaftProbe = 118 => msg::RaftProbe,
    RaftProbeOk = 119 => msg::RaftProbeOk,
}

impl Kind {
    /// Whether a server streams this request's payload to its destination as it arrives
    /// instead of holding it: a block write's bytes go into the store chunk by chunk.
    pub const fn streams_payload(self) -> bool {
        matches!(self, Kind::WriteBlock)
    }
}
