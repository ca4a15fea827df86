//! The wire format's readers as each side runs them, for property tests
//! (feature `testing`; not part of the API): the length-prefixed framing
//! with the frame limit of the side that reads, then the decoding of each
//! payload. Also one valid encoding of every message variant, with field
//! values drawn from a seed, for the tests to mutate.
//!
//! What the tests hold these readers to: whatever the bytes, a reader
//! returns messages or an error that says what was wrong, never panics,
//! and allocates within its frame limit.

use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};
use tokio_util::codec::Decoder;

use super::wire::{
    self, ErrorKind, Hello, Op, Reply, Request, Response, Welcome, WireArgs, WireLockInfo,
    WireMode, WireProclamation, WirePushEvent, WireTicket, WireValue, WireWaitReply,
    MAX_HELLO_FRAME, MAX_OWNER_LEN, MAX_SOURCE_LEN, MAX_UID_LEN,
};
use super::{malformed, sniff};
use crate::{MAX_RESOURCES, MAX_RESOURCE_NAME_LEN, MAX_VALUE_LEN};

/// A kind of frame, with the side that reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Message {
    /// `Hello`, read by a server before the handshake.
    Hello,
    /// `Welcome`, read by a client during the handshake.
    Welcome,
    /// `Request`, read by a server after the handshake.
    Request,
    /// `Response`, read by a client after the handshake.
    Response,
}

impl Message {
    /// Every kind of frame.
    pub const ALL: [Message; 4] = [
        Message::Hello,
        Message::Welcome,
        Message::Request,
        Message::Response,
    ];

    /// The largest frame payload its reader accepts, in bytes.
    pub fn frame_limit(self) -> usize {
        match self {
            Message::Hello => MAX_HELLO_FRAME,
            _ => wire::MAX_FRAME,
        }
    }

    fn codec(self) -> tokio_util::codec::LengthDelimitedCodec {
        match self {
            Message::Hello => wire::hello_codec(),
            _ => wire::codec(),
        }
    }
}

/// A message a reader decoded.
#[derive(Debug, Clone)]
pub struct Decoded(Value);

#[derive(Debug, Clone)]
enum Value {
    Hello(Hello),
    Welcome(Welcome),
    Request(Request),
    Response(Response),
}

impl Decoded {
    /// The message as `Debug` shows it.
    pub fn shown(&self) -> String {
        match &self.0 {
            Value::Hello(m) => format!("{m:?}"),
            Value::Welcome(m) => format!("{m:?}"),
            Value::Request(m) => format!("{m:?}"),
            Value::Response(m) => format!("{m:?}"),
        }
    }

    /// The message encoded again, as its sender's encoder writes it.
    pub fn encoded(&self) -> Vec<u8> {
        let encoded = match &self.0 {
            Value::Hello(m) => wire::encode(m),
            Value::Welcome(m) => wire::encode(m),
            Value::Request(m) => wire::encode(m),
            Value::Response(m) => wire::encode(m),
        };
        encoded.unwrap_or_default()
    }

    /// Why the receiver refuses the message by id while keeping the
    /// connection: a field beyond a limit, which decodes empty.
    pub fn oversize(&self) -> Option<String> {
        match &self.0 {
            Value::Request(request) => {
                let (_, args) = op_variant(&request.op);
                let value = match &request.op {
                    Op::Proclaim { proclamation, .. } => proclamation.oversize(),
                    _ => None,
                };
                args.and_then(|a| a.oversize.clone()).or(value)
            }
            Value::Response(Response {
                reply: Reply::Leader(Some(p)),
                ..
            }) => p.oversize(),
            _ => None,
        }
    }

    /// The variant's name (`Lock`, `Rejected`, ...).
    pub fn variant(&self) -> &'static str {
        match &self.0 {
            Value::Hello(_) => "Hello",
            Value::Welcome(Welcome::Accepted { .. }) => "Accepted",
            Value::Welcome(Welcome::Rejected { .. }) => "Rejected",
            Value::Request(r) => op_variant(&r.op).0,
            Value::Response(r) => reply_variant(&r.reply),
        }
    }
}

/// Reads `bytes` as the whole stream a reader of `message` receives: every
/// frame decoded, or the first error, as the reader would report it
/// before closing the connection. A stream that ends inside a frame is an
/// error too.
pub fn read(message: Message, bytes: &[u8]) -> Result<Vec<Decoded>, String> {
    let mut codec = message.codec();
    let mut buf = BytesMut::from(bytes);
    let mut decoded = Vec::new();
    loop {
        match codec.decode_eof(&mut buf) {
            Ok(Some(frame)) => decoded.push(decode(message, &frame)?),
            Ok(None) => return Ok(decoded),
            Err(err) => return Err(malformed::bad_frame(&err, &buf, message.frame_limit())),
        }
    }
}

/// Decodes one payload (without its length prefix) as `message`.
pub fn decode(message: Message, payload: &[u8]) -> Result<Decoded, String> {
    let value = match message {
        Message::Hello => wire::decode(payload).map(Value::Hello),
        Message::Welcome => wire::decode(payload).map(Value::Welcome),
        Message::Request => wire::decode(payload).map(Value::Request),
        Message::Response => wire::decode(payload).map(Value::Response),
    };
    value.map(Decoded).map_err(|e| e.to_string())
}

/// What a client says about a server whose first answer it cannot decode,
/// and what a server logs about a client whose first bytes are no
/// handshake (`None` when they look like nothing in particular).
pub fn sniffed(first_bytes: &[u8]) -> (String, Option<String>) {
    (
        sniff::answer_from_server(first_bytes),
        sniff::client_that_sent(first_bytes),
    )
}

/// One valid payload of every variant of `message`, with field values
/// drawn from `seed`: empty, longest and one-past-the-limit fields,
/// varint boundaries, extreme numbers and durations, and text with
/// multi-byte and control characters. Every payload fits its frame limit.
pub fn samples(message: Message, seed: u64) -> Vec<Vec<u8>> {
    let mut g = Gen(SmallRng::seed_from_u64(seed));
    let encoded = match message {
        Message::Hello => vec![wire::encode(&Hello {
            version: g.version(),
            token: g.text(MAX_HELLO_FRAME - 16),
        })],
        Message::Welcome => vec![
            wire::encode(&Welcome::Accepted {
                version: g.version(),
                admin: g.0.random(),
                validity: g.duration(),
            }),
            wire::encode(&Welcome::Rejected {
                reason: g.text(1000),
            }),
        ],
        Message::Request => (0..OPS)
            .map(|variant| {
                wire::encode(&Request {
                    id: g.number(),
                    op: g.op(variant),
                })
            })
            .collect(),
        Message::Response => (0..REPLIES)
            .map(|variant| {
                wire::encode(&Response {
                    id: g.number(),
                    reply: g.reply(variant),
                })
            })
            .collect(),
    };
    encoded.into_iter().filter_map(Result::ok).collect()
}

/// The number of `Op` variants [`samples`] builds; the tests check that
/// the decoder knows no more.
const OPS: usize = 14;

/// The number of `Reply` variants [`samples`] builds.
const REPLIES: usize = 10;

/// The name of an operation and its lock arguments, if it has any. The
/// match has no catch-all, so a new operation fails to compile here until
/// it is named (and [`samples`] is told to build it).
fn op_variant(op: &Op) -> (&'static str, Option<&WireArgs>) {
    match op {
        Op::Lock(a) => ("Lock", Some(a)),
        Op::RLock(a) => ("RLock", Some(a)),
        Op::Unlock(a) => ("Unlock", Some(a)),
        Op::RUnlock(a) => ("RUnlock", Some(a)),
        Op::Refresh(a, _) => ("Refresh", Some(a)),
        Op::ForceUnlock(a) => ("ForceUnlock", Some(a)),
        Op::List => ("List", None),
        Op::Health => ("Health", None),
        Op::LockWait { args, .. } => ("LockWait", Some(args)),
        Op::Fence { args, .. } => ("Fence", Some(args)),
        Op::Status => ("Status", None),
        Op::Proclaim { args, .. } => ("Proclaim", Some(args)),
        Op::Leader { args, .. } => ("Leader", Some(args)),
        Op::ListPage { .. } => ("ListPage", None),
    }
}

/// The name of a reply; without a catch-all, as [`op_variant`].
fn reply_variant(reply: &Reply) -> &'static str {
    match reply {
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

/// Field values for the samples.
struct Gen(SmallRng);

impl Gen {
    /// Characters of one, two, three and four bytes, URL punctuation,
    /// and control characters.
    const CHARS: [char; 12] = [
        'a', 'Z', '7', '/', '@', ' ', 'é', '€', '𝄞', '\u{1b}', '\n', '\0',
    ];

    fn pick<T: Copy>(&mut self, options: &[T]) -> T {
        options[self.0.random_range(0..options.len())]
    }

    /// Text of 0 to 16 bytes, exactly `limit` bytes, or one byte more.
    fn text(&mut self, limit: usize) -> String {
        let target = match self.0.random_range(0..6u8) {
            0 => 0,
            1 => limit,
            2 => limit + 1,
            _ => self.0.random_range(1..=16.min(limit.max(1))),
        };
        let mut text = String::new();
        while text.len() < target.min(12) {
            let c = self.pick(&Self::CHARS);
            if text.len() + c.len_utf8() > target {
                break;
            }
            text.push(c);
        }
        while text.len() < target {
            text.push('x');
        }
        text
    }

    /// A number at a varint boundary, an extreme, or any.
    fn number(&mut self) -> u64 {
        match self.0.random_range(0..10u8) {
            0 => 0,
            1 => 1,
            2 => 127,
            3 => 128,
            4 => 16_384,
            5 => u64::from(u32::MAX),
            6 => u64::MAX,
            _ => self.0.random(),
        }
    }

    fn version(&mut self) -> u16 {
        match self.0.random_range(0..5u8) {
            0 => wire::MIN_PROTOCOL_VERSION,
            1 => wire::PROTOCOL_VERSION,
            2 => u16::MAX,
            _ => self.0.random(),
        }
    }

    fn duration(&mut self) -> Duration {
        match self.0.random_range(0..6u8) {
            0 => Duration::ZERO,
            1 => Duration::MAX,
            2 => Duration::new(self.0.random(), 999_999_999),
            _ => Duration::new(
                self.0.random_range(0..1_000_000),
                self.0.random_range(0..1_000_000_000),
            ),
        }
    }

    fn mode(&mut self) -> WireMode {
        self.pick(&[WireMode::Read, WireMode::Write])
    }

    fn args(&mut self) -> WireArgs {
        let count = match self.0.random_range(0..8u8) {
            0 => 0,
            1 => MAX_RESOURCES + 1,
            _ => self.0.random_range(1..4),
        };
        let resources: Vec<String> = (0..count)
            .map(|i| {
                if count > 4 {
                    format!("r{i}")
                } else {
                    self.text(MAX_RESOURCE_NAME_LEN)
                }
            })
            .collect();
        WireArgs {
            uid: self.text(MAX_UID_LEN).into(),
            resources: resources.into(),
            owner: self.text(MAX_OWNER_LEN).into(),
            source: self.text(MAX_SOURCE_LEN).into(),
            quorum: self.0.random(),
            oversize: None,
        }
    }

    fn proclamation(&mut self) -> WireProclamation {
        let len = match self.0.random_range(0..4u8) {
            0 => 0,
            1 => MAX_VALUE_LEN + 1,
            _ => self.0.random_range(1..64),
        };
        let bytes: Vec<u8> = (0..len).map(|_| self.0.random()).collect();
        WireProclamation {
            term: self.number(),
            seq: self.number(),
            value: WireValue::new(Arc::from(bytes)),
        }
    }

    fn op(&mut self, variant: usize) -> Op {
        match variant {
            0 => Op::Lock(self.args()),
            1 => Op::RLock(self.args()),
            2 => Op::Unlock(self.args()),
            3 => Op::RUnlock(self.args()),
            4 => {
                let mode = self.0.random::<bool>().then(|| self.mode());
                Op::Refresh(self.args(), mode)
            }
            5 => Op::ForceUnlock(self.args()),
            6 => Op::List,
            7 => Op::Health,
            8 => Op::LockWait {
                args: self.args(),
                mode: self.mode(),
                ticket: WireTicket {
                    at: self.number(),
                    tiebreak: self.number(),
                },
                place_ttl: self.duration(),
                push: self.0.random(),
            },
            9 => Op::Fence {
                args: self.args(),
                mode: self.mode(),
                floor: self.number(),
            },
            10 => Op::Status,
            11 => Op::Proclaim {
                args: self.args(),
                proclamation: self.proclamation(),
            },
            12 => Op::Leader {
                args: self.args(),
                watch: self.0.random::<bool>().then(|| self.duration()),
            },
            _ => Op::ListPage {
                after: self
                    .0
                    .random::<bool>()
                    .then(|| (self.text(MAX_RESOURCE_NAME_LEN), self.text(MAX_UID_LEN))),
            },
        }
    }

    /// An entry of a listing; `short` keeps its text fields to a few
    /// bytes, so that a long listing fits a frame.
    fn lock_info(&mut self, short: bool) -> WireLockInfo {
        let mut text = |limit: usize| self.text(if short { 8 } else { limit });
        WireLockInfo {
            resource: text(MAX_RESOURCE_NAME_LEN),
            uid: text(MAX_UID_LEN),
            owner: text(MAX_OWNER_LEN),
            source: text(MAX_SOURCE_LEN),
            mode: self.mode(),
            age: self.duration(),
            since_refresh: self.duration(),
        }
    }

    fn reply(&mut self, variant: usize) -> Reply {
        match variant {
            0 => Reply::Bool(self.0.random()),
            1 => {
                let count = match self.0.random_range(0..6u8) {
                    0 => 0,
                    1 => 2000,
                    _ => self.0.random_range(1..5),
                };
                Reply::Locks((0..count).map(|_| self.lock_info(count > 4)).collect())
            }
            2 => Reply::Health {
                quarantined: self.0.random(),
                entries: self.number(),
            },
            3 => Reply::Error {
                kind: self.pick(&[
                    ErrorKind::InvalidArgument,
                    ErrorKind::Forbidden,
                    ErrorKind::Unavailable,
                ]),
                message: self.text(1000),
            },
            4 => Reply::Wait(self.pick(&[
                WireWaitReply::Granted,
                WireWaitReply::Queued,
                WireWaitReply::Refused,
            ])),
            5 => Reply::Fence(self.0.random::<bool>().then(|| self.number())),
            6 => Reply::Push {
                uid: self.text(MAX_UID_LEN),
                event: self.pick(&[
                    WirePushEvent::Granted,
                    WirePushEvent::Wounded,
                    WirePushEvent::Changed,
                ]),
            },
            7 => Reply::Status {
                quarantine_left: self.0.random::<bool>().then(|| self.duration()),
                entries: self.number(),
            },
            8 => Reply::Leader(self.0.random::<bool>().then(|| self.proclamation())),
            _ => {
                let count = self.0.random_range(0..5);
                Reply::LocksPage {
                    entries: (0..count).map(|_| self.lock_info(false)).collect(),
                    more: self.0.random(),
                }
            }
        }
    }
}
