//! The command that `run` runs under a lock and `elect` runs while leading
//! does not inherit quorum-lock's secrets: the tokens, the token files'
//! paths and the node list (which may hold database passwords) are removed
//! from its environment, so that it cannot force every lock open; with
//! `--pass-secrets` it keeps them, for commands that run quorum-lock
//! themselves.

use std::time::Duration;

use crate::support::{cli, Finished, Scratch, Server, ADMIN, TOKEN};

const LIMIT: Duration = Duration::from_secs(20);

/// The secrets, as an operator would set them.
fn secrets<'a>(node: &'a str, token: &'a str, admin: &'a str) -> Vec<(&'a str, &'a str)> {
    vec![
        ("QUORUM_LOCK_NODES", node),
        ("QUORUM_LOCK_TOKEN", TOKEN),
        ("QUORUM_LOCK_ADMIN_TOKEN", ADMIN),
        ("QUORUM_LOCK_TOKEN_FILE", token),
        ("QUORUM_LOCK_ADMIN_TOKEN_FILE", admin),
    ]
}

const SECRET_NAMES: [&str; 5] = [
    "QUORUM_LOCK_NODES",
    "QUORUM_LOCK_TOKEN",
    "QUORUM_LOCK_ADMIN_TOKEN",
    "QUORUM_LOCK_TOKEN_FILE",
    "QUORUM_LOCK_ADMIN_TOKEN_FILE",
];

/// The command's environment, as `env` wrote it to `$D/env`.
fn command_env(dir: &Scratch, done: &Finished) -> String {
    assert_eq!(done.code, Some(0), "{done:?}");
    let env = dir.read("env");
    assert!(env.contains("QUORUM_LOCK_NAME=job"), "no lock facts: {env}");
    env
}

fn assert_no_secrets(what: &str, env: &str) {
    for name in SECRET_NAMES {
        assert!(
            !env.lines().any(|l| l.starts_with(&format!("{name}="))),
            "{what}: the command got {name}: {env}"
        );
    }
    for secret in [TOKEN, ADMIN] {
        assert!(
            !env.contains(secret),
            "{what}: the command got a token: {env}"
        );
    }
}

fn assert_secrets(what: &str, env: &str, node: &str) {
    for (name, value) in [
        ("QUORUM_LOCK_NODES", node),
        ("QUORUM_LOCK_TOKEN", TOKEN),
        ("QUORUM_LOCK_ADMIN_TOKEN", ADMIN),
    ] {
        assert!(
            env.lines().any(|l| l == format!("{name}={value}")),
            "{what}: {name} was not passed on: {env}"
        );
    }
}

#[test]
fn run_keeps_the_secrets_from_its_command_unless_told_to_pass_them() {
    let dir = Scratch::new("secrets-run");
    let server = Server::start(&dir, &["--no-quarantine"]);
    let node = server.addr.to_string();
    let (token, admin) = (dir.token(), dir.admin());
    let path = dir.path.display().to_string();
    let mut env = secrets(&node, &token, &admin);
    env.push(("D", &path));

    let script = "env > $D/env";
    let done = cli(&dir, &["run", "job", "--", "sh", "-c", script], &env, LIMIT);
    assert_no_secrets("run", &command_env(&dir, &done));

    let done = cli(
        &dir,
        &["run", "--pass-secrets", "job", "--", "sh", "-c", script],
        &env,
        LIMIT,
    );
    let passed = command_env(&dir, &done);
    assert_secrets("run --pass-secrets", &passed, &node);
    // What it is for: a quorum-lock inside the command works with them.
    let nested = format!("{} locks > $D/nested", crate::support::bin());
    let done = cli(
        &dir,
        &["run", "--pass-secrets", "job", "--", "sh", "-c", &nested],
        &env,
        LIMIT,
    );
    assert_eq!(done.code, Some(0), "{done:?}");
    assert!(
        dir.read("nested").lines().any(|l| l.starts_with("job ")),
        "the inner `locks` did not list the lock: {:?}",
        dir.read("nested")
    );
}

#[test]
fn elect_keeps_the_secrets_from_its_command_unless_told_to_pass_them() {
    let dir = Scratch::new("secrets-elect");
    let server = Server::start(&dir, &["--no-quarantine"]);
    let node = server.addr.to_string();
    let (token, admin) = (dir.token(), dir.admin());
    let path = dir.path.display().to_string();
    let mut env = secrets(&node, &token, &admin);
    env.push(("D", &path));

    let script = "env > $D/env";
    let done = cli(
        &dir,
        &["elect", "job", "leader-a", "--", "sh", "-c", script],
        &env,
        LIMIT,
    );
    assert_no_secrets("elect", &command_env(&dir, &done));

    let done = cli(
        &dir,
        &[
            "elect",
            "--pass-secrets",
            "job",
            "leader-a",
            "--",
            "sh",
            "-c",
            script,
        ],
        &env,
        LIMIT,
    );
    assert_secrets("elect --pass-secrets", &command_env(&dir, &done), &node);
}

/// The command cannot read the secrets out of quorum-lock's own process
/// either: `/proc/<pid>/environ` of its parent holds them, and a process
/// of the same user may read it unless the parent made itself
/// non-dumpable. Run as an unprivileged user (through `setpriv`), since
/// root reads every process's environment anyway; skipped where the test
/// is not root or `setpriv` is missing.
#[cfg(target_os = "linux")]
#[test]
fn run_keeps_its_own_environment_from_its_command() {
    use std::os::unix::fs::PermissionsExt;
    use std::process::{Command, Stdio};

    // SAFETY: getuid(2) has no preconditions.
    let root = unsafe { libc::getuid() } == 0;
    let setpriv = Command::new("setpriv").arg("--version").output().is_ok();
    if !root || !setpriv {
        eprintln!("skipped: needs root and setpriv to run quorum-lock as another user");
        return;
    }
    let dir = Scratch::for_other_users("quorum-lock-secrets-proc-environ");
    std::fs::set_permissions(&dir.path, std::fs::Permissions::from_mode(0o777))
        .expect("let the unprivileged command write here");
    let server = Server::start(&dir, &["--no-quarantine"]);
    let node = server.addr.to_string();
    let path = dir.path.display().to_string();
    let script = "cat /proc/$PPID/environ > $D/parent-env 2> $D/parent-err; echo $? > $D/read";
    let mut child = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
        .arg(crate::support::bin())
        .args(["run", "job", "--", "sh", "-c", script])
        .env("QUORUM_LOCK_NODES", &node)
        .env("QUORUM_LOCK_TOKEN", TOKEN)
        .env("QUORUM_LOCK_ADMIN_TOKEN", ADMIN)
        .env("D", &path)
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.file("cli.err")).expect("stderr file"))
        .spawn()
        .expect("start quorum-lock through setpriv");
    let status = crate::support::wait_bounded(&mut child, LIMIT, "quorum-lock run as nobody");
    assert!(status.success(), "{status:?}: {}", dir.read("cli.err"));
    let read = dir.read("read");
    let env = std::fs::read(dir.file("parent-env")).unwrap_or_default();
    let env = String::from_utf8_lossy(&env);
    for secret in [TOKEN, ADMIN] {
        assert!(
            !env.contains(secret),
            "the command read quorum-lock's environment (cat exit {}): {env}",
            read.trim()
        );
    }
    assert_ne!(read.trim(), "0", "the command read /proc/$PPID/environ");
}
