//! What every locker call carries: the [`LockArgs`] and [`LockMode`], the
//! limits on resource names, and the checks and display of names and
//! other text a caller sends. Names are checked here once, before any
//! locker sees them: a name that passes is valid for every locker.

use std::sync::Arc;

use crate::Error;

/// Longest resource name, in bytes, that the library accepts.
pub const MAX_RESOURCE_NAME_LEN: usize = 1024;

/// Most resources one lock may cover.
pub const MAX_RESOURCES: usize = 1000;

/// Longest lock uid, in bytes, that every locker accepts. Uids are UUID
/// v4 strings (36 bytes); the bound keeps every entry, every listing of it
/// and every remembered release small.
pub const MAX_UID_LEN: usize = 128;

/// Longest owner, in bytes, that every locker accepts: room for a host
/// name of 253 bytes, a pid and some context.
pub const MAX_OWNER_LEN: usize = 512;

/// Longest source (the caller's `file:line:column`), in bytes, that every
/// locker accepts.
pub const MAX_SOURCE_LEN: usize = 512;

/// Whether a lock is exclusive (write) or shared (read).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LockMode {
    /// Shared: any number of readers may hold the lock together.
    Read,
    /// Exclusive: one writer and nobody else.
    Write,
}

/// The arguments of every [`NetLocker`](crate::NetLocker) call.
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
    /// // A name given twice: a coordinator sends each name once.
    /// args.resources = vec!["ok".to_string(), "ok".to_string()].into();
    /// let err = args.validate_resources().unwrap_err().to_string();
    /// assert!(err.contains("resource name \"ok\" is given twice"));
    /// ```
    pub fn validate_resources(&self) -> Result<(), Error> {
        validate_names(&self.resources)?;
        // Each copy of a name would cost a locker a pass over its holders
        // and its line, all under one lock: a client could multiply any
        // such pass by the most names one lock may carry.
        let twice = if self.resources.is_sorted() {
            self.resources
                .windows(2)
                .find(|pair| pair[0] == pair[1])
                .map(|pair| &pair[0])
        } else {
            let mut seen = std::collections::HashSet::with_capacity(self.resources.len());
            self.resources
                .iter()
                .find(|name| !seen.insert(name.as_str()))
        };
        match twice {
            Some(name) => Err(Error::invalid(format!(
                "resource name {} is given twice in one lock; name each resource once (a \
                 coordinator sends them sorted, each once)",
                shown(name)
            ))),
            None => Ok(()),
        }
    }

    /// Checks the text a client sends besides the names: the uid, the
    /// owner and the source.
    ///
    /// Listings, logs and errors show them, so none may hold a control
    /// character (a newline would forge a row of a listing, an escape
    /// sequence would take over the terminal that shows it) or a character
    /// that reverses or breaks lines of text (U+2028, U+2029, U+202A to
    /// U+202E, U+2066 to U+2069), and none may be longer than the lock
    /// protocol carries ([`MAX_UID_LEN`], [`MAX_OWNER_LEN`],
    /// [`MAX_SOURCE_LEN`]), so that every entry fits a listing page. Every
    /// locker of this crate refuses a call whose arguments fail this with
    /// [`Error::InvalidArgument`], which names the field and the character
    /// or the length.
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
    /// args.owner = "o".repeat(600).into();
    /// let err = args.validate_text().unwrap_err().to_string();
    /// assert!(err.contains("the owner is 600 bytes long; at most 512 are allowed"));
    /// ```
    pub fn validate_text(&self) -> Result<(), Error> {
        validate_length("uid", &self.uid, MAX_UID_LEN)?;
        validate_length("owner", &self.owner, MAX_OWNER_LEN)?;
        validate_length("source", &self.source, MAX_SOURCE_LEN)?;
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

    /// [`validate`](Self::validate), skipped for the arguments this thread
    /// found valid last: a coordinator hands the same `LockArgs` to each
    /// of its in-process lockers in turn, and each checked every name and
    /// text again (a twentieth of an in-process lock's time).
    ///
    /// Sound because the thread remembers the four `Arc`s of the arguments
    /// that passed as weak references: while a weak reference lives, the
    /// allocation it points to is not freed, so no other `Arc` can take its
    /// address; and what an `Arc<str>` or `Arc<[String]>` holds cannot
    /// change while the caller's own `Arc` to it exists. Arguments with the
    /// same four pointers therefore hold the same text, which passed. Weak
    /// references keep no names alive (the text of a dropped uid stays
    /// allocated until the next arguments replace it: one lock's worth per
    /// thread).
    pub(crate) fn validate_once(&self) -> Result<(), Error> {
        use std::cell::RefCell;
        use std::sync::Weak;
        type Remembered = (Weak<str>, Weak<[String]>, Weak<str>, Weak<str>);
        thread_local! {
            static LAST_VALID: RefCell<Option<Remembered>> = const { RefCell::new(None) };
        }
        // `try_with` and `try_borrow`: a lock released by a guard that a
        // thread-local held is released as the thread ends, perhaps after
        // this one was destroyed; it is then checked in full.
        let seen = LAST_VALID
            .try_with(|last| {
                last.try_borrow().is_ok_and(|last| {
                    last.as_ref()
                        .is_some_and(|(uid, resources, owner, source)| {
                            std::ptr::eq(uid.as_ptr(), Arc::as_ptr(&self.uid))
                                && std::ptr::eq(resources.as_ptr(), Arc::as_ptr(&self.resources))
                                && std::ptr::eq(owner.as_ptr(), Arc::as_ptr(&self.owner))
                                && std::ptr::eq(source.as_ptr(), Arc::as_ptr(&self.source))
                        })
                })
            })
            .unwrap_or(false);
        if seen {
            return Ok(());
        }
        self.validate()?;
        let passed = (
            Arc::downgrade(&self.uid),
            Arc::downgrade(&self.resources),
            Arc::downgrade(&self.owner),
            Arc::downgrade(&self.source),
        );
        // Replaced outside the borrow: dropping the old weak references
        // may free their allocations, which runs no code of ours.
        let old = LAST_VALID.try_with(|last| {
            last.try_borrow_mut()
                .ok()
                .and_then(|mut last| last.replace(passed))
        });
        drop(old);
        Ok(())
    }
}

/// Refuses an owner that [`LockArgs::validate_text`] would refuse: for a
/// coordinator's owner, checked once when it is built.
pub(crate) fn validate_owner(owner: &str) -> Result<(), Error> {
    validate_length("owner", owner, MAX_OWNER_LEN)?;
    validate_text("owner", owner)
}

/// Refuses `text`, the `field` of a lock, when it is longer than `limit`
/// bytes: what a lock server takes over the wire, so that every locker
/// takes the same and every entry fits a listing.
fn validate_length(field: &str, text: &str, limit: usize) -> Result<(), Error> {
    if text.len() > limit {
        return Err(Error::invalid(format!(
            "the {field} is {} bytes long; at most {limit} are allowed",
            text.len()
        )));
    }
    Ok(())
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

/// `text` a peer sent (a lock server's error reason or rejection, a
/// database's or Redis's message), with every character [`validate_text`]
/// refuses written as an escape (`\n`, `\u{1b}`, `\u{202e}`): an error
/// built from it stays on one line and cannot drive the terminal or
/// reverse the text of the log or message that shows it; and with every
/// run of a secret this process handed a locker masked (see
/// `locker::secrets`). At most 2 KiB of it is shown, then how much more
/// there was. Every error a locker builds from a peer's words goes
/// through it.
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
    let (head, _) = peer_text_head(text);
    escape_peer_head(head, text.len())
}

/// [`escape_peer_text`] of the head of a peer's text (see
/// [`peer_text_head`]) whose whole was `total` bytes long.
#[cfg_attr(
    not(any(
        feature = "net",
        feature = "redis",
        feature = "postgres",
        feature = "mysql"
    )),
    allow(dead_code)
)]
pub(crate) fn escape_peer_head(head: &str, total: usize) -> String {
    // Only the head is masked and escaped: the work stays bounded however
    // long the message (masking looks up every 8-byte run in every secret
    // held). A secret quoted across the cut shows at most 7 of its bytes,
    // as one quoted in pieces would.
    let cut = total > head.len();
    // A secret this process handed a locker, quoted back, is masked first.
    let head = &*super::secrets::mask(head);
    if !cut && head.len() <= PEER_TEXT_SHOWN && unshowable_character(head).is_none() {
        return head.to_owned();
    }
    let mut out = String::with_capacity(head.len().min(PEER_TEXT_SHOWN) + 40);
    let mut shortened = cut;
    for c in head.chars() {
        let before = out.len();
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if unshowable(c) => out.extend(c.escape_unicode()),
            c => out.push(c),
        }
        if out.len() > PEER_TEXT_SHOWN {
            // Whatever the peer sent, an error or log line quoting it stays
            // short: a hostile server cannot fill the log through it.
            out.truncate(before);
            shortened = true;
            break;
        }
    }
    if shortened {
        out.push_str(&format!("… (cut; the peer sent {total} bytes)"));
    }
    out
}

/// The most bytes of a peer's text, as escaped, that an error or log line
/// quotes: enough for any honest message (a database error with its
/// detail, a server's reason), and all a hostile peer can put into one
/// line however long its message.
const PEER_TEXT_SHOWN: usize = 2048;

/// The head of a peer's `text` that is worth masking and escaping (a few
/// times what is shown, since masking shortens it), cut at a character
/// boundary, and whether it was cut. Anything that scans a peer's text
/// for secrets scans this, so a hostile peer's megabytes cost no more
/// than a few kilobytes.
#[cfg_attr(
    not(any(
        feature = "net",
        feature = "redis",
        feature = "postgres",
        feature = "mysql"
    )),
    allow(dead_code)
)]
pub(crate) fn peer_text_head(text: &str) -> (&str, bool) {
    const TAKEN: usize = 4 * PEER_TEXT_SHOWN;
    if text.len() <= TAKEN {
        return (text, false);
    }
    let mut at = TAKEN;
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    (&text[..at], true)
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
    if !may_be_unshowable(text.as_bytes()) {
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
/// Whether `bytes` hold a byte that starts an unshowable character (see
/// [`unshowable_character`]), or may. Each chunk is scanned without an
/// early exit, which the compiler turns into a check of many bytes at a
/// time: a lock call scans a few dozen bytes per field on every locker,
/// which byte by byte took a tenth of an in-process lock and unlock.
fn may_be_unshowable(bytes: &[u8]) -> bool {
    bytes.chunks(64).any(|chunk| {
        chunk.iter().fold(false, |seen, &b| {
            seen | (b < 0x20) | (b == 0x7f) | (b == 0xc2) | (b == 0xe2)
        })
    })
}

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

#[cfg(test)]
mod tests {
    use super::*;

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
    fn a_long_peer_text_is_cut_to_two_kib_saying_how_long_it_was() {
        let plain = "é".repeat(3000);
        let shown = escape_peer_text(&plain);
        assert!(shown.len() <= 2048 + 40, "{} bytes", shown.len());
        assert!(
            shown.ends_with("… (cut; the peer sent 6000 bytes)"),
            "{shown}"
        );
        let controls = "\u{1}".repeat(1 << 20);
        let shown = escape_peer_text(&controls);
        assert!(shown.len() <= 2048 + 40, "{} bytes", shown.len());
        assert!(shown.starts_with("\\u{1}\\u{1}"), "{}", &shown[..20]);
        assert!(
            shown.ends_with("… (cut; the peer sent 1048576 bytes)"),
            "{shown}"
        );
        let short = "x".repeat(2048);
        assert_eq!(escape_peer_text(&short), short);
    }

    #[test]
    fn arguments_found_valid_pass_again_and_any_other_arguments_are_checked() {
        let valid = LockArgs {
            uid: "uid-1".into(),
            resources: Arc::from(vec!["a".to_string(), "b".to_string()]),
            owner: "node-a".into(),
            source: "src/main.rs:1:1".into(),
            quorum: 3,
        };
        assert!(valid.validate_once().is_ok());
        assert!(valid.clone().validate_once().is_ok());
        // Each field in turn replaced by a refused one of its own, beside
        // the three others of the arguments just found valid.
        let mut forged = Vec::new();
        for field in 0..4 {
            let mut bad = valid.clone();
            match field {
                0 => bad.uid = "uid\n2".into(),
                1 => bad.resources = Arc::from(vec!["a".to_string(), "\u{1b}[2J".to_string()]),
                2 => bad.owner = "node-a\nforged".into(),
                _ => bad.source = "s\u{202e}x".into(),
            }
            forged.push(bad);
        }
        for bad in &forged {
            assert!(valid.validate_once().is_ok());
            let err = bad.validate_once().expect_err("refused text passed");
            assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
            // Refused again, right after it was refused.
            assert!(bad.validate_once().is_err());
        }
        // The same text in another allocation is checked, and passes.
        let copy = LockArgs {
            uid: Arc::from(&*valid.uid),
            ..valid.clone()
        };
        assert!(copy.validate_once().is_ok());
        // Each thread remembers its own.
        std::thread::scope(|scope| {
            scope.spawn(|| {
                assert!(valid.validate_once().is_ok());
                assert!(forged.iter().all(|bad| bad.validate_once().is_err()));
            });
        });
    }

    /// A guard kept in a thread-local is dropped, and its lock released,
    /// as the thread ends, perhaps after the thread's record of valid
    /// arguments is gone (a panic there aborted the process).
    #[test]
    fn arguments_checked_as_the_thread_ends_are_checked_in_full() {
        use std::cell::RefCell;
        use std::sync::Mutex;
        type Seen = Arc<Mutex<Vec<Result<(), String>>>>;
        struct CheckOnDrop(Vec<LockArgs>, Seen);
        impl Drop for CheckOnDrop {
            fn drop(&mut self) {
                for args in &self.0 {
                    let checked = args.validate_once().map_err(|e| e.to_string());
                    self.1
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .push(checked);
                }
            }
        }
        thread_local! {
            static HELD: RefCell<Option<CheckOnDrop>> = const { RefCell::new(None) };
        }
        let valid = LockArgs {
            uid: "uid-1".into(),
            resources: Arc::from(vec!["a".to_string()]),
            owner: "node-a".into(),
            source: "src/main.rs:1:1".into(),
            quorum: 3,
        };
        let bad = LockArgs {
            owner: "node-a\nforged".into(),
            ..valid.clone()
        };
        let seen: Seen = Arc::default();
        let (v, b, out) = (valid.clone(), bad.clone(), seen.clone());
        std::thread::spawn(move || {
            // Registered first, so destroyed last: after the record.
            HELD.with(|held| held.borrow_mut().take());
            assert!(v.validate_once().is_ok());
            HELD.with(|held| *held.borrow_mut() = Some(CheckOnDrop(vec![v, b], out)));
        })
        .join()
        .expect("the thread ends without a panic");
        let seen = seen.lock().unwrap_or_else(|e| e.into_inner()).clone();
        assert_eq!(seen.len(), 2, "{seen:?}");
        assert!(seen[0].is_ok(), "{seen:?}");
        assert!(
            seen[1]
                .as_ref()
                .is_err_and(|e| e.contains("control character")),
            "{seen:?}"
        );
    }

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

    /// The chunked scan finds each byte it looks for at every offset of
    /// texts of every length up to three chunks, and nothing else.
    #[test]
    fn the_chunked_scan_finds_every_byte_at_every_offset() {
        for len in 0..200 {
            assert!(!may_be_unshowable(&vec![b'a'; len]));
            for at in 0..len {
                for byte in [0x00, 0x1f, 0x7f, 0xc2, 0xe2] {
                    let mut text = vec![b'a'; len];
                    text[at] = byte;
                    assert!(may_be_unshowable(&text), "{byte:#x} at {at} of {len}");
                }
                for byte in [0x20, 0x7e, 0x80, 0xc3, 0xe1, 0xe3, 0xff] {
                    let mut text = vec![b'a'; len];
                    text[at] = byte;
                    assert!(!may_be_unshowable(&text), "{byte:#x} at {at} of {len}");
                }
            }
        }
    }
}
