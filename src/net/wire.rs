//! The messages of the lock protocol and their encoding: postcard-encoded
//! values inside length-prefixed frames. PROTOCOL.md is the specification.

use std::sync::Arc;
use std::time::Duration;

use bytes::{BufMut, BytesMut};
use serde::de::{self, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize};
use tokio_util::codec::LengthDelimitedCodec;

use crate::locker::escape_peer_text;
use crate::locker::wait::{PushEvent, Ticket, WaitReply};
use crate::{Error, LockArgs, LockMode, Proclamation};
use crate::{MAX_RESOURCES, MAX_RESOURCE_NAME_LEN, MAX_VALUE_LEN};

/// The newest protocol version this build speaks, and the one a client
/// offers first.
///
/// Version 2 added the server's lock validity to `Welcome::Accepted`;
/// version 3 added waiting in line with pushed wake-ups and fencing tokens;
/// version 4 added `Status`, which also tells how long a quarantine has
/// left; version 5 added leader election (`Proclaim`, `Leader` with watches
/// and the `Changed` push). A server of this build also accepts clients of
/// versions 2 to 4, and a client falls back to the newest older version a
/// server names when it rejects the client's (PROTOCOL.md, "Versioning").
pub const PROTOCOL_VERSION: u16 = 5;

/// The oldest protocol version this build speaks, as a server and as a
/// client.
pub const MIN_PROTOCOL_VERSION: u16 = 2;

/// The first version with waiting in line, pushes and fencing tokens.
pub(crate) const V3: u16 = 3;

/// The first version with `Status`.
pub(crate) const V4: u16 = 4;

/// The first version with leader election: `Proclaim`, `Leader` and the
/// `Changed` push.
pub(crate) const V5: u16 = 5;

/// Whether this build speaks `version`.
pub(crate) fn speaks(version: u16) -> bool {
    (MIN_PROTOCOL_VERSION..=PROTOCOL_VERSION).contains(&version)
}

/// The reason a server gives for a version it does not speak. Clients
/// parse it (see [`fallback_version`]), and older servers gave the same
/// shape ("speaks 2", "speaks 2 and 3"): keep its prefix and the "this
/// server speaks" part as they are.
pub(crate) fn unsupported_version(version: u16) -> String {
    let spoken: Vec<String> = (MIN_PROTOCOL_VERSION..=PROTOCOL_VERSION)
        .map(|v| v.to_string())
        .collect();
    let spoken = match spoken.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} and {last}", rest.join(", ")),
        _ => spoken.join(""),
    };
    format!("protocol version {version} is not supported; this server speaks {spoken}")
}

/// How the reason of a `Rejected` starts when the server turned the
/// connection away for want of room, not for its token: the client token's
/// connections are all in use, or the peer's address holds its share.
/// Clients treat such a rejection as the server being unavailable for now
/// and try again; any other rejection of a known version is final.
pub(crate) const BUSY: &str = "server busy: ";

/// Whether a `Rejected` reason says the server is busy ([`BUSY`]).
pub(crate) fn is_busy(reason: &str) -> bool {
    reason.starts_with(BUSY)
}

/// The version to try next after a server rejected our `Hello` of version
/// `offered` with `reason`: the newest version below `offered` that the
/// reason lists after "this server speaks" and this build speaks too.
/// `None` when the rejection was not about the version.
pub(crate) fn fallback_version(reason: &str, offered: u16) -> Option<u16> {
    if !reason.starts_with("protocol version ") {
        return None;
    }
    let (_, spoken) = reason.split_once("this server speaks ")?;
    spoken
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|v| v.parse::<u16>().ok())
        .filter(|v| *v < offered && speaks(*v))
        .max()
}

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
///
/// The fields are shared, as in [`LockArgs`]: a client sends a call's
/// arguments without copying them, and a server copies each field out of
/// the frame once.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub(crate) struct WireArgs {
    pub uid: Arc<str>,
    pub resources: Arc<[String]>,
    pub owner: Arc<str>,
    pub source: Arc<str>,
    pub quorum: u32,
    /// Why the arguments break a limit; never on the wire.
    #[serde(skip)]
    pub oversize: Option<String>,
}

impl From<&LockArgs> for WireArgs {
    fn from(args: &LockArgs) -> Self {
        WireArgs {
            uid: args.uid.clone(),
            resources: args.resources.clone(),
            owner: args.owner.clone(),
            source: args.source.clone(),
            quorum: u32::try_from(args.quorum).unwrap_or(u32::MAX),
            oversize: None,
        }
    }
}

impl From<WireArgs> for LockArgs {
    fn from(args: WireArgs) -> Self {
        LockArgs {
            uid: args.uid,
            resources: args.resources,
            owner: args.owner,
            source: args.source,
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
            Names::Within(names) => args.resources = names.into(),
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

/// `value` as a shared string when it is within `limit`; otherwise empty,
/// with the first broken limit noted in `oversize`.
fn bounded(what: &str, value: &str, limit: usize, oversize: &mut Option<String>) -> Arc<str> {
    if value.len() <= limit {
        return value.into();
    }
    oversize.get_or_insert_with(|| {
        format!(
            "{what} of {} bytes; at most {limit} are allowed",
            value.len()
        )
    });
    Arc::default()
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

/// A leader's value on the wire: bytes, copied out of the frame only when
/// they are within [`MAX_VALUE_LEN`]. A longer value still decodes, empty,
/// with `oversize` set to its length, so that the server can refuse the
/// request by id and keep the connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct WireValue {
    pub bytes: Arc<[u8]>,
    /// The length of a value over the limit; never on the wire.
    pub oversize: Option<usize>,
}

impl WireValue {
    pub(crate) fn new(bytes: Arc<[u8]>) -> Self {
        WireValue {
            bytes,
            oversize: None,
        }
    }
}

impl Serialize for WireValue {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_bytes(&self.bytes)
    }
}

impl<'de> Deserialize<'de> for WireValue {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_bytes(ValueVisitor)
    }
}

struct ValueVisitor;

impl<'de> Visitor<'de> for ValueVisitor {
    type Value = WireValue;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a leader value")
    }

    fn visit_borrowed_bytes<E: de::Error>(self, v: &'de [u8]) -> Result<WireValue, E> {
        self.visit_bytes(v)
    }

    fn visit_bytes<E: de::Error>(self, v: &[u8]) -> Result<WireValue, E> {
        Ok(if v.len() > MAX_VALUE_LEN {
            WireValue {
                bytes: Arc::from(&[][..]),
                oversize: Some(v.len()),
            }
        } else {
            WireValue::new(Arc::from(v))
        })
    }
}

/// A [`Proclamation`] on the wire.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub(crate) struct WireProclamation {
    pub term: u64,
    pub seq: u64,
    pub value: WireValue,
}

impl From<&Proclamation> for WireProclamation {
    fn from(p: &Proclamation) -> Self {
        WireProclamation {
            term: p.term,
            seq: p.seq,
            value: WireValue::new(p.value.clone()),
        }
    }
}

impl WireProclamation {
    /// Why the value breaks the limit, if it does.
    pub(crate) fn oversize(&self) -> Option<String> {
        self.value.oversize.map(|len| {
            format!("a leader value of {len} bytes; at most {MAX_VALUE_LEN} are allowed")
        })
    }

    /// The proclamation, or [`Error::InvalidArgument`] when its value was
    /// over the limit.
    pub(crate) fn into_proclamation(self) -> Result<Proclamation, Error> {
        if let Some(reason) = self.oversize() {
            return Err(Error::InvalidArgument(reason));
        }
        Ok(Proclamation {
            term: self.term,
            seq: self.seq,
            value: self.value.bytes,
        })
    }
}

/// A [`Ticket`] on the wire.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
pub(crate) struct WireTicket {
    pub at: u64,
    pub tiebreak: u64,
}

impl From<Ticket> for WireTicket {
    fn from(t: Ticket) -> Self {
        WireTicket {
            at: t.at,
            tiebreak: t.tiebreak,
        }
    }
}

impl From<WireTicket> for Ticket {
    fn from(t: WireTicket) -> Self {
        Ticket {
            at: t.at,
            tiebreak: t.tiebreak,
        }
    }
}

/// A [`WaitReply`] on the wire.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
pub(crate) enum WireWaitReply {
    Granted,
    Queued,
    Refused,
}

impl From<WaitReply> for WireWaitReply {
    fn from(r: WaitReply) -> Self {
        match r {
            WaitReply::Granted => WireWaitReply::Granted,
            WaitReply::Queued => WireWaitReply::Queued,
            WaitReply::Refused => WireWaitReply::Refused,
        }
    }
}

impl From<WireWaitReply> for WaitReply {
    fn from(r: WireWaitReply) -> Self {
        match r {
            WireWaitReply::Granted => WaitReply::Granted,
            WireWaitReply::Queued => WaitReply::Queued,
            WireWaitReply::Refused => WaitReply::Refused,
        }
    }
}

/// A [`PushEvent`] on the wire.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
pub(crate) enum WirePushEvent {
    Granted,
    Wounded,
    /// Version 5: the leader a watch looks at may have changed.
    Changed,
}

impl From<PushEvent> for WirePushEvent {
    fn from(e: PushEvent) -> Self {
        match e {
            PushEvent::Granted => WirePushEvent::Granted,
            PushEvent::Wounded => WirePushEvent::Wounded,
            PushEvent::Changed => WirePushEvent::Changed,
        }
    }
}

impl From<WirePushEvent> for PushEvent {
    fn from(e: WirePushEvent) -> Self {
        match e {
            WirePushEvent::Granted => PushEvent::Granted,
            WirePushEvent::Wounded => PushEvent::Wounded,
            WirePushEvent::Changed => PushEvent::Changed,
        }
    }
}

/// What a client asks for. New operations are appended, so that the
/// variant indexes of older versions stay.
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
    /// Version 3: a lock that waits in line. `push` asks the server to push
    /// the grant; without it the place is a reservation only.
    LockWait {
        args: WireArgs,
        mode: WireMode,
        ticket: WireTicket,
        place_ttl: Duration,
        push: bool,
    },
    /// Version 3: a fencing token for the lock `args.uid` holds in `mode`,
    /// at least `floor`.
    Fence {
        args: WireArgs,
        mode: WireMode,
        floor: u64,
    },
    /// Version 4: `Health`, with how long the quarantine has left.
    Status,
    /// Version 5: store `proclamation` with the exclusive entry `args.uid`
    /// holds on the one resource of `args`. Answered with `Bool`.
    Proclaim {
        args: WireArgs,
        proclamation: WireProclamation,
    },
    /// Version 5: the proclamation of the live exclusive entry on the one
    /// resource of `args`. With `watch`, the server also keeps a watch for
    /// `args.uid` for that long (at most 60 s and the server's validity)
    /// and pushes `Changed` to it once the answer may have changed.
    /// Answered with `Leader`.
    Leader {
        args: WireArgs,
        watch: Option<Duration>,
    },
}

impl Op {
    /// The first protocol version with this operation.
    pub(crate) fn since(&self) -> u16 {
        match self {
            Op::LockWait { .. } | Op::Fence { .. } => V3,
            Op::Status => V4,
            Op::Proclaim { .. } | Op::Leader { .. } => V5,
            _ => MIN_PROTOCOL_VERSION,
        }
    }
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

/// The server's answer to one request, or (with id 0) a message that
/// answers none. New variants are appended, so that the variant indexes of
/// older versions stay.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub(crate) enum Reply {
    Bool(bool),
    Locks(Vec<WireLockInfo>),
    Health {
        quarantined: bool,
        entries: u64,
    },
    Error {
        kind: ErrorKind,
        message: String,
    },
    /// Version 3: the answer to [`Op::LockWait`].
    Wait(WireWaitReply),
    /// Version 3: the answer to [`Op::Fence`].
    Fence(Option<u64>),
    /// Version 3, always with id 0: the server granted or wounded the wait
    /// of `uid`, without being asked; from version 5 also that the leader
    /// a watch of `uid` looks at may have changed (`Changed`).
    Push {
        uid: String,
        event: WirePushEvent,
    },
    /// Version 4: the answer to [`Op::Status`]. `quarantine_left` is how
    /// long the server still refuses new grants after its start; `None`
    /// when it grants.
    Status {
        quarantine_left: Option<Duration>,
        entries: u64,
    },
    /// Version 5: the answer to [`Op::Leader`].
    Leader(Option<WireProclamation>),
}

/// One message from the server: the response to request `id`, or, with
/// [`UNSOLICITED`], an error about an unreadable frame or a push.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub(crate) struct Response {
    pub id: u64,
    pub reply: Reply,
}

/// The id of server messages that answer no request. Request ids start at
/// 1, so it never pairs with a request.
pub(crate) const UNSOLICITED: u64 = 0;

impl Reply {
    /// The reply for a locker call's result.
    pub(crate) fn from_result(result: Result<bool, Error>) -> Reply {
        match result {
            Ok(granted) => Reply::Bool(granted),
            Err(err) => Reply::from_error(err),
        }
    }

    /// The reply for a locker call that failed.
    pub(crate) fn from_error(err: Error) -> Reply {
        match err {
            Error::InvalidArgument(message) => Reply::Error {
                kind: ErrorKind::InvalidArgument,
                message,
            },
            err => Reply::Error {
                kind: ErrorKind::Unavailable,
                message: err.to_string(),
            },
        }
    }

    /// The locker call's result for a reply, as the client reports it.
    pub(crate) fn into_result(self, endpoint: &str) -> Result<bool, Error> {
        match self {
            Reply::Bool(granted) => Ok(granted),
            other => Err(other.into_error(endpoint)),
        }
    }

    /// The error a reply stands for when it is not the answer the call
    /// expected: the server's error, or an unexpected reply. The server's
    /// words are escaped ([`escape_peer_text`]): a hostile server's reason
    /// must not drive the terminal of whoever reads the error or the log.
    pub(crate) fn into_error(self, endpoint: &str) -> Error {
        match self {
            Reply::Error {
                kind: ErrorKind::InvalidArgument,
                message,
            } => Error::InvalidArgument(format!("{endpoint}: {}", escape_peer_text(&message))),
            Reply::Error {
                kind: ErrorKind::Forbidden,
                message,
            } => Error::Unauthorized {
                endpoint: endpoint.to_owned(),
                reason: escape_peer_text(&message),
            },
            Reply::Error { kind, message } => Error::LockerUnavailable {
                endpoint: endpoint.to_owned(),
                reason: format!("{kind:?}: {}", escape_peer_text(&message)),
            },
            other => Error::LockerUnavailable {
                endpoint: endpoint.to_owned(),
                reason: format!("unexpected reply {other:?}"),
            },
        }
    }
}

/// Encodes a message into a frame payload.
pub(crate) fn encode<T: Serialize>(message: &T) -> Result<Vec<u8>, Error> {
    postcard::to_stdvec(message)
        .map_err(|e| Error::InvalidArgument(format!("cannot encode message: {e}")))
}

/// Appends `message` to `buf` as one frame, as [`codec`] would write it: a
/// 4-byte big-endian length, then the payload. Callers encode straight into
/// the buffer their connection writes from, so a frame costs no allocation
/// of its own. On error `buf` is left as it was.
pub(crate) fn encode_frame<T: Serialize>(message: &T, buf: &mut BytesMut) -> Result<(), Error> {
    let start = buf.len();
    buf.put_u32(0);
    let written = postcard::serialize_with_flavor(message, Appender(buf))
        .map_err(|e| format!("cannot encode message: {e}"))
        .and_then(|()| {
            let len = buf.len() - start - 4;
            if len > MAX_FRAME {
                return Err(format!(
                    "a message of {len} bytes is over the frame limit of {MAX_FRAME}"
                ));
            }
            u32::try_from(len).map_err(|_| format!("a message of {len} bytes"))
        });
    match written {
        Ok(len) => {
            buf[start..start + 4].copy_from_slice(&len.to_be_bytes());
            Ok(())
        }
        Err(reason) => {
            buf.truncate(start);
            Err(Error::InvalidArgument(reason))
        }
    }
}

/// A postcard output that appends to a borrowed buffer.
struct Appender<'a>(&'a mut BytesMut);

impl postcard::ser_flavors::Flavor for Appender<'_> {
    type Output = ();

    fn try_extend(&mut self, data: &[u8]) -> postcard::Result<()> {
        self.0.extend_from_slice(data);
        Ok(())
    }

    fn try_push(&mut self, data: u8) -> postcard::Result<()> {
        self.0.put_u8(data);
        Ok(())
    }

    fn finalize(self) -> postcard::Result<()> {
        Ok(())
    }
}

/// Decodes a frame payload as one whole message; malformed input is an
/// error that says what was wrong (see [`super::malformed`]), never a
/// panic.
pub(crate) fn decode<'a, T: Deserialize<'a>>(payload: &'a [u8]) -> Result<T, Error> {
    let mut deserializer = postcard::Deserializer::from_bytes(payload);
    let decoded = T::deserialize(&mut deserializer);
    // A slice's remainder is always there, even after an error.
    let left = deserializer.finalize().map_or(0, <[u8]>::len);
    super::malformed::whole(decoded, payload.len(), left)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_version_2_rejection_leads_to_version_2() {
        // The exact reason a version-2 server gives.
        let v2 = "protocol version 3 is not supported; this server speaks 2";
        assert_eq!(fallback_version(v2, 3), Some(2));
        // Ours, as a future client would read it.
        // The exact reason a version-3 server gives.
        let v3 = "protocol version 4 is not supported; this server speaks 2 and 3";
        assert_eq!(fallback_version(v3, 4), Some(3));
        // The exact reason a version-4 server gives.
        let v4 = "protocol version 5 is not supported; this server speaks 2, 3 and 4";
        assert_eq!(fallback_version(v4, 5), Some(4));
        // Ours, as a future client would read it.
        assert_eq!(
            unsupported_version(6),
            "protocol version 6 is not supported; this server speaks 2, 3, 4 and 5"
        );
        assert_eq!(fallback_version(&unsupported_version(6), 6), Some(5));
        assert_eq!(fallback_version(&unsupported_version(9), 4), Some(3));
        assert_eq!(fallback_version(&unsupported_version(9), 3), Some(2));
        // Never upwards, never to a version this build does not speak,
        // never for another reason.
        assert_eq!(fallback_version(v2, 2), None);
        assert_eq!(
            fallback_version(
                "protocol version 3 is not supported; this server speaks 1",
                3
            ),
            None
        );
        assert_eq!(fallback_version("invalid token", 3), None);
        assert!(unsupported_version(99).starts_with("protocol version 99 is not supported"));
    }

    #[test]
    fn version_3_messages_round_trip_and_keep_the_old_indexes() {
        let args = WireArgs {
            uid: "u".into(),
            resources: vec!["r".to_owned()].into(),
            owner: "o".into(),
            source: "s".into(),
            quorum: 2,
            oversize: None,
        };
        let wait = Request {
            id: 7,
            op: Op::LockWait {
                args: args.clone(),
                mode: WireMode::Write,
                ticket: WireTicket { at: 5, tiebreak: 6 },
                place_ttl: Duration::from_millis(1500),
                push: true,
            },
        };
        let bytes = encode(&wait).unwrap();
        // id, then the variant index after the eight of version 2.
        assert_eq!(&bytes[..2], &[7, 8]);
        assert_eq!(decode::<Request>(&bytes).unwrap(), wait);
        let fence = Request {
            id: 1,
            op: Op::Fence {
                args,
                mode: WireMode::Read,
                floor: 300,
            },
        };
        let bytes = encode(&fence).unwrap();
        assert_eq!(&bytes[..2], &[1, 9]);
        assert_eq!(decode::<Request>(&bytes).unwrap(), fence);
        let push = Response {
            id: UNSOLICITED,
            reply: Reply::Push {
                uid: "ab".into(),
                event: WirePushEvent::Wounded,
            },
        };
        assert_eq!(encode(&push).unwrap(), [0, 6, 2, b'a', b'b', 1]);
        let queued = Response {
            id: 3,
            reply: Reply::Wait(WireWaitReply::Queued),
        };
        assert_eq!(encode(&queued).unwrap(), [3, 4, 1]);
        let token = Response {
            id: 3,
            reply: Reply::Fence(Some(2)),
        };
        assert_eq!(encode(&token).unwrap(), [3, 5, 1, 2]);
        assert_eq!(Op::Health.since(), 2);
        assert_eq!(fence.op.since(), 3);
    }

    #[test]
    fn version_4_messages_round_trip_and_keep_the_old_indexes() {
        let status = Request {
            id: 2,
            op: Op::Status,
        };
        // id, then the variant index after the ten of versions 2 and 3.
        assert_eq!(encode(&status).unwrap(), [2, 10]);
        assert_eq!(Op::Status.since(), 4);
        let quarantined = Response {
            id: 2,
            reply: Reply::Status {
                quarantine_left: Some(Duration::new(41, 5)),
                entries: 3,
            },
        };
        // The variant index after the seven of versions 2 and 3, then
        // `Some`, seconds, nanoseconds, entries.
        let bytes = encode(&quarantined).unwrap();
        assert_eq!(bytes, [2, 7, 1, 41, 5, 3]);
        assert_eq!(decode::<Response>(&bytes).unwrap(), quarantined);
        let granting = Response {
            id: 2,
            reply: Reply::Status {
                quarantine_left: None,
                entries: 0,
            },
        };
        assert_eq!(encode(&granting).unwrap(), [2, 7, 0, 0]);
    }

    #[test]
    fn version_5_messages_round_trip_and_keep_the_old_indexes() {
        let args = WireArgs {
            uid: "u".into(),
            resources: vec!["e".to_owned()].into(),
            owner: "o".into(),
            source: "s".into(),
            quorum: 2,
            oversize: None,
        };
        let p = Proclamation::new(7, 1, &b"ab"[..]).unwrap();
        let proclaim = Request {
            id: 3,
            op: Op::Proclaim {
                args: args.clone(),
                proclamation: WireProclamation::from(&p),
            },
        };
        let bytes = encode(&proclaim).unwrap();
        // id, then the variant index after the eleven of versions 2 to 4.
        assert_eq!(&bytes[..2], &[3, 11]);
        // ... the arguments, then term, seq and the value's length and bytes.
        assert!(bytes.ends_with(&[7, 1, 2, b'a', b'b']));
        assert_eq!(decode::<Request>(&bytes).unwrap(), proclaim);
        assert_eq!(proclaim.op.since(), 5);
        let leader = Request {
            id: 4,
            op: Op::Leader {
                args,
                watch: Some(Duration::from_secs(3)),
            },
        };
        let bytes = encode(&leader).unwrap();
        assert_eq!(&bytes[..2], &[4, 12]);
        assert!(bytes.ends_with(&[1, 3, 0]));
        assert_eq!(decode::<Request>(&bytes).unwrap(), leader);
        assert_eq!(leader.op.since(), 5);
        // The variant index after the eight replies of versions 2 to 4.
        let found = Response {
            id: 4,
            reply: Reply::Leader(Some(WireProclamation::from(&p))),
        };
        let bytes = encode(&found).unwrap();
        assert_eq!(bytes, [4, 8, 1, 7, 1, 2, b'a', b'b']);
        assert_eq!(decode::<Response>(&bytes).unwrap(), found);
        assert_eq!(
            encode(&Response {
                id: 4,
                reply: Reply::Leader(None)
            })
            .unwrap(),
            [4, 8, 0]
        );
        let changed = Response {
            id: UNSOLICITED,
            reply: Reply::Push {
                uid: "ab".into(),
                event: WirePushEvent::Changed,
            },
        };
        assert_eq!(encode(&changed).unwrap(), [0, 6, 2, b'a', b'b', 2]);
    }

    #[test]
    fn an_oversized_value_decodes_empty_and_marked() {
        let long = vec![7u8; MAX_VALUE_LEN + 1];
        let p = Proclamation {
            term: 1,
            seq: 0,
            value: long.into(),
        };
        let bytes = encode(&WireProclamation::from(&p)).unwrap();
        let decoded: WireProclamation = decode(&bytes).unwrap();
        assert_eq!(decoded.value.oversize, Some(MAX_VALUE_LEN + 1));
        assert!(decoded.value.bytes.is_empty());
        let err = decoded.into_proclamation().unwrap_err();
        assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
        let fits = Proclamation::new(1, 0, vec![1u8; MAX_VALUE_LEN]).unwrap();
        let bytes = encode(&WireProclamation::from(&fits)).unwrap();
        let decoded: WireProclamation = decode(&bytes).unwrap();
        assert_eq!(decoded.into_proclamation().unwrap(), fits);
    }
}
