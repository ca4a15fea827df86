//! Properties of the command line's parsers over random and mutated
//! input: node lists (`--nodes`, `--redis`), the redaction every shown URL
//! goes through, and durations and sizes, through clap as a user meets
//! them. None may panic; every error is one line without control
//! characters; no 4-character piece of a password given in a URL shows in
//! any error or shown text, wherever the password sits and whatever it
//! holds; every duration accepted is one a deadline can be computed from.
//!
//! `QUORUM_LOCK_PROP_SEED=<n>` replays a run (the seed is printed, and
//! again on failure); `QUORUM_LOCK_PROP_CASES=<n>` sets the cases per
//! test and `QUORUM_LOCK_PROP_SECONDS=<s>` bounds the time of all of them
//! together (each runs one case at least).

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use clap::Parser;
use rand::rngs::SmallRng;
use rand::seq::IndexedRandom;
use rand::{RngExt, SeedableRng};

use crate::args::Cli;
use crate::fail::{one_line, Failure};
use crate::node_urls::{classify, shown, Entry};
use crate::node_urls::{redact, split_urls};

/// Cases per test unless `QUORUM_LOCK_PROP_CASES` says otherwise.
const DEFAULT_CASES: usize = 1000;

fn env<T: std::str::FromStr>(name: &str) -> Option<T> {
    std::env::var(name).ok().and_then(|v| v.trim().parse().ok())
}

/// Runs `case` with a generator of its own per case until the cases or
/// the time run out, printing the seed, and again with the case if one
/// fails.
fn run(test: &str, mut case: impl FnMut(&mut SmallRng)) {
    let seed = env("QUORUM_LOCK_PROP_SEED").unwrap_or_else(|| rand::rng().random());
    let cases: usize = env("QUORUM_LOCK_PROP_CASES").unwrap_or(DEFAULT_CASES);
    let seconds: f64 = env("QUORUM_LOCK_PROP_SECONDS").unwrap_or(30.0);
    eprintln!("{test}: seed {seed}, up to {cases} cases or {seconds} s for all tests");
    // One deadline for the tests of the run, which share the cores.
    static START: OnceLock<Instant> = OnceLock::new();
    let until = *START.get_or_init(Instant::now) + Duration::from_secs_f64(seconds);
    let mut done = 0;
    while done < cases && (done == 0 || Instant::now() < until) {
        let mut rng =
            SmallRng::seed_from_u64(seed ^ (done as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15));
        let report = Report {
            test,
            seed,
            case: done,
        };
        case(&mut rng);
        drop(report);
        done += 1;
    }
    eprintln!("{test}: {done} cases");
}

/// Prints how to replay a case that failed, however it failed.
struct Report<'a> {
    test: &'a str,
    seed: u64,
    case: usize,
}

impl Drop for Report<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "{} failed in case {} of seed {}; replay with QUORUM_LOCK_PROP_SEED={}",
                self.test, self.case, self.seed, self.seed
            );
        }
    }
}

/// The password every generated URL carries, cut by characters that end
/// URL parts. Nothing else in the generated text has its capitals.
const MARKER: &str = "Pw-SECRET";

/// Characters users leave unencoded in passwords.
const CUTS: [&str; 14] = [
    "/", "?", "#", "@", "%", "%40", ":", "=", "&", "+", ";", "[", "]", "/@?#",
];

fn password(rng: &mut SmallRng) -> String {
    let mut pw = String::new();
    for c in MARKER.chars() {
        pw.push(c);
        if rng.random_range(0..4u8) == 0 {
            pw.push_str(CUTS.choose(rng).expect("cuts"));
        }
    }
    pw
}

/// Every 4-character piece of `password` that holds a letter of the
/// marker's: none may show.
fn pieces(password: &str) -> Vec<String> {
    let chars: Vec<char> = password.chars().collect();
    chars
        .windows(4)
        .filter(|w| w.iter().any(|c| c.is_ascii_uppercase()))
        .map(|w| w.iter().collect())
        .collect()
}

fn lowercase(rng: &mut SmallRng, len: usize) -> String {
    (0..len)
        .map(|_| char::from(b'a' + rng.random_range(0..26u8)))
        .collect()
}

/// A URL (or something typed for one) with `pw` where a password goes.
fn url_with(rng: &mut SmallRng, pw: &str) -> String {
    let scheme = *[
        "redis://",
        "rediss://",
        "postgres://",
        "postgresql://",
        "mysql://",
        "mariadb://",
        "REDIS://",
        "Postgres://",
        "postgress://",
        "http://",
        "redis:/",
        "redis//",
        "",
    ]
    .choose(rng)
    .expect("schemes");
    let user = *["", "app", "locks", "u"].choose(rng).expect("users");
    let host = *["db.internal", "10.0.0.5", "[::1]", "h", "cache-1"]
        .choose(rng)
        .expect("hosts");
    let port = *["", ":5432", ":6379", ":1"].choose(rng).expect("ports");
    let path = *["", "/locks", "/0", "/a/b"].choose(rng).expect("paths");
    let query = *["", "?sslmode=require", "?x=1&y=2"]
        .choose(rng)
        .expect("queries");
    let at = format!("{host}{port}{path}");
    match rng.random_range(0..9u8) {
        0 => format!("{scheme}{user}:{pw}@{at}{query}"),
        1 => format!("{scheme}:{pw}@{at}"),
        2 => format!("{scheme}{pw}@{at}{query}"),
        3 => format!("{scheme}{at}?user={user}&password={pw}"),
        4 => format!("{scheme}{at}?password={pw}&sslmode=require"),
        5 => format!("{scheme}{at}?{pw}"),
        6 => format!("{scheme}{at}{query}#{pw}"),
        // The scheme after the password.
        7 => format!("{user}:{pw}@{host}://x"),
        // A password typed for a scheme. Text of a scheme's characters
        // alone reads as one there, and messages show a scheme (the rule
        // of `quorum_lock::redact_url`), so this one holds another
        // character.
        _ => {
            let scheme_like = pw
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
            let cut = if scheme_like { "/" } else { "" };
            format!("{pw}{cut}://{host}{port}")
        }
    }
}

/// A node list of one to four entries, some with the password, some
/// plain, with spaces and sometimes an empty or repeated entry.
fn node_list(rng: &mut SmallRng, pw: &str) -> String {
    let mut entries: Vec<String> = (0..rng.random_range(1..5))
        .map(|_| match rng.random_range(0..4u8) {
            0 => format!("{}:{}", lowercase(rng, 3), rng.random_range(1..70_000u32)),
            1 => format!("redis://{}:6379", lowercase(rng, 2)),
            _ => url_with(rng, pw),
        })
        .collect();
    match rng.random_range(0..8u8) {
        0 => entries.push(String::new()),
        1 => entries.push(entries[0].clone()),
        _ => {}
    }
    let space = *["", " ", "  "].choose(rng).expect("spaces");
    entries.join(&format!("{space},{space}"))
}

/// Random changes: characters removed, doubled or inserted, among them
/// control characters, multi-byte ones and URL punctuation.
fn mutated(rng: &mut SmallRng, text: &str) -> String {
    const INSERTS: [char; 14] = [
        ':', '/', '@', '?', '#', ',', ' ', '\u{1b}', '\n', '\0', 'é', '𝄞', '[', '%',
    ];
    let mut chars: Vec<char> = text.chars().collect();
    for _ in 0..rng.random_range(1..5) {
        let at = rng.random_range(0..=chars.len());
        match rng.random_range(0..3u8) {
            0 if at < chars.len() => {
                chars.remove(at);
            }
            1 if at < chars.len() => chars.insert(at, chars[at]),
            _ => chars.insert(at, *INSERTS.choose(rng).expect("inserts")),
        }
    }
    chars.into_iter().collect()
}

/// One line, no control characters, and none of `secrets`.
fn check_shown(what: &str, text: &str, input: &str, secrets: &[String]) {
    assert!(
        !text.chars().any(char::is_control),
        "{what} of {input:?} holds a control character: {text:?}"
    );
    for piece in secrets {
        assert!(
            !text.contains(piece.as_str()),
            "{what} of {input:?} shows {piece:?}: {text:?}"
        );
    }
}

/// Everything the node-list parsers say about `input`: their errors, each
/// entry as shown, and the lock-server addresses they accept, which
/// messages show as given.
fn node_list_texts(input: &str) -> Vec<(&'static str, String)> {
    let mut texts: Vec<(&'static str, String)> = input
        .split(',')
        .flat_map(|entry| {
            [
                ("redacted entry", shown(entry)),
                ("redacted entry", redact(entry)),
            ]
        })
        .collect();
    match classify(input) {
        Ok(entries) => {
            for entry in entries {
                match entry {
                    Entry::Server(addr) => texts.push(("lock-server address", addr)),
                    other => texts.push(("shown entry", shown(other.given()))),
                }
            }
        }
        Err(err) => {
            texts.push(("--nodes error", err.to_string()));
            texts.push(("--nodes failure", Failure::from(err).message));
        }
    }
    match split_urls(input) {
        Ok(urls) => texts.extend(urls.iter().map(|u| ("shown --redis URL", redact(u)))),
        Err(failure) => texts.push(("--redis error", failure.message)),
    }
    texts
}

#[test]
fn node_lists_never_show_a_piece_of_a_password() {
    run("node lists with passwords", |rng| {
        let pw = password(rng);
        let secrets = pieces(&pw);
        let input = node_list(rng, &pw);
        for (what, text) in node_list_texts(&input) {
            check_shown(what, &text, &input, &secrets);
        }
    });
}

#[test]
fn mutated_and_random_node_lists_never_panic_and_errors_are_one_line() {
    run("mutated node lists", |rng| {
        let input = if rng.random() {
            let pw = password(rng);
            let list = node_list(rng, &pw);
            mutated(rng, &list)
        } else {
            let bytes: Vec<u8> = (0..rng.random_range(0..40)).map(|_| rng.random()).collect();
            String::from_utf8_lossy(&bytes).into_owned()
        };
        for (what, text) in node_list_texts(&input) {
            check_shown(what, &text, &input, &[]);
        }
    });
}

/// Something typed for a duration: valid ones, units humantime does not
/// know, huge and odd numbers, and noise.
fn duration_text(rng: &mut SmallRng) -> String {
    const UNITS: [&str; 16] = [
        "ns", "us", "µs", "ms", "s", "sec", "m", "min", "h", "hours", "d", "days", "w", "M", "y",
        "years",
    ];
    let number = match rng.random_range(0..8u8) {
        0 => "0".to_owned(),
        1 => u64::MAX.to_string(),
        2 => "99999999999999999999999".to_owned(),
        3 => format!("{}", rng.random_range(0..1_000_000_000u64)),
        4 => "1.5".to_owned(),
        5 => "-3".to_owned(),
        _ => format!("{}", rng.random_range(1..100u32)),
    };
    let unit = *UNITS.choose(rng).expect("units");
    let text = match rng.random_range(0..6u8) {
        0 => format!("{number}{unit} {}s", rng.random_range(0..60u32)),
        1 => number,
        _ => format!("{number}{unit}"),
    };
    if rng.random_range(0..3u8) == 0 {
        mutated(rng, &text)
    } else {
        text
    }
}

/// The command lines a duration reaches the parser through.
fn with_duration(flag: &str, value: &str) -> Vec<String> {
    let value = format!("--{flag}={value}");
    let args: &[&str] = match flag {
        "validity" | "handshake-timeout" => &["server", "--listen", "127.0.0.1:0", &value],
        _ => &["run", "--nodes", "a:1", &value, "name", "--", "true"],
    };
    std::iter::once("quorum-lock")
        .chain(args.iter().copied())
        .map(str::to_owned)
        .collect()
}

#[test]
fn durations_parse_into_usable_deadlines_or_say_why_in_one_line() {
    let flags = [
        "validity",
        "handshake-timeout",
        "timeout",
        "grace",
        "connect-timeout",
    ];
    run("durations", |rng| {
        let text = duration_text(rng);
        let flag = *flags.choose(rng).expect("flags");
        match Cli::try_parse_from(with_duration(flag, &text)) {
            Ok(_) => {
                let parsed = humantime::parse_duration(text.trim()).expect("accepted");
                assert!(!parsed.is_zero(), "--{flag}={text:?} accepted zero");
                // The command computes deadlines from it: now + grace,
                // now + timeout, a lease's instants.
                assert!(
                    Instant::now().checked_add(parsed).is_some()
                        && tokio::time::Instant::now().checked_add(parsed).is_some(),
                    "--{flag}={text:?} accepted {parsed:?}, past any deadline"
                );
            }
            Err(err) => {
                let line = one_line(&err.render().to_string());
                check_shown("error", &line, &text, &[]);
                assert!(line.contains(&format!("--{flag}")), "{line}");
            }
        }
    });
}

#[test]
fn sizes_parse_or_say_why_in_one_line() {
    run("sizes", |rng| {
        let number = match rng.random_range(0..4u8) {
            0 => u64::MAX.to_string(),
            1 => "0".to_owned(),
            _ => rng.random_range(0..100_000u64).to_string(),
        };
        let unit = *["", "b", "KiB", "mb", "GiB", "TiB", " MiB"]
            .choose(rng)
            .expect("units");
        let text = mutated(rng, &format!("{number}{unit}"));
        let args = [
            "quorum-lock",
            "server",
            "--listen",
            "127.0.0.1:0",
            &format!("--max-bytes-per-connection={text}"),
        ];
        if let Err(err) = Cli::try_parse_from(args) {
            let line = one_line(&err.render().to_string());
            check_shown("error", &line, &text, &[]);
        }
    });
}
