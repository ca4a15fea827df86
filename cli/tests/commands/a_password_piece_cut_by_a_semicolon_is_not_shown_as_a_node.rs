//! A `;` inside a URL's password, not written `%3B`, cuts the URL in two
//! groups (docs/groups.md). When the piece after the `;` happens to read
//! as a lock server (`Tail:7`), nothing may show it: the commit that made
//! groups of a list carrying credentials name them by place meant that no
//! piece of a password shows in any message.

use std::time::Duration;

use crate::support::{cli, Scratch};

const LIMIT: Duration = Duration::from_secs(20);

/// Reproduces: the tail `Tail9:7` of a password cut by `;` is taken for a lock server and shown by status, locks and run.
#[test]
fn a_password_piece_cut_by_a_semicolon_is_not_shown_as_a_node() {
    let dir = Scratch::new("node-groups-cut-password");
    let token = dir.token();
    let nodes = "redis://127.0.0.1:1/0?password=Head9;Tail9:7";
    let mut seen = Vec::new();
    for args in [
        vec!["status", "--nodes", nodes, "--token-file", &token],
        vec!["locks", "--nodes", nodes, "--token-file", &token],
    ] {
        seen.push(cli(&dir, &args, &[], LIMIT));
    }
    for name in ["x", "y", "z", "w"] {
        let args = [
            "run",
            "--nodes",
            nodes,
            "--token-file",
            &token,
            "--timeout",
            "1s",
            name,
            "--",
            "true",
        ];
        seen.push(cli(&dir, &args, &[], LIMIT));
    }
    for done in &seen {
        assert!(
            !done.stdout.contains("Tail9") && !done.stderr.contains("Tail9"),
            "a piece of the password shows: {done:?}"
        );
    }
}
