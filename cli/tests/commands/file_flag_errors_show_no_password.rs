//! A node URL given to a flag that takes a file (`--redis-ca` for
//! `--redis`, `--token-file`, `--tls-ca`, `--tls-cert`, the server's
//! `--tls-client-ca`; or the variable of one, `QUORUM_LOCK_REDIS_CA` set
//! where `QUORUM_LOCK_REDIS` was meant): the file cannot be read, and the
//! error says so. It must not show the password the URL carries, as the
//! usage errors about a misplaced URL do not (misplaced_urls.rs).
//!
//! docs/cli.md: "Passwords never appear in the tool's output, errors or
//! logs: a database is named `scheme://host:port/database`."
//! docs/redis.md: "Errors, logs and `Debug` output name the node by
//! `host:port` only; a password never appears in them."

use std::time::Duration;

use crate::support::{cli, Scratch};

const LIMIT: Duration = Duration::from_secs(20);

/// Arguments, variables, and the piece of the password that must not show.
type Case<'a> = (Vec<&'a str>, Vec<(&'a str, &'a str)>, &'a str);

#[test]
fn a_node_url_given_to_a_file_flag_shows_no_password_in_the_error() {
    let dir = Scratch::new("file-flag-errors-show-no-password");
    let token = dir.file("token");
    std::fs::write(&token, "s3cret\n").expect("write the token file");
    let token = token.to_str().expect("a UTF-8 path").to_owned();
    let redis = "rediss://:FileFlagSecret1@cache.internal:6380";
    let pg = "postgres://app:FileFlagSecret2@db.internal/locks";
    let cases: Vec<Case> = vec![
        // `--redis-ca` where `--redis` was meant (the nodes are rediss://).
        (
            vec![
                "status",
                "--redis",
                "rediss://127.0.0.1:1",
                "--redis-ca",
                redis,
            ],
            vec![],
            "FileFlagSecret1",
        ),
        // The variable next to the one that was meant.
        (
            vec!["status", "--redis", "rediss://127.0.0.1:1"],
            vec![("QUORUM_LOCK_REDIS_CA", redis)],
            "FileFlagSecret1",
        ),
        (
            vec![
                "run",
                "--nodes",
                "127.0.0.1:1",
                "--token-file",
                pg,
                "job",
                "--",
                "true",
            ],
            vec![],
            "FileFlagSecret2",
        ),
        (
            vec!["locks", "--nodes", "127.0.0.1:1", "--admin-token-file", pg],
            vec![],
            "FileFlagSecret2",
        ),
        (
            vec![
                "status",
                "--nodes",
                "127.0.0.1:1",
                "--token-file",
                &token,
                "--tls-ca",
                pg,
            ],
            vec![],
            "FileFlagSecret2",
        ),
        (
            vec!["server", "--listen", "127.0.0.1:0", "--token-file", pg],
            vec![],
            "FileFlagSecret2",
        ),
    ];
    let mut shown = Vec::new();
    for (args, env, secret) in cases {
        let done = cli(&dir, &args, &env, LIMIT);
        assert_ne!(done.code, Some(0), "{args:?} {env:?}: {done:?}");
        for (stream, text) in [("stdout", &done.stdout), ("stderr", &done.stderr)] {
            if let Some(line) = text.lines().find(|l| l.contains(secret)) {
                shown.push(format!(
                    "{args:?} {env:?}: {stream} shows the password: {line}"
                ));
            }
        }
    }
    assert!(shown.is_empty(), "{}", shown.join("\n"));
}
