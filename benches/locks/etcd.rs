//! etcd's lock, measured beside ours (`--backend compare`): a single etcd
//! node of our own on free loopback ports (stopped by its PID on drop, its
//! data folder removed), with etcd's defaults (every write synced before
//! it is acknowledged, as in a real deployment), and clients that lock as
//! users of `concurrency.Mutex` do: each holds a session (a lease of 60 s
//! kept alive every TTL/3) and locks with one `Lock` call of etcd's lock
//! service, unlocks with one `Unlock`. All clients share one
//! `etcd_client::Client` (one HTTP/2 connection), as an application would.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use etcd_client::{LockClient, LockOptions};

use crate::context::Context;
use crate::etcd_election::{self, Session};
use tokio::time::timeout;

use crate::redis_base::BaselineKey;
use crate::servers;
use crate::stats::{gather, Bounds, ClientTally, Locking, Snapshot, Summary};

/// The session's lease TTL: how long etcd keeps a lock whose holder went
/// silent, like the validity of our locks (60 s by default) and etcd's
/// default session TTL.
const TTL: Duration = Duration::from_secs(60);

pub struct EtcdServer {
    child: Child,
    /// The client port: gRPC (and HTTP for /health).
    pub port: u16,
    /// `etcd --version`'s first line, e.g. "etcd Version: 3.4.23".
    pub version: String,
    dir: PathBuf,
}

impl EtcdServer {
    pub fn start(binary: &Path) -> Result<EtcdServer, String> {
        let version = servers::version(binary);
        servers::with_retries("etcd", |attempt| {
            let (port, peer) = (servers::free_port()?, servers::free_port()?);
            let dir = std::env::temp_dir().join(format!(
                "quorum-lock-bench-etcd-{}-{attempt}",
                std::process::id()
            ));
            // Left over only if a run with our PID was killed: it is ours.
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir(&dir).map_err(|e| format!("cannot make {}: {e}", dir.display()))?;
            let log = std::fs::File::create(dir.join("etcd.log"))
                .context("cannot make etcd's log file")?;
            let log_err = log.try_clone().context("cannot share etcd's log file")?;
            let client_url = format!("http://127.0.0.1:{port}");
            let peer_url = format!("http://127.0.0.1:{peer}");
            let mut command = Command::new(binary);
            command
                .args(["--name", "bench", "--data-dir"])
                .arg(dir.join("data"))
                .args(["--listen-client-urls", &client_url])
                .args(["--advertise-client-urls", &client_url])
                .args(["--listen-peer-urls", &peer_url])
                .args(["--initial-advertise-peer-urls", &peer_url])
                .args(["--initial-cluster", &format!("bench={peer_url}")])
                .args(["--initial-cluster-state", "new"])
                .args(["--logger", "zap", "--log-level", "warn"])
                .stdin(Stdio::null())
                .stdout(log)
                .stderr(log_err);
            let child = match servers::dies_with_parent(&mut command).spawn() {
                Ok(child) => child,
                Err(e) => {
                    let _ = std::fs::remove_dir_all(&dir);
                    return Err(format!("cannot start {}: {e}", binary.display()));
                }
            };
            let mut server = EtcdServer {
                child,
                port,
                version: version.clone(),
                dir,
            };
            // On an error, dropping `server` stops it and removes its folder.
            Ok(match server.wait_ready(Duration::from_secs(20)) {
                Ok(()) => Ok(server),
                Err(err) => Err(format!("{err}; its log: {}", server.log_tail())),
            })
        })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn endpoint(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// User + system CPU time of etcd, from /proc.
    pub fn cpu(&self) -> Option<Duration> {
        crate::stats::pid_cpu(self.pid())
    }

    /// The last lines of etcd's log, for an error message.
    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(self.dir.join("etcd.log")).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(5)..].join(" | ")
    }

    /// Polls `GET /health` until etcd says it is healthy: it has elected
    /// itself leader and serves requests.
    fn wait_ready(&mut self, limit: Duration) -> Result<(), String> {
        let timing = (limit, Duration::from_millis(50), Duration::from_secs(2));
        let request = b"GET /health HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
        servers::wait_ready(&mut self.child, self.port, timing, request, |s| {
            let mut reply = String::new();
            s.take(4096).read_to_string(&mut reply).is_ok() && reply.contains("\"health\":\"true\"")
        })
    }
}

/// SIGTERM to its PID, then SIGKILL if it lingers; then its folder goes.
impl Drop for EtcdServer {
    fn drop(&mut self) {
        servers::stop(&mut self.child, Duration::from_secs(5));
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A client of etcd's lock service: its lock client, name and lease.
struct Locker {
    locks: LockClient,
    name: String,
    lease: i64,
}

impl Locking for Locker {
    /// The key the lock call created, to unlock.
    type Held = Vec<u8>;

    async fn acquire(&mut self) -> Result<Vec<u8>, String> {
        // A call the window cuts off is cancelled: the server stops waiting
        // and its key goes with the lease, revoked at the end.
        let options = LockOptions::new().with_lease(self.lease);
        let reply = self.locks.lock(self.name.as_str(), Some(options)).await;
        Ok(reply.context("etcd lock failed")?.key().to_vec())
    }

    async fn release(
        &mut self,
        key: Vec<u8>,
        tally: &mut ClientTally,
        counted: bool,
    ) -> Result<(), String> {
        if counted {
            tally.calls.lock += 1;
            tally.calls.unlock += 1;
        }
        self.locks
            .unlock(key)
            .await
            .map(drop)
            .context("etcd unlock failed")
    }
}

/// One measurement: `key.clients` clients, each with its own session, on
/// names no earlier run used.
pub async fn run(
    server: &EtcdServer,
    run_id: usize,
    key: BaselineKey,
    bounds: Bounds,
) -> Result<Summary, String> {
    let etcd = etcd_election::connect(&server.endpoint()).await?;
    // Every session is open (and the connection up) before the clock starts.
    let sessions = gather(0..key.clients, |_| async {
        (timeout(Duration::from_secs(10), Session::open(&etcd, TTL)).await)
            .map_err(|_| "etcd: no lease within 10 s".to_owned())?
    });
    let sessions = sessions.await?;
    let snapshot = || Snapshot::now(None, server.cpu());
    let ids: Vec<i64> = sessions.iter().map(|s| s.lease).collect();
    let measured = bounds.load(key.clients, key.hold, snapshot, |c| Locker {
        locks: etcd.lock_client(),
        name: key.names.of(&format!("bench{run_id}/"), c),
        lease: ids[c],
    });
    let measured = measured.await;
    // Close the sessions, as `Session.Close` does: keys left by waits the
    // window cut off go with their leases.
    for s in sessions {
        s.close().await;
    }
    measured
}

/// Starts the etcd node a run wants (`--etcd`) if it is installed: the
/// server, or none with the reason, and the status line of the banner.
pub fn start_wanted(opts: &crate::cli::Options) -> Result<(Option<EtcdServer>, String), String> {
    let words = ["--etcd", "etcd", "apt-get install -y etcd-server"];
    servers::wanted(opts.etcd, words, |binary| {
        let s = EtcdServer::start(binary)?;
        let status = format!("{}; pid {} on 127.0.0.1:{}", s.version, s.pid(), s.port);
        Ok((s, status))
    })
}
