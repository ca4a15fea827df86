//! Smaller rough edges of the command line: `help --help` works and
//! `help COMMAND` prints what `COMMAND --help` does, and the server's
//! start-up log says its values in words.

use std::time::Duration;

use crate::support::{cli, Scratch, Server};

const LIMIT: Duration = Duration::from_secs(20);

#[test]
fn the_start_up_log_says_its_values_in_words() {
    let dir = Scratch::new("edges-startup");
    let server = Server::start(&dir, &["--max-connections", "64"]);
    let log = server.log_text();
    let line = log
        .lines()
        .find(|l| l.contains("memory budget"))
        .unwrap_or_else(|| panic!("no memory budget line: {log}"));
    for placeholder in ["at most unauthenticated_mib", "at most client_mib"] {
        assert!(!line.contains(placeholder), "{line}");
    }
    let number_before = |words: &str| {
        let (before, _) = line
            .split_once(words)
            .unwrap_or_else(|| panic!("{words:?} missing: {line}"));
        before
            .rsplit(' ')
            .next()
            .and_then(|n| n.parse::<u64>().ok())
            .unwrap_or_else(|| panic!("no number before {words:?}: {line}"))
    };
    assert!(number_before(" MiB, clients with the token") > 0, "{line}");
    assert!(number_before(" MiB (lock table included)") > 0, "{line}");
    assert_eq!(number_before(" connections"), 64, "{line}");
}

#[test]
fn help_help_works_and_help_prints_what_help_flags_print() {
    let dir = Scratch::new("edges-help");
    let help = cli(&dir, &["help", "--help"], &[], LIMIT);
    assert_eq!(help.code, Some(0), "{help:?}");
    assert!(
        help.stdout.contains("Usage: quorum-lock help [COMMAND]"),
        "{help:?}"
    );
    for command in ["run", "server", "elect", "status"] {
        let via_help = cli(&dir, &["help", command], &[], LIMIT);
        let via_flag = cli(&dir, &[command, "--help"], &[], LIMIT);
        assert_eq!(via_help.code, Some(0), "{via_help:?}");
        assert_eq!(via_help.stdout, via_flag.stdout, "help {command}");
    }
    let top = cli(&dir, &["help"], &[], LIMIT);
    assert_eq!(top.code, Some(0), "{top:?}");
    assert!(top.stdout.contains("Exit codes"), "{top:?}");
    let unknown = cli(&dir, &["help", "frobnicate"], &[], LIMIT);
    assert_eq!(unknown.code, Some(2), "{unknown:?}");
    assert!(unknown.stderr.contains("'frobnicate'"), "{unknown:?}");
}
