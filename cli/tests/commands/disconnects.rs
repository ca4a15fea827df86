//! A lock server logs a client that merely goes away (before its
//! handshake, between requests, in the middle of a request) at debug, and
//! keeps the warning about a frame that could not be decoded for a client that
//! breaks the protocol.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::support::wire::{authenticate, frame, request, OP_HEALTH};
use crate::support::{bin, wait_until, Scratch, VALIDITY};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

const LIMIT: Duration = Duration::from_secs(20);

/// A server logging at debug, so that a client's going away can be seen
/// to be logged, and at which level.
struct DebugServer {
    child: Child,
    addr: String,
    log: std::path::PathBuf,
}

impl DebugServer {
    fn start(dir: &Scratch) -> DebugServer {
        let log = dir.file("debug-server.log");
        let mut child = Command::new(bin())
            .args(["server", "--listen", "127.0.0.1:0", "--no-quarantine"])
            .args(["--token-file", &dir.token(), "--validity", VALIDITY])
            .env("RUST_LOG", "quorum_lock=debug")
            .env_remove("QUORUM_LOCK_TOKEN")
            .env_remove("QUORUM_LOCK_ADMIN_TOKEN")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log).expect("server log"))
            .spawn()
            .expect("spawn a server");
        let stdout = child.stdout.take().expect("piped stdout");
        let mut first = String::new();
        BufReader::new(stdout)
            .read_line(&mut first)
            .expect("the listening line");
        let addr = first
            .trim()
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("unexpected first line {first:?}"))
            .to_owned();
        DebugServer { child, addr, log }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for DebugServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_goes_away_is_no_warning_but_a_protocol_violation_is() {
    let dir = Scratch::new("edges-disconnect");
    let server = DebugServer::start(&dir);
    let addr = server.addr.clone();

    // Gone before its handshake, by a reset, as a port check may do.
    let probe = TcpStream::connect(&addr).await.unwrap();
    probe.set_zero_linger().unwrap();
    drop(probe);
    // Gone in the middle of a request: a client killed while it wrote.
    let (mut cut, _) = authenticate(&addr, "client-secret").await.unwrap();
    let mut request = frame(&request(1, OP_HEALTH));
    request.truncate(5);
    cut.write_all(&request).await.unwrap();
    cut.shutdown().await.unwrap();
    // Gone between requests with a reset.
    let (reset, _) = authenticate(&addr, "client-secret").await.unwrap();
    reset.set_zero_linger().unwrap();
    drop(reset);

    let log = || server.log();
    wait_until(LIMIT, "the three closes to be logged", || {
        let log = log();
        log.contains("closed before its handshake")
            && log.matches("client closed the connection abruptly").count() >= 2
    });
    let text = log();
    assert!(
        !text.contains(" WARN "),
        "a close logged as a warning: {text}"
    );

    // Breaking the protocol still is one.
    let (mut bad, _) = authenticate(&addr, "client-secret").await.unwrap();
    bad.write_all(&u32::MAX.to_be_bytes()).await.unwrap();
    wait_until(LIMIT, "the violation to be logged", || {
        log().contains("could not be decoded")
    });
    let warned = log();
    let line = warned
        .lines()
        .find(|l| l.contains("could not be decoded"))
        .unwrap_or_default();
    assert!(line.contains(" WARN "), "{line}");
    drop(bad);
}
