//! Smaller rough edges of the command line: the server's start-up log
//! says its values in words.

use crate::support::{Scratch, Server};

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
