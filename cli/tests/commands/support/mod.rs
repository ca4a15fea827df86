//! Helpers for the end-to-end tests: lock-server processes on 127.0.0.1,
//! `quorum-lock` client processes with bounded waits, and in-process
//! clients. Every process is killed by its guard's `Drop`, so a failing
//! test leaves nothing running.

#![allow(dead_code)]

pub mod fake;
pub mod hostile;
pub mod listing;
pub mod old_server;
pub mod pace;
mod procs;
pub mod raw;
mod three_servers;
#[path = "../../../../tests/net_support/wire.rs"]
pub mod wire;

// Not every test file uses every helper.
#[allow(unused_imports)]
pub use procs::{cli, cli_with_logs, nodes, Cli, Finished, LimitedServer, Server};
#[allow(unused_imports)]
pub use three_servers::{Cluster, Holder};

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, ExitStatus};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use quorum_lock::net::{RemoteConfig, RemoteLocker};
use quorum_lock::{Dsync, Lease, NetLocker, RetryPolicy, Timeouts};

/// Ports on 127.0.0.1 that refuse every connection while this is alive:
/// bound without listening, so that no server another test starts can take
/// one of them in the meantime (a port bound and released at once can be).
pub struct RefusingPorts {
    sockets: Vec<socket2::Socket>,
}

impl RefusingPorts {
    pub fn new(n: usize) -> RefusingPorts {
        let sockets = (0..n)
            .map(|_| {
                let socket = socket2::Socket::new(
                    socket2::Domain::IPV4,
                    socket2::Type::STREAM,
                    Some(socket2::Protocol::TCP),
                )
                .expect("a TCP socket");
                let any: SocketAddr = "127.0.0.1:0".parse().expect("an address");
                socket.bind(&any.into()).expect("bind a port on 127.0.0.1");
                socket
            })
            .collect();
        RefusingPorts { sockets }
    }

    /// Each port's address, as `127.0.0.1:PORT`.
    pub fn addrs(&self) -> Vec<String> {
        self.sockets
            .iter()
            .map(|socket| {
                let addr = socket.local_addr().expect("a bound address");
                addr.as_socket().expect("an IP address").to_string()
            })
            .collect()
    }
}

/// The client token every test server accepts.
pub const TOKEN: &str = "client-secret";
/// The admin token every test server accepts.
pub const ADMIN: &str = "admin-secret";
/// Short validity so that expiry, quarantine and loss happen within seconds.
pub const VALIDITY: &str = "6s";

pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_quorum-lock")
}

/// The lease matching `--validity 6s` on the servers.
pub fn lease() -> Lease {
    Lease {
        validity: Duration::from_secs(6),
        refresh_interval: Duration::from_secs(1),
        safety_margin: Duration::from_secs(1),
    }
}

/// A scratch directory under cargo's target tmpdir, removed on drop.
pub struct Scratch {
    pub path: PathBuf,
}

impl Scratch {
    pub fn new(test: &str) -> Scratch {
        Scratch::under(Path::new(env!("CARGO_TARGET_TMPDIR")), test)
    }

    /// A scratch folder in the system's temporary folder, which every user
    /// can reach, for a test that runs a program as another user (the
    /// build folder may sit in a home only its owner can enter).
    pub fn for_other_users(test: &str) -> Scratch {
        Scratch::under(&std::env::temp_dir(), test)
    }

    fn under(base: &Path, test: &str) -> Scratch {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let path = base.join(format!("{test}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).expect("create scratch dir");
        std::fs::write(path.join("token"), format!("  {TOKEN}\n")).expect("write token");
        std::fs::write(path.join("admin"), format!("{ADMIN}\n")).expect("write admin token");
        Scratch { path }
    }

    pub fn file(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }

    pub fn token(&self) -> String {
        self.file("token").display().to_string()
    }

    pub fn admin(&self) -> String {
        self.file("admin").display().to_string()
    }

    pub fn read(&self, name: &str) -> String {
        std::fs::read_to_string(self.file(name)).unwrap_or_default()
    }

    /// Makes a CA and a certificate for `node` with `quorum-lock certs`, in
    /// the folder `tls`.
    pub fn certificate_for(&self, node: &str) -> NodeCertificate {
        let tls = self.file("tls").display().to_string();
        let made = cli(
            self,
            &["certs", "--dir", &tls, "--node", node],
            &[],
            Duration::from_secs(30),
        );
        assert_eq!(made.code, Some(0), "certs: {made:?}");
        NodeCertificate {
            cert: format!("{tls}/node-{node}.pem"),
            key: format!("{tls}/node-{node}-key.pem"),
            ca: format!("{tls}/ca.pem"),
        }
    }
}

/// The files `quorum-lock certs` made for one node.
pub struct NodeCertificate {
    pub cert: String,
    pub key: String,
    pub ca: String,
}

impl Drop for Scratch {
    fn drop(&mut self) {
        // Kept after a failure, for the server logs.
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

/// Sends a signal with kill(2); std only offers SIGKILL.
pub fn signal(pid: u32, sig: i32) {
    unsafe extern "C" {
        fn kill(pid: i32, sig: i32) -> i32;
    }
    // SAFETY: kill(2) takes two integers and touches no memory of ours.
    unsafe {
        kill(pid as i32, sig);
    }
}

pub const SIGINT: i32 = 2;
pub const SIGTERM: i32 = 15;
pub const SIGKILL: i32 = 9;
/// Linux numbers: freeze and thaw a server, so that it keeps its entries
/// but answers nobody for a while.
pub const SIGSTOP: i32 = 19;
pub const SIGCONT: i32 = 18;

/// Whether a process runs (a zombie does not count: it is dead but its
/// parent, possibly init in a container, has not reaped it yet).
pub fn running(pid: &str) -> bool {
    match std::fs::read_to_string(format!("/proc/{}/stat", pid.trim())) {
        Ok(stat) => !stat
            .rsplit(')')
            .next()
            .unwrap_or("")
            .trim_start()
            .starts_with('Z'),
        Err(_) => false,
    }
}

/// Whether process `pid` has a handler for signal `sig` (Linux: the
/// `SigCgt` mask of /proc/PID/status), so that the signal reaches the
/// program instead of ending it by default.
pub fn catches(pid: u32, sig: i32) -> bool {
    let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
        return false;
    };
    status
        .lines()
        .find_map(|l| l.strip_prefix("SigCgt:"))
        .and_then(|mask| u64::from_str_radix(mask.trim(), 16).ok())
        .is_some_and(|mask| mask & (1 << (sig - 1)) != 0)
}

/// Whether a listing's held/total cell (or a line holding it) shows a lock
/// on a quorum of three nodes. A lock call returns once two granted; the
/// third grant is kept only if its call answered in time (one cut off under
/// load is undone), so 2/3 and 3/3 are both what the library promises.
pub fn on_a_quorum_of_three(listed: &str) -> bool {
    listed.contains("2/3") || listed.contains("3/3")
}

/// Whether `line` is `force-unlock`'s report of `opened` found on a quorum
/// of three nodes (see `on_a_quorum_of_three`) and freed on all three:
/// `{opened} (held on 2 or 3, confirmed by 3 of 3 {nodes})`.
pub fn forced_open_on_a_quorum(line: &str, opened: &str, nodes: &str) -> bool {
    [2, 3].iter().any(|held| {
        line.trim() == format!("{opened} (held on {held}, confirmed by 3 of 3 {nodes})")
    })
}

/// Polls `check` every 20 ms until it holds or `limit` passes.
pub fn wait_until(limit: Duration, what: &str, mut check: impl FnMut() -> bool) {
    let start = Instant::now();
    while !check() {
        assert!(
            start.elapsed() < limit,
            "timed out after {limit:?} waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits for `child` at most `limit`; kills it and panics after that.
pub fn wait_bounded(child: &mut Child, limit: Duration, what: &str) -> ExitStatus {
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            return status;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what} did not exit within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// RemoteLocker settings for tests: quick reconnects after a node restarts.
pub fn remote_config(token: &str) -> RemoteConfig {
    let mut config = RemoteConfig::new(token);
    config.connect_timeout = Duration::from_secs(1);
    config.call_timeout = Duration::from_secs(2);
    config.reconnect = RetryPolicy {
        initial: Duration::from_millis(20),
        max: Duration::from_millis(300),
    };
    config
}

/// An in-process client over `addrs`, with the test lease.
pub async fn dsync(addrs: &[SocketAddr], token: &str, owner: &str) -> Dsync {
    let mut lockers: Vec<Arc<dyn NetLocker>> = Vec::new();
    for addr in addrs {
        let locker = RemoteLocker::connect(addr.to_string(), remote_config(token))
            .await
            .expect("connect to a test server");
        lockers.push(Arc::new(locker));
    }
    Dsync::builder(lockers)
        .owner(owner)
        .lease(lease())
        // A release that a killed node cannot confirm should not stall the
        // load for the default 5 s.
        .timeouts(Timeouts {
            unlock: Duration::from_secs(1),
            ..Timeouts::default()
        })
        .retry(RetryPolicy {
            initial: Duration::from_millis(5),
            max: Duration::from_millis(100),
        })
        .build()
        .expect("valid client settings")
}
