//! The messages of the lock protocol and their encoding: postcard-encoded
//! values inside length-prefixed frames. PROTOCOL.md is the specification.

use std::time::Duration;

use serde::de::{self, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize};
use tokio_util::codec::LengthDelimitedCodec;

use crate::{Error, LockArgs, LockMode};
use crate::{MAX_RESOURCES, MAX_RESOURCE_NAME_LEN};

/// The protocol version this build speaks. A server refuses other versions
/// in the handshake.
///
/// Version 2 added the server's lock validity to `Welcome::Accepted`.
pub const PROTOCOL_VERSION: u16 = 2;

/// Largest frame either side accepts, in bytes. A request at the resource
/// limits (1000 names of 1 KiB) fits with room to spare.
pub const MAX_FRAME: usize = 2 * 1024 * 1024;

/// Largest frame a server reads before the handshake succeeded. A `Hello`
/// is a version and a token, so an unauthenticated peer has no reason to
/// send more, and may not make the server buffer more.
pub const MAX_HELLO_FRAME: usize = 4 * 1024;

/// Longest lock uid a server accepts, in bytes. Uids are UUID v4 strings
/// (36 bytes); the bound keeps every entry and every remembered release
/// small whatever a client sends.
pub const MAX_UID_LEN: usize = 128;

/// Longest owner a server accepts, in bytes: room for a host name of 253
/// bytes, a pid and some context.
pub const MAX_OWNER_LEN: usize = 512;

/// Longest source (the caller's `file:line:column`) a server accepts.
pub const MAX_SOURCE_LEN: usize = 512;

/// The codec both sides use: a 4-byte big-endian length, then the payload.
pub(crate) fn codec() -> LengthDelimitedCodec {
    LengthDelimitedCodec::builder()
        .max_frame_length(MAX_FRAME)
        .new_codec()
}

/// The codec a server reads the handshake with; it switches to
/// [`MAX_FRAME`] once the peer authenticated.
pub(crate) fn hello_codec() -> LengthDelimitedCodec {
    LengthDelimitedCodec::builder()
        .max_frame_length(MAX_HELLO_FRAME)
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
    /// `validity` is how long the server keeps an entry that is not
    /// refreshed, so that a client can refuse a lease the server would not
    /// honour.
    Accepted {
        version: u16,
        admin: bool,
        validity: Duration,
    },
    Rejected {
        reason: String,
    },
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
///
/// Decoding enforces the length limits while it reads: an over-long field
/// or resource list is not copied out of the frame, and `oversize` says
/// which limit it broke. The request still decodes, so the server can
/// answer it by id with an error and keep the connection.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub(crate) struct WireArgs {
    pub uid: String,
    pub resources: Vec<String>,
    pub owner: String,
    pub source: String,
    pub quorum: u32,
    /// Why the arguments break a limit; never on the wire.
    #[serde(skip)]
    pub oversize: Option<String>,
}

impl From<&LockArgs> for WireArgs {
    fn from(args: &LockArgs) -> Self {
        WireArgs {
            uid: args.uid.to_string(),
            resources: args.resources.to_vec(),
            owner: args.owner.to_string(),
            source: args.source.to_string(),
            quorum: u32::try_from(args.quorum).unwrap_or(u32::MAX),
            oversize: None,
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

impl<'de> Deserialize<'de> for WireArgs {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        const FIELDS: &[&str] = &["uid", "resources", "owner", "source", "quorum"];
        deserializer.deserialize_struct("WireArgs", FIELDS, ArgsVisitor)
    }
}

struct ArgsVisitor;

impl<'de> Visitor<'de> for ArgsVisitor {
    type Value = WireArgs;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("lock arguments")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<WireArgs, A::Error> {
        let mut args = WireArgs::default();
        let mut fields = FieldReader { seq: &mut seq };
        let uid = fields.string(0)?;
        let names: Names = fields.element(1)?;
        let owner = fields.string(2)?;
        let source = fields.string(3)?;
        args.quorum = fields.element(4)?;
        args.uid = bounded("uid", uid, MAX_UID_LEN, &mut args.oversize);
        args.owner = bounded("owner", owner, MAX_OWNER_LEN, &mut args.oversize);
        args.source = bounded("source", source, MAX_SOURCE_LEN, &mut args.oversize);
        match names {
            Names::Within(names) => args.resources = names,
            Names::Beyond(reason) => {
                args.oversize.get_or_insert(reason);
            }
        }
        Ok(args)
    }
}

/// Reads the fields of a sequence in order, failing on a short one.
struct FieldReader<'s, A> {
    seq: &'s mut A,
}

impl<'de, A: SeqAccess<'de>> FieldReader<'_, A> {
    fn element<T: Deserialize<'de>>(&mut self, index: usize) -> Result<T, A::Error> {
        self.seq
            .next_element()?
            .ok_or_else(|| de::Error::invalid_length(index, &"5 fields of lock arguments"))
    }

    /// A string borrowed from the frame: nothing is allocated before its
    /// length is checked.
    fn string(&mut self, index: usize) -> Result<&'de str, A::Error> {
        self.element::<Field<'de>>(index).map(|f| f.0)
    }
}

/// A string field borrowed from the frame being decoded.
struct Field<'de>(&'de str);

impl<'de> Deserialize<'de> for Field<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        <&'de str>::deserialize(deserializer).map(Field)
    }
}

/// `value` as an owned string when it is within `limit`; otherwise empty,
/// with the first broken limit noted in `oversize`.
fn bounded(what: &str, value: &str, limit: usize, oversize: &mut Option<String>) -> String {
    if value.len() <= limit {
        return value.to_owned();
    }
    oversize.get_or_insert_with(|| {
        format!(
            "{what} of {} bytes; at most {limit} are allowed",
            value.len()
        )
    });
    String::new()
}

/// A resource list, kept only when it is within the library's limits.
enum Names {
    Within(Vec<String>),
    Beyond(String),
}

impl<'de> Deserialize<'de> for Names {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_seq(NamesVisitor)
    }
}

struct NamesVisitor;

impl<'de> Visitor<'de> for NamesVisitor {
    type Value = Names;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a list of resource names")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Names, A::Error> {
        let hint = seq.size_hint().unwrap_or(0).min(MAX_RESOURCES);
        let mut names = Vec::with_capacity(hint);
        let mut count = 0usize;
        let mut beyond = None;
        // Every element is read, borrowed, so that the fields after the
        // list decode; only names within the limits are copied.
        while let Some(Field(name)) = seq.next_element::<Field<'de>>()? {
            count += 1;
            if beyond.is_some() {
                continue;
            }
            if name.len() > MAX_RESOURCE_NAME_LEN {
                beyond = Some(format!(
                    "resource name of {} bytes; at most {MAX_RESOURCE_NAME_LEN} are allowed",
                    name.len()
                ));
            } else if count > MAX_RESOURCES {
                // Release what was copied; the count is all that matters now.
                names = Vec::new();
            } else {
                names.push(name.to_owned());
            }
        }
        if count > MAX_RESOURCES {
            return Ok(Names::Beyond(format!(
                "{count} resources in one lock; at most {MAX_RESOURCES} are allowed, split the lock"
            )));
        }
        Ok(match beyond {
            Some(reason) => Names::Beyond(reason),
            None => Names::Within(names),
        })
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
