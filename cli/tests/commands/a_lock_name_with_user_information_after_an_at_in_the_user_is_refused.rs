//! Reproduces a past break: a node URL without its scheme whose user name holds an `@` (`app@tenant:password@db/locks`, as Azure's PostgreSQL names users), given where a command takes a lock name, is taken for the name and printed whole, password and all.
//!
//! docs/cli.md: a lock name is refused (exit 2) when it has "user
//! information (a `:` before an `@`, as in `app:pw@db/locks`)". The command
//! line looks for a `:` only before the first `@`; here the first `@` is the
//! user name's own, and the `:` that starts the password comes after it,
//! before the last. So `force-unlock` prints the name ("not held: NAME").

use std::time::Duration;

use crate::support::{cli, Scratch, Server};

const LIMIT: Duration = Duration::from_secs(20);

#[test]
fn a_lock_name_with_user_information_after_an_at_in_the_user_is_refused() {
    let dir = Scratch::new("user-information-after-an-at-as-lock-name");
    let server = Server::start(&dir, &["--no-quarantine"]);
    let nodes = server.addr.to_string();
    let (token, admin) = (dir.token(), dir.admin());
    let env = [
        ("QUORUM_LOCK_NODES", nodes.as_str()),
        ("QUORUM_LOCK_TOKEN_FILE", token.as_str()),
        ("QUORUM_LOCK_ADMIN_TOKEN_FILE", admin.as_str()),
    ];
    let name = "app@tenant:UserInfoSecret1@db.internal/locks";
    let args = ["force-unlock", name];
    let done = cli(&dir, &args, &env, LIMIT);
    for (stream, text) in [("stdout", &done.stdout), ("stderr", &done.stderr)] {
        assert!(
            !text.contains("UserInfoSecret"),
            "{args:?}: {stream} shows the password: {text}"
        );
    }
}
