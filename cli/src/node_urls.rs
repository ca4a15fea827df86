//! The entries of `--nodes` and what kind of node each one is: a lock
//! server's `host:port` (no scheme), or a Redis or database URL, told apart
//! by the scheme. Everything here is checked before anything connects.
//!
//! An entry may carry a password, so no message here shows an entry as
//! given: URLs are shown by [`shown`], without user, password, query or
//! fragment.

use quorum_lock::sql::Backend;
use thiserror::Error;

use crate::fail::Failure;

/// How a bad entry of a list that carries credentials is shown: a comma
/// in a password splits the list into pieces that no redaction can tell
/// from host names.
pub const HIDDEN: &str =
    "not shown since the list carries credentials; write a comma in a password as %2C";

/// The schemes `--nodes` takes, as messages list them.
pub const SCHEMES: &str = "host:port (no scheme) for a lock server, redis:// or rediss:// for \
     Redis, postgres:// or postgresql:// for PostgreSQL, mysql:// or mariadb:// for MySQL or \
     MariaDB";

/// One entry of the list, as given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    /// `host:port`: a `quorum-lock server`.
    Server(String),
    /// `redis://` or `rediss://`: a standalone Redis server.
    Redis(String),
    /// `postgres://`, `postgresql://`, `mysql://` or `mariadb://`.
    Sql { url: String, backend: Backend },
}

impl Entry {
    /// The URL or address as given (credentials included: never show it).
    pub fn given(&self) -> &str {
        match self {
            Entry::Server(addr) => addr,
            Entry::Redis(url) | Entry::Sql { url, .. } => url,
        }
    }
}

/// Why a node list was refused. Each message names the entry (without its
/// credentials) and what to write instead.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum EntryError {
    #[error(
        "empty node list: pass --nodes host:port,... (or URLs: {SCHEMES}) or set QUORUM_LOCK_NODES"
    )]
    EmptyList,
    /// `shown` is the entry quoted, or its place when it is not shown.
    #[error("bad node address {shown}: {why}")]
    BadAddress { shown: String, why: &'static str },
    #[error(
        "node {position} of {total} ({shown}): {scheme} is not a kind of node --nodes takes; \
         it takes {SCHEMES}"
    )]
    UnknownScheme {
        position: usize,
        total: usize,
        shown: String,
        /// `scheme "http"`, or `a URL without a scheme` words when the
        /// scheme is empty or not one a URL could have.
        scheme: String,
    },
    #[error("node {0} is listed twice")]
    Twice(String),
}

impl From<EntryError> for Failure {
    fn from(err: EntryError) -> Failure {
        Failure::usage(err.to_string())
    }
}

/// Splits `A,B,C` and tells each entry's kind by its scheme. A lock
/// server listed twice is refused here: it would count twice towards the
/// quorum and break mutual exclusion. (URLs are compared once their
/// lockers say which server they reach.)
pub fn classify(raw: &str) -> Result<Vec<Entry>, EntryError> {
    // A comma inside a password splits it into entries of its own, which
    // redaction cannot tell from a host name: in a list that carries
    // credentials, a bad entry is named by its place only.
    classify_with(raw, raw.contains(['@', '=']))
}

/// [`classify`], told whether the list carries credentials: one group of
/// several (node_groups.rs) may hold a piece of a password that a `;`
/// cut from the rest of its URL, and nothing else of it.
pub fn classify_with(raw: &str, secret_bearing: bool) -> Result<Vec<Entry>, EntryError> {
    if raw.trim().is_empty() {
        return Err(EntryError::EmptyList);
    }
    let parts: Vec<&str> = raw.split(',').map(str::trim).collect();
    let total = parts.len();
    let mut entries: Vec<Entry> = Vec::with_capacity(total);
    for (i, part) in parts.iter().enumerate() {
        let shown_as = if secret_bearing {
            HIDDEN.to_owned()
        } else {
            shown(part)
        };
        let entry = entry(part, i + 1, total, shown_as)?;
        if let Entry::Server(addr) = &entry {
            let key = server_key(addr);
            let twice = entries.iter().any(|e| match e {
                Entry::Server(other) => server_key(other) == key,
                _ => false,
            });
            if twice {
                let named = if secret_bearing {
                    format!("{} of {total} ({HIDDEN})", i + 1)
                } else {
                    crate::words::escaped(addr).into_owned()
                };
                return Err(EntryError::Twice(named));
            }
        }
        entries.push(entry);
    }
    Ok(entries)
}

/// What makes two lock-server addresses one server: the host without
/// regard to case (DNS names are case-blind, and `host.` is `host`), an IP
/// address as the one it reaches whatever its spelling (`127.1`,
/// `2130706433`, `0x7f.0.0.1` and `[::ffff:127.0.0.1]` are all
/// `127.0.0.1`, as the system's resolver reads them), and the port as a
/// number (`07070` is `7070`). Called on entries [`check_address`] took.
pub fn server_key(addr: &str) -> (String, u16) {
    let (host, port) = addr.rsplit_once(':').unwrap_or((addr, ""));
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    let host = match bare.parse::<std::net::IpAddr>() {
        Ok(ip) => ip.to_canonical().to_string(),
        Err(_) => match ipv4_any_form(bare) {
            Some(ip) => ip.to_string(),
            None => bare.strip_suffix('.').unwrap_or(bare).to_ascii_lowercase(),
        },
    };
    (host, port.parse().unwrap_or(0))
}

/// An IPv4 address in any of the forms the C library's resolver takes
/// (`inet_aton`): one to four parts, each decimal, octal (a leading `0`)
/// or hexadecimal (`0x`), the last filling the bytes the others left.
fn ipv4_any_form(host: &str) -> Option<std::net::Ipv4Addr> {
    let parts: Vec<&str> = host.split('.').collect();
    if parts.len() > 4 {
        return None;
    }
    let mut numbers = Vec::with_capacity(parts.len());
    for part in &parts {
        let (digits, radix) =
            if let Some(hex) = part.strip_prefix("0x").or_else(|| part.strip_prefix("0X")) {
                (hex, 16)
            } else if part.len() > 1 && part.starts_with('0') {
                (&part[1..], 8)
            } else {
                (*part, 10)
            };
        if digits.is_empty() && radix != 16 {
            return None;
        }
        let number = if digits.is_empty() {
            0
        } else if digits.chars().all(|c| c.is_digit(radix)) {
            u32::from_str_radix(digits, radix).ok()?
        } else {
            return None;
        };
        numbers.push(number);
    }
    let (last, leading) = numbers.split_last()?;
    let mut value: u32 = 0;
    for (i, number) in leading.iter().enumerate() {
        let byte = u8::try_from(*number).ok()?;
        value |= u32::from(byte) << (24 - 8 * i);
    }
    let room = 32 - 8 * leading.len();
    if room < 32 && *last >> room != 0 {
        return None;
    }
    Some(std::net::Ipv4Addr::from(value | last))
}

/// One entry, the `position`th of `total`.
fn entry(part: &str, position: usize, total: usize, shown_as: String) -> Result<Entry, EntryError> {
    let Some((scheme, _)) = part.split_once("://") else {
        check_address(part, position, total, shown_as)?;
        return Ok(Entry::Server(part.to_owned()));
    };
    if let Some(backend) = Backend::of_url(part) {
        return Ok(Entry::Sql {
            url: part.to_owned(),
            backend,
        });
    }
    match scheme.to_ascii_lowercase().as_str() {
        "redis" | "rediss" => Ok(Entry::Redis(part.to_owned())),
        _ => Err(EntryError::UnknownScheme {
            position,
            total,
            shown: shown_as,
            scheme: scheme_words(scheme),
        }),
    }
}

/// How a message names a scheme that is not taken. Only a scheme that
/// could be one (RFC 3986: a letter, then letters, digits, `+`, `-`, `.`)
/// is quoted: anything else before `://` may be a password typed in the
/// wrong place.
fn scheme_words(scheme: &str) -> String {
    let plausible = scheme.starts_with(|c: char| c.is_ascii_alphabetic())
        && scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
    if plausible {
        format!("scheme \"{scheme}\"")
    } else {
        "a URL without a known scheme".to_owned()
    }
}

/// `host:port` with a non-empty host and a port in 1..=65535; IPv6 hosts
/// in brackets. Resolution happens when connecting.
fn check_address(
    entry: &str,
    position: usize,
    total: usize,
    shown_as: String,
) -> Result<(), EntryError> {
    let shown = if shown_as == HIDDEN {
        format!("{position} of {total} ({HIDDEN})")
    } else {
        format!("'{shown_as}'")
    };
    let bad = |why: &'static str| EntryError::BadAddress {
        shown: shown.clone(),
        why,
    };
    if entry.is_empty() {
        return Err(bad("empty entry in the node list"));
    }
    if entry.contains('@') {
        // `user:password@host:port` without a scheme: a URL whose scheme
        // was left out, not a lock server.
        return Err(bad(
            "it names a user but has no scheme; write postgres://, mysql:// or redis:// before \
             it, or host:port alone for a lock server",
        ));
    }
    let (host, port) = entry
        .rsplit_once(':')
        .ok_or_else(|| bad("expected host:port, or a URL with a scheme"))?;
    let bracketed = host.starts_with('[') && host.ends_with(']');
    if host.is_empty() || (host.contains(':') && !bracketed) || host.contains(char::is_whitespace) {
        return Err(bad("expected host:port (IPv6 as [addr]:port)"));
    }
    // No host name holds one, and messages show the address as given.
    if host.contains(char::is_control) {
        return Err(bad("the host holds a control character"));
    }
    // No host name or address holds either; `b=host` would be a group's
    // id read as part of a host (node_groups.rs), `;` a separator's.
    if host.contains(['=', ';']) {
        return Err(bad(
            "the host holds '=' or ';', which no host does: a group's id goes at the group's \
             start (ID=A,B,C), and ';' separates groups",
        ));
    }
    match port.parse::<u16>() {
        Ok(0) | Err(_) => Err(bad("the port must be a number from 1 to 65535")),
        Ok(_) => Ok(()),
    }
}

/// `text` as it may be shown: the library's redaction, which keeps no
/// password wherever it is and whatever it holds.
pub fn shown(text: &str) -> String {
    quorum_lock::redact_url(text)
}

/// A file's path for a message: as given, unless it holds `://` or `@`
/// (a node URL given to a file flag by mistake, password and all), which
/// is shown as [`shown`] shows a URL.
pub fn path_shown(path: &std::path::Path) -> String {
    let text = path.display().to_string();
    if text.contains("://") || text.contains('@') {
        shown(&text)
    } else {
        text
    }
}

/// Splits `A,B,C` into URLs and checks each is `redis://` or `rediss://`.
/// The same URL twice is caught later, by `host:port`.
pub fn split_urls(raw: &str) -> Result<Vec<String>, Failure> {
    if raw.trim().is_empty() {
        return Err(Failure::usage(
            "empty Redis node list: pass --redis redis://host:port,... or set QUORUM_LOCK_REDIS",
        ));
    }
    let entries: Vec<&str> = raw.split(',').map(str::trim).collect();
    // A comma inside a password splits it into entries of its own, which
    // redaction cannot tell from a host: with credentials in the list, a
    // bad entry is named by its place only.
    let secret_bearing = raw.contains(['@', '=']);
    let mut urls = Vec::with_capacity(entries.len());
    for (i, entry) in entries.iter().enumerate() {
        let bad = |why: &str| {
            let shown = if secret_bearing {
                HIDDEN.to_owned()
            } else {
                redact(entry)
            };
            Failure::usage(format!(
                "Redis node {} of {} ({shown}): {why}",
                i + 1,
                entries.len(),
            ))
        };
        if entry.is_empty() {
            return Err(bad("empty entry in the list"));
        }
        let scheme = entry.split_once("://").map(|(s, _)| s.to_ascii_lowercase());
        if !matches!(scheme.as_deref(), Some("redis" | "rediss")) {
            return Err(bad(
                "expected redis://[user:password@]host:port[/db], or rediss://... for TLS",
            ));
        }
        urls.push((*entry).to_owned());
    }
    Ok(urls)
}

/// `url` as it may be shown: the library's redaction, which keeps no
/// password wherever it is and whatever it holds.
pub fn redact(url: &str) -> String {
    quorum_lock::redact_url(url)
}

/// `message` (a usage error of clap's, which quotes the arguments it
/// stumbled on, a node URL given without its flag among them) with every
/// URL in it shown by [`shown`]: each of `given` (the arguments, the
/// variables' values) that holds `://` is replaced wherever it appears,
/// as a whole and (for `--flag=VALUE`) its value alone, and so is any
/// other word that holds `://`; the same for `@` (a URL typed without its
/// scheme).
pub fn without_urls(message: &str, given: impl IntoIterator<Item = String>) -> String {
    // A URL, or `user:password@host` typed without its scheme.
    let secret = |g: &str| g.contains("://") || g.contains('@');
    let mut given: Vec<String> = given.into_iter().filter(|g| secret(g)).collect();
    // The longest first: an argument may hold another one.
    given.sort_by_key(|g| std::cmp::Reverse(g.len()));
    let mut out = message.to_owned();
    for arg in &given {
        out = out.replace(arg.as_str(), &shown_arg(arg));
        if let Some((_, value)) = flag_and_value(arg) {
            out = out.replace(value, &shown_list(value));
        }
    }
    out.split(' ')
        .map(|word| {
            if !secret(word) {
                return word.to_owned();
            }
            let quote = |c: char| matches!(c, '\'' | '"' | '`');
            let core = word.trim_matches(quote);
            let start = word.len() - word.trim_start_matches(quote).len();
            let end = start + core.len();
            format!("{}{}{}", &word[..start], shown_arg(core), &word[end..])
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// `--flag` and `VALUE` of `--flag=VALUE`.
fn flag_and_value(arg: &str) -> Option<(&str, &str)> {
    arg.split_once('=')
        .filter(|(flag, _)| flag.starts_with('-') && !flag.contains("://"))
}

/// An argument as a message may show it: `--flag=` kept, the URLs of the
/// value (or of the whole) [`shown`].
fn shown_arg(arg: &str) -> String {
    match flag_and_value(arg) {
        Some((flag, value)) => format!("{flag}={}", shown_list(value)),
        None => shown_list(arg),
    }
}

/// A comma-separated list, each entry [`shown`]: a comma in a password
/// leaves its pieces without `://`, and the redaction hides those too.
fn shown_list(list: &str) -> String {
    list.split(',').map(shown).collect::<Vec<_>>().join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_spelling_of_one_address_is_one_server() {
        let key = |addr: &str| server_key(addr);
        let loopback = ("127.0.0.1".to_owned(), 7070);
        for spelling in [
            "127.0.0.1:7070",
            "127.1:7070",
            "127.0.1:07070",
            "2130706433:7070",
            "0x7f.1:7070",
            "0177.0.0.1:7070",
            "[::ffff:127.0.0.1]:7070",
        ] {
            assert_eq!(key(spelling), loopback, "{spelling}");
        }
        assert_eq!(key("[::1]:1"), key("[0:0:0:0:0:0:0:1]:1"));
        assert_eq!(key("Node-A.:1"), key("node-a:1"));
        assert_ne!(key("127.0.0.2:7070"), loopback);
        // Not IPv4 addresses: compared as names.
        for name in ["256.1.1.1:1", "1.2.3.4.5:1", "08.1:1", "0x:1:1", "1..2:1"] {
            let (host, _) = key(name);
            assert!(
                host.parse::<std::net::Ipv4Addr>().is_err(),
                "{name} read as {host}"
            );
        }
    }

    #[test]
    fn usage_errors_show_no_password_of_a_url() {
        let args = [
            "quorum-lock",
            "locks",
            "postgres://app:Left Out1@db.internal/locks",
            "--ndoes=redis://:Typo,Secret2@cache:6379,mysql://u:Pw3@db/x",
        ]
        .map(String::from);
        let message = "unexpected argument 'postgres://app:Left Out1@db.internal/locks' found \
                       tip: to pass 'postgres://app:Left Out1@db.internal/locks' as a value, use \
                       '-- postgres://app:Left Out1@db.internal/locks'; unexpected argument \
                       '--ndoes=redis://:Typo,Secret2@cache:6379,mysql://u:Pw3@db/x' found; \
                       invalid value 'redis://:Typo,Secret2@cache:6379,mysql://u:Pw3@db/x'; \
                       not given: 'rediss://:Pw4@h:1'";
        let shown = without_urls(message, args);
        let schemeless = without_urls(
            "unexpected argument 'u:PwSec13@h:1' found",
            ["quorum-lock", "locks", "u:PwSec13@h:1"].map(String::from),
        );
        assert_eq!(schemeless, "unexpected argument 'h:1' found");
        for secret in ["Left", "Out1", "Typo", "Secret2", "Pw3", "Pw4"] {
            assert!(!shown.contains(secret), "{secret} shows: {shown}");
        }
        assert!(
            shown.contains("'postgres://db.internal/locks'")
                && shown.contains("'--ndoes=redis://***,")
                && shown.contains("mysql://db/x'")
                && shown.contains("'rediss://h:1'"),
            "{shown}"
        );
        assert_eq!(
            without_urls("unexpected argument '--ndoes' found", []),
            "unexpected argument '--ndoes' found"
        );
    }

    #[test]
    fn schemes_tell_the_kind_of_each_entry_in_a_mixed_list() {
        let entries = classify(
            " postgres://u:pw@db1:5432/locks , mysql://db2/locks,redis://:pw@r:6379,10.0.0.5:7070,\
             postgresql://db3/x,MARIADB://db4/x,rediss://r2:6380,[::1]:7070",
        )
        .expect("a valid list");
        assert_eq!(
            entries,
            [
                Entry::Sql {
                    url: "postgres://u:pw@db1:5432/locks".into(),
                    backend: Backend::Postgres
                },
                Entry::Sql {
                    url: "mysql://db2/locks".into(),
                    backend: Backend::MySql
                },
                Entry::Redis("redis://:pw@r:6379".into()),
                Entry::Server("10.0.0.5:7070".into()),
                Entry::Sql {
                    url: "postgresql://db3/x".into(),
                    backend: Backend::Postgres
                },
                Entry::Sql {
                    url: "MARIADB://db4/x".into(),
                    backend: Backend::MySql
                },
                Entry::Redis("rediss://r2:6380".into()),
                Entry::Server("[::1]:7070".into()),
            ]
        );
        // A host that happens to be called redis is still a lock server.
        assert_eq!(
            classify("redis:6379").ok(),
            Some(vec![Entry::Server("redis:6379".into())])
        );
    }

    #[test]
    fn lock_server_addresses_are_checked_as_before() {
        assert_eq!(classify(" a:1, b:2 ").map(|n| n.len()).ok(), Some(2));
        assert!(classify("[::1]:7070").is_ok());
        for bad in [
            "",
            " ",
            "a:1,,b:2",
            "a",
            "a:0",
            "a:x",
            ":80",
            "::1:80",
            "a:1,a:1",
            "a b:1",
            "a\u{1b}]0;T\u{7}:1",
            "b=127.0.0.1:7070",
            "a;b:1",
        ] {
            assert!(classify(bad).is_err(), "{bad:?} accepted");
        }
        assert_eq!(
            classify("a:1,a:1").unwrap_err().to_string(),
            "node a:1 is listed twice"
        );
        assert!(classify("")
            .unwrap_err()
            .to_string()
            .starts_with("empty node list"));
    }

    #[test]
    fn an_unknown_scheme_says_which_are_taken() {
        let err = classify("10.0.0.5:7070,http://x:80").unwrap_err();
        assert!(matches!(
            &err,
            EntryError::UnknownScheme {
                position: 2,
                total: 2,
                ..
            }
        ));
        let text = err.to_string();
        assert!(
            text.starts_with(
                "node 2 of 2 (http://x:80): scheme \"http\" is not a kind of node --nodes takes"
            ),
            "{text}"
        );
        for scheme in [
            "redis://",
            "postgres://",
            "mysql://",
            "mariadb://",
            "host:port",
        ] {
            assert!(text.contains(scheme), "{scheme} not named: {text}");
        }
        assert!(classify("sqlite:///tmp/x.db").is_err());
        assert!(classify("tcp://10.0.0.5:7070").is_err());
    }

    #[test]
    fn errors_never_show_credentials() {
        for bad in [
            "http://user:s3cret@host:80/db",
            "https://u:s3cret@h/x?password=s3cret",
            "ftp://:s3cret@h",
            "user:s3cret@db.internal:5432",
            "u:s3cret@h://x",
            "http://u:s3/cret@h",
            "http://u:s3cret@h@i:1",
            "10.0.0.1:1,mongodb://root:s3cret@h:27017/?authSource=admin",
            "a:1,,postgres://u:s3cret@h/db",
        ] {
            let err = classify(bad).expect_err(bad);
            let text = err.to_string();
            assert!(!text.contains("s3"), "{bad}: {text}");
            assert!(!text.contains("cret"), "{bad}: {text}");
            let failure = Failure::from(err);
            assert_eq!(failure.code, crate::fail::USAGE);
        }
    }

    #[test]
    fn shown_urls_keep_only_scheme_host_and_path() {
        for (text, expected) in [
            ("postgres://h:5432/db", "postgres://h:5432/db"),
            (
                "postgres://u:pw@h:5432/db?sslmode=require",
                "postgres://h:5432/db",
            ),
            ("mysql://u:p/w@h/db", "mysql://***"),
            ("mysql://u:p@ss@h/db#x", "mysql://h/db"),
            ("u:pw@h:1", "h:1"),
            ("u:pw@h://x", "***://x"),
            ("10.0.0.1:7070", "10.0.0.1:7070"),
        ] {
            assert_eq!(shown(text), expected, "{text}");
        }
    }

    /// A comma inside a password splits the list; the pieces cannot be told
    /// from host names, so in a list that carries credentials no bad
    /// entry is shown.
    #[test]
    fn pieces_of_a_password_cut_by_a_comma_never_show() {
        for (list, secret) in [
            (
                "postgres://db.internal/locks?user=app&password=Pw,SecretTail99",
                "SecretTail99",
            ),
            ("redis://:Pw,MiddleSecret42,x@cache:6379", "MiddleSecret42"),
            (
                "host=db.internal user=app password=KeywordSecret7 dbname=locks",
                "KeywordSecret7",
            ),
        ] {
            let text = classify(list).expect_err(list).to_string();
            assert!(!text.contains(secret), "{list}: {text}");
            assert!(text.contains("%2C"), "says how to write a comma: {text}");
        }
        // Listed twice: not shown either.
        let list = "redis://:Pw,Twice:1234,Twice:1234,x@cache:6379";
        let text = classify(list).expect_err(list).to_string();
        assert!(!text.contains("Twice"), "{text}");
        // Without credentials, the bad entry is shown, escaped.
        let text = classify("10.0.0.1:1,nohost").unwrap_err().to_string();
        assert!(text.contains("'nohost'"), "{text}");
    }
}

#[cfg(test)]
mod redis_list_tests {
    use super::*;

    #[test]
    fn pieces_of_a_password_cut_by_a_comma_never_show() {
        let err = split_urls("redis://:Pw,MiddleSecret42,x@cache:6379").unwrap_err();
        let text = err.to_string();
        assert!(!text.contains("MiddleSecret42"), "{text}");
        assert!(!text.contains("Pw"), "{text}");
    }

    #[test]
    fn redacted_urls_show_no_credentials() {
        for (url, shown) in [
            ("redis://127.0.0.1:6379", "redis://127.0.0.1:6379"),
            (
                "redis://:s3cret@127.0.0.1:6379/2",
                "redis://127.0.0.1:6379/2",
            ),
            ("rediss://user:s3cret@host:1", "rediss://host:1"),
            ("redis://u:p@ss@host:1?x=1", "redis://host:1"),
            ("user:s3cret@host:1", "host:1"),
            ("redis://host:1/0?pass=s3cret", "redis://host:1/0"),
            ("redis://h:1#s3cret", "redis://h:1"),
        ] {
            assert_eq!(redact(url), shown, "{url}");
        }
    }

    /// The help text states the default prefix; it must be the library's.
    #[test]
    fn the_documented_prefix_is_the_library_default() {
        use clap::CommandFactory;
        let prefix = quorum_lock::redis::RedisConfig::default().prefix;
        let cli = crate::args::Cli::command();
        let run = cli.find_subcommand("run").expect("a run subcommand");
        let help = run
            .get_arguments()
            .find(|a| a.get_id() == "redis_prefix")
            .and_then(|a| a.get_help())
            .map(|h| h.to_string())
            .expect("--redis-prefix has help");
        assert!(help.contains(&format!("[default: {prefix}]")), "{help}");
    }

    #[test]
    fn url_lists_are_checked_without_showing_passwords() {
        let urls = split_urls(" redis://a:1 , rediss://:pw@b:2 ").expect("valid");
        assert_eq!(urls, ["redis://a:1", "rediss://:pw@b:2"]);
        for bad in [
            "",
            " ",
            "redis://a:1,,redis://b:2",
            "a:1",
            "http://a:1",
            "tcp://:s3cret@a:1",
        ] {
            let err = split_urls(bad).expect_err(bad);
            assert_eq!(err.code, crate::fail::USAGE);
            assert!(!err.message.contains("s3cret"), "{}", err.message);
        }
    }
}
