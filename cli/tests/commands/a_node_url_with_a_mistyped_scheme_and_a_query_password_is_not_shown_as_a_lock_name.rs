//! Reproduces a past break: a PostgreSQL URL whose `://` was mistyped (`postgres:/…`, `postgres//…`) and whose password is a query parameter (`?password=…`), given where a command takes a lock name, is taken for the name and printed whole, password and all.
//!
//! docs/cli.md: "Passwords never appear in the tool's output, errors or
//! logs ... That holds for usage errors too: a URL given without its flag,
//! or after a mistyped one, is quoted without its password"; docs/sql.md:
//! "a password may be a query parameter". The fix for mistyped schemes
//! (cf6ee8e) refuses a lock name with user information (a `:` before an
//! `@`), and one with `://` that redaction changes; a mistyped URL whose
//! password is in its query has neither, so `force-unlock` prints it
//! ("not held: NAME") and `run` takes a lock by it.

use std::time::Duration;

use crate::support::{cli, Scratch, Server};

const LIMIT: Duration = Duration::from_secs(20);

#[test]
fn a_node_url_with_a_mistyped_scheme_and_a_query_password_is_not_shown_as_a_lock_name() {
    let dir = Scratch::new("mistyped-node-url-query-password-as-lock-name");
    let server = Server::start(&dir, &["--no-quarantine"]);
    let nodes = server.addr.to_string();
    let (token, admin) = (dir.token(), dir.admin());
    let env = [
        ("QUORUM_LOCK_NODES", nodes.as_str()),
        ("QUORUM_LOCK_TOKEN_FILE", token.as_str()),
        ("QUORUM_LOCK_ADMIN_TOKEN_FILE", admin.as_str()),
    ];
    for url in [
        "postgres:/db.internal/locks?user=app&password=QuerySlotSecret1",
        "postgres//db.internal/locks?user=app&password=QuerySlotSecret2",
    ] {
        let args = ["force-unlock", url];
        let done = cli(&dir, &args, &env, LIMIT);
        for (stream, text) in [("stdout", &done.stdout), ("stderr", &done.stderr)] {
            assert!(
                !text.contains("QuerySlotSecret"),
                "{args:?}: {stream} shows the password: {text}"
            );
        }
    }
}
