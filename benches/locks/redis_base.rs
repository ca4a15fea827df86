//! The Redis baseline: a redis-server of our own on 127.0.0.1 and the
//! classic single-node lock loop against it, `SET key token NX PX ttl` to
//! lock and a Lua compare-and-delete to unlock.
//!
//! The server is ours alone: started on a free port with persistence off,
//! and killed by its PID when `RedisServer` is dropped, which happens on
//! success, on error and on panic. `PR_SET_PDEATHSIG` covers the harness
//! itself being killed.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use quorum_lock::redis::{RedisConfig, RedisLocker};
use redis::aio::MultiplexedConnection;

use crate::context::Context;
use crate::scenario::{Hold, Names};
use crate::servers;
use crate::stats::{gather, Bounds, ClientTally, Locking, Snapshot, Summary};

/// Long enough never to expire during a run; a lock cut off by the end of
/// the window is left to it, under a key no later run uses.
const TTL_MS: u64 = 30_000;

const UNLOCK: &str = r#"
if redis.call("get", KEYS[1]) == ARGV[1] then
    return redis.call("del", KEYS[1])
else
    return 0
end"#;

/// `redis-server` from PATH, if there is one.
pub fn locate() -> Option<PathBuf> {
    servers::on_path("redis-server")
}

pub struct RedisServer {
    child: Child,
    pub port: u16,
    pub version: String,
}

impl RedisServer {
    pub fn start(binary: &Path) -> Result<RedisServer, String> {
        let version = servers::version(binary);
        servers::with_retries("redis-server", |_| {
            let port = servers::free_port()?;
            let mut command = Command::new(binary);
            command
                .args(["--bind", "127.0.0.1", "--port", &port.to_string()])
                .args(["--save", "", "--appendonly", "no"])
                .args(["--daemonize", "no", "--loglevel", "warning"])
                .arg("--dir")
                .arg(std::env::temp_dir())
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null());
            let child = servers::dies_with_parent(&mut command)
                .spawn()
                .map_err(|e| format!("cannot start {}: {e}", binary.display()))?;
            let mut server = RedisServer {
                child,
                port,
                version: version.clone(),
            };
            // On an error, dropping `server` kills it.
            Ok(server.wait_ready(Duration::from_secs(5)).map(|()| server))
        })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// Polls with a raw PING until the server answers PONG.
    fn wait_ready(&mut self, limit: Duration) -> Result<(), String> {
        let timing = (limit, Duration::from_millis(20), Duration::from_millis(500));
        servers::wait_ready(&mut self.child, self.port, timing, b"PING\r\n", |s| {
            let mut reply = [0u8; 7];
            s.read_exact(&mut reply).is_ok() && &reply == b"+PONG\r\n"
        })
        .map_err(|e| format!("{e} (port {} taken?)", self.port))
    }

    /// A `RedisLocker` on this server, its keys under `prefix`. The server
    /// is this run's own and has never granted a lock: no quarantine.
    pub async fn locker(&self, prefix: String, validity: Duration) -> Result<RedisLocker, String> {
        let config = RedisConfig {
            prefix,
            validity,
            quarantine: Duration::ZERO,
            ..RedisConfig::default()
        };
        (RedisLocker::connect(&self.url(), config).await)
            .map_err(|e| format!("cannot connect a RedisLocker to port {}: {e}", self.port))
    }

    /// User + system CPU time of the server, from /proc.
    pub fn cpu(&self) -> Option<Duration> {
        crate::stats::pid_cpu(self.pid())
    }
}

/// Stops the server: SIGTERM to its PID, then SIGKILL if it lingers.
impl Drop for RedisServer {
    fn drop(&mut self) {
        servers::stop(&mut self.child, Duration::from_secs(2));
    }
}

/// `count` servers; on an error, the ones already started are dropped:
/// stopped.
pub fn start_many(binary: &Path, count: usize) -> Result<Vec<RedisServer>, String> {
    (0..count).map(|_| RedisServer::start(binary)).collect()
}

/// "pid P on 127.0.0.1:PORT, ..." for a banner.
pub fn where_(servers: &[RedisServer]) -> String {
    let list: Vec<String> = servers
        .iter()
        .map(|s| format!("pid {} on 127.0.0.1:{}", s.pid(), s.port))
        .collect();
    list.join(", ")
}

/// The scenario parameters the baseline shares with our runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct BaselineKey {
    pub clients: usize,
    pub names: Names,
    pub hold: Hold,
}

impl BaselineKey {
    /// `clients` clients on `names` with no hold: the load the targets
    /// judge.
    pub fn unheld(clients: usize, names: Names) -> BaselineKey {
        BaselineKey {
            clients,
            names,
            hold: Hold::None,
        }
    }
}

// Here, beside the key, rather than in cli.rs: a plan, not an option.
impl crate::cli::Options {
    /// Every hold, naming and client count, in the order the comparing
    /// backends measure them: by hold, then naming, then clients.
    pub fn keys(&self) -> Vec<BaselineKey> {
        let mut out = Vec::new();
        for &hold in &self.holds {
            for &names in &self.names {
                out.extend(self.clients.iter().map(|&clients| BaselineKey {
                    clients,
                    names,
                    hold,
                }));
            }
        }
        out
    }
}

/// A client of the SET NX lock: a connection of its own and a token per
/// lock, `id:seq`.
struct Client {
    con: MultiplexedConnection,
    key: String,
    id: usize,
    seq: u64,
    retry: Duration,
    unlock: redis::Script,
}

impl Locking for Client {
    /// The token and the SET tries it took.
    type Held = (String, u64);

    async fn acquire(&mut self) -> Result<(String, u64), String> {
        self.seq += 1;
        let token = format!("{}:{}", self.id, self.seq);
        let mut sent = 0u64;
        loop {
            sent += 1;
            let set: Option<String> = redis::cmd("SET")
                .arg(&self.key)
                .arg(&token)
                .arg("NX")
                .arg("PX")
                .arg(TTL_MS)
                .query_async(&mut self.con)
                .await
                .context("redis SET failed")?;
            if set.is_some() {
                return Ok((token, sent));
            }
            tokio::time::sleep(self.retry).await;
        }
    }

    async fn release(
        &mut self,
        (token, sent): (String, u64),
        tally: &mut ClientTally,
        counted: bool,
    ) -> Result<(), String> {
        if counted {
            // SET NX tries count as lock calls, the script as the unlock.
            tally.calls.lock += sent;
            tally.calls.unlock += 1;
        }
        let deleted: i64 = self
            .unlock
            .key(&self.key)
            .arg(&token)
            .invoke_async(&mut self.con)
            .await
            .context("redis unlock failed")?;
        if deleted != 1 {
            return Err(format!(
                "redis lock {} expired while held ({TTL_MS} ms TTL)",
                self.key
            ));
        }
        Ok(())
    }
}

pub async fn run(
    server: &RedisServer,
    run_id: usize,
    key: BaselineKey,
    bounds: Bounds,
    probe: impl Fn(),
) -> Result<Summary, String> {
    let redis = redis::Client::open(server.url()).context("redis client")?;
    // Connect everyone before the clock starts, one connection per client.
    let connections = gather(0..key.clients, |_| async {
        (redis.get_multiplexed_async_connection().await).context("cannot connect to redis-server")
    });
    let connections = connections.await?;
    // `probe` runs beside each snapshot: `--backend redis` reads the
    // server's command counters there.
    let snapshot = || {
        probe();
        Snapshot::now(None, server.cpu())
    };
    let mut connections = connections.into_iter();
    let load = bounds.load(key.clients, key.hold, snapshot, |c| Client {
        con: connections.next().expect("one connection per client"),
        // A fresh prefix per run: a key whose owner was cut off by the end
        // of an earlier window must not block this one.
        key: key.names.of(&format!("bench:{run_id}:"), c),
        id: c,
        seq: 0,
        retry: bounds.retry,
        unlock: redis::Script::new(UNLOCK),
    });
    load.await
}
