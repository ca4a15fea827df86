//! A node URL given where the command takes a lock name, its flag left out
//! while the node list comes from `QUORUM_LOCK_NODES` (where docs/cli.md
//! says to keep URLs with passwords): refused as a usage error that shows
//! no piece of the password, as the commands that take no name refuse it
//! (misplaced_urls.rs). Reproduces a past break: `lock` and `force-unlock`
//! took the URL for the name and printed it whole.

use std::time::Duration;

use crate::support::{cli, Scratch, Server};

const LIMIT: Duration = Duration::from_secs(20);

#[test]
fn a_node_url_given_as_the_lock_name_is_refused_without_its_password() {
    let dir = Scratch::new("node-url-as-lock-name");
    let server = Server::start(&dir, &["--no-quarantine"]);
    let nodes = server.addr.to_string();
    let (token, admin) = (dir.token(), dir.admin());
    let env = [
        ("QUORUM_LOCK_NODES", nodes.as_str()),
        ("QUORUM_LOCK_TOKEN_FILE", token.as_str()),
        ("QUORUM_LOCK_ADMIN_TOKEN_FILE", admin.as_str()),
    ];
    let url = "postgres://app:NameSlotSecret1@db.internal/locks";
    let runs = [
        vec!["lock", url],
        vec!["run", url, "--", "true"],
        vec!["force-unlock", url],
        vec!["force-unlock", "fine-name", url],
    ];
    for args in runs {
        let done = cli(&dir, &args, &env, LIMIT);
        assert_eq!(done.code, Some(2), "{args:?}: {done:?}");
        assert!(
            done.stderr
                .contains("looks like a node URL with a password"),
            "{args:?}: {done:?}"
        );
        for (stream, text) in [("stdout", &done.stdout), ("stderr", &done.stderr)] {
            assert!(
                !text.contains("NameSlotSecret") && !text.contains("app:"),
                "{args:?}: {stream} shows a piece of the password: {text}"
            );
        }
    }
    // A name that only holds `://` is a name like any.
    let done = cli(&dir, &["run", "s3://bucket/key", "--", "true"], &env, LIMIT);
    assert_eq!(done.code, Some(0), "{done:?}");
}
