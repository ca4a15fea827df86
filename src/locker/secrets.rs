//! The secrets this process holds for its lockers (a client's token, a
//! lock server's own tokens, the password of a Redis or database URL or of
//! the driver's environment, `PGPASSWORD` and `MYSQL_PWD`), so that no
//! text a peer sends is shown with one of them in it.
//!
//! A peer already holds what it was sent; the danger is a server, a proxy
//! or a misconfigured service quoting it back (in a refusal, an error reply,
//! a log line), which would put the secret in the client's errors and logs
//! for whoever reads those. Every piece of peer text the library shows goes
//! through [`escape_peer_text`](super::escape_peer_text), which masks each
//! run of [`RUN`] bytes or more of a remembered secret as `***`.
//!
//! Invariants: only secrets of at least [`RUN`] bytes are remembered (a
//! shorter run turns up in honest words); at most [`KEPT`] are kept, the
//! oldest forgotten first; masking never panics and keeps the text valid
//! UTF-8.

#![cfg_attr(
    not(any(
        feature = "net",
        feature = "redis",
        feature = "postgres",
        feature = "mysql"
    )),
    allow(dead_code)
)]

use std::borrow::Cow;
use std::collections::HashSet;
use std::sync::{PoisonError, RwLock};

/// The shortest run of a secret's bytes that is masked, and the shortest
/// secret remembered.
pub(crate) const RUN: usize = 8;

/// The most secrets remembered at once (a password file may hold
/// hundreds).
const KEPT: usize = 4096;

/// A remembered secret, and its runs of [`RUN`] bytes, as written and as
/// Rust's `Debug` escapes it (a `"` or `\` in it is shown escaped where a
/// peer's value is printed with `{:?}`).
struct Secret {
    bytes: Box<[u8]>,
    runs: HashSet<[u8; RUN]>,
}

/// Each remembered secret.
static SECRETS: RwLock<Vec<Secret>> = RwLock::new(Vec::new());

/// Remembers `secret`, handed to a locker, for masking.
pub(crate) fn remember(secret: &[u8]) {
    if secret.len() < RUN {
        return;
    }
    let mut secrets = SECRETS.write().unwrap_or_else(PoisonError::into_inner);
    if secrets.iter().any(|known| *known.bytes == *secret) {
        return;
    }
    if secrets.len() >= KEPT {
        secrets.remove(0);
    }
    // As `Debug` of a string shows it: `str::escape_debug`, but for `'`,
    // which `Debug` of a string leaves as it is.
    let escaped = String::from_utf8_lossy(secret)
        .escape_debug()
        .to_string()
        .replace("\\'", "'");
    let runs = [secret, escaped.as_bytes()]
        .iter()
        .flat_map(|form| form.windows(RUN))
        .filter_map(|w| <[u8; RUN]>::try_from(w).ok())
        .collect();
    secrets.push(Secret {
        bytes: secret.into(),
        runs,
    });
}

/// Remembers the password a node `url` may carry: in its user information
/// (`user:password@`) or in a query parameter whose name holds `pass`
/// (`password`, `pass`, `passwd`, `sslpassword`), read as written,
/// percent-decoded and form-decoded (`+` a space), as drivers read it.
///
/// The drivers parse the URL with the `url` crate, which (as WHATWG URL
/// parsing does) cuts leading and trailing C0 controls and spaces and
/// removes every ASCII tab, line feed and carriage return: the password
/// sent is read from the URL so cleaned, which is remembered too.
#[cfg_attr(
    not(any(feature = "redis", feature = "postgres", feature = "mysql")),
    allow(dead_code)
)]
pub(crate) fn remember_url(url: &str) {
    remember_url_as_written(url);
    let cleaned: String = url
        .trim_matches(|c: char| c <= ' ')
        .chars()
        .filter(|c| !matches!(c, '\t' | '\n' | '\r'))
        .collect();
    if cleaned != url {
        remember_url_as_written(&cleaned);
    }
}

/// [`remember_url`] for `url` as it is.
#[cfg_attr(
    not(any(feature = "redis", feature = "postgres", feature = "mysql")),
    allow(dead_code)
)]
fn remember_url_as_written(url: &str) {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    // Up to the last `@` before the query: a password may hold `/` or `#`
    // unencoded, while an `@` in the query (`application_name=ops@batch`)
    // is no user information, and remembering what precedes it would mask
    // honest words (the database's name).
    let before_query = rest.split_once('?').map_or(rest, |(before, _)| before);
    if let Some((user_info, _)) = before_query.rsplit_once('@')
        && let Some((_, password)) = user_info.split_once(':')
    {
        remember_both(password);
    }
    if let Some((_, query)) = url.split_once('?') {
        for pair in query.split('&') {
            if let Some((key, value)) = pair.split_once('=') {
                let key = String::from_utf8_lossy(&percent_decoded(key)).to_ascii_lowercase();
                if key.contains("pass") || key.contains("pwd") {
                    remember_both(value);
                }
            }
        }
    }
}

/// Remembers the password of PostgreSQL's password file that the driver
/// will send for a connection to `host`, `port`, `database` and `user`
/// when neither the URL nor `PGPASSWORD` gives one.
///
/// This follows sqlx-postgres 0.8's lookup (`src/options/pgpass.rs`,
/// `load_password` and the functions it calls) step by step, so that what
/// is remembered is what the driver sends:
/// * the files in the driver's order: `PGPASSFILE`, then, when that gives
///   no password (missing, unreadable, too open, or no line matches),
///   `.pgpass` in the home directory (`std::env::home_dir`, as the driver's
///   `home` crate takes it); the first password found ends the search;
/// * on Linux a file that group or others may access is ignored by the
///   driver (its password is remembered all the same, and the search goes
///   on as the driver's does);
/// * the file is read line by line, and reading stops at the first line
///   that cannot be read (not UTF-8): the lines above it count;
/// * a line beginning with `#`, or blank (or `#`) after leading
///   whitespace, is passed over; a final `\n` or `\r\n` is cut;
/// * the first four fields (separated by `:`, with `\` escaping the next
///   character) must each be `*` or equal host, port, database and user,
///   the database being empty when the URL names none (the driver does not
///   fall back to the user's name); the first mismatch ends the line;
/// * the password is the rest of the line as written: escapes are not
///   undone and further `:` are kept (the unescaped form is remembered
///   too, harmlessly);
/// * a line that ends before a field the driver looks for is logged whole
///   by the driver at WARN (`Malformed line in pgpass file`): what is
///   left of it from that field on is remembered, the fields before it
///   being the connection's own host, port, database or user (or `*`).
///
/// Only the password used, and the rests of at most [`MALFORMED_KEPT`]
/// malformed lines per file: a file of thousands would push every other
/// secret out. A path that is not a
/// regular file (a pipe) is not read: reading it would take the driver's
/// bytes.
#[cfg_attr(not(feature = "postgres"), allow(dead_code))]
pub(crate) fn remember_pgpass(host: &str, port: u16, database: Option<&str>, user: &str) {
    let port = port.to_string();
    let wanted = [host, port.as_str(), database.unwrap_or(""), user];
    if let Some(path) = std::env::var_os("PGPASSFILE")
        && pgpass_file(std::path::Path::new(&path), wanted)
    {
        return;
    }
    // What the driver's `home::home_dir` calls on Unix.
    #[allow(deprecated)]
    let home = std::env::home_dir();
    if let Some(home) = home {
        pgpass_file(&home.join(".pgpass"), wanted);
    }
}

/// Remembers, for every line of PostgreSQL's password files (`PGPASSFILE`
/// and `~/.pgpass`, whichever exist) that the driver could take for
/// malformed, whatever connection it looks up, what the driver's warning
/// would show of it past the fields matched: the text after its last
/// unescaped `:` (or the whole line without one), as
/// [`remember_pgpass`] does for the lines that connection reaches. Called
/// before any parse of a URL by the driver, each of which may read the
/// file and log such a line; this reading logs nothing. At most
/// [`MALFORMED_KEPT`] lines per file; a path that is not a regular file
/// (a pipe) is not read.
#[cfg_attr(not(feature = "postgres"), allow(dead_code))]
pub(crate) fn remember_pgpass_malformed() {
    if let Some(path) = std::env::var_os("PGPASSFILE") {
        pgpass_file_malformed(std::path::Path::new(&path));
    }
    // What the driver's `home::home_dir` calls on Unix.
    #[allow(deprecated)]
    let home = std::env::home_dir();
    if let Some(home) = home {
        pgpass_file_malformed(&home.join(".pgpass"));
    }
}

/// [`remember_pgpass_malformed`] for the file at `path`.
#[cfg_attr(not(feature = "postgres"), allow(dead_code))]
fn pgpass_file_malformed(path: &std::path::Path) {
    use std::io::BufRead;

    if !std::fs::metadata(path).is_ok_and(|m| m.is_file()) {
        return;
    }
    let Ok(file) = std::fs::File::open(path) else {
        return;
    };
    let mut reader = std::io::BufReader::new(file);
    let mut line = String::new();
    let mut malformed = 0;
    while malformed < MALFORMED_KEPT {
        line.clear();
        // As the driver: the end of the file, or a line that cannot be
        // read (not UTF-8, say), ends the file.
        match reader.read_line(&mut line) {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        if line.starts_with('#') {
            continue;
        }
        let text = match line.strip_suffix('\n') {
            Some(text) => text.strip_suffix('\r').unwrap_or(text),
            None => &line,
        };
        // Any line the driver calls malformed for some connection: one
        // with fewer than the four fields before a password.
        if let Some(rest) = pgpass_malformed_rest(text) {
            malformed += 1;
            remember_pgpass_text(rest);
        }
    }
}

/// What the driver's warning would show past the matched fields if
/// `line` is malformed for some connection (fewer than four fields before
/// its password; see [`pgpass_line`]): the text after its last `:`.
#[cfg_attr(not(feature = "postgres"), allow(dead_code))]
fn pgpass_malformed_rest(line: &str) -> Option<&str> {
    if matches!(line.trim_start().chars().next(), None | Some('#')) {
        return None;
    }
    let mut rest = line;
    for _ in 0..4 {
        match pgpass_field(rest) {
            Some((_, after)) => rest = after,
            None => return Some(rest),
        }
    }
    None
}

/// The most malformed lines of one password file whose rests are
/// remembered.
const MALFORMED_KEPT: usize = 64;

/// Remembers what the driver takes from the password file at `path` for
/// `wanted` (host, port, database, user); returns whether the driver ends
/// its search there, with a password.
#[cfg_attr(not(feature = "postgres"), allow(dead_code))]
fn pgpass_file(path: &std::path::Path, wanted: [&str; 4]) -> bool {
    use std::io::BufRead;

    if !std::fs::metadata(path).is_ok_and(|m| m.is_file()) {
        return false;
    }
    let Ok(file) = std::fs::File::open(path) else {
        return false;
    };
    // The driver ignores a file others may read, on Linux only.
    #[cfg(target_os = "linux")]
    let used = {
        use std::os::unix::fs::PermissionsExt;
        file.metadata()
            .is_ok_and(|m| m.permissions().mode() & 0o77 == 0)
    };
    #[cfg(not(target_os = "linux"))]
    let used = true;
    let mut reader = std::io::BufReader::new(file);
    let mut line = String::new();
    let mut malformed = 0;
    loop {
        line.clear();
        // As the driver: the end of the file, or a line that cannot be
        // read (not UTF-8, say), ends the file.
        match reader.read_line(&mut line) {
            Ok(0) | Err(_) => return false,
            Ok(_) => {}
        }
        if line.starts_with('#') {
            continue;
        }
        let text = match line.strip_suffix('\n') {
            Some(text) => text.strip_suffix('\r').unwrap_or(text),
            None => &line,
        };
        match pgpass_line(text, wanted) {
            PgpassLine::Password(password) => {
                remember_pgpass_text(password);
                // A file the driver ignores does not end its search.
                return used;
            }
            PgpassLine::Malformed(rest) if malformed < MALFORMED_KEPT => {
                malformed += 1;
                remember_pgpass_text(rest);
            }
            PgpassLine::Malformed(_) => {}
            PgpassLine::Other => {}
        }
    }
}

/// What one line of a password file gives the driver.
#[cfg_attr(not(feature = "postgres"), allow(dead_code))]
enum PgpassLine<'a> {
    /// The line matches: its password, as written.
    Password(&'a str),
    /// The line ends before a field looked for, every field before it
    /// matching: the driver logs the whole line. What is left of it.
    Malformed(&'a str),
    /// A comment, a blank line, or one for another connection.
    Other,
}

#[cfg_attr(not(feature = "postgres"), allow(dead_code))]
fn pgpass_line<'a>(line: &'a str, wanted: [&str; 4]) -> PgpassLine<'a> {
    if matches!(line.trim_start().chars().next(), None | Some('#')) {
        return PgpassLine::Other;
    }
    let mut rest = line;
    for value in wanted {
        let Some((field, after)) = pgpass_field(rest) else {
            return PgpassLine::Malformed(rest);
        };
        if field != "*" && field != value {
            return PgpassLine::Other;
        }
        rest = after;
    }
    PgpassLine::Password(rest)
}

/// The next field of `text`, escapes undone, and what follows its `:`;
/// `None` when no unescaped `:` ends it.
#[cfg_attr(not(feature = "postgres"), allow(dead_code))]
fn pgpass_field(text: &str) -> Option<(String, &str)> {
    let mut field = String::new();
    let mut escaped = false;
    for (at, c) in text.char_indices() {
        match c {
            c if escaped => {
                field.push(c);
                escaped = false;
            }
            '\\' => escaped = true,
            ':' => return Some((field, &text[at + 1..])),
            c => field.push(c),
        }
    }
    None
}

/// Remembers `text` of a password file as written and with its escapes
/// undone (`\` keeping the next character).
#[cfg_attr(not(feature = "postgres"), allow(dead_code))]
fn remember_pgpass_text(text: &str) {
    remember(text.as_bytes());
    if text.contains('\\') {
        let mut unescaped = String::with_capacity(text.len());
        let mut chars = text.chars();
        while let Some(c) = chars.next() {
            match c {
                '\\' => unescaped.extend(chars.next()),
                c => unescaped.push(c),
            }
        }
        remember(unescaped.as_bytes());
    }
}

#[cfg_attr(
    not(any(feature = "redis", feature = "postgres", feature = "mysql")),
    allow(dead_code)
)]
fn remember_both(text: &str) {
    remember(text.as_bytes());
    remember(&percent_decoded(text));
    remember(&percent_decoded(&text.replace('+', " ")));
}

#[cfg_attr(
    not(any(feature = "redis", feature = "postgres", feature = "mysql")),
    allow(dead_code)
)]
fn percent_decoded(text: &str) -> Vec<u8> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match (bytes[i], bytes.get(i + 1), bytes.get(i + 2)) {
            (b'%', Some(&h), Some(&l)) if hex(h).is_some() && hex(l).is_some() => {
                let value = hex(h).unwrap_or(0) * 16 + hex(l).unwrap_or(0);
                out.push(u8::try_from(value).unwrap_or(b'?'));
                i += 3;
            }
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    out
}

/// Which bytes of `bytes` stand in a run of [`RUN`] or more bytes of a
/// remembered secret; `None` when none do. For bytes shown otherwise than
/// as text (escaped as `\xNN`), masked before they are escaped.
pub(crate) fn covered(bytes: &[u8]) -> Option<Vec<bool>> {
    if bytes.len() < RUN {
        return None;
    }
    let secrets = SECRETS.read().unwrap_or_else(PoisonError::into_inner);
    if secrets.is_empty() {
        return None;
    }
    let mut covered = vec![false; bytes.len()];
    let mut any = false;
    for (at, window) in bytes.windows(RUN).enumerate() {
        let Ok(window) = <[u8; RUN]>::try_from(window) else {
            continue;
        };
        if secrets.iter().any(|secret| secret.runs.contains(&window)) {
            covered[at..at + RUN].iter_mut().for_each(|c| *c = true);
            any = true;
        }
    }
    any.then_some(covered)
}

/// `text` with every run of [`RUN`] or more bytes of a remembered secret
/// shown as `***`.
pub(crate) fn mask(text: &str) -> Cow<'_, str> {
    let Some(covered) = covered(text.as_bytes()) else {
        return Cow::Borrowed(text);
    };
    let mut out = String::with_capacity(text.len());
    let mut masking = false;
    for (at, c) in text.char_indices() {
        // A character is masked when any of its bytes is.
        if covered[at..at + c.len_utf8()].iter().any(|&c| c) {
            if !masking {
                out.push_str("***");
                masking = true;
            }
        } else {
            masking = false;
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// `text` with every run of 8 or more bytes of a secret this process holds
/// shown as `***`: the masking the library applies to every piece of text
/// a peer sends before it shows it (in its errors and logs), for an
/// application that prints such text itself (an owner, uid, source or
/// name of a listing, a leader's value).
///
/// The secrets are those the process handed its lockers: a
/// [`RemoteLocker`](crate::net::RemoteLocker)'s token, a lock server's own
/// tokens, the password of a Redis or database URL, `PGPASSWORD`,
/// `MYSQL_PWD` and the PostgreSQL password file; and those given to
/// [`remember_secret`]. At most 4,096 are kept, the oldest forgotten
/// first. Only masked, not escaped: text for a terminal also needs its
/// control characters escaped.
///
/// ```
/// use quorum_lock::{mask_secrets, remember_secret};
///
/// remember_secret("tok-8d2fa19c77");
/// assert_eq!(mask_secrets("owner: ops (tok-8d2fa19c77)"), "owner: ops (***)");
/// assert_eq!(mask_secrets("tok-8d2"), "tok-8d2"); // under 8 bytes of it
/// ```
pub fn mask_secrets(text: &str) -> Cow<'_, str> {
    mask(text)
}

/// Remembers `secret` for [`mask_secrets`] and for the masking of every
/// error and log line the library builds from a peer's words: for a
/// secret the application holds but has not handed a locker (a token read
/// for another command, say). A secret shorter than 8 bytes is not
/// remembered (shorter runs turn up in honest words).
pub fn remember_secret(secret: &str) {
    remember(secret.as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_of_a_remembered_secret_are_masked_wherever_they_stand() {
        remember(b"Zq7pW2xK9mN4vB8c-unit");
        assert_eq!(mask("ERR with Zq7pW2xK9mN4vB8c-unit!"), "ERR with ***!");
        // A part of eight bytes or more, quoted alone.
        assert_eq!(mask("got xK9mN4vB8 here"), "got *** here");
        // Shorter runs stay: they turn up in honest words.
        assert_eq!(mask("xK9mN4v"), "xK9mN4v");
        // Multi-byte characters around a run stay whole.
        assert_eq!(mask("é Zq7pW2xK9 é"), "é *** é");
    }

    #[test]
    fn a_secret_is_masked_as_debug_escapes_it_too() {
        remember(b"4be1d\"a07c3\\52e86");
        let shown = format!("{:?}", "4be1d\"a07c3\\52e86");
        assert_eq!(mask(&shown), "\"***\"");
    }

    #[test]
    fn a_url_password_is_remembered_as_the_url_parser_reads_it_too() {
        // Tabs, line feeds and carriage returns are removed anywhere, C0
        // controls and spaces cut at the ends, as the `url` crate does.
        remember_url("redis://app:Tabbed1\tpass\r\nword-unit@h:6379");
        assert_eq!(mask("got Tabbed1password-unit"), "got ***");
        remember_url(" postgres://h/l?password=Trailing-unit-5 \n");
        assert_eq!(mask("got Trailing-unit-5."), "got ***.");
    }

    #[test]
    fn passwords_are_taken_from_user_information_and_query_parameters() {
        remember_url("postgres://app:Pa%2Fss-url-unit@db/locks?sslpassword=Key-unit-1234");
        assert_eq!(mask("got Pa/ss-url-unit"), "got ***");
        assert_eq!(mask("got Pa%2Fss-url-unit"), "got ***");
        assert_eq!(mask("key Key-unit-1234."), "key ***.");
        // Keys percent-encoded, `pass` as Redis names it, `+` as a space.
        remember_url("postgres://db/l?pa%73sword=Enc-key-unit-99&x=1");
        assert_eq!(mask("got Enc-key-unit-99"), "got ***");
        remember_url("redis+unix:///run/r.sock?pass=Unix-pass-unit-7");
        assert_eq!(mask("got Unix-pass-unit-7"), "got ***");
        remember_url("mysql://db/l?password=Plus+sign+unit");
        assert_eq!(mask("got Plus sign unit"), "got ***");
        // An `@` in the query is no user information.
        remember_url("postgres://app@h:5432/honest-words-db?application_name=x@y");
        assert_eq!(mask("database honest-words-db"), "database honest-words-db");
        // Too short to remember.
        remember_url("redis://:short@cache");
        assert_eq!(mask("a short word"), "a short word");
    }

    /// A password file's line is matched as sqlx-postgres 0.8 matches it.
    #[test]
    fn pgpass_lines_are_read_as_the_driver_reads_them() {
        let wanted = ["db", "5432", "", "app"];
        let password = |line| match pgpass_line(line, wanted) {
            PgpassLine::Password(p) => Some(p),
            _ => None,
        };
        // The password as written: escapes kept, later colons too.
        assert_eq!(password(r"db:5432::app:pa\:ss:w"), Some(r"pa\:ss:w"));
        assert_eq!(password("*:*:*:*:any"), Some("any"));
        // Escapes are undone in the fields matched.
        assert_eq!(password(r"d\b:5432::app:x"), Some("x"));
        // No database named: only an empty field or `*` matches, not the
        // user's name.
        assert_eq!(password("db:5432:app:app:x"), None);
        // Comments and blank lines.
        assert_eq!(password("  # db:5432::app:x"), None);
        assert_eq!(password("   "), None);
        // A mismatch ends the line before a missing field is looked for.
        assert!(matches!(
            pgpass_line("other:5432", wanted),
            PgpassLine::Other
        ));
        assert!(matches!(
            pgpass_line("db:5432:secret-rest", wanted),
            PgpassLine::Malformed("secret-rest")
        ));
        // Read before any connection is known: whatever a connection's
        // fields, what the driver would show past them.
        assert_eq!(
            pgpass_malformed_rest("db:5432:secret-rest"),
            Some("secret-rest")
        );
        assert_eq!(pgpass_malformed_rest(r"x\:y:r\:est"), Some(r"r\:est"));
        assert_eq!(
            pgpass_malformed_rest("no-colon-at-all"),
            Some("no-colon-at-all")
        );
        assert_eq!(pgpass_malformed_rest("*:*:*:*:pass:word"), None);
        assert_eq!(pgpass_malformed_rest(" # h:p"), None);
    }
}
