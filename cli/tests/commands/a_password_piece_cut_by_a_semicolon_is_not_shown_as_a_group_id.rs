//! A `;` inside a URL's password, not written `%3B`, cuts the URL in two
//! groups (docs/groups.md); split_groups then names groups by their place
//! so that no piece of the password shows. When the piece after the `;`
//! reads as `ID=HOST:PORT`, the later messages still name the group by
//! that "id", a piece of the password.

use std::time::Duration;

use crate::support::{cli, Scratch};

const LIMIT: Duration = Duration::from_secs(20);

/// Reproduces: the piece `Tail9` of a password cut by `;` becomes a group id that status prints on lines and in errors.
#[test]
fn a_password_piece_cut_by_a_semicolon_is_not_shown_as_a_group_id() {
    let dir = Scratch::new("node-groups-cut-password-id");
    let token = dir.token();
    let nodes = "redis://127.0.0.1:1/0?password=Head9;Tail9=127.0.0.1:7";
    let args = ["status", "--nodes", nodes, "--token-file", &token];
    let done = cli(&dir, &args, &[], LIMIT);
    assert!(
        !done.stdout.contains("Tail9") && !done.stderr.contains("Tail9"),
        "a piece of the password shows: {done:?}"
    );
}
