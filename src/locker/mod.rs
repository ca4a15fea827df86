//! The contract between the coordinator and its lockers: the `NetLocker`
//! trait that every locker (in process, a lock server, Redis, SQL)
//! implements, the `LockArgs` sent with each call, waiting in line
//! (`wait`), election values (`proclamation`), a locker that answers at
//! once (`immediate`) and how a locker's endpoint is shown (`redact`).

pub(crate) mod immediate;
pub(crate) mod proclamation;
pub(crate) mod redact;
pub(crate) mod wait;

use std::sync::Arc;

use async_trait::async_trait;

use crate::locker::proclamation::{Proclamation, WatchArgs};
use crate::locker::wait::{WaitArgs, WaitReply};
use crate::{Error, LockInfo};

/// Longest resource name, in bytes, that the library accepts.
pub const MAX_RESOURCE_NAME_LEN: usize = 1024;

/// Most resources one lock may cover.
pub const MAX_RESOURCES: usize = 1000;

/// Whether a lock is exclusive (write) or shared (read).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LockMode {
    /// Shared: any number of readers may hold the lock together.
    Read,
    /// Exclusive: one writer and nobody else.
    Write,
}

/// The arguments of every [`NetLocker`] call.
///
/// One `LockArgs` describes one acquisition: the same `uid` is sent to every
/// locker, and later unlock and refresh calls repeat it. The string fields are
/// reference counted so that fanning one acquisition out to many lockers, and
/// keeping it for the lifetime of the lock, copies no strings.
///
/// ```
/// use quorum_lock::LockArgs;
///
/// let args = LockArgs {
///     uid: "3f1c…".into(),
///     resources: vec!["bucket/object".to_string()].into(),
///     owner: "host-a:4242".into(),
///     source: "src/main.rs:10".into(),
///     quorum: 3,
/// };
/// assert_eq!(args.resources.len(), 1);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockArgs {
    /// Identifies one acquisition. A fresh random UUID v4 per attempt, so it is
    /// also the capability that allows unlocking and refreshing.
    pub uid: Arc<str>,
    /// The resource names, sorted and without duplicates. All of them are
    /// locked together or none is.
    pub resources: Arc<[String]>,
    /// Who asked: by default the host name and process id.
    pub owner: Arc<str>,
    /// Where in the caller's code the lock was created (`file:line:column`).
    pub source: Arc<str>,
    /// How many grants the coordinator needs; informational for lockers.
    pub quorum: usize,
}

impl LockArgs {
    /// Checks the resource list against the library's limits.
    ///
    /// Lockers call this on input that may come from the network, so that a
    /// malformed request is refused with a clear error instead of a panic.
    ///
    /// ```
    /// use quorum_lock::LockArgs;
    /// let mut args = LockArgs {
    ///     uid: "u".into(), resources: vec![String::new()].into(),
    ///     owner: "o".into(), source: "s".into(), quorum: 1,
    /// };
    /// assert!(args.validate_resources().is_err());
    /// args.resources = vec!["ok".to_string()].into();
    /// assert!(args.validate_resources().is_ok());
    /// ```
    pub fn validate_resources(&self) -> Result<(), Error> {
        validate_names(&self.resources)
    }

    /// Checks the text a client sends besides the names: the uid, the
    /// owner and the source.
    ///
    /// Listings, logs and errors show them, so none may hold a control
    /// character (a newline would forge a row of a listing, an escape
    /// sequence would take over the terminal that shows it) or a character
    /// that reverses or breaks lines of text (U+2028, U+2029, U+202A to
    /// U+202E, U+2066 to U+2069). Every locker of this crate refuses a call
    /// whose arguments fail this with [`Error::InvalidArgument`], which
    /// names the field and the character.
    ///
    /// ```
    /// use quorum_lock::LockArgs;
    /// let mut args = LockArgs {
    ///     uid: "u".into(), resources: vec!["r".to_string()].into(),
    ///     owner: "bob\nforged row".into(), source: "s".into(), quorum: 1,
    /// };
    /// let err = args.validate_text().unwrap_err().to_string();
    /// assert!(err.contains("the owner \"bob\\nforged row\" contains the control character U+000A"));
    /// args.owner = "bob@host-a:4242 (日本)".into();
    /// assert!(args.validate_text().is_ok());
    /// ```
    pub fn validate_text(&self) -> Result<(), Error> {
        validate_text("uid", &self.uid)?;
        validate_text("owner", &self.owner)?;
        validate_text("source", &self.source)
    }

    /// Both [`validate_resources`](Self::validate_resources) and
    /// [`validate_text`](Self::validate_text): what every locker checks
    /// before it acts on a call.
    pub fn validate(&self) -> Result<(), Error> {
        self.validate_resources()?;
        self.validate_text()
    }
}

/// Refuses `text`, the `field` of a lock (uid, owner, source), when it
/// holds a character that listings cannot show as it is.
pub(crate) fn validate_text(field: &str, text: &str) -> Result<(), Error> {
    match unshowable_character(text) {
        None => Ok(()),
        Some(why) => Err(Error::invalid(format!(
            "the {field} {} contains {why}: the uid, owner and source of a lock must not \
             contain control characters or characters that reverse or break lines, since \
             listings show them",
            shown(text)
        ))),
    }
}

/// `text` a peer sent (a lock server's error reason or rejection, a
/// database's or Redis's message), with every character [`validate_text`]
/// refuses written as an escape (`\n`, `\u{1b}`, `\u{202e}`): an error
/// built from it stays on one line and cannot drive the terminal or
/// reverse the text of the log or message that shows it. Every error a
/// locker builds from a peer's words goes through it.
#[cfg_attr(
    not(any(
        feature = "net",
        feature = "redis",
        feature = "postgres",
        feature = "mysql"
    )),
    allow(dead_code)
)]
pub(crate) fn escape_peer_text(text: &str) -> String {
    if unshowable_character(text).is_none() {
        return text.to_owned();
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if unshowable(c) => out.extend(c.escape_unicode()),
            c => out.push(c),
        }
    }
    out
}

pub(crate) fn validate_names<S: AsRef<str>>(names: &[S]) -> Result<(), Error> {
    if names.is_empty() {
        return Err(Error::invalid("a lock needs at least one resource name"));
    }
    if names.len() > MAX_RESOURCES {
        return Err(Error::invalid(format!(
            "{} resources in one lock; at most {MAX_RESOURCES} are allowed, split the lock",
            names.len()
        )));
    }
    for name in names {
        let name = name.as_ref();
        if name.is_empty() {
            return Err(Error::invalid("resource names must not be empty"));
        }
        if name.len() > MAX_RESOURCE_NAME_LEN {
            return Err(Error::invalid(format!(
                "resource name of {} bytes; at most {MAX_RESOURCE_NAME_LEN} are allowed",
                name.len()
            )));
        }
        // A name is shown on one line of a listing, a log or an error; a
        // newline or an escape sequence in it would forge or hide lines.
        if let Some(why) = unshowable_character(name) {
            return Err(Error::invalid(format!(
                "resource name {} contains {why}: names must not contain control characters \
                 or characters that reverse or break lines",
                shown(name)
            )));
        }
    }
    Ok(())
}

/// The first character of `text` that a listing cannot show as it is,
/// named, with its byte offset: `the control character U+000A (line feed)
/// at byte 3`. `None` when there is none.
///
/// Refused are the control characters (`char::is_control`: a newline forges
/// a row, an escape starts a terminal sequence) and the characters that
/// reverse or break lines of text: the line and paragraph separators
/// U+2028 and U+2029, and the bidirectional embeddings, overrides and
/// isolates U+202A to U+202E and U+2066 to U+2069, which make text read
/// otherwise than it is stored.
pub(crate) fn unshowable_character(text: &str) -> Option<String> {
    // Every lock call checks its names and text, so the common case is a
    // byte scan: control characters are U+0000..=U+001F, U+007F and
    // U+0080..=U+009F, the last encoded as 0xC2 followed by 0x80..=0x9F;
    // the others are U+2028..=U+202E and U+2066..=U+2069, encoded as 0xE2
    // followed by 0x80 or 0x81.
    if !text
        .bytes()
        .any(|b| b < 0x20 || b == 0x7f || b == 0xc2 || b == 0xe2)
    {
        return None;
    }
    let (at, c) = text.char_indices().find(|(_, c)| unshowable(*c))?;
    if !c.is_control() {
        let kind = match c {
            '\u{2028}' => "the line separator",
            '\u{2029}' => "the paragraph separator",
            _ => "the bidirectional formatting character",
        };
        return Some(format!("{kind} U+{:04X} at byte {at}", u32::from(c)));
    }
    let name = match c {
        '\0' => " (NUL)",
        '\u{7}' => " (bell)",
        '\t' => " (tab)",
        '\n' => " (line feed)",
        '\r' => " (carriage return)",
        '\u{1b}' => " (escape)",
        '\u{7f}' => " (delete)",
        _ => "",
    };
    Some(format!(
        "the control character U+{:04X}{name} at byte {at}",
        u32::from(c)
    ))
}

/// Whether `c` is refused in names and text: see [`unshowable_character`].
fn unshowable(c: char) -> bool {
    c.is_control() || matches!(c, '\u{2028}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// Longest part of a name quoted in a message, in characters.
const SHOWN: usize = 64;

/// `name` as a message quotes it: escaped, so that it stays on one line,
/// and cut after [`SHOWN`] characters with its length in bytes, so that a
/// long name does not drown the message.
pub(crate) fn shown(name: &str) -> String {
    let mut out: String = name
        .chars()
        .take(SHOWN)
        .collect::<String>()
        .escape_debug()
        .collect();
    out.insert(0, '"');
    out.push('"');
    if name.chars().nth(SHOWN).is_some() {
        out = format!("{}…\" ({} bytes)", &out[..out.len() - 1], name.len());
    }
    out
}

/// One lock server, as seen by the [`Dsync`](crate::Dsync) coordinator.
///
/// Every call returns `Ok(true)` when the locker did what was asked,
/// `Ok(false)` when it answered but refused (the lock is held by someone
/// else, or the uid does not hold it), and `Err(_)` when it could not answer.
/// The coordinator treats an error as "unknown": the request may or may not
/// have been applied, so it later sends an unlock to be sure.
///
/// Implementations must make `lock`/`rlock` all-or-nothing over
/// `args.resources`, make repeated calls with the same uid idempotent, and
/// process one client's calls in the order they were sent.
///
/// Capabilities added later arrive as provided methods with default bodies,
/// so an implementation written for an older version keeps working:
/// [`lock_wait`](Self::lock_wait) (queues and pushed wake-ups) falls back to
/// a plain lock call that the coordinator repeats, and
/// [`fence`](Self::fence) (fencing tokens), [`proclaim`](Self::proclaim) and
/// [`leader`](Self::leader) (leader election) report that they are
/// unsupported, and [`immediate`](Self::immediate) (plain function calls
/// for a locker that never waits) offers nothing, so every call goes through
/// the async methods.
///
/// # Cancel safety
///
/// The coordinator drops a call at its deadline, and a caller may drop the
/// acquire that made it. Implementations must tolerate being dropped at any
/// await point: a request may then be applied or not, which the coordinator
/// already treats as "unknown" and answers with an unlock. `LocalLocker`
/// never awaits, so each of its calls is applied entirely or not at all.
///
/// ```
/// use std::sync::Arc;
/// use quorum_lock::{LocalLocker, NetLocker};
///
/// let lockers: Vec<Arc<dyn NetLocker>> =
///     (0..3).map(|_| Arc::new(LocalLocker::new()) as Arc<dyn NetLocker>).collect();
/// assert!(lockers.iter().all(|l| l.is_local() && l.is_online()));
/// ```
#[async_trait]
pub trait NetLocker: Send + Sync {
    /// Grants an exclusive lock on all of `args.resources` to `args.uid`.
    async fn lock(&self, args: &LockArgs) -> Result<bool, Error>;

    /// Grants a shared lock on all of `args.resources` to `args.uid`.
    async fn rlock(&self, args: &LockArgs) -> Result<bool, Error>;

    /// Releases the exclusive lock `args.uid` holds, and drops its place in
    /// line if it has one. `Ok(false)` if it holds no lock.
    async fn unlock(&self, args: &LockArgs) -> Result<bool, Error>;

    /// Releases the shared lock `args.uid` holds, and drops its place in
    /// line if it has one. `Ok(false)` if it holds no lock.
    async fn runlock(&self, args: &LockArgs) -> Result<bool, Error>;

    /// Marks the lock of `args.uid` as still in use. `Ok(false)` when the
    /// locker does not know the uid (it expired, was forced open, or the
    /// server restarted).
    async fn refresh(&self, args: &LockArgs) -> Result<bool, Error>;

    /// Refreshes like [`refresh`](Self::refresh), telling the locker the
    /// mode the lock is held in. A locker that restarted and lost its table
    /// can then re-create the entry if the resources are free there. The
    /// coordinator always calls this method; the default forwards to
    /// `refresh`, which suits lockers that never re-grant.
    async fn refresh_mode(&self, args: &LockArgs, mode: LockMode) -> Result<bool, Error> {
        let _ = mode;
        self.refresh(args).await
    }

    /// Asks for the lock in `mode` as a waiter with a place in line.
    ///
    /// A locker with queues grants at once only when the resources are free
    /// for `mode` *and* no older conflicting waiter is queued on them;
    /// otherwise it keeps a place for `args.uid` ordered by `wait.ticket`,
    /// answers [`WaitReply::Queued`], and later grants the place when its
    /// turn comes and pushes [`PushEvent::Granted`](crate::PushEvent) through
    /// `wait.wake`. A request with a newer uid but the same ticket is the
    /// same waiter trying again (the coordinator does this, for the same
    /// names, after a wound): its places replace the older request's. A
    /// locker drops the older request's places at least on the names the
    /// newer one names; [`LocalLocker`](crate::LocalLocker) drops them on
    /// every name the older one named whenever the two share a name, and a
    /// lock server always for the waits of one connection, so that there a
    /// waiter's places never outlast its newest request. Repeating the call
    /// renews the place; [`unlock`](Self::unlock)/[`runlock`](Self::runlock)
    /// with the uid removes it. When `wait.ticket` is older than the ticket of
    /// a grant it waits behind, the locker pushes
    /// [`PushEvent::Wounded`](crate::PushEvent) to that grant's waiter.
    ///
    /// The default sends a plain [`lock`](Self::lock)/[`rlock`](Self::rlock)
    /// and answers [`WaitReply::Refused`] when it is not granted, so the
    /// coordinator polls lockers that have no queues.
    async fn lock_wait(
        &self,
        args: &LockArgs,
        mode: LockMode,
        wait: &WaitArgs,
    ) -> Result<WaitReply, Error> {
        let _ = wait;
        let granted = match mode {
            LockMode::Write => self.lock(args).await?,
            LockMode::Read => self.rlock(args).await?,
        };
        Ok(if granted {
            WaitReply::Granted
        } else {
            WaitReply::Refused
        })
    }

    /// Whether [`lock_wait`](Self::lock_wait) keeps places in line and
    /// pushes grants, rather than the polling default. A locker that says
    /// yes must also treat a `lock_wait` by a uid that already holds the
    /// lock as a refresh of its entries, since the coordinator then counts
    /// it as one; and must answer `Queued` or `Refused` only when the uid
    /// holds no entry there. The default, `false`, makes the coordinator
    /// renew the grants of a waiter with [`refresh_mode`](Self::refresh_mode).
    fn queues(&self) -> bool {
        false
    }

    /// The same locker's calls as plain functions, when it answers every
    /// call at once: see [`ImmediateLocker`](crate::ImmediateLocker).
    ///
    /// The coordinator then calls the locker directly for locks, waits,
    /// renewals and unlocks, without allocating or polling a future per
    /// call. The default, `None`, keeps every call on the async methods,
    /// which is right for any locker that waits for something.
    /// [`LocalLocker`](crate::LocalLocker) returns itself.
    fn immediate(&self) -> Option<&dyn crate::ImmediateLocker> {
        None
    }

    /// Draws a fencing token for the lock `args.uid` holds in `mode`.
    ///
    /// When `args.uid` holds every resource of `args.resources` here, the
    /// locker answers `Some(t)` with `t` at least `floor` and greater than
    /// every token it answered before on any of those resources, and
    /// remembers `t` as the resources' latest token. `None` when the uid
    /// does not hold them all (expired, released, forced open).
    ///
    /// A locker must keep its tokens increasing across restarts: one that
    /// forgets its counters starts them above anything it could have issued
    /// before, for example from the wall clock. The default reports that
    /// fencing is unsupported.
    async fn fence(
        &self,
        args: &LockArgs,
        mode: LockMode,
        floor: u64,
    ) -> Result<Option<u64>, Error> {
        let _ = (args, mode, floor);
        Err(Error::Unsupported {
            endpoint: self.endpoint(),
            what: "fencing tokens".into(),
        })
    }

    /// Stores `proclamation` with the exclusive entry that `args.uid` holds
    /// on the one resource of `args.resources` (an election's name), for
    /// [`leader`](Self::leader) to report.
    ///
    /// Answers `Ok(true)` when the entry now carries this proclamation or a
    /// newer one of the same uid ([`Proclamation::is_newer_than`]), and
    /// `Ok(false)` when the uid holds no exclusive entry there. The
    /// proclamation lives exactly as long as the entry: released, expired or
    /// forced open, it is gone. A locker in quarantine answers the
    /// quarantine error, as for every call that vouches for a grant, but
    /// may still store it on an entry it holds. Lockers must refuse a value
    /// longer than [`MAX_VALUE_LEN`](crate::MAX_VALUE_LEN). The default
    /// reports that election is unsupported.
    async fn proclaim(&self, args: &LockArgs, proclamation: &Proclamation) -> Result<bool, Error> {
        let _ = (args, proclamation);
        Err(Error::Unsupported {
            endpoint: self.endpoint(),
            what: "leader election".into(),
        })
    }

    /// The proclamation stored with the live exclusive entry on the one
    /// resource of `args.resources`, or `None` when the resource is free,
    /// held in read mode, or held by an entry that proclaimed nothing.
    ///
    /// `args.uid` identifies the observer asking. With `watch`, the locker
    /// also keeps a watch for that uid on the resource (replacing an older
    /// one of the same uid) and pushes
    /// [`PushEvent::Changed`](crate::PushEvent::Changed) once the answer may
    /// have changed: see [`WatchArgs`]. A locker in quarantine answers the
    /// quarantine error: it may have forgotten a proclamation that its
    /// leader still counts on. The default reports that election is
    /// unsupported.
    async fn leader(
        &self,
        args: &LockArgs,
        watch: Option<&WatchArgs>,
    ) -> Result<Option<Proclamation>, Error> {
        let _ = (args, watch);
        Err(Error::Unsupported {
            endpoint: self.endpoint(),
            what: "leader election".into(),
        })
    }

    /// Drops locks regardless of owner: the entries of `args.uid` when it is
    /// not empty, otherwise every entry on `args.resources`.
    async fn force_unlock(&self, args: &LockArgs) -> Result<bool, Error>;

    /// Every entry this locker holds, for listings. The default reports
    /// that listing is not supported.
    async fn locks(&self) -> Result<Vec<LockInfo>, Error> {
        Err(Error::LockerUnavailable {
            endpoint: self.endpoint(),
            reason: "this locker cannot list its locks".into(),
        })
    }

    /// A human-readable address for logs and errors.
    fn endpoint(&self) -> String;

    /// Whether the locker is believed reachable right now.
    fn is_online(&self) -> bool;

    /// Whether the locker lives in this process.
    fn is_local(&self) -> bool;

    /// How long this locker keeps an entry that is not refreshed, when it
    /// knows. A [`Dsync`](crate::Dsync) refuses to build with a
    /// [`Lease::validity`](crate::Lease::validity) longer than any locker
    /// reports here, because a holder would then trust its lock after the
    /// locker had already freed it. The default, `None`, skips that check.
    fn validity(&self) -> Option<std::time::Duration> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_with_control_characters_are_refused_saying_which_and_where() {
        let err = validate_names(&["ok", "job\n1"]).expect_err("a newline");
        let text = err.to_string();
        for words in [
            "\"job\\n1\"",
            "U+000A (line feed) at byte 3",
            "must not contain control characters",
        ] {
            assert!(text.contains(words), "{words:?} missing: {text}");
        }
        assert!(!text.contains('\n'), "the message spans lines: {text}");
        for bad in ["\u{1b}[2J", "nul\0", "del\u{7f}", "c1\u{85}", "tab\t"] {
            assert!(validate_names(&[bad]).is_err(), "{bad:?} accepted");
        }
        // Printable names, Unicode ones too, are fine.
        assert!(validate_names(&["reports/2026-11", "ümlaut é 日本", "a b"]).is_ok());
    }

    #[test]
    fn the_byte_scan_finds_every_refused_character_and_no_other() {
        let refused = |c: char| {
            c.is_control()
                || (0x2028..=0x202e).contains(&(c as u32))
                || (0x2066..=0x2069).contains(&(c as u32))
        };
        for c in (0..=0x10ffffu32).filter_map(char::from_u32) {
            let text = format!("a{c}b");
            assert_eq!(
                unshowable_character(&text).is_some(),
                refused(c),
                "U+{:04X}",
                c as u32
            );
        }
    }

    #[test]
    fn text_fields_are_checked_by_name() {
        let args = |uid: &str, owner: &str, source: &str| LockArgs {
            uid: uid.into(),
            resources: vec!["r".to_string()].into(),
            owner: owner.into(),
            source: source.into(),
            quorum: 1,
        };
        assert!(args("u", "host-a:42", "src/main.rs:1:1").validate().is_ok());
        for (bad, field) in [
            (args("u\u{1b}[2J", "o", "s"), "the uid \"u\\u{1b}[2J\""),
            (args("u", "bob\u{7}", "s"), "the owner \"bob\\u{7}\""),
            (args("u", "o", "a\u{2066}b"), "the source \"a\\u{2066}b\""),
        ] {
            let text = bad.validate().expect_err("refused").to_string();
            assert!(text.contains(field), "{field:?} missing: {text}");
            assert!(text.is_ascii(), "the raw character shows: {text:?}");
        }
        let err = args("u", "o", "x\u{202e}y").validate_text().unwrap_err();
        assert!(
            err.to_string()
                .contains("the bidirectional formatting character U+202E at byte 1"),
            "{err}"
        );
    }

    #[test]
    fn peer_text_is_escaped_onto_one_line() {
        assert_eq!(escape_peer_text("plain (日本) \\ ok"), "plain (日本) \\ ok");
        assert_eq!(
            escape_peer_text("bob\u{1b}]0;T\u{7}\nforged\u{9b}\u{202e}x\u{2028}"),
            "bob\\u{1b}]0;T\\u{7}\\nforged\\u{9b}\\u{202e}x\\u{2028}"
        );
        let escaped = escape_peer_text("\r\t\u{2066}\u{7f}");
        assert!(unshowable_character(&escaped).is_none(), "{escaped:?}");
    }

    #[test]
    fn shown_names_are_escaped_and_cut() {
        assert_eq!(shown("plain"), "\"plain\"");
        assert_eq!(shown("a\nb"), "\"a\\nb\"");
        let long = "x".repeat(2000);
        let text = shown(&long);
        assert_eq!(text, format!("\"{}…\" (2000 bytes)", "x".repeat(SHOWN)));
        // Cut by characters, never inside one.
        let wide = "é".repeat(100);
        assert!(shown(&wide).ends_with("…\" (200 bytes)"));
    }
}
