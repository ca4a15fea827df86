//! `force-unlock NAME` prints a status line per name on stdout ("not held:
//! NAME", "forced open: NAME"). docs/cli.md: "in every listing, status
//! line, warning and error, ... an invisible formatting character is
//! written as an escape"; the lockers accept such characters in names, so
//! the status line must show them escaped, as its warning on stderr does.

use std::time::Duration;

use crate::support::{cli, Scratch, Server};

const LIMIT: Duration = Duration::from_secs(20);

#[test]
fn force_unlock_status_lines_show_invisible_characters_of_a_name_escaped() {
    let dir = Scratch::new("force-unlock-status-lines");
    let server = Server::start(&dir, &["--no-quarantine"]);
    let node = server.addr.to_string();
    let admin = dir.admin();
    // A zero-width space (U+200B, a format character) after the name.
    let name = "backup\u{200b}";
    let done = cli(
        &dir,
        &[
            "force-unlock",
            "--nodes",
            &node,
            "--admin-token-file",
            &admin,
            name,
        ],
        &[],
        LIMIT,
    );
    assert_eq!(done.code, Some(0), "{done:?}");
    assert!(
        done.stdout.contains("not held"),
        "no status line, so this checks nothing: {done:?}"
    );
    assert!(
        !done.stdout.contains('\u{200b}') && !done.stderr.contains('\u{200b}'),
        "a zero-width space shown raw: stdout {:?}, stderr {:?}",
        done.stdout,
        done.stderr
    );
}
