//! A node URL given where a command takes a lock name (its flag left out,
//! the node list from `QUORUM_LOCK_NODES`, where docs/cli.md says to keep
//! URLs with passwords) never shows its password: docs/cli.md, "Passwords
//! never appear in the tool's output, errors or logs ... That holds for
//! usage errors too"; a lock name with user information (a `:` before an
//! `@`) or a query parameter named for a password is refused (exit 2), as
//! the commands that take no name refuse a misplaced URL (misplaced_urls.rs).
//! Each scene reproduces a past break, in which `force-unlock` printed the
//! URL whole ("not held: NAME") and `run` took a lock by it.

use std::time::Duration;

use crate::support::{cli, Finished, Scratch, Server};

const LIMIT: Duration = Duration::from_secs(20);

/// A lock server, and the environment that points the command line at it
/// with its tokens.
struct Scene {
    dir: Scratch,
    _server: Server,
    env: [(&'static str, String); 3],
}

impl Scene {
    fn new(label: &str) -> Scene {
        let dir = Scratch::new(label);
        let server = Server::start(&dir, &["--no-quarantine"]);
        let env = [
            ("QUORUM_LOCK_NODES", server.addr.to_string()),
            ("QUORUM_LOCK_TOKEN_FILE", dir.token()),
            ("QUORUM_LOCK_ADMIN_TOKEN_FILE", dir.admin()),
        ];
        Scene {
            dir,
            _server: server,
            env,
        }
    }

    fn run(&self, args: &[&str]) -> Finished {
        let env: Vec<(&str, &str)> = self.env.iter().map(|(k, v)| (*k, v.as_str())).collect();
        cli(&self.dir, args, &env, LIMIT)
    }
}

/// Panics when either stream of `done` holds `secret`.
fn assert_hidden(args: &[&str], done: &Finished, secret: &str) {
    for (stream, text) in [("stdout", &done.stdout), ("stderr", &done.stderr)] {
        assert!(
            !text.contains(secret),
            "{args:?}: {stream} shows the password: {text}"
        );
    }
}

/// Reproduces a past break: `lock` and `force-unlock` took a node URL given as the lock name for the name and printed it whole.
#[test]
fn a_node_url_given_as_the_lock_name_is_refused_without_its_password() {
    let scene = Scene::new("node-url-as-lock-name");
    let url = "postgres://app:NameSlotSecret1@db.internal/locks";
    let runs: [&[&str]; 4] = [
        &["lock", url],
        &["run", url, "--", "true"],
        &["force-unlock", url],
        &["force-unlock", "fine-name", url],
    ];
    for args in runs {
        let done = scene.run(args);
        assert_eq!(done.code, Some(2), "{args:?}: {done:?}");
        assert!(
            done.stderr
                .contains("looks like a node URL with a password"),
            "{args:?}: {done:?}"
        );
        assert_hidden(args, &done, "NameSlotSecret");
        assert_hidden(args, &done, "app:");
    }
    // A name that only holds `://` is a name like any.
    let done = scene.run(&["run", "s3://bucket/key", "--", "true"]);
    assert_eq!(done.code, Some(0), "{done:?}");
}

/// Reproduces a past break: a node URL with a password whose `://` was mistyped (`postgres:/…`, `postgres//…`) or left out (`app:pw@db:5432/locks`) passed for a lock name.
///
/// Only names holding `://` were looked at; `quorum_lock::redact_url`
/// shows each as `***`, and the command line's own check now knows them
/// too.
#[test]
fn a_node_url_with_a_mistyped_scheme_given_as_the_lock_name_is_refused() {
    let scene = Scene::new("mistyped-node-url-as-lock-name");
    for url in [
        "postgres:/app:NameSlotSecret1@db.internal/locks",
        "postgres//app:NameSlotSecret2@db.internal/locks",
        "app:NameSlotSecret3@db.internal:5432/locks",
    ] {
        let runs: [&[&str]; 2] = [&["force-unlock", url], &["run", url, "--", "true"]];
        for args in runs {
            let done = scene.run(args);
            assert_hidden(args, &done, "NameSlotSecret");
            assert_eq!(done.code, Some(2), "{args:?}: {done:?}");
        }
    }
}

/// Reproduces a past break: a PostgreSQL URL whose `://` was mistyped and whose password is a query parameter (`?password=…`) passed for a lock name.
///
/// docs/sql.md allows the password there; such a URL has neither user
/// information nor a `://` that redaction changes.
#[test]
fn a_node_url_with_a_mistyped_scheme_and_a_query_password_is_not_shown_as_a_lock_name() {
    let scene = Scene::new("mistyped-node-url-query-password-as-lock-name");
    for url in [
        "postgres:/db.internal/locks?user=app&password=QuerySlotSecret1",
        "postgres//db.internal/locks?user=app&password=QuerySlotSecret2",
    ] {
        let args = ["force-unlock", url];
        assert_hidden(&args, &scene.run(&args), "QuerySlotSecret");
    }
}

/// Reproduces a past break: a mistyped URL whose password is a parameter named `pass`, `passwd` or `pwd`, or `password` percent-encoded, passed for a lock name.
///
/// The command line looked for parameter names holding `password` as
/// written, while the library counts as passwords the parameters whose
/// names, percent-decoded, hold `pass` or `pwd` (Redis takes `?pass=` on
/// a socket URL, drivers decode `%73` to `s`).
#[test]
fn a_node_url_with_a_mistyped_scheme_and_a_pass_parameter_is_not_shown_as_a_lock_name() {
    let scene = Scene::new("mistyped-node-url-pass-parameter-as-lock-name");
    for url in [
        "redis+unix:/run/redis.sock?db=0&pass=PassSlotSecret1",
        "postgres:/db.internal/locks?user=app&passwd=PassSlotSecret2",
        "mysql:/db.internal/locks?pwd=PassSlotSecret3",
        "postgres:/db.internal/locks?user=app&pa%73sword=PassSlotSecret4",
    ] {
        let args = ["force-unlock", url];
        assert_hidden(&args, &scene.run(&args), "PassSlotSecret");
    }
}

/// Reproduces a past break: a URL without its scheme whose user name holds an `@` (`app@tenant:password@db/locks`, as Azure's PostgreSQL names users) passed for a lock name.
///
/// The `:` that starts the password comes after the first `@`, where the
/// command line stopped looking.
#[test]
fn a_lock_name_with_user_information_after_an_at_in_the_user_is_refused() {
    let scene = Scene::new("user-information-after-an-at-as-lock-name");
    let args = [
        "force-unlock",
        "app@tenant:UserInfoSecret1@db.internal/locks",
    ];
    assert_hidden(&args, &scene.run(&args), "UserInfoSecret");
}
