//! `--backend compare`: ours against the locks people use instead (Redis
//! `SET NX`, Redlock, etcd's lock service), back to back in one run on one
//! machine, every system on the same client counts and names; what each
//! system is, `LEGEND` says. The redis-servers and the etcd node are
//! started once for the run and stopped by their PIDs at its end; each
//! measurement uses names no other one used, so that a wait an earlier
//! window cut off cannot block it. A system whose server is not installed
//! is left out with the reason printed (`--redis`, `--etcd`).

use std::fmt::Write as _;
use std::time::Duration;

use crate::cli::Options;
use crate::etcd::{self, EtcdServer};
use crate::out::{
    self, human, key_cols, left, loadavg, notes, right, say, stats, string, Col, Doc, Machine, Obj,
};
use crate::redis_base::{self, BaselineKey, RedisServer};
use crate::redis_nodes::{self, Probe};
use crate::scenario::{Names, Scenario, Transport, Wait};
use crate::stats::Bounds;
use crate::stats::{fmt_rate, Summary};

/// What a row measured, in the order each scenario runs them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum System {
    OursTcp,
    OursRedis,
    SetNx,
    Rslock,
    Etcd,
}

impl System {
    fn label(self) -> &'static str {
        match self {
            System::OursTcp => "ours-tcp",
            System::OursRedis => "ours-redis",
            System::SetNx => "setnx",
            System::Rslock => "rslock",
            System::Etcd => "etcd",
        }
    }
}

crate::out::measured_fields!(Row);

struct Row {
    system: System,
    nodes: usize,
    key: BaselineKey,
    summary: Summary,
}

/// The servers of the run that are shared by its measurements.
struct Servers {
    /// `max(1, --nodes)` redis-servers, or none.
    redis: Vec<RedisServer>,
    redis_status: String,
    etcd: Option<EtcdServer>,
    etcd_status: String,
}

/// Starts what is wanted and installed; what is missing is left out with
/// the reason, unless `on` asked for it.
fn start(opts: &Options, nodes: usize) -> Result<Servers, String> {
    let words = ["--redis", "redis-server", "apt-get install -y redis-server"];
    let (redis, redis_status) = crate::servers::wanted(opts.redis, words, |binary| {
        let servers = redis_base::start_many(binary, nodes.max(1))?;
        let status = format!("{}; {}", servers[0].version, redis_base::where_(&servers));
        Ok((servers, status))
    })?;
    let (etcd, etcd_status) = etcd::start_wanted(opts)?;
    Ok(Servers {
        redis: redis.unwrap_or_default(),
        redis_status,
        etcd,
        etcd_status,
    })
}

/// CPU time the whole machine spent busy (user, nice, system, irq,
/// softirq; not idle or iowait), and the time the hypervisor gave its
/// virtual CPUs to someone else (steal), from /proc/stat.
fn machine_busy() -> Option<(Duration, Duration)> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let fields: Vec<u64> = stat
        .lines()
        .next()?
        .strip_prefix("cpu ")?
        .split_whitespace()
        .map(|f| f.parse().ok())
        .collect::<Option<_>>()?;
    let busy = [0, 1, 2, 5, 6]
        .iter()
        .map(|&i| fields.get(i).copied())
        .sum::<Option<u64>>()?;
    let steal = fields.get(7).copied().unwrap_or(0);
    Some((crate::stats::ticks(busy)?, crate::stats::ticks(steal)?))
}

/// CPU time of this process and of its children that have been waited for:
/// once the run has stopped its servers, all of them.
fn own_cpu() -> Duration {
    let children = crate::stats::rusage(libc::RUSAGE_CHILDREN);
    crate::stats::process_cpu() + children.unwrap_or(Duration::ZERO)
}

/// How busy the machine was during the run, in cores: in all, with this
/// run (the harness and every server it started), and with other work.
struct Busy {
    all: f64,
    own: f64,
    steal: f64,
}

impl Busy {
    fn other(&self) -> f64 {
        self.all - self.own
    }

    fn text(&self) -> String {
        format!(
            "the machine was busy {:.2} cores on average, this run (harness and servers) {:.2}, \
             other work {:.2}; the hypervisor took {:.2} (steal)",
            self.all,
            self.own,
            self.other(),
            self.steal
        )
    }
}

/// The whole `--backend compare` run.
pub fn run(opts: &Options) -> Result<(), String> {
    let machine = Machine::read();
    let clock = (std::time::Instant::now(), machine_busy(), own_cpu());
    let nodes = opts.nodes.first().copied().unwrap_or(3);
    // Ours over TCP is the point of the comparison: no binary, no run.
    let binary = crate::servers::binary()?;
    let servers = start(opts, nodes)?;
    let mut systems = vec![System::OursTcp];
    if !servers.redis.is_empty() {
        systems.extend([System::OursRedis, System::SetNx]);
        if opts.rslock {
            systems.push(System::Rslock);
        }
    }
    if servers.etcd.is_some() {
        systems.push(System::Etcd);
    }
    let mut planned = Vec::new();
    for key in opts.keys() {
        planned.extend(systems.iter().map(|&system| (system, key)));
    }
    let bounds = Bounds::of(opts);
    let plan = out::Plan {
        title: "quorum-lock against Redis, Redlock and etcd",
        setup: format!(
            ", {nodes} nodes for ours and rslock, retry sleep {:?} (rslock, SET NX)\n\
             ours over TCP: {} server processes started per measurement ({})\n\
             redis: {}\n\
             etcd: {}\n",
            opts.redis_retry,
            nodes,
            binary
                .file_name()
                .map_or("quorum-lock".into(), |n| n.to_string_lossy()),
            servers.redis_status,
            servers.etcd_status,
        ),
        each: 0.3,
        columns: columns(),
    };
    let measure_row = |run, &(system, key): &(System, BaselineKey), _: &[Row]| {
        let scenario = |transport| Scenario::write(nodes, key, transport, Wait::Push);
        let redis = &servers.redis[..nodes.min(servers.redis.len())];
        let probe = Probe::new(redis);
        let summary = match system {
            System::OursTcp => {
                crate::measure(opts, || crate::ours::run(scenario(Transport::Tcp), bounds))?
            }
            System::OursRedis => {
                let scenario = scenario(Transport::Redis);
                crate::measure(opts, || {
                    redis_nodes::ours(redis, scenario, run, bounds, &probe)
                })?
            }
            System::Rslock => crate::measure(opts, || {
                redis_nodes::rslock(redis, key, run, bounds, &probe)
            })?,
            System::SetNx => {
                let server = &servers.redis[0];
                crate::measure(opts, || redis_base::run(server, run, key, bounds, || {}))?
            }
            System::Etcd => {
                let server = (servers.etcd.as_ref()).ok_or("etcd was planned without a server")?;
                crate::measure(opts, || etcd::run(server, run, key, bounds))?
            }
        };
        // SET NX and etcd run on one server whatever --nodes says.
        let row_nodes = match system {
            System::SetNx | System::Etcd => 1,
            System::OursTcp | System::OursRedis | System::Rslock => nodes,
        };
        Ok(Row {
            system,
            nodes: row_nodes,
            key,
            summary,
        })
    };
    let rows = plan.run(opts, &machine, &planned, measure_row, |r| notes(&r.summary))?;
    let load_end = loadavg();
    let statuses = [servers.redis_status.clone(), servers.etcd_status.clone()];
    let table = markdown(opts, &servers, &rows);
    let mut stopped = Vec::new();
    let Servers { redis, etcd, .. } = servers;
    for server in redis {
        stopped.push(format!("redis-server {}", server.pid()));
    }
    if let Some(server) = etcd {
        stopped.push(format!("etcd {}", server.pid()));
        drop(server);
    }
    // Every server is stopped and waited for: its CPU time is ours now.
    let busy = match (clock.1, machine_busy()) {
        (Some(before), Some(after)) => {
            let wall = clock.0.elapsed().as_secs_f64().max(1e-9);
            Some(Busy {
                all: after.0.saturating_sub(before.0).as_secs_f64() / wall,
                own: own_cpu().saturating_sub(clock.2).as_secs_f64() / wall,
                steal: after.1.saturating_sub(before.1).as_secs_f64() / wall,
            })
        }
        _ => None,
    };
    say(format!("\n{LEGEND}"));
    say(format!(
        "\nload average at the start {}, at the end {load_end}; {}\n",
        machine.loadavg,
        busy.as_ref().map_or(
            "no /proc/stat to say how busy the machine was".into(),
            Busy::text
        )
    ));
    say(&table);
    if !stopped.is_empty() {
        say(format!("stopped {}", stopped.join(", ")));
    }
    out::save(opts, || {
        let load = Load {
            end: &load_end,
            busy: busy.as_ref(),
        };
        json(opts, &machine, &load, nodes, &statuses, &rows)
    })
}

/// The columns of the table, in order.
fn columns() -> Vec<Col<Row>> {
    let mut cols = vec![
        left("sys", 10, |r: &Row| r.system.label().to_owned()),
        right("nodes", 5, |r: &Row| r.nodes.to_string()),
    ];
    cols.extend(key_cols(6));
    cols.extend(stats(&[
        "locks/s", "mean", "p50", "p99", "max", "longest", "cpu", "cpu/lk", "rpc/lk", "min/cl",
        "max/cl", "jain",
    ]));
    cols
}

const LEGEND: &str = "\
ours-tcp: a Dsync over quorum-lock server processes on 127.0.0.1 (started for
each measurement), waiting in line with pushed grants. ours-redis: a Dsync over
one RedisLocker per redis-server, waiting in line (pub/sub). setnx: SET NX PX
and a compare-and-delete script on one redis-server, a refused SET retried
after the retry sleep, one connection per client. rslock: Redlock (rslock
0.10) over the same redis-servers as ours-redis, one round per lock call, a
refused round retried after the retry sleep. etcd: one etcd node; each client
holds a lease (60 s TTL, kept alive every 20 s) and locks with one Lock call of
etcd's lock service (the server waits for every older key under the name, as
concurrency.Mutex does) and unlocks with one Unlock call. Ours, rslock and
etcd share one client object (connection per node) among all clients.
locks/s: locks acquired in the window / window length. mean..max: acquire
latency. longest: the longest wait, counting waits still unfinished when the
window closed. cpu: (user+sys)/wall of this process and of the servers in use,
100% = one core; cpu/lk: that CPU time per lock. rpc/lk: requests per lock and
its unlock where the harness counts them (ours: calls to lockers, summed over
nodes; setnx: SET tries and the unlock script; etcd: Lock and Unlock).
min/cl, max/cl: fewest and most locks of one client. jain: Jain's fairness
index over clients (1 = every client got the same number of locks).";

/// What the table calls a system.
fn title(system: System, opts: &Options, servers: &Servers) -> String {
    let retry = match opts.redis_retry {
        d if d.subsec_nanos() % 1_000_000 == 0 => format!("{} ms", d.as_millis()),
        d => human(d),
    };
    match system {
        System::OursTcp => "**quorum-lock**, `quorum-lock server` processes over TCP".into(),
        System::OursRedis => "**quorum-lock** over Redis nodes (`RedisLocker`)".into(),
        System::SetNx => format!("Redis, `SET NX PX` + scripted unlock, retry every {retry}"),
        System::Rslock => format!("Redlock (`rslock` 0.10), retry every {retry}"),
        System::Etcd => {
            let version = servers
                .etcd_status
                .split(';')
                .next()
                .and_then(|v| v.rsplit(' ').next())
                .unwrap_or("");
            format!("etcd {version}, lock service (`Lock`/`Unlock`, a lease per client)")
        }
    }
}

/// One cell: locks/s, p50 / p99, and on a shared name the longest wait.
fn cell(row: &Row) -> String {
    let s = &row.summary;
    let mut out = format!("{} · {} / {}", fmt_rate(s.lsps), human(s.p50), human(s.p99));
    if row.key.names == Names::Shared && row.key.clients > 1 {
        let _ = write!(out, " ({})", human(s.longest_wait));
    }
    out
}

/// The comparison as a Markdown table: one row per system and naming, one
/// column per client count.
fn markdown(opts: &Options, servers: &Servers, rows: &[Row]) -> String {
    let grid = out::grid(
        opts,
        rows,
        "system | nodes | names",
        |r| (r.system, r.key),
        |r, naming| {
            format!(
                "{} | {} | {naming}",
                title(r.system, opts, servers),
                r.nodes
            )
        },
        cell,
    );
    format!("Markdown (locks/s · p50 / p99 of the acquire; on one shared name, the longest wait in brackets):\n\n{grid}")
}

/// The load figures taken at the end of the run.
struct Load<'a> {
    end: &'a str,
    busy: Option<&'a Busy>,
}

/// The whole run as JSON, in the spirit of `report::json`.
fn json(
    opts: &Options,
    machine: &Machine,
    load: &Load,
    nodes: usize,
    [redis, etcd]: &[String; 2],
    rows: &[Row],
) -> String {
    let busy = |f: fn(&Busy) -> f64| load.busy.map(f);
    let cores = Obj::new()
        .opt("busy_cores", busy(|b| b.all))
        .opt("own_cores", busy(|b| b.own))
        .opt("other_cores", busy(Busy::other))
        .opt("steal_cores", busy(|b| b.steal));
    let settings = Obj::new()
        .str("backend", "compare")
        .raw("nodes", nodes)
        .load(opts)
        .raw("retry_ns", opts.redis_retry.as_nanos());
    Doc::new(opts, machine, load.end, cores)
        .field("settings", settings)
        .field("redis", string(redis))
        .field("etcd", string(etcd))
        .results(rows.iter().map(|row| {
            let s = &row.summary;
            Obj::new()
                .str("system", row.system.label())
                .raw("nodes", row.nodes)
                .key(row.key)
                .summary(s, false)
                .opt("calls_per_lock", s.calls_per_lock)
                .raw("hit_count_bound", s.hit_count_bound)
                .done()
        }))
}
