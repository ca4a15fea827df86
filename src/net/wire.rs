//! The messages of the lock protocol and their encoding: postcard-encoded
//! values inside length-prefixed frames. PROTOCOL.md is the specification.

use std::sync::Arc;
use std::time::Duration;

use bytes::{BufMut, BytesMut};
use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer, Serialize};
use tokio_util::codec::LengthDelimitedCodec;

use crate::locker::escape_peer_text;
use crate::locker::wait::{PushEvent, Ticket, WaitReply};
use crate::MAX_VALUE_LEN;
use crate::{Error, LockArgs, LockMode, Proclamation};
mod args;
#[cfg(test)]
mod tests;

/// The newest protocol version this build speaks, and the one a client
/// offers first.
///
/// Version 2 added the server's lock validity to `Welcome::Accepted`;
/// version 3 added waiting in line with pushed wake-ups and fencing tokens;
/// version 4 added `Status`, which also tells how long a quarantine has
/// left; version 5 added leader election (`Proclaim`, `Leader` with watches
/// and the `Changed` push); version 6 added listings in pages
/// (`ListPage`). A server of this build also accepts clients of
/// versions 2 to 5, and a client falls back to the newest older version a
/// server names when it rejects the client's (PROTOCOL.md, "Versioning").
pub const PROTOCOL_VERSION: u16 = 6;

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

/// The first version with listings in pages: `ListPage`.
pub(crate) const V6: u16 = 6;

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

/// The reason a server gives for a token it does not know: the only
/// rejection that is about the token (others are about the version, room,
/// or a handshake that came late, in part, or malformed).
pub(crate) const INVALID_TOKEN: &str = "invalid token";

/// Whether a `Rejected` reason says the token is not one the server takes.
pub(crate) fn is_token_rejection(reason: &str) -> bool {
    reason.starts_with(INVALID_TOKEN)
}

/// The longest token a client can present: a `Hello` holds its version and
/// the token's length (up to 3 bytes each) and must fit in
/// [`MAX_HELLO_FRAME`].
pub const MAX_TOKEN_LEN: usize = MAX_HELLO_FRAME - 8;

/// Whether a `Rejected` reason turns the offered version away (the shape
/// [`fallback_version`] reads), whether or not it names one to try next.
pub(crate) fn is_version_rejection(reason: &str) -> bool {
    reason.starts_with("protocol version ") && reason.contains("this server speaks ")
}

/// The version to try next after a server rejected our `Hello` of version
/// `offered` with `reason`: the newest version below `offered` that the
/// reason lists after "this server speaks" and this build speaks too.
/// `None` when the rejection was not about the version.
pub(crate) fn fallback_version(reason: &str, offered: u16) -> Option<u16> {
    versions_named(reason)
        .filter(|v| *v < offered && speaks(*v))
        .max()
}

/// The versions a `Rejected` reason lists after "this server speaks": every
/// number there, however the list is written ("2, 3 and 4", "(2, 3 and
/// 4)", "2 3 4"). Digits of other text (an escaped control character) read
/// as versions too; that can only come from a server that could as well
/// name any version outright, and [`fallback_version`] offers only one this
/// build speaks, below the one offered.
pub(crate) fn versions_named(reason: &str) -> impl Iterator<Item = u16> + '_ {
    let spoken = reason
        .strip_prefix("protocol version ")
        .and_then(|rest| rest.split_once("this server speaks "))
        .map_or("", |(_, spoken)| spoken);
    spoken
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|v| v.parse::<u16>().ok())
}

/// Largest frame either side accepts, in bytes. A request at the resource
/// limits (1000 names of 1 KiB) fits with room to spare.
pub const MAX_FRAME: usize = 2 * 1024 * 1024;

/// Largest frame a server reads before the handshake succeeded. A `Hello`
/// is a version and a token, so an unauthenticated peer has no reason to
/// send more, and may not make the server buffer more.
pub const MAX_HELLO_FRAME: usize = 4 * 1024;

pub use crate::locker::args::{MAX_OWNER_LEN, MAX_SOURCE_LEN, MAX_UID_LEN};

/// What a page of a listing holds, by the entries' listed size (their text
/// and 48 bytes each): a server fills each page to this, and a page that
/// says more entries follow holds at least [`LISTING_PAGE_FULL`].
pub(crate) const LISTING_PAGE: usize = MAX_FRAME / 2;

/// The least a page that says more entries follow holds: what
/// [`LISTING_PAGE`] less the largest entry leaves, rounded down to half.
pub(crate) const LISTING_PAGE_FULL: usize = LISTING_PAGE / 2;

/// The most entries one listing reply carries: a server cuts its pages
/// (and a whole listing for a client before version 6) at this many, and
/// a client refuses a reply with more, so that decoding one keeps at most
/// about a MiB beside what its text takes.
pub(crate) const LISTING_ENTRIES: usize = 4096;

/// Decodes the entries of a listing reply, refusing more than
/// [`LISTING_ENTRIES`] before making room for them.
fn listing_entries<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<WireLockInfo>, D::Error> {
    struct Entries;
    impl<'de> Visitor<'de> for Entries {
        type Value = Vec<WireLockInfo>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "at most {LISTING_ENTRIES} listing entries")
        }
        fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            let over = |n: usize| {
                de::Error::custom(format!(
                    "a listing reply of {n} entries or more; at most {LISTING_ENTRIES} are allowed"
                ))
            };
            let hint = seq.size_hint().unwrap_or(0);
            if hint > LISTING_ENTRIES {
                return Err(over(hint));
            }
            let mut out = Vec::with_capacity(hint.min(256));
            while let Some(entry) = seq.next_element()? {
                if out.len() == LISTING_ENTRIES {
                    return Err(over(LISTING_ENTRIES + 1));
                }
                out.push(entry);
            }
            Ok(out)
        }
    }
    d.deserialize_seq(Entries)
}

/// The most a client takes of one server's listing, by the entries'
/// listed size: 4 GiB, four times the lock table a server keeps by
/// default.
pub(crate) const MAX_LISTING: u64 = 4 << 30;

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
    /// Version 6: the next page of the listing, after the entry of
    /// `after` (a resource and a uid) in their order; the first page
    /// without it. Answered with `LocksPage`.
    ListPage {
        after: Option<(String, String)>,
    },
}

impl Op {
    /// The first protocol version with this operation.
    pub(crate) fn since(&self) -> u16 {
        match self {
            Op::LockWait { .. } | Op::Fence { .. } => V3,
            Op::Status => V4,
            Op::Proclaim { .. } | Op::Leader { .. } => V5,
            Op::ListPage { .. } => V6,
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
    Locks(#[serde(deserialize_with = "listing_entries")] Vec<WireLockInfo>),
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
    /// Version 6: the answer to [`Op::ListPage`]: entries in the order of
    /// (resource, uid); `more` when entries after the last did not fit.
    LocksPage {
        #[serde(deserialize_with = "listing_entries")]
        entries: Vec<WireLockInfo>,
        more: bool,
    },
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
    /// The kind of reply, for a message that must not show what it holds.
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            Reply::Bool(_) => "Bool",
            Reply::Locks(_) => "Locks",
            Reply::Health { .. } => "Health",
            Reply::Error { .. } => "Error",
            Reply::Wait(_) => "Wait",
            Reply::Fence(_) => "Fence",
            Reply::Push { .. } => "Push",
            Reply::Status { .. } => "Status",
            Reply::Leader(_) => "Leader",
            Reply::LocksPage { .. } => "LocksPage",
        }
    }

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
                // Its kind, not what it holds: a value's bytes would be
                // shown as numbers, which no masking of a secret catches.
                reason: format!("unexpected reply {}", other.kind()),
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
