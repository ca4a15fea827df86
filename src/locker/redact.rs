//! Showing a node URL without the secrets it may carry.
//!
//! A URL's password may sit in its user information or in a query
//! parameter, and users paste passwords that hold `/`, `?`, `#` and `@`
//! without percent-encoding them. Where such a character ends the host
//! part is ambiguous; the rule here is to show a piece only when it cannot
//! be part of a secret under any reading:
//! * the scheme, when it is a plausible one (a letter, then letters,
//!   digits, `+`, `-`, `.`);
//! * the host part (up to the first `/`, `?` or `#`), without anything up
//!   to its last `@` (the user information), and the path after it, but only when
//!   no `@` follows the host part: otherwise the "host part" may be the
//!   start of a password holding `/`, `?` or `#`, and the text after the
//!   `@` may be the end of a password in a query; and, where the host part
//!   holds no `@`, only when it looks like a host (`host`, `host:port`,
//!   `[v6]:port`), since a comma in a list can cut credentials off from
//!   their `@`;
//! * of the path, only a database name or number: `/***` for a path
//!   holding anything else (`/db;password=…`);
//! * never a query or a fragment, never a control character or anything
//!   but printable ASCII outside the scheme's `***`.
//!
//! What no rule can catch: a password that reads as a host, a port or a
//! scheme (`app:2024`, `Hunter2://`) once a comma in a list or a typo cut
//! it from its `@`; the command line names a bad entry of a list that
//! carries credentials by its place only for that reason.

/// `url` as it may be shown in logs, errors and listings:
/// `scheme://host:port/path`, without user and password, and no query or
/// fragment (which may hold a password). Works on
/// any text, URL or not, and never panics. When an `@` comes after the
/// host part (an unencoded `/`, `?` or `#` in a password, or an `@` in a
/// query), nothing after the scheme is shown: `scheme://***`.
///
/// ```
/// use quorum_lock::redact_url;
///
/// assert_eq!(redact_url("postgres://app:S3cr%40t@db:5432/locks?sslmode=require"), "postgres://db:5432/locks");
/// assert_eq!(redact_url("redis://:Zm9v/YmFy@cache:6379"), "redis://***");
/// assert_eq!(redact_url("postgres://db/locks?user=app&password=Pw@Tail"), "postgres://***");
/// assert_eq!(redact_url("10.0.0.5:7070"), "10.0.0.5:7070");
/// ```
pub fn redact_url(url: &str) -> String {
    let (scheme, rest) = match url.split_once("://") {
        Some((scheme, rest)) if plausible_scheme(scheme) => (Some(scheme), rest),
        // Whatever precedes `://` may be a password typed in the wrong place.
        Some((_, rest)) => (Some("***"), rest),
        None => (None, url),
    };
    let (authority, after) = host_part_and_after(rest);
    let shown = if after.contains('@') {
        "***".to_owned()
    } else {
        // With no `@`, a host part that is no host (`:Pw`, `user:pw`) may
        // be credentials cut off from their `@` (by a comma in a list, say).
        let host = authority
            .rsplit_once('@')
            .map_or(authority, |(_, host)| host);
        if plausible_host(host) {
            format!("{host}{}", shown_path(after))
        } else {
            "***".to_owned()
        }
    };
    let shown: String = shown.chars().filter(|c| !c.is_control()).collect();
    match scheme {
        Some(scheme) => format!("{scheme}://{shown}"),
        None => shown,
    }
}

/// `rest` (a URL after its `scheme://`) split where its host part ends:
/// at the first `/`, `?` or `#`.
fn host_part_and_after(rest: &str) -> (&str, &str) {
    rest.split_at(rest.find(['/', '?', '#']).unwrap_or(rest.len()))
}

/// Whether an `@` follows the host part of `url`: the mark of a password
/// that holds an unencoded `/`, `?` or `#`, which a URL parser reads as
/// the end of the host part, taking the user name for the host and the
/// password's first characters for a port or a path. A locker whose URLs
/// never carry an `@` in their path or query refuses such a URL rather
/// than connect to that host, or name it.
#[cfg(feature = "redis")]
pub(crate) fn at_after_host_part(url: &str) -> bool {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    host_part_and_after(rest).1.contains('@')
}

/// The path of a URL as it may be shown: a database name or number
/// (letters, digits, `_`, `-`, `.`, `/`), or `/***` for anything else,
/// which may carry a password (`/db;password=…`, a command line pasted
/// after the URL).
fn shown_path(after: &str) -> &str {
    let path = after.split(['?', '#']).next().unwrap_or("");
    if path
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '/'))
    {
        path
    } else {
        "/***"
    }
}

/// `host`, `host:port` or `[v6]:port`, with a numeric port: what a host
/// part without credentials looks like.
fn plausible_host(authority: &str) -> bool {
    if authority.is_empty() {
        return true; // nothing to hide
    }
    let (host_ok, port) = match authority.strip_prefix('[') {
        Some(rest) => match rest.split_once(']') {
            Some((v6, rest)) => (
                v6.chars()
                    .all(|c| c.is_ascii_hexdigit() || matches!(c, ':' | '.')),
                match rest {
                    "" => None,
                    _ => Some(rest.strip_prefix(':').unwrap_or("not a port")),
                },
            ),
            None => (false, None),
        },
        None => {
            let (host, port) = match authority.split_once(':') {
                Some((host, port)) => (host, Some(port)),
                None => (authority, None),
            };
            let ok = !host.is_empty()
                && host
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'));
            (ok, port)
        }
    };
    host_ok && port.is_none_or(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit()))
}

/// RFC 3986's scheme: a letter, then letters, digits, `+`, `-` or `.`.
pub(crate) fn plausible_scheme(scheme: &str) -> bool {
    scheme.starts_with(|c: char| c.is_ascii_alphabetic())
        && scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
}

#[cfg(test)]
mod tests {
    use super::redact_url;

    const SCHEMES: [&str; 8] = [
        "redis",
        "rediss",
        "postgres",
        "postgresql",
        "mysql",
        "mariadb",
        "postgress", // mistyped
        "",          // none at all
    ];

    /// Passwords with every character that ends a URL part, alone, in
    /// pairs and as the base64 secrets users paste.
    const PASSWORDS: [&str; 12] = [
        "Pw/Secret1",
        "Pw?Secret2",
        "Pw#Secret3",
        "Pw@Secret4",
        "Pw%Secret5",
        "Pw%40Secret6",
        "Zm9vYmFy/c2VjcmV0+UGFzcw==",
        "S3CR?ETPW",
        "a/b?c#d@e%f",
        "Pw@Secret7/x?y",
        "//@@??##",
        "Pw:Secret8@",
    ];

    /// Every piece of `secret` of 4 characters or more that is not just URL
    /// punctuation: none may show.
    fn pieces(secret: &str) -> Vec<String> {
        secret
            .split(['/', '?', '#', '@', '%', ':', '='])
            .filter(|p| p.len() >= 4)
            .map(str::to_owned)
            .chain(std::iter::once(secret.to_owned()))
            .collect()
    }

    fn url(scheme: &str, rest: &str) -> String {
        if scheme.is_empty() {
            rest.to_owned()
        } else {
            format!("{scheme}://{rest}")
        }
    }

    #[test]
    fn no_piece_of_a_password_shows_wherever_it_is_and_whatever_it_holds() {
        for scheme in SCHEMES {
            for pw in PASSWORDS {
                for rest in [
                    format!("locks:{pw}@db.internal:5432/locks"),
                    format!(":{pw}@db.internal:6379"),
                    format!("{pw}@db.internal"),
                    format!("locks:{pw}@db.internal:5432/locks?sslmode=require#frag"),
                    format!("db.internal:5432/locks?user=app&password={pw}"),
                    format!("db.internal:5432/locks?password={pw}&sslmode=require"),
                    format!("db.internal/locks#{pw}"),
                    format!("db.internal?{pw}"),
                ] {
                    let given = url(scheme, &rest);
                    let shown = redact_url(&given);
                    for piece in pieces(pw) {
                        assert!(
                            !shown.contains(&piece),
                            "{given:?} showed {piece:?}: {shown:?}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn a_password_before_the_scheme_does_not_show() {
        let shown = redact_url("u:Pw/Secret1@h://x");
        assert!(!shown.contains("Secret1"), "{shown}");
        assert_eq!(redact_url("Pw/Secret1://h:1"), "***://h:1");
    }

    #[test]
    fn hosts_ports_and_databases_still_show() {
        for (given, shown) in [
            ("redis://127.0.0.1:6379", "redis://127.0.0.1:6379"),
            ("redis://:pw@127.0.0.1:6379/2", "redis://127.0.0.1:6379/2"),
            ("rediss://user:pw@host:1", "rediss://host:1"),
            (
                "postgres://lock:pw@db.internal:5432/locks?sslmode=require",
                "postgres://db.internal:5432/locks",
            ),
            ("mysql://u:p%2Fw@[::1]:3306/x", "mysql://[::1]:3306/x"),
            ("mysql://10.0.0.1", "mysql://10.0.0.1"),
            ("10.0.0.5:7070", "10.0.0.5:7070"),
            ("user:pw@host:1", "host:1"),
            ("redis://h:1#pw", "redis://h:1"),
            ("", ""),
        ] {
            assert_eq!(redact_url(given), shown, "{given}");
        }
    }

    #[test]
    fn credentials_cut_off_from_their_at_sign_do_not_show() {
        // `redis://:Pw,Secret@h` split at its comma.
        assert_eq!(redact_url("redis://:Pw"), "redis://***");
        assert_eq!(redact_url("postgres://app:Secret1/db"), "postgres://***");
        assert_eq!(redact_url("mysql://h:notaport/x"), "mysql://***");
        assert_eq!(redact_url("[::1]:7070"), "[::1]:7070");
        assert_eq!(redact_url("[::1]"), "[::1]");
    }

    #[test]
    fn a_password_in_the_path_does_not_show() {
        for given in [
            "jdbc:derby://db.internal:1527/locks;user=app;password=DerbySecret9",
            "postgres://db:5432/locks;password=PathSecret9",
            "redis://cache:6379/0 -a SpaceSecret9",
        ] {
            let shown = redact_url(given);
            assert!(!shown.contains("Secret9"), "{given}: {shown}");
            assert!(shown.ends_with("/***"), "{given}: {shown}");
        }
    }

    #[test]
    fn bidirectional_and_line_separating_characters_never_show() {
        for given in [
            "redis://u:pw@ev\u{202e}il:1/0",
            "redis://evil:1/0\u{2028}x",
            "redis://h:1/\u{2066}0",
        ] {
            let shown = redact_url(given);
            assert!(shown.is_ascii(), "{given:?}: {shown:?}");
        }
    }

    #[test]
    fn control_characters_never_show() {
        assert_eq!(
            redact_url("redis://h:1/\n0\u{1b}]0;T\u{7}"),
            "redis://h:1/***"
        );
        assert_eq!(redact_url("redis://h\u{1b}]0;T\u{7}:1/0"), "redis://***");
    }
}
