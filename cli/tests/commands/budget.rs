//! The memory budget of a real `quorum-lock server` process under attack:
//! peers without a token, then peers with the client
//! token, do their worst within bounded counts and times, only on
//! 127.0.0.1, and the server's peak resident memory must stay within what
//! `ServerConfig::memory_budget` derives from its limits.

use std::time::{Duration, Instant};

use crate::support::wire::{
    args_request, authenticate, closed_within, frame, read_frame, OP_LOCK, OP_UNLOCK,
};
use crate::support::{Scratch, Server, TOKEN};
use quorum_lock::net::{ServerConfig, MAX_FRAME};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

const MIB: usize = 1 << 20;
const CONNECTIONS: usize = 16;

/// Allocator slack: freed memory a multi-threaded malloc keeps in its
/// arenas, thread stacks touched for the first time, page rounding.
const SLACK: usize = 12 * MIB;

/// A field of /proc/PID/status, in bytes.
fn status_kib(pid: u32, field: &str) -> usize {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("proc status");
    let line = status
        .lines()
        .find(|l| l.starts_with(field))
        .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"));
    let kib: usize = line
        .split_whitespace()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .expect("a number of kB");
    kib * 1024
}

/// The limits the server is started with, as the library computes them.
fn config() -> ServerConfig {
    let mut config = ServerConfig::new(TOKEN);
    config.max_connections = CONNECTIONS;
    config.max_lock_bytes = 16 * MIB;
    config.max_bytes_per_connection = 4 * MIB;
    config.max_released_bytes = 2 * MIB;
    config
}

fn flags() -> Vec<String> {
    let c = config();
    [
        "--no-quarantine".to_string(),
        "--handshake-timeout".into(),
        "2s".into(),
        "--max-connections".into(),
        c.max_connections.to_string(),
        "--max-lock-bytes".into(),
        c.max_lock_bytes.to_string(),
        "--max-bytes-per-connection".into(),
        c.max_bytes_per_connection.to_string(),
        "--max-released-bytes".into(),
        c.max_released_bytes.to_string(),
    ]
    .to_vec()
}

/// Writes what it can of `bytes`; the server may hang up midway.
async fn push(stream: &mut TcpStream, bytes: &[u8]) {
    let _ = tokio::time::timeout(Duration::from_secs(5), stream.write_all(bytes)).await;
}

/// One authenticated attacker: big locks until refused, a flood of
/// unlocks with maximal uids, and frames with 2 MB uids. Returns how many
/// big locks were granted.
async fn client_attack(addr: String, n: usize) -> usize {
    let Ok((mut stream, welcome)) = authenticate(&addr, TOKEN).await else {
        return 0;
    };
    if welcome.first() != Some(&0) {
        return 0;
    }
    let mut granted = 0;
    let mut id = 1u64;
    // Big locks, one at a time, until refused; at most 8.
    for round in 0..8 {
        let uid = format!("big-{n}-{round}");
        let names: Vec<Vec<u8>> = (0..1000)
            .map(|i| format!("{n:03}-{round}-{i:01014}").into_bytes())
            .collect();
        let these: Vec<&[u8]> = names.iter().map(Vec::as_slice).collect();
        push(
            &mut stream,
            &frame(&args_request(
                id,
                OP_LOCK,
                uid.as_bytes(),
                &these,
                b"attacker",
                b"net_budget",
            )),
        )
        .await;
        id += 1;
        match tokio::time::timeout(Duration::from_secs(5), read_frame(&mut stream, 4096)).await {
            Ok(Ok(reply)) if reply.ends_with(&[0, 1]) => granted += 1,
            _ => break,
        }
    }
    // Tombstones: 5,000 unlocks of distinct 128-byte uids, pipelined.
    let mut flood = Vec::new();
    for i in 0..5_000 {
        let uid = format!("{n:08}-{i:0120}");
        flood.extend(frame(&args_request(
            id,
            OP_UNLOCK,
            uid.as_bytes(),
            &[b"r"],
            b"o",
            b"s",
        )));
        id += 1;
    }
    // Frames as large as allowed, with an over-long uid.
    let huge_uid = vec![b'u'; MAX_FRAME - 64];
    for _ in 0..4 {
        flood.extend(frame(&args_request(
            id,
            OP_UNLOCK,
            &huge_uid,
            &[b"r"],
            b"o",
            b"s",
        )));
        id += 1;
    }
    push(&mut stream, &flood).await;
    let _ = tokio::time::timeout(Duration::from_secs(10), async {
        for _ in 0..5_004 {
            if read_frame(&mut stream, 4096).await.is_err() {
                break;
            }
        }
    })
    .await;
    granted
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_memory_budget_holds_under_attack() {
    let budget = config().memory_budget();
    let dir = Scratch::new("net-budget");
    let flags = flags();
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let server = Server::start(&dir, &flags);
    let pid = server.pid();
    let addr = server.addr.to_string();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let base = status_kib(pid, "VmRSS:");

    // 1. No token: 3 waves of 40 connections, each claiming a 2 MiB frame
    // and sending all of it but the last byte, then waiting; within 30 s.
    let started = Instant::now();
    for _wave in 0..3 {
        let mut peers = Vec::new();
        for _ in 0..40 {
            let addr = addr.clone();
            peers.push(tokio::spawn(async move {
                let Ok(mut stream) = TcpStream::connect(&addr).await else {
                    return;
                };
                let mut bytes = (MAX_FRAME as u32).to_be_bytes().to_vec();
                bytes.resize(MAX_FRAME + 3, 0x5a);
                push(&mut stream, &bytes).await;
                let _ = closed_within(&mut stream, Duration::from_secs(3)).await;
            }));
        }
        for peer in peers {
            let _ = peer.await;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "attack too slow"
        );
    }
    let unauthenticated = status_kib(pid, "VmHWM:").saturating_sub(base);
    eprintln!(
        "unauthenticated: peak +{:.1} MiB, budget {:.1} MiB (+{} MiB slack)",
        unauthenticated as f64 / MIB as f64,
        budget.unauthenticated as f64 / MIB as f64,
        SLACK / MIB
    );
    assert!(
        unauthenticated <= budget.unauthenticated + SLACK,
        "peers without a token took the server {unauthenticated} bytes over its baseline"
    );

    // 2. The client token: every connection slot, big locks, tombstones,
    // maximal frames; within 60 s.
    let attackers: Vec<_> = (0..CONNECTIONS)
        .map(|n| tokio::spawn(client_attack(addr.clone(), n)))
        .collect();
    let mut granted = 0;
    for attacker in attackers {
        granted += tokio::time::timeout(Duration::from_secs(60), attacker)
            .await
            .expect("attack bounded in time")
            .unwrap();
    }
    let client = status_kib(pid, "VmHWM:").saturating_sub(base);
    let now = status_kib(pid, "VmRSS:").saturating_sub(base);
    eprintln!(
        "client token: {granted} locks of 1000 x 1 KiB granted; peak +{:.1} MiB, now +{:.1} MiB, \
         budget {:.1} MiB (+{} MiB slack)",
        client as f64 / MIB as f64,
        now as f64 / MIB as f64,
        budget.client as f64 / MIB as f64,
        SLACK / MIB
    );
    assert!(granted >= 1, "the attack did not even get one lock");
    assert!(
        granted <= 16,
        "{granted} locks of about 1.25 MiB fit in a 16 MiB table"
    );
    assert!(
        client <= budget.client + SLACK,
        "peers with the client token took the server {client} bytes over its baseline"
    );
    assert!(!server.log_text().contains("panicked"));
}

/// Issue #9: with `ulimit -n 256`, 220 idle connections made accept fail
/// and a legitimate `run` exit with 69. Now the connection cap is fitted
/// to the open-files limit and idle peers are replaced by new connections.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_gets_in_under_a_small_open_files_limit_full_of_idle_peers() {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};

    let dir = Scratch::new("net-ulimit");
    let log = dir.file("server.log");
    let mut child = Command::new("sh")
        .arg("-c")
        .arg("ulimit -n 64 && exec \"$0\" \"$@\"")
        .arg(crate::support::bin())
        .args([
            "server",
            "--listen",
            "127.0.0.1:0",
            "--token-file",
            &dir.token(),
        ])
        .args([
            "--no-quarantine",
            "--handshake-timeout",
            "30s",
            "--validity",
            "6s",
        ])
        .env("RUST_LOG", "info")
        .env_remove("QUORUM_LOCK_TOKEN")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .expect("spawn sh");
    // Killed by pid, whatever happens below.
    struct Reap(std::process::Child);
    impl Drop for Reap {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let stdout = child.stdout.take().unwrap();
    let mut child = Reap(child);
    let line = tokio::task::spawn_blocking(move || {
        let mut line = String::new();
        let _ = BufReader::new(stdout).read_line(&mut line);
        line
    });
    let line = tokio::time::timeout(Duration::from_secs(15), line)
        .await
        .expect("server started")
        .unwrap();
    let addr = line
        .trim()
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
        .to_string();

    // 100 idle peers, more than the 64 files the server may open.
    let mut idle = Vec::new();
    for _ in 0..100 {
        if let Ok(stream) = TcpStream::connect(&addr).await {
            idle.push(stream);
        }
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let token = dir.token();
    let args = [
        "run",
        "--nodes",
        &addr,
        "--token-file",
        &token,
        "--validity",
        "6s",
        "--timeout",
        "10s",
        "ulimit-test",
        "--",
        "true",
    ];
    let finished = tokio::task::block_in_place(|| {
        crate::support::cli(&dir, &args, &[], Duration::from_secs(20))
    });
    let server_log = std::fs::read_to_string(&log).unwrap_or_default();
    assert_eq!(
        finished.code,
        Some(0),
        "run failed: {}\nserver log:\n{server_log}",
        finished.stderr
    );
    assert!(
        server_log.contains("lowering --max-connections"),
        "{server_log}"
    );
    assert!(!server_log.contains("accept failed"), "{server_log}");
    drop(idle);
    let _ = child.0.kill();
}
