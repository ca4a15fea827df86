//! `--backend redis`: Redis nodes as lockers, measured beside Redlock.
//!
//! One run starts `max(--nodes)` redis-server processes of its own and,
//! for each N in `--nodes`, measures on the first N of them ours over
//! `RedisLocker`s (push and poll), rslock, and once per client count and
//! naming the `SET NX` lock of `redis_base` (what each is: the `LEGEND` of
//! `redis_table`). Around every window the harness reads `INFO
//! commandstats` from each node in use, so every row also says how many
//! Redis commands a lock and its unlock cost: sent by the client, and
//! executed by Redis including those a Lua script runs inside, which
//! `commandstats` counts as commands of their own.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use quorum_lock::NetLocker;
use rslock::{LockError, LockManager};

use crate::cli::Options;
use crate::context::Context;
use crate::redis_base::{self, BaselineKey, RedisServer};
use crate::redis_table::{self, Row, System};
use crate::scenario::{Names, Scenario, Transport, Wait};
use crate::stats::{Bounds, ClientTally, Locking, Snapshot, Summary};

/// How long a lock is kept by Redis without a refresh: the lockers'
/// validity for ours (RedisConfig's default), the TTL for rslock.
const VALIDITY: Duration = Duration::from_secs(60);

/// The commands Lua scripts run inside Redis (`redis.call`) for each
/// system, as read in the scripts. `INFO commandstats` counts them like
/// commands a client sent; the network count leaves them out. Ours sends
/// `SET` itself (the fast path of a grant) and runs `GETRANGE`, `GET` and
/// `PTTL` only inside scripts (the unlock's fast path, and turning a
/// fast-path key into a hash).
const INNER_OURS: &[&str] = &[
    "time", "exists", "hlen", "hget", "hexists", "hgetall", "hset", "hdel", "del", "pexpire",
    "publish", "getrange", "get", "pttl",
];
/// rslock's unlock script and the SET NX baseline's compare-and-delete.
const INNER_GET_DEL: &[&str] = &["get", "del"];

/// Script invocations: what `eval/lk` counts.
const SCRIPT_CALLS: &[&str] = &["evalsha", "eval", "evalsha_ro", "eval_ro"];

/// Calls and the microseconds Redis spent in them, by command name, on one
/// server. A script's time includes the commands it runs inside.
type Counters = BTreeMap<String, Stat>;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stat {
    pub calls: u64,
    pub usec: u64,
}

/// The Redis commands of one measured window, summed over its nodes.
#[derive(Debug, Clone, Default)]
pub struct Commands {
    /// Calls by command name, the harness's own `INFO` taken out.
    pub by_name: Counters,
    /// Microseconds Redis spent executing the network commands: its own
    /// work per command, without reading, parsing and answering.
    pub usec: u64,
    /// Commands executed, including those run inside scripts.
    pub executed: u64,
    /// Commands clients sent over the network: `executed` less the ones
    /// scripts ran inside.
    pub network: u64,
    /// `EVALSHA`/`EVAL` calls (part of `network`).
    pub scripts: u64,
    /// `INFO` calls not made by the harness: a `RedisLocker` sends one per
    /// (re)connection, so this counts reconnections in the window.
    pub connects: u64,
    /// Per node, in order: commands executed and Redis time in them, the
    /// harness's `INFO` included. Shows a node that falls behind.
    pub per_node: Vec<Stat>,
}

/// Reads `INFO commandstats` with a plain RESP exchange on a connection of
/// its own (a connection is not a command, so only the `INFO` counts).
fn commandstats(port: u16) -> Result<Counters, String> {
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let failed = |e: std::io::Error| format!("INFO commandstats on port {port}: {e}");
    let stream = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).map_err(failed)?;
    stream
        .set_read_timeout(Some(Duration::from_secs(2)))
        .map_err(failed)?;
    (&stream)
        .write_all(b"INFO commandstats\r\n")
        .map_err(failed)?;
    let mut reader = BufReader::new(&stream);
    let mut header = String::new();
    reader.read_line(&mut header).map_err(failed)?;
    let len: usize = header
        .trim_end()
        .strip_prefix('$')
        .and_then(|n| n.parse().ok())
        .ok_or_else(|| format!("INFO commandstats on port {port}: unexpected reply {header:?}"))?;
    let mut body = vec![0u8; len + 2];
    reader.read_exact(&mut body).map_err(failed)?;
    Ok(parse_commandstats(&String::from_utf8_lossy(&body)))
}

/// `cmdstat_<name>:calls=N,usec=M,...` lines as name → (N, M).
fn parse_commandstats(text: &str) -> Counters {
    text.lines()
        .filter_map(|line| {
            let (name, fields) = line.strip_prefix("cmdstat_")?.split_once(':')?;
            let field = |key: &str| -> Option<u64> {
                fields
                    .split(',')
                    .find_map(|f| f.strip_prefix(key)?.strip_prefix('='))?
                    .parse()
                    .ok()
            };
            let stat = Stat {
                calls: field("calls")?,
                usec: field("usec")?,
            };
            Some((name.to_owned(), stat))
        })
        .collect()
}

/// Reads the counters of the nodes in use each time a snapshot is taken.
pub struct Probe {
    ports: Vec<u16>,
    readings: Mutex<Vec<Result<Vec<Counters>, String>>>,
}

impl Probe {
    pub fn new(servers: &[RedisServer]) -> Probe {
        Probe {
            ports: servers.iter().map(|s| s.port).collect(),
            readings: Mutex::new(Vec::new()),
        }
    }

    pub fn read(&self) {
        let reading = self.ports.iter().map(|&p| commandstats(p)).collect();
        self.readings
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(reading);
    }

    /// The commands between the first and the last reading, classified
    /// with the script-inner command names of the system measured.
    fn commands(self, inner: &[&str], time_on_connect: bool) -> Result<Commands, String> {
        let readings = self
            .readings
            .into_inner()
            .unwrap_or_else(PoisonError::into_inner);
        let (Some(before), Some(after)) = (readings.first(), readings.last()) else {
            return Err("no INFO commandstats readings were taken".into());
        };
        if readings.len() < 2 {
            return Err("only one INFO commandstats reading was taken".into());
        }
        let (before, after) = (before.clone()?, after.clone()?);
        Ok(classify(&before, &after, inner, time_on_connect))
    }
}

/// `after - before`, summed over nodes, without the harness's `INFO`, and
/// split into network and script-inner commands. `INFO` does not count
/// itself, so the later reading of each node shows exactly one harness
/// call: the earlier reading. A `RedisLocker` that connects sends `INFO
/// server` and `TIME` over the network (`time_on_connect`); every other
/// `TIME` is a script's clock.
fn classify(
    before: &[Counters],
    after: &[Counters],
    inner: &[&str],
    time_on_connect: bool,
) -> Commands {
    let mut by_name = Counters::new();
    let mut per_node = Vec::with_capacity(after.len());
    for (b, a) in before.iter().zip(after) {
        let mut node = Stat::default();
        for (name, now) in a {
            let earlier = b.get(name).copied().unwrap_or_default();
            let calls = now.calls.saturating_sub(earlier.calls);
            let usec = now.usec.saturating_sub(earlier.usec);
            let sum = by_name.entry(name.clone()).or_default();
            sum.calls += calls;
            sum.usec += usec;
            node.calls += calls;
            node.usec += usec;
        }
        per_node.push(node);
    }
    // The harness's INFO: its calls, and the time of each (the mean of the
    // INFO calls seen, as commandstats keeps only sums).
    if let Some(info) = by_name.get_mut("info") {
        let harness = (before.len() as u64).min(info.calls);
        let usec = info.usec * harness / info.calls.max(1);
        info.calls -= harness;
        info.usec -= usec;
    }
    by_name.retain(|_, stat| stat.calls > 0);
    let count = |name: &str| by_name.get(name).map_or(0, |s| s.calls);
    let connects = count("info");
    let executed = by_name.values().map(|s| s.calls).sum();
    let mut inside: u64 = inner.iter().map(|n| count(n)).sum();
    let mut inside_usec: u64 = inner
        .iter()
        .map(|n| by_name.get(*n).map_or(0, |s| s.usec))
        .sum();
    if time_on_connect {
        let time = by_name.get("time").copied().unwrap_or_default();
        let on_connect = time.calls.min(connects);
        inside -= on_connect;
        inside_usec -= time.usec * on_connect / time.calls.max(1);
    }
    let all_usec: u64 = by_name.values().map(|s| s.usec).sum();
    Commands {
        executed,
        network: executed - inside,
        usec: all_usec - inside_usec,
        scripts: SCRIPT_CALLS.iter().map(|n| count(n)).sum(),
        connects,
        by_name,
        per_node,
    }
}

/// User + system CPU of the servers, when all of them can be read.
fn servers_cpu(servers: &[RedisServer]) -> Option<Duration> {
    servers.iter().map(RedisServer::cpu).sum()
}

/// Ours: a `Dsync` over one `RedisLocker` per node, shared by every client.
pub async fn ours(
    servers: &[RedisServer],
    scenario: Scenario,
    run: usize,
    bounds: Bounds,
    probe: &Probe,
) -> Result<Summary, String> {
    let mut bare: Vec<Arc<dyn NetLocker>> = Vec::with_capacity(servers.len());
    for server in servers {
        // A prefix per run: whatever a cut-off wait of an earlier run left
        // behind cannot block this one.
        bare.push(Arc::new(
            server.locker(format!("bench{run}:"), VALIDITY).await?,
        ));
    }
    let cluster = crate::ours::Cluster::build(bare, bounds.count_rpcs, scenario.wait, None)?;
    let mark = || probe.read();
    (cluster.load(scenario, bounds, "", mark, || servers_cpu(servers))).await
}

/// One rslock client: `lock` (one Redlock round: SET NX PX on every node,
/// and on failure the unlock script on every node), retried after
/// `retry` while the window is open, then `unlock`. A round cut off by
/// the window's end may leave keys until their TTL; the next run uses
/// other names.
struct Rslock {
    manager: LockManager,
    resource: String,
    retry: Duration,
}

impl Locking for Rslock {
    type Held = rslock::Lock;

    async fn acquire(&mut self) -> Result<rslock::Lock, String> {
        loop {
            match self.manager.lock(self.resource.as_str(), VALIDITY).await {
                Ok(lock) => return Ok(lock),
                Err(LockError::Unavailable) => tokio::time::sleep(self.retry).await,
                Err(err) => return Err(format!("rslock lock failed: {err}")),
            }
        }
    }

    async fn release(
        &mut self,
        lock: rslock::Lock,
        _: &mut ClientTally,
        _: bool,
    ) -> Result<(), String> {
        self.manager.unlock(&lock).await;
        Ok(())
    }
}

pub async fn rslock(
    servers: &[RedisServer],
    key: BaselineKey,
    run: usize,
    bounds: Bounds,
    probe: &Probe,
) -> Result<Summary, String> {
    let mut manager = LockManager::new(servers.iter().map(RedisServer::url).collect());
    // One Redlock round per `lock` call: the clients retry themselves,
    // bounded by the window, after the same sleep as the SET NX baseline.
    // (rslock's own retries sleep a random 0..delay whole milliseconds.)
    manager.set_retry(1, Duration::from_millis(1));
    // Connects to every node before the clock starts.
    let warm = format!("bench{run}:connect");
    let lock = manager
        .lock(warm.as_str(), VALIDITY)
        .await
        .context("rslock cannot lock on a fresh cluster")?;
    manager.unlock(&lock).await;
    let snapshot = || {
        probe.read();
        Snapshot::now(None, servers_cpu(servers))
    };
    let load = bounds.load(key.clients, key.hold, snapshot, |c| Rslock {
        manager: manager.clone(),
        resource: key.names.of(&format!("bench{run}:"), c),
        retry: bounds.retry,
    });
    load.await
}

/// One measurement to make.
#[derive(Clone, Copy)]
struct Planned {
    system: System,
    nodes: usize,
    key: BaselineKey,
}

/// The waits of ours for one naming: `--wait` when given, else push for
/// distinct names and push then poll for one shared name.
fn waits(opts: &Options, names: Names) -> Vec<Wait> {
    match (opts.waits_given, names) {
        (true, _) => opts.waits.clone(),
        (false, Names::Own) => vec![Wait::Push],
        (false, Names::Shared) => vec![Wait::Push, Wait::Poll],
    }
}

/// Every measurement in order: per hold and naming, the SET NX rows, then
/// per node count and client count rslock first (so that ours can be
/// printed with its ratio to it) and ours with each wait.
fn plan(opts: &Options) -> Vec<Planned> {
    let setnx = opts.redis != crate::cli::RedisMode::Off;
    let mut out = Vec::new();
    for &hold in &opts.holds {
        for &names in &opts.names {
            let mut push = |system, nodes, clients| {
                let key = BaselineKey {
                    clients,
                    names,
                    hold,
                };
                out.push(Planned { system, nodes, key });
            };
            for &clients in opts.clients.iter().filter(|_| setnx) {
                push(System::SetNx, 1, clients);
            }
            for &nodes in &opts.nodes {
                for &clients in &opts.clients {
                    if opts.rslock {
                        push(System::Rslock, nodes, clients);
                    }
                    for wait in waits(opts, names) {
                        push(System::Ours(wait), nodes, clients);
                    }
                }
            }
        }
    }
    out
}

/// The whole `--backend redis` run: servers up, every planned measurement,
/// the table, the targets, the JSON, servers down.
pub fn run(opts: &Options) -> Result<(), String> {
    use crate::out::say;
    let machine = crate::out::Machine::read();
    let binary = redis_base::locate()
        .ok_or("--backend redis needs redis-server on PATH (apt-get install -y redis-server)")?;
    let most = opts.nodes.iter().copied().max().unwrap_or(1);
    let nodes = redis_base::start_many(&binary, most)?;
    let planned = plan(opts);
    let bounds = Bounds::of(opts);
    let version = nodes.first().map(|s| s.version.clone()).unwrap_or_default();
    let plan = crate::out::Plan {
        title: "quorum-lock over Redis nodes, with rslock and SET NX",
        setup: format!(
            ", retry sleep {:?} (rslock, SET NX)\n\
             redis: {version}; {} servers, --save \"\" --appendonly no: {}\n",
            opts.redis_retry,
            nodes.len(),
            redis_base::where_(&nodes),
        ),
        each: 0.1,
        columns: redis_table::columns(),
    };
    let measure_row = |run, p: &Planned, rows: &[Row]| {
        let servers = &nodes[..p.nodes];
        let probe = Probe::new(servers);
        let summary = match p.system {
            System::Ours(wait) => {
                let scenario = Scenario::write(p.nodes, p.key, Transport::Redis, wait);
                crate::measure(opts, || ours(servers, scenario, run, bounds, &probe))?
            }
            System::Rslock => crate::measure(opts, || rslock(servers, p.key, run, bounds, &probe))?,
            System::SetNx => crate::measure(opts, || {
                redis_base::run(&servers[0], run, p.key, bounds, || probe.read())
            })?,
        };
        // Which commands ran inside scripts, by who sent the scripts.
        let (inner, time_on_connect) = match p.system {
            System::Ours(_) => (INNER_OURS, true),
            System::Rslock | System::SetNx => (INNER_GET_DEL, false),
        };
        let commands = probe.commands(inner, time_on_connect)?;
        let rslock_lsps = match p.system {
            System::Ours(_) => {
                let rslock = |r: &Row| r.system == System::Rslock && r.nodes == p.nodes;
                crate::out::pick(rows, p.key, rslock).map(|r| r.summary.lsps)
            }
            _ => None,
        };
        Ok(Row {
            system: p.system,
            nodes: p.nodes,
            key: p.key,
            summary,
            commands,
            rslock_lsps,
        })
    };
    let rows = plan.run(
        opts,
        &machine,
        &planned,
        measure_row,
        redis_table::row_notes,
    )?;
    say(format!("\n{}", redis_table::LEGEND));
    say(format!("\n{}", redis_table::targets(&rows)));
    let pids: Vec<String> = nodes.iter().map(|s| s.pid().to_string()).collect();
    drop(nodes);
    say(format!("stopped redis-server pids {}", pids.join(", ")));
    crate::out::save(opts, || redis_table::json(opts, &machine, &version, &rows))
}
