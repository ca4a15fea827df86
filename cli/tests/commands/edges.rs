//! Smaller rough edges of the command line: `help --help` works and
//! `help COMMAND` prints what `COMMAND --help` does, the server's start-up
//! log says its values in words, and the order of `--nodes` does not
//! matter (its help says why the list must be the same everywhere).

use std::time::Duration;

use crate::support::{cli, wait_until, Cli, Scratch, Server, VALIDITY};

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
    assert_eq!(number_before(" client connections"), 64, "{line}");
    assert_eq!(number_before(" more for handshakes"), 4, "{line}");
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
    // Why --nodes must be the same list, and that the order is free.
    let run = cli(&dir, &["run", "--help"], &[], LIMIT);
    for words in ["a majority of the list", "The order does not matter"] {
        assert!(run.stdout.contains(words), "{words:?}: {run:?}");
    }
}

#[test]
fn clients_listing_the_nodes_in_another_order_exclude_each_other() {
    let dir = Scratch::new("edges-order");
    let servers = [
        Server::start(&dir, &["--no-quarantine"]),
        Server::start(&dir, &["--no-quarantine"]),
        Server::start(&dir, &["--no-quarantine"]),
    ];
    let addrs: Vec<String> = servers.iter().map(|s| s.addr.to_string()).collect();
    let forward = addrs.join(",");
    let backward: Vec<&str> = addrs.iter().rev().map(String::as_str).collect();
    let backward = backward.join(",");
    let token = dir.token();
    let d = dir.path.display().to_string();
    let holder = Cli::spawn(
        &dir,
        &[
            "run",
            "--nodes",
            &forward,
            "--token-file",
            &token,
            "--validity",
            VALIDITY,
            "job",
            "--",
            "sh",
            "-c",
            "touch \"$D/held\"; sleep 60",
        ],
        &[("D", &d)],
    );
    wait_until(LIMIT, "the first holder", || dir.file("held").exists());
    let second = cli(
        &dir,
        &[
            "run",
            "--nodes",
            &backward,
            "--token-file",
            &token,
            "--validity",
            VALIDITY,
            "--timeout",
            "1s",
            "job",
            "--",
            "true",
        ],
        &[],
        LIMIT,
    );
    assert_eq!(
        second.code,
        Some(75),
        "granted beside the holder: {second:?}"
    );
    drop(holder);
    // Released, the other order gets it.
    let third = cli(
        &dir,
        &[
            "run",
            "--nodes",
            &backward,
            "--token-file",
            &token,
            "--validity",
            VALIDITY,
            "--timeout",
            "10s",
            "job",
            "--",
            "sh",
            "-c",
            "exit 3",
        ],
        &[],
        LIMIT,
    );
    assert_eq!(third.code, Some(3), "{third:?}");
}
