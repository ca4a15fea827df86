//! Reproduces a past break: a node URL with a password whose `://` was mistyped (`postgres:/…`, `postgres//…`) or left out (`app:pw@db:5432/locks`), given where a command takes a lock name, was taken for the name and printed whole, password and all.
//!
//! docs/cli.md: "A node URL typed where something else goes is shown
//! redacted too: ... given as a lock name (its flag left out, the nodes
//! from `QUORUM_LOCK_NODES`), a URL with a password is refused (exit 2)";
//! and for `--nodes`, an entry with a user but no scheme
//! (`locks:pw@db1:5432`) is a usage error. `refuse_node_url` only looks at
//! names that hold `://`, so a URL whose scheme separator lost a slash,
//! or its scheme, passes for a lock name: `force-unlock` prints it
//! ("not held: NAME"), `run` takes a lock by it, which every listing then
//! shows. `quorum_lock::redact_url` shows each
//! of these as `***`: the command line's own redaction knows them for
//! what they are.

use std::time::Duration;

use crate::support::{cli, Scratch, Server};

const LIMIT: Duration = Duration::from_secs(20);

#[test]
fn a_node_url_with_a_mistyped_scheme_given_as_the_lock_name_is_refused() {
    let dir = Scratch::new("mistyped-node-url-as-lock-name");
    let server = Server::start(&dir, &["--no-quarantine"]);
    let nodes = server.addr.to_string();
    let (token, admin) = (dir.token(), dir.admin());
    let env = [
        ("QUORUM_LOCK_NODES", nodes.as_str()),
        ("QUORUM_LOCK_TOKEN_FILE", token.as_str()),
        ("QUORUM_LOCK_ADMIN_TOKEN_FILE", admin.as_str()),
    ];
    for url in [
        "postgres:/app:NameSlotSecret1@db.internal/locks",
        "postgres//app:NameSlotSecret2@db.internal/locks",
        "app:NameSlotSecret3@db.internal:5432/locks",
    ] {
        for args in [vec!["force-unlock", url], vec!["run", url, "--", "true"]] {
            let done = cli(&dir, &args, &env, LIMIT);
            for (stream, text) in [("stdout", &done.stdout), ("stderr", &done.stderr)] {
                assert!(
                    !text.contains("NameSlotSecret"),
                    "{args:?}: {stream} shows the password: {text}"
                );
            }
            assert_eq!(done.code, Some(2), "{args:?}: {done:?}");
        }
    }
}
