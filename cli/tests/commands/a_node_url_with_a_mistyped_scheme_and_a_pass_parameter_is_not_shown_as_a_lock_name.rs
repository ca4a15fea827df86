//! Reproduces a past break: a Redis or database URL whose `://` was mistyped and whose password is a query parameter named `pass`, `passwd` or `pwd`, or `password` percent-encoded, given where a command takes a lock name, is taken for the name and printed whole, password and all.
//!
//! docs/cli.md: "Passwords never appear in the tool's output, errors or
//! logs"; a lock name with "a query parameter named for a password" is
//! refused (exit 2). The command line looks for parameter names holding
//! `password` as written; the library remembers as passwords the
//! parameters whose names, percent-decoded, hold `pass` or `pwd` (Redis
//! takes `?pass=` on a socket URL, drivers decode `%73` to `s`). So
//! `redis+unix:/run/redis.sock?pass=…` and
//! `postgres:/db/locks?pa%73sword=…` pass for lock names: `force-unlock`
//! prints them ("not held: NAME") and `run` takes a lock by them.

use std::time::Duration;

use crate::support::{cli, Scratch, Server};

const LIMIT: Duration = Duration::from_secs(20);

#[test]
fn a_node_url_with_a_mistyped_scheme_and_a_pass_parameter_is_not_shown_as_a_lock_name() {
    let dir = Scratch::new("mistyped-node-url-pass-parameter-as-lock-name");
    let server = Server::start(&dir, &["--no-quarantine"]);
    let nodes = server.addr.to_string();
    let (token, admin) = (dir.token(), dir.admin());
    let env = [
        ("QUORUM_LOCK_NODES", nodes.as_str()),
        ("QUORUM_LOCK_TOKEN_FILE", token.as_str()),
        ("QUORUM_LOCK_ADMIN_TOKEN_FILE", admin.as_str()),
    ];
    let mut shown = Vec::new();
    for url in [
        "redis+unix:/run/redis.sock?db=0&pass=PassSlotSecret1",
        "postgres:/db.internal/locks?user=app&passwd=PassSlotSecret2",
        "mysql:/db.internal/locks?pwd=PassSlotSecret3",
        "postgres:/db.internal/locks?user=app&pa%73sword=PassSlotSecret4",
    ] {
        let args = ["force-unlock", url];
        let done = cli(&dir, &args, &env, LIMIT);
        for (stream, text) in [("stdout", &done.stdout), ("stderr", &done.stderr)] {
            if text.contains("PassSlotSecret") {
                shown.push(format!("{args:?}: {stream} shows the password: {text}"));
            }
        }
    }
    assert!(shown.is_empty(), "{}", shown.join("\n"));
}
