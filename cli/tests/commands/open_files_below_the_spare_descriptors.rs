//! An open-files limit below what the command line sets aside for itself.
//! `ServerConfig`'s rustdoc (`max_connections`): the slots bound the
//! connections served at once "so that the server never runs out of file
//! descriptors"; the `--max-connections` and `--admin-reserve` help:
//! "Lowered to fit the open-files limit (ulimit -n)". A limit too small
//! for even one connection must be refused at start, or fitted so that a
//! flood of silent connections never makes `accept` fail.

use std::io::{BufRead, BufReader};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::{bin, Scratch};

/// The server process, killed by its pid when dropped.
struct Started(std::process::Child);

impl Drop for Started {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_tiny_open_files_limit_is_refused_or_never_runs_out_of_descriptors() {
    let dir = Scratch::new("tiny-open-files");
    let log = dir.file("server.log");
    let mut child = Command::new("sh")
        .arg("-c")
        .arg("ulimit -n 12 && exec \"$0\" \"$@\"")
        .arg(bin())
        .args(["server", "--listen", "127.0.0.1:0"])
        .args([
            "--token-file",
            &dir.token(),
            "--admin-token-file",
            &dir.admin(),
        ])
        .args(["--no-quarantine"])
        .env("RUST_LOG", "info")
        .env_remove("QUORUM_LOCK_TOKEN")
        .env_remove("QUORUM_LOCK_ADMIN_TOKEN")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .expect("spawn sh");
    let stdout = child.stdout.take().unwrap();
    let started = Started(child);
    let mut line = String::new();
    // A server that refused to start under that limit is fine.
    if BufReader::new(stdout).read_line(&mut line).unwrap_or(0) == 0 {
        return;
    }
    let addr = line
        .trim()
        .strip_prefix("listening on ")
        .expect("address")
        .parse::<std::net::SocketAddr>()
        .expect("an address");

    // 200 silent connections, bounded in time.
    let begun = Instant::now();
    let mut silent = Vec::new();
    while silent.len() < 200 && begun.elapsed() < Duration::from_secs(5) {
        if let Ok(stream) = TcpStream::connect_timeout(&addr, Duration::from_millis(200)) {
            silent.push(stream);
        }
    }
    std::thread::sleep(Duration::from_millis(500));
    drop(silent);
    drop(started);
    let log = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(
        !log.contains("accept failed"),
        "under ulimit -n 12 the server started and ran out of descriptors:\n{log}"
    );
}
