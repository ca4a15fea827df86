//! The JSON documents of `locks --output json` and `status --output json`.
//!
//! These shapes are an interface for scripts, documented in docs/cli.md:
//! fields may be added, but none is renamed, removed or changes its type
//! while `format` stays 1. Durations are whole milliseconds; a field that
//! is not known (a node that did not answer) is `null`, never left out.

use std::io;
use std::time::Duration;

use quorum_lock::LockMode;
use serde::Serialize;
use serde_json::ser::CharEscape;

use crate::fail::{Failure, FAILURE};
use crate::plan::Kind;
use crate::words::unsafe_char;

/// The version of the shapes below.
pub const FORMAT: u32 = 1;

/// `locks --output json`, both views.
#[derive(Serialize)]
pub struct Locks {
    pub format: u32,
    /// "lock-servers", "redis", "sql" (databases only) or "mixed".
    pub kind: &'static str,
    /// "merged" or "per-node".
    pub view: &'static str,
    /// How many nodes were given, how many answered, and how many must
    /// answer for the merged view (a write quorum).
    pub total: usize,
    pub answered: usize,
    pub quorum: usize,
    pub nodes: Vec<Node>,
    /// The merged view's locks; `null` in it when fewer than `quorum`
    /// answered. Left out of the per-node view, whose entries are under
    /// each node.
    #[serde(skip_serializing_if = "Field::is_absent")]
    pub locks: Field<Vec<Lock>>,
    /// With several groups in `--nodes` only: each group's counts (the
    /// ones above are summed over the groups). Left out for one group.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub groups: Option<Vec<GroupCounts>>,
}

/// One group of `locks` or `status`, when `--nodes` has several.
#[derive(Serialize)]
pub struct GroupCounts {
    pub group: String,
    pub total: usize,
    /// `locks`: how many answered; left out of `status`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub answered: Option<usize>,
    /// A write quorum of the group's nodes.
    pub quorum: usize,
    /// `locks`: whether its locks are in `locks` (a quorum answered).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub listed: Option<bool>,
    /// `status`: how many are healthy, and whether a quorum is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub healthy: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub quorum_healthy: Option<bool>,
}

/// One node of `locks`.
#[derive(Serialize)]
pub struct Node {
    /// The group of `--nodes` it is in, when there are several; left
    /// out for one group.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// `host:port`, or a database's `scheme://host:port/database`.
    pub node: String,
    /// "lock-server", "redis", "postgres" or "mysql" (MySQL and MariaDB).
    pub kind: &'static str,
    /// Whether there is a connection to it.
    pub reachable: bool,
    /// Whether it answered this command's call.
    pub answered: bool,
    /// Why it did not answer; `null` when it did.
    pub reason: Option<String>,
    /// The per-node view: its entries, `null` when it did not answer.
    /// Left out of the merged view.
    #[serde(skip_serializing_if = "Field::is_absent")]
    pub locks: Field<Vec<Entry>>,
}

/// One lock of the merged view: the entries of one uid on one resource.
#[derive(Serialize)]
pub struct Lock {
    /// The group of `--nodes` it is in, when there are several; left
    /// out for one group.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    pub resource: String,
    /// "read" or "write".
    pub mode: &'static str,
    pub owner: String,
    pub uid: String,
    pub source: String,
    /// Since the oldest of its entries was granted.
    pub age_ms: u64,
    /// The nodes that hold an entry for it, in the order given; fewer
    /// than the quorum means a leftover, not a held lock.
    pub held_on: Vec<String>,
}

/// One entry on one node.
#[derive(Serialize)]
pub struct Entry {
    pub resource: String,
    pub mode: &'static str,
    pub owner: String,
    pub uid: String,
    pub source: String,
    pub age_ms: u64,
    /// `status` only: since its holder last refreshed it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refreshed_ms_ago: Option<u64>,
}

/// `status --output json`, with or without `--health`.
#[derive(Serialize)]
pub struct Status {
    pub format: u32,
    pub kind: &'static str,
    /// "status" or "health".
    pub view: &'static str,
    /// When the snapshot was taken, RFC 3339 in UTC, whole seconds.
    pub time: String,
    pub total: usize,
    /// A write quorum: how many healthy nodes a write lock needs.
    pub quorum: usize,
    /// How many nodes answered and are out of quarantine.
    pub healthy: usize,
    /// `healthy >= quorum`: what `--health` exits 0 on.
    pub quorum_healthy: bool,
    pub nodes: Vec<StatusNode>,
    /// As in `locks`: each group's counts, with several groups only (the
    /// ones above are then summed, `quorum_healthy` true when every
    /// group's is).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub groups: Option<Vec<GroupCounts>>,
}

/// One node of `status`.
#[derive(Serialize)]
pub struct StatusNode {
    /// The group of `--nodes` it is in, when there are several; left
    /// out for one group.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    pub node: String,
    /// As in `locks`: "lock-server", "redis", "postgres" or "mysql".
    pub kind: &'static str,
    pub reachable: bool,
    pub answered: bool,
    pub reason: Option<String>,
    /// The lock server's protocol version; `null` for Redis, databases,
    /// and while not connected.
    pub protocol: Option<u16>,
    /// `null` when it did not answer.
    pub quarantined: Option<bool>,
    /// `null` when not quarantined, or when a lock server older than
    /// protocol 4 cannot say.
    pub quarantine_left_ms: Option<u64>,
    /// How many entries it holds; `null` when it did not answer, and for
    /// Redis and databases with `--health` (which lists nothing).
    pub entries: Option<u64>,
    /// Answered and out of quarantine.
    pub healthy: bool,
    /// Its entries; `null` with `--health` and when it did not answer.
    pub locks: Option<Vec<Entry>>,
}

/// A field that is either left out of its document, or present (a value
/// or `null`).
pub enum Field<T> {
    Absent,
    Present(Option<T>),
}

impl<T> Field<T> {
    pub fn is_absent(&self) -> bool {
        matches!(self, Field::Absent)
    }
}

impl<T: Serialize> Serialize for Field<T> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Field::Present(value) => value.serialize(serializer),
            // Never reached: `skip_serializing_if` leaves it out first.
            Field::Absent => serializer.serialize_none(),
        }
    }
}

pub fn kind(kind: Kind) -> &'static str {
    match kind {
        Kind::LockServers => "lock-servers",
        Kind::Redis => "redis",
        Kind::Sql => "sql",
        Kind::Mixed => "mixed",
    }
}

pub fn mode(mode: LockMode) -> &'static str {
    match mode {
        LockMode::Read => "read",
        LockMode::Write => "write",
    }
}

/// Whole milliseconds, saturating.
pub fn ms(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// One line of JSON, or why not (these plain structs always serialize,
/// but a failure must not print half a document).
pub fn line<T: Serialize>(document: &T) -> Result<String, Failure> {
    let mut bytes = Vec::new();
    let mut serializer = serde_json::Serializer::with_formatter(&mut bytes, Escaping::default());
    document
        .serialize(&mut serializer)
        .map_err(|e| Failure::new(FAILURE, format!("cannot write JSON: {e}")))?;
    let mut text = String::from_utf8(bytes)
        .map_err(|e| Failure::new(FAILURE, format!("cannot write JSON: {e}")))?;
    text.push('\n');
    Ok(text)
}

/// serde_json's compact output, with every character a terminal would act
/// on ([`unsafe_char`]) written as `\uXXXX` in strings, and every run of a
/// secret the process holds in a string shown as `***` (as
/// [`escaped`](crate::words::escaped) shows it). serde_json escapes the C0
/// controls itself but writes DEL, the C1 controls (U+009B starts a
/// terminal sequence) and bidirectional overrides as they are; a reader of
/// the JSON gets the same text either way. Each string is gathered whole
/// before it is written (serde_json hands it over in pieces, split at the
/// characters it escapes), so that a secret is masked wherever it falls.
#[derive(Default)]
struct Escaping {
    /// The string being written, as it reads: `Some` between its quotes.
    string: Option<String>,
}

impl serde_json::ser::Formatter for Escaping {
    fn begin_string<W: ?Sized + io::Write>(&mut self, writer: &mut W) -> io::Result<()> {
        self.string = Some(String::new());
        writer.write_all(b"\"")
    }

    fn end_string<W: ?Sized + io::Write>(&mut self, writer: &mut W) -> io::Result<()> {
        if let Some(string) = self.string.take() {
            // As the text output: only the first 8 KiB is masked and shown.
            let (head, cut) = crate::words::head_of(&string);
            write_escaped(writer, &quorum_lock::mask_secrets(head))?;
            if cut {
                write_escaped(writer, &format!("… (cut; {} bytes in all)", string.len()))?;
            }
        }
        writer.write_all(b"\"")
    }

    fn write_string_fragment<W: ?Sized + io::Write>(
        &mut self,
        writer: &mut W,
        fragment: &str,
    ) -> io::Result<()> {
        match &mut self.string {
            Some(string) => {
                string.push_str(fragment);
                Ok(())
            }
            None => write_escaped(writer, fragment),
        }
    }

    fn write_char_escape<W: ?Sized + io::Write>(
        &mut self,
        writer: &mut W,
        escape: CharEscape,
    ) -> io::Result<()> {
        let c = match escape {
            CharEscape::Quote => '"',
            CharEscape::ReverseSolidus => '\\',
            CharEscape::Solidus => '/',
            CharEscape::Backspace => '\u{8}',
            CharEscape::FormFeed => '\u{c}',
            CharEscape::LineFeed => '\n',
            CharEscape::CarriageReturn => '\r',
            CharEscape::Tab => '\t',
            CharEscape::AsciiControl(byte) => char::from(byte),
        };
        match &mut self.string {
            Some(string) => {
                string.push(c);
                Ok(())
            }
            None => write_escaped(writer, c.encode_utf8(&mut [0; 4])),
        }
    }
}

/// `text` as the inside of a JSON string: `"` and `\` escaped, the
/// short escapes serde_json uses (`\n`, `\r`, `\t`, `\b`, `\f`), and
/// every other control character and [`unsafe_char`] as `\uXXXX`.
fn write_escaped<W: ?Sized + io::Write>(writer: &mut W, text: &str) -> io::Result<()> {
    let mut start = 0;
    for (at, c) in text.char_indices() {
        let short = match c {
            '"' => Some("\\\""),
            '\\' => Some("\\\\"),
            '\n' => Some("\\n"),
            '\r' => Some("\\r"),
            '\t' => Some("\\t"),
            '\u{8}' => Some("\\b"),
            '\u{c}' => Some("\\f"),
            _ => None,
        };
        if short.is_none() && !unsafe_char(c) {
            continue;
        }
        writer.write_all(&text.as_bytes()[start..at])?;
        match short {
            Some(short) => writer.write_all(short.as_bytes())?,
            None => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    write!(writer, "\\u{unit:04x}")?;
                }
            }
        }
        start = at + c.len_utf8();
    }
    writer.write_all(&text.as_bytes()[start..])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_in_a_string_is_masked_wherever_serde_json_splits_it() {
        #[derive(Serialize)]
        struct Doc {
            owner: String,
        }
        // A `"` and a `\` in the token: serde_json writes the string in
        // pieces around them.
        let token = "json\"tok\\en-5e1";
        quorum_lock::remember_secret(token);
        let text = line(&Doc {
            owner: format!("ops ({token})\n"),
        })
        .expect("JSON");
        assert_eq!(text, "{\"owner\":\"ops (***)\\n\"}\n");
    }

    #[test]
    fn strings_hold_no_character_a_terminal_acts_on_and_read_back_exact() {
        #[derive(Serialize)]
        struct Doc {
            owner: &'static str,
        }
        let hostile = "bob\u{1b}]0;x\u{7}\u{7f}\u{9b}31m\u{202e}\u{2028}\nrow \u{1f600} é";
        let text = line(&Doc { owner: hostile }).expect("JSON");
        assert_eq!(
            text,
            "{\"owner\":\"bob\\u001b]0;x\\u0007\\u007f\\u009b31m\\u202e\\u2028\\nrow \u{1f600} é\"}\n"
        );
        let back: serde_json::Value = serde_json::from_str(&text).expect("valid JSON");
        assert_eq!(back["owner"], hostile);
    }
}
