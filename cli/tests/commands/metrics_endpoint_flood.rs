//! The metrics endpoint (`server --metrics`, unauthenticated plain HTTP,
//! bound where "only the scraper reaches it", so at least every local
//! user) must not be a way around the lock port's guarantees
//! (docs/lock-servers.md, "Threat model"): a peer without a token "can
//! only open connections and send a 4 KiB handshake", the admin reserve
//! keeps the admin in, and the server "cannot make the server log without
//! bound". Connections to the metrics port are counted nowhere: enough of
//! them use up the process's open files, so that the lock port can accept
//! nobody, the admin included, and the exporter's accept loop then warns
//! on every failed accept, without pause.
//!
//! The server runs with an open-files limit of 128 (soft and hard, so
//! that it cannot raise it), which a local user reaches with a few hundred
//! connections; the flood is bounded (300 connections, each with a 2 s
//! connect timeout) and ends with the test.

use std::io::Write;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::support::{bin, cli, Scratch};

const LIMIT: Duration = Duration::from_secs(20);
const OPEN_FILES: u64 = 128;
const FLOOD: usize = 300;

struct Guarded(Child);

impl Drop for Guarded {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> SocketAddr {
    let probe = TcpListener::bind("127.0.0.1:0").expect("bind a probe");
    probe.local_addr().expect("its address")
}

/// A server with `--metrics` on `metrics`, under an open-files limit of
/// [`OPEN_FILES`]; its address, and its process.
fn start(dir: &Scratch, metrics: SocketAddr) -> (SocketAddr, Guarded) {
    let listen = free_port();
    let log = std::fs::File::create(dir.file("server.log")).expect("create the server log");
    let mut command = Command::new(bin());
    command
        .args(["server", "--listen", &listen.to_string()])
        .args([
            "--token-file",
            &dir.token(),
            "--admin-token-file",
            &dir.admin(),
        ])
        .args(["--no-quarantine", "--metrics", &metrics.to_string()])
        .env("RUST_LOG", "info")
        .env_remove("QUORUM_LOCK_TOKEN")
        .env_remove("QUORUM_LOCK_ADMIN_TOKEN")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log);
    // SAFETY: setrlimit(2) between fork and exec: a system call with a
    // struct on the stack, async-signal-safe.
    unsafe {
        command.pre_exec(|| {
            let limit = libc::rlimit {
                rlim_cur: OPEN_FILES,
                rlim_max: OPEN_FILES,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let child = Guarded(command.spawn().expect("spawn the server"));
    // Bounded: the server binds both ports within a few seconds.
    for _ in 0..100 {
        if TcpStream::connect(listen).is_ok() && TcpStream::connect(metrics).is_ok() {
            return (listen, child);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("the server did not bind {listen} and {metrics}");
}

/// Opens up to [`FLOOD`] connections to `addr`, each with the start of a
/// request that never ends, and keeps them open.
fn flood(addr: SocketAddr) -> Vec<TcpStream> {
    let mut held = Vec::new();
    for _ in 0..FLOOD {
        let Ok(mut stream) = TcpStream::connect_timeout(&addr, Duration::from_secs(2)) else {
            break;
        };
        let _ = stream.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n");
        held.push(stream);
    }
    held
}

#[test]
fn a_flood_of_the_metrics_endpoint_does_not_lock_the_admin_out() {
    let dir = Scratch::new("metrics-flood-admin");
    let metrics = free_port();
    let (addr, _server) = start(&dir, metrics);
    let admin = dir.admin();
    let node = addr.to_string();
    let before = cli(
        &dir,
        &["status", "--nodes", &node, "--admin-token-file", &admin],
        &[],
        LIMIT,
    );
    assert_eq!(before.code, Some(0), "before the flood: {before:?}");

    let held = flood(metrics);
    let during = cli(
        &dir,
        &["status", "--nodes", &node, "--admin-token-file", &admin],
        &[],
        LIMIT,
    );
    assert!(
        during.code == Some(0) && during.stdout.contains("reachable, protocol"),
        "with {} connections open to the metrics endpoint, the admin cannot reach the \
         server: {during:?}",
        held.len()
    );
    drop(held);
}

#[test]
fn a_flood_of_the_metrics_endpoint_writes_a_bounded_number_of_log_lines() {
    let dir = Scratch::new("metrics-flood-log");
    let metrics = free_port();
    let (_addr, _server) = start(&dir, metrics);
    let held = flood(metrics);
    // The flood lasts two seconds; the lock port's own refusals are
    // logged at most once a second per cause.
    std::thread::sleep(Duration::from_secs(2));
    drop(held);
    let log = dir.read("server.log");
    let lines = log.lines().count();
    assert!(
        lines < 200,
        "two seconds of a flood of the metrics endpoint wrote {lines} log lines; the last: {:?}",
        log.lines().last()
    );
}
