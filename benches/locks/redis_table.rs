//! The table, the targets and the JSON of `--backend redis`.

use std::fmt::Write as _;
use std::time::Duration;

use crate::cli::Options;
use crate::redis_base::BaselineKey;
use crate::redis_nodes::Commands;
use crate::report::{loadavg, number, string, Machine};
use crate::scenario::{Hold, Names, Wait};
use crate::stats::{fmt_duration, fmt_rate, Summary};

/// What a row measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum System {
    /// A `Dsync` over `RedisLocker`s, waiting this way.
    Ours(Wait),
    /// rslock's Redlock over the same nodes.
    Rslock,
    /// `SET NX PX` and a compare-and-delete script on one node.
    SetNx,
}

impl System {
    fn label(self) -> &'static str {
        match self {
            System::Ours(_) => "ours",
            System::Rslock => "rslock",
            System::SetNx => "setnx",
        }
    }

    fn wait(self) -> &'static str {
        match self {
            System::Ours(wait) => wait.label(),
            // Both retry a refused attempt after a sleep.
            System::Rslock | System::SetNx => "-",
        }
    }
}

pub struct Row {
    pub system: System,
    pub nodes: usize,
    pub key: BaselineKey,
    pub summary: Summary,
    pub commands: Commands,
    /// rslock's locks/s on the same nodes, clients, names and hold.
    pub rslock_lsps: Option<f64>,
}

impl Row {
    fn per_lock(&self, count: u64) -> Option<f64> {
        (self.summary.locks > 0).then(|| count as f64 / self.summary.locks as f64)
    }

    /// Commands sent by clients per lock and its unlock, over all nodes.
    pub fn network_per_lock(&self) -> Option<f64> {
        self.per_lock(self.commands.network)
    }

    pub fn scripts_per_lock(&self) -> Option<f64> {
        self.per_lock(self.commands.scripts)
    }

    /// Commands executed per lock and unlock, inside scripts included.
    pub fn executed_per_lock(&self) -> Option<f64> {
        self.per_lock(self.commands.executed)
    }

    /// Microseconds Redis spent executing commands per lock and unlock.
    pub fn redis_usec_per_lock(&self) -> Option<f64> {
        self.per_lock(self.commands.usec)
    }
}

pub fn header() -> String {
    format!(
        "{:<6} {:<4} {:>5} {:>7} {:<6} {:>6} {:>8} {:>7} {:>7} {:>7} {:>7} {:>7} {:>5} {:>7} {:>7} {:>6} {:>7} {:>7} {:>7} {:>7} {:>5} {:>8}",
        "sys", "wait", "nodes", "clients", "names", "hold", "locks/s", "mean", "p50", "p99", "max",
        "longest", "cpu", "cpu/lk", "rds/lk", "net/lk", "eval/lk", "exec/lk", "min/cl", "max/cl", "jain",
        "x rslock"
    )
}

pub fn line(row: &Row) -> String {
    let s = &row.summary;
    let d = |d: Duration| fmt_duration(d);
    let cpu = s.cpu + s.server_cpu.unwrap_or(0.0);
    let cpu_per_lock = if s.lsps > 0.0 {
        d(Duration::from_secs_f64(cpu / s.lsps))
    } else {
        "-".into()
    };
    let per = |x: Option<f64>| x.map_or("-".into(), |x| format!("{x:.2}"));
    let ratio = match row.rslock_lsps {
        Some(r) if r > 0.0 => format!("{:.2}x", s.lsps / r),
        _ => "-".into(),
    };
    let mut out = format!(
        "{:<6} {:<4} {:>5} {:>7} {:<6} {:>6} {:>8} {:>7} {:>7} {:>7} {:>7} {:>7} {:>4.0}% {:>7} {:>7} {:>6} {:>7} {:>7} {:>7} {:>7} {:>5.3} {:>8}",
        row.system.label(),
        row.system.wait(),
        row.nodes,
        row.key.clients,
        row.key.names.label(),
        row.key.hold.label(),
        fmt_rate(s.lsps),
        d(s.mean),
        d(s.p50),
        d(s.p99),
        d(s.max),
        d(s.longest_wait),
        cpu * 100.0,
        cpu_per_lock,
        row.redis_usec_per_lock()
            .map_or("-".into(), |us| d(Duration::from_secs_f64(us / 1e6))),
        per(row.network_per_lock()),
        per(row.scripts_per_lock()),
        per(row.executed_per_lock()),
        s.min_client,
        s.max_client,
        s.jain,
        ratio,
    );
    if s.longest_wait > s.max {
        let _ = write!(out, "  ({} waits cut off by the end)", s.unfinished);
    }
    if s.hit_count_bound {
        out.push_str("  (stopped by --max-locks)");
    }
    if row.commands.connects > 0 {
        let _ = write!(out, "  ({} reconnections)", row.commands.connects);
    }
    out
}

pub const LEGEND: &str = "\
ours: a Dsync over one RedisLocker per node (push: waiting in line, woken by
Redis pub/sub; poll: rounds with backoff). rslock: Redlock (rslock 0.10), one
LockManager over the same nodes; a refused round is retried after the retry
sleep. setnx: SET NX PX and a compare-and-delete script on the first node,
retried after the retry sleep. Ours and rslock share one client object (one
multiplexed connection per node) among all clients; setnx has one connection
per client.
locks/s: locks acquired in the window / window length. mean..max: acquire
latency. longest: the longest wait, counting waits still unfinished when the
window closed. cpu: (user+sys)/wall of this process and of the redis-servers
in use, 100% = one core; cpu/lk: that CPU time per lock. rds/lk: the time
Redis spent executing the commands sent (commandstats usec, all nodes) per lock.
net/lk: Redis commands clients sent (round trips) per lock and its unlock,
summed over nodes, from INFO commandstats read before and after the window
(the harness's own INFO taken out). eval/lk: of those, EVALSHA/EVAL script
calls. exec/lk: commands Redis executed per lock and unlock, counting the
redis.call()s inside scripts as commandstats does. Everything the system sent
in the window counts, including refused rounds, their undo, pushes' turns and
waits cut off by the end.
min/cl, max/cl: fewest and most locks of one client. jain: Jain's fairness
index over clients. x rslock: our locks/s over rslock's on the same nodes,
clients and names.";

fn find(rows: &[Row], system: System, nodes: usize, clients: usize, names: Names) -> Option<&Row> {
    rows.iter().find(|r| {
        r.system == system
            && r.nodes == nodes
            && r.key.clients == clients
            && r.key.names == names
            && r.key.hold == Hold::None
    })
}

fn verdict(met: bool) -> &'static str {
    if met {
        "met"
    } else {
        "MISSED"
    }
}

/// The targets at 3 nodes and 64 clients, with no hold:
/// reported, not asserted.
pub fn targets(rows: &[Row]) -> String {
    const NODES: usize = 3;
    const CLIENTS: usize = 64;
    let mut out = format!(
        "targets ({NODES} Redis nodes, {CLIENTS} clients, no hold; reported, not asserted):\n"
    );
    let get = |system, names| find(rows, system, NODES, CLIENTS, names);
    let push = System::Ours(Wait::Push);
    let poll = System::Ours(Wait::Poll);
    let missing = "not measured in this run";

    match (get(push, Names::Own), get(System::Rslock, Names::Own)) {
        (Some(ours), Some(theirs)) if theirs.summary.lsps > 0.0 => {
            let ratio = ours.summary.lsps / theirs.summary.lsps;
            let _ = writeln!(
                out,
                "  distinct names, locks/s >= 1.5x rslock: ours {} vs rslock {} = {ratio:.2}x: {}",
                fmt_rate(ours.summary.lsps),
                fmt_rate(theirs.summary.lsps),
                verdict(ratio >= 1.5)
            );
        }
        _ => {
            let _ = writeln!(out, "  distinct names, locks/s >= 1.5x rslock: {missing}");
        }
    }

    for (system, goal) in [(push, true), (poll, false)] {
        let label = system.wait();
        match get(system, Names::Shared) {
            Some(row) => {
                let s = &row.summary;
                let served = s.min_client > 0;
                let within = s.longest_wait <= Duration::from_millis(100);
                let fair = s.jain >= 0.95;
                let figures = format!(
                    "min {} locks/client, {} waits still open when the window closed (counted in the longest wait), jain {:.3}, longest wait {}",
                    s.min_client,
                    s.unfinished,
                    s.jain,
                    fmt_duration(s.longest_wait)
                );
                if goal {
                    let _ = writeln!(
                        out,
                        "  one shared name, {label}: every client served: {}; jain >= 0.95: {}; longest wait <= 100ms: {}  ({figures})",
                        verdict(served),
                        verdict(fair),
                        verdict(within)
                    );
                } else {
                    let _ = writeln!(out, "  one shared name, {label} (no target): {figures}");
                }
            }
            None => {
                let _ = writeln!(out, "  one shared name, {label}: {missing}");
            }
        }
    }

    for names in [Names::Own, Names::Shared] {
        for system in [push, poll] {
            let (Some(ours), Some(theirs)) = (get(system, names), get(System::Rslock, names))
            else {
                continue;
            };
            let (Some(net), Some(their_net), Some(exec), Some(their_exec)) = (
                ours.network_per_lock(),
                theirs.network_per_lock(),
                ours.executed_per_lock(),
                theirs.executed_per_lock(),
            ) else {
                continue;
            };
            // Locks asked for before the window but finished in it, and
            // rounds cut off by its end, move a count by a few commands
            // either way: within that, two equal figures are equal.
            let slack = 0.01 * their_net.max(1.0);
            let judged = if (net - their_net).abs() <= slack {
                "met (equal within the window-edge error)"
            } else {
                verdict(net < their_net)
            };
            let _ = writeln!(
                out,
                "  commands per lock+unlock <= rslock's, {} names, {}: network (judged) {net:.2} vs {their_net:.2}: {judged}; \
                 executed incl. inside scripts {exec:.2} vs {their_exec:.2}: {}",
                names.label(),
                system.wait(),
                if exec <= their_exec { "no more" } else { "more" },
            );
        }
    }
    out
}

/// The whole run as JSON, in the spirit of `report::json`.
pub fn json(opts: &Options, machine: &Machine, started: &str, redis: &str, rows: &[Row]) -> String {
    let mut o = String::from("{\n");
    let _ = writeln!(o, "  \"date\": {},", string(started));
    let _ = writeln!(o, "  \"commit\": {},", string(&machine.commit));
    let args: Vec<String> = opts.args.iter().map(|a| string(a)).collect();
    let _ = writeln!(o, "  \"args\": [{}],", args.join(", "));
    let _ = writeln!(
        o,
        "  \"machine\": {{\"cpus\": {}, \"cpu_model\": {}, \"mem_total\": {}, \"kernel\": {}, \"loadavg_start\": {}, \"loadavg_end\": {}}},",
        machine.cpus,
        string(&machine.cpu_model),
        string(&machine.mem_total),
        string(&machine.kernel),
        string(&machine.loadavg),
        string(&loadavg())
    );
    let _ = writeln!(
        o,
        "  \"settings\": {{\"backend\": \"redis\", \"rslock\": {}, \"setnx\": {}, \"seconds\": {}, \"warmup\": {}, \"max_locks\": {}, \"threads\": {}, \"count_rpcs\": {}, \"retry_ns\": {}}},",
        opts.rslock,
        opts.redis != crate::cli::RedisMode::Off,
        number(opts.seconds),
        number(opts.warmup),
        opts.max_locks,
        opts.threads,
        opts.count_rpcs,
        opts.redis_retry.as_nanos()
    );
    let _ = writeln!(o, "  \"redis\": {},", string(redis));
    o.push_str("  \"results\": [");
    for (i, row) in rows.iter().enumerate() {
        o.push_str(if i == 0 { "\n    " } else { ",\n    " });
        o.push_str(&result(row));
    }
    o.push_str("\n  ]\n}\n");
    o
}

fn result(row: &Row) -> String {
    let s = &row.summary;
    let ns = |d: Duration| d.as_nanos().to_string();
    let opt = |x: Option<f64>| x.map_or("null".into(), number);
    let by_name: Vec<String> = row
        .commands
        .by_name
        .iter()
        .map(|(name, stat)| {
            format!(
                "{}: {{\"calls\": {}, \"usec\": {}}}",
                string(name),
                stat.calls,
                stat.usec
            )
        })
        .collect();
    let by_node: Vec<String> = row
        .commands
        .per_node
        .iter()
        .map(|n| format!("{{\"calls\": {}, \"usec\": {}}}", n.calls, n.usec))
        .collect();
    let calls = s.calls.map_or("null".into(), |c| {
        format!(
            "{{\"lock\": {}, \"wait\": {}, \"unlock\": {}, \"refresh\": {}, \"fence\": {}, \"other\": {}}}",
            c.lock, c.wait, c.unlock, c.refresh, c.fence, c.other
        )
    });
    format!(
        "{{\"system\": {}, \"wait\": {}, \"nodes\": {}, \"clients\": {}, \"names\": {}, \"hold\": {}, \
         \"locks\": {}, \"seconds\": {}, \"lsps\": {}, \"mean_ns\": {}, \"p50_ns\": {}, \"p90_ns\": {}, \
         \"p99_ns\": {}, \"max_ns\": {}, \"longest_wait_ns\": {}, \"unfinished_clients\": {}, \
         \"min_locks_per_client\": {}, \"max_locks_per_client\": {}, \"jain\": {}, \"cpu_cores\": {}, \
         \"server_cpu_cores\": {}, \"locker_calls\": {}, \"locker_calls_per_lock\": {}, \
         \"redis_network_commands\": {}, \"redis_script_calls\": {}, \"redis_executed_commands\": {}, \
         \"redis_connects\": {}, \"redis_usec\": {}, \"network_per_lock\": {}, \"scripts_per_lock\": {}, \
         \"executed_per_lock\": {}, \"commands_by_name\": {{{}}}, \"commands_by_node\": [{}], \
         \"hit_count_bound\": {}, \
         \"rslock_lsps\": {}, \"ratio_vs_rslock\": {}}}",
        string(row.system.label()),
        string(row.system.wait()),
        row.nodes,
        row.key.clients,
        string(row.key.names.label()),
        string(&row.key.hold.label()),
        s.locks,
        number(s.seconds),
        number(s.lsps),
        ns(s.mean),
        ns(s.p50),
        ns(s.p90),
        ns(s.p99),
        ns(s.max),
        ns(s.longest_wait),
        s.unfinished,
        s.min_client,
        s.max_client,
        number(s.jain),
        number(s.cpu),
        s.server_cpu.map_or("null".into(), number),
        calls,
        opt(s.calls_per_lock),
        row.commands.network,
        row.commands.scripts,
        row.commands.executed,
        row.commands.connects,
        row.commands.usec,
        opt(row.network_per_lock()),
        opt(row.scripts_per_lock()),
        opt(row.executed_per_lock()),
        by_name.join(", "),
        by_node.join(", "),
        s.hit_count_bound,
        opt(row.rslock_lsps),
        opt(row
            .rslock_lsps
            .filter(|r| *r > 0.0)
            .map(|r| s.lsps / r)),
    )
}
