//! What a client writes to stderr when `RUST_LOG` asks for its logs: text
//! a hostile lock server sends (a handshake's rejection, an error reply)
//! stays on its line and cannot drive the terminal, as in the client's
//! own messages; and no piece of a database password shows, wherever the
//! URL carries it.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::support::hostile::{HostileServer, Welcome};
use crate::support::{bin, wait_bounded, Scratch};

const LIMIT: Duration = Duration::from_secs(20);

/// Runs `quorum-lock ARGS` with `RUST_LOG=debug` (which the shared helper
/// removes) and no QUORUM_LOCK_* variables; its stderr.
fn with_debug_logs(dir: &Scratch, name: &str, args: &[&str]) -> String {
    let err: PathBuf = dir.file(&format!("{name}.err"));
    let mut command = Command::new(bin());
    for (var, _) in std::env::vars() {
        if var.starts_with("QUORUM_LOCK_") {
            command.env_remove(var);
        }
    }
    let mut child = command
        .args(args)
        .env("RUST_LOG", "debug")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&err).expect("stderr file"))
        .spawn()
        .expect("spawn quorum-lock");
    wait_bounded(&mut child, LIMIT, "quorum-lock with debug logs");
    std::fs::read_to_string(&err).unwrap_or_default()
}

/// The first line of `text` that a newline in the peer's text started, or
/// that holds a character a terminal would act on or that reverses text.
fn unsafe_line(text: &str) -> Option<&str> {
    text.lines().find(|line| {
        line.trim_start().starts_with("forged-row")
            || line.chars().any(|c| {
                c.is_control() || matches!(c, '\u{2028}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
            })
    })
}

#[test]
fn debug_logs_show_a_hostile_servers_text_on_one_line() {
    let dir = Scratch::new("debug-logs-peer-text");
    let rejecting = HostileServer::start(Welcome::Reject);
    let answering = HostileServer::start(Welcome::Admin);
    let (token, admin) = (dir.token(), dir.admin());
    let rejecting = rejecting.addr.to_string();
    let answering = answering.addr.to_string();
    let mut broken = Vec::new();
    for (what, args) in [
        (
            "status against a server that rejects the handshake",
            vec![
                "status",
                "--nodes",
                &rejecting,
                "--admin-token-file",
                &admin,
            ],
        ),
        (
            "run against a server that rejects the handshake",
            vec![
                "run",
                "--nodes",
                &rejecting,
                "--token-file",
                &token,
                "-n",
                "job",
                "--",
                "true",
            ],
        ),
        (
            "run against a server that answers every lock call with an error",
            vec![
                "run",
                "--nodes",
                &answering,
                "--token-file",
                &token,
                "-n",
                "job",
                "--",
                "true",
            ],
        ),
    ] {
        let stderr = with_debug_logs(&dir, "peer-text", &args);
        assert!(
            stderr.contains("pwned"),
            "{what}: the peer's text did not reach the log at all: {stderr}"
        );
        if let Some(line) = unsafe_line(&stderr) {
            broken.push(format!("{what}: stderr has the line {line:?}"));
        }
    }
    assert!(broken.is_empty(), "{broken:#?}");
}

#[test]
fn debug_logs_show_no_piece_of_a_database_password() {
    let dir = Scratch::new("debug-logs-passwords");
    let token = dir.token();
    // Nothing listens on port 1: every connection is refused at once.
    let mut shown = Vec::new();
    for (url, secret) in [
        // An unencoded `&` in a password given as a query parameter.
        (
            "postgres://127.0.0.1:1/locks?user=app&password=Pw&AmpSecret9",
            "AmpSecret9",
        ),
        (
            "postgres://127.0.0.1:1/locks?password=Pw&AmpSecret8&sslmode=disable",
            "AmpSecret8",
        ),
        // libpq's password of the client key, which the driver does not
        // know.
        (
            "postgres://app@127.0.0.1:1/locks?sslmode=require&sslpassword=KeyPassSecret5",
            "KeyPassSecret5",
        ),
        // In the user information, with the characters that end URL parts.
        (
            "postgres://app:Pw%2FUserSecret7@127.0.0.1:1/locks",
            "UserSecret7",
        ),
        (
            "mysql://app:Pw%3FUserSecret6@127.0.0.1:1/locks",
            "UserSecret6",
        ),
    ] {
        let stderr = with_debug_logs(
            &dir,
            "password",
            &[
                "run",
                "--nodes",
                url,
                "--token-file",
                &token,
                "-n",
                "job",
                "--",
                "true",
            ],
        );
        if let Some(line) = stderr.lines().find(|l| l.contains(secret)) {
            shown.push(format!("{url}: the password's {secret:?} shows: {line}"));
        }
    }
    assert!(shown.is_empty(), "{shown:#?}");
}

/// Every scheme `--nodes` and `--redis` take, a mistyped one of each
/// kind, and passwords holding each character that ends a URL part (or a
/// list entry), in the user information and in a query: neither the
/// messages nor the debug logs show a piece of the password.
#[test]
fn messages_and_debug_logs_show_no_piece_of_a_password_in_any_node_url() {
    let dir = Scratch::new("debug-logs-url-matrix");
    let token = dir.token();
    let mut shown = Vec::new();
    // (An `&` in a query's password: see the test above.)
    let separators = ['/', '?', '#', '@', '%', ',', '=', ':', ' ', ';', '+'];
    for (i, sep) in separators.iter().enumerate() {
        let head = format!("Hd{i}x");
        let tail = format!("Tl{i}x");
        let password = format!("{head}{sep}{tail}");
        for scheme in [
            "redis",
            "rediss",
            "postgres",
            "postgresql",
            "mysql",
            "mariadb",
            "postgress",
            "redsi",
        ] {
            for rest in [
                format!("app:{password}@127.0.0.1:1/locks"),
                format!(":{password}@127.0.0.1:1"),
                format!("127.0.0.1:1/locks?user=app&password={password}"),
            ] {
                let url = format!("{scheme}://{rest}");
                // A Redis URL is tried where it belongs and in a node
                // list; any other only in a node list, once.
                let flags: &[&str] = if scheme.starts_with("red") {
                    &["--redis", "--nodes"]
                } else {
                    &["--nodes"]
                };
                for &flag in flags {
                    let stderr = with_debug_logs(
                        &dir,
                        "matrix",
                        &[
                            "run",
                            flag,
                            &url,
                            "--token-file",
                            &token,
                            "--connect-timeout",
                            "100ms",
                            "-n",
                            "job",
                            "--",
                            "true",
                        ],
                    );
                    for piece in [&head, &tail] {
                        if let Some(line) = stderr.lines().find(|l| l.contains(piece.as_str())) {
                            shown.push(format!("{flag} {url:?}: {piece} shows: {line}"));
                        }
                    }
                }
            }
        }
    }
    assert!(shown.is_empty(), "{} leaks: {shown:#?}", shown.len());
}
