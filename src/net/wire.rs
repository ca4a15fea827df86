//! The messages of the lock protocol and their encoding: postcard-encoded
//! values inside length-prefixed frames. PROTOCOL.md is the specification.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio_util::codec::LengthDelimitedCodec;

use crate::{Error, LockArgs, LockMode};

/// The protocol version this build speaks. A server refuses other versions
/// in the handshake.
pub const PROTOCOL_VERSION: u16 = 1;

/// Largest frame either side accepts, in bytes. A request at the resource
/// limits (1000 names of 1 KiB) fits with room to spare.
pub const MAX_FRAME: usize = 2 * 1024 * 1024;

/// The codec both sides use: a 4-byte big-endian length, then the payload.
pub(crate) fn codec() -> LengthDelimitedCodec {
    LengthDelimitedCodec::builder()
        .max_frame_length(MAX_FRAME)
        .new_codec()
}

/// The first frame a client sends.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub(crate) struct Hello {
    pub version: u16,
    pub token: String,
}

/// The server's answer to [`Hello`].
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub(crate) enum Welcome {
    Accepted { version: u16, admin: bool },
    Rejected { reason: String },
}

/// A mode on the wire.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
pub(crate) enum WireMode {
    Read,
    Write,
}

impl From<LockMode> for WireMode {
    fn from(mode: LockMode) -> Self {
        match mode {
            LockMode::Read => WireMode::Read,
            LockMode::Write => WireMode::Write,
        }
    }
}

impl From<WireMode> for LockMode {
    fn from(mode: WireMode) -> Self {
        match mode {
            WireMode::Read => LockMode::Read,
            WireMode::Write => LockMode::Write,
        }
    }
}

/// [`LockArgs`] on the wire.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub(crate) struct WireArgs {
    pub uid: String,
    pub resources: Vec<String>,
    pub owner: String,
    pub source: String,
    pub quorum: u32,
}

impl From<&LockArgs> for WireArgs {
    fn from(args: &LockArgs) -> Self {
        WireArgs {
            uid: args.uid.to_string(),
            resources: args.resources.to_vec(),
            owner: args.owner.to_string(),
            source: args.source.to_string(),
            quorum: u32::try_from(args.quorum).unwrap_or(u32::MAX),
        }
    }
}

impl From<WireArgs> for LockArgs {
    fn from(args: WireArgs) -> Self {
        LockArgs {
            uid: args.uid.into(),
            resources: args.resources.into(),
            owner: args.owner.into(),
            source: args.source.into(),
            quorum: args.quorum as usize,
        }
    }
}

/// What a client asks for.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub(crate) enum Op {
    Lock(WireArgs),
    RLock(WireArgs),
    Unlock(WireArgs),
    RUnlock(WireArgs),
    Refresh(WireArgs, Option<WireMode>),
    ForceUnlock(WireArgs),
    List,
    Health,
}

/// One request; `id` pairs it with its response on a multiplexed connection.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub(crate) struct Request {
    pub id: u64,
    pub op: Op,
}

/// One entry of a listing; times are ages, since instants mean nothing on
/// another host.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub(crate) struct WireLockInfo {
    pub resource: String,
    pub uid: String,
    pub owner: String,
    pub source: String,
    pub mode: WireMode,
    pub age: Duration,
    pub since_refresh: Duration,
}

/// Why the server could not serve a request.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
pub(crate) enum ErrorKind {
    /// The request broke a limit or was malformed.
    InvalidArgument,
    /// The credential does not allow this operation.
    Forbidden,
    /// The server cannot serve it now (quarantine, overload).
    Unavailable,
}

/// The server's answer to one request.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub(crate) enum Reply {
    Bool(bool),
    Locks(Vec<WireLockInfo>),
    Health { quarantined: bool, entries: u64 },
    Error { kind: ErrorKind, message: String },
}

/// One response.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub(crate) struct Response {
    pub id: u64,
    pub reply: Reply,
}

impl Reply {
    /// The reply for a locker call's result.
    pub(crate) fn from_result(result: Result<bool, Error>) -> Reply {
        match result {
            Ok(granted) => Reply::Bool(granted),
            Err(Error::InvalidArgument(message)) => Reply::Error {
                kind: ErrorKind::InvalidArgument,
                message,
            },
            Err(err) => Reply::Error {
                kind: ErrorKind::Unavailable,
                message: err.to_string(),
            },
        }
    }

    /// The locker call's result for a reply, as the client reports it.
    pub(crate) fn into_result(self, endpoint: &str) -> Result<bool, Error> {
        match self {
            Reply::Bool(granted) => Ok(granted),
            Reply::Error {
                kind: ErrorKind::InvalidArgument,
                message,
            } => Err(Error::InvalidArgument(format!("{endpoint}: {message}"))),
            Reply::Error {
                kind: ErrorKind::Forbidden,
                message,
            } => Err(Error::Unauthorized {
                endpoint: endpoint.to_owned(),
                reason: message,
            }),
            Reply::Error { kind, message } => Err(Error::LockerUnavailable {
                endpoint: endpoint.to_owned(),
                reason: format!("{kind:?}: {message}"),
            }),
            other => Err(Error::LockerUnavailable {
                endpoint: endpoint.to_owned(),
                reason: format!("unexpected reply {other:?}"),
            }),
        }
    }
}

/// Encodes a message into a frame payload.
pub(crate) fn encode<T: Serialize>(message: &T) -> Result<Vec<u8>, Error> {
    postcard::to_stdvec(message)
        .map_err(|e| Error::InvalidArgument(format!("cannot encode message: {e}")))
}

/// Decodes a frame payload; malformed input is an error, never a panic.
pub(crate) fn decode<'a, T: Deserialize<'a>>(payload: &'a [u8]) -> Result<T, Error> {
    postcard::from_bytes(payload)
        .map_err(|e| Error::InvalidArgument(format!("malformed message: {e}")))
}
