//! The table, the targets and the JSON of `--backend redis`.

use std::fmt::Write as _;
use std::time::Duration;

use crate::cli::Options;
use crate::out::{
    self, key_cols, left, notes, per, right, stat, stats, string, times, verdict, Col, Doc,
    Machine, Measured, Obj,
};
use crate::redis_base::BaselineKey;
use crate::redis_nodes::{Commands, Stat};
use crate::scenario::{Names, Wait};
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

crate::out::measured_fields!(Row);

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

/// The columns of the table, in order.
pub fn columns() -> Vec<Col<Row>> {
    let mut cols = vec![
        left("sys", 6, |r: &Row| r.system.label().to_owned()),
        left("wait", 4, |r: &Row| r.system.wait().to_owned()),
        right("nodes", 5, |r: &Row| r.nodes.to_string()),
    ];
    cols.extend(key_cols(6));
    cols.extend(stats(&[
        "locks/s", "mean", "p50", "p99", "max", "longest", "cpu", "cpu/lk",
    ]));
    cols.extend([
        right("rds/lk", 7, |r: &Row| {
            r.redis_usec_per_lock().map_or("-".into(), |us| {
                fmt_duration(Duration::from_secs_f64(us / 1e6))
            })
        }),
        right("net/lk", 6, |r: &Row| per(r.network_per_lock())),
        right("eval/lk", 7, |r: &Row| per(r.scripts_per_lock())),
        right("exec/lk", 7, |r: &Row| per(r.executed_per_lock())),
        stat("min/cl"),
        stat("max/cl"),
        stat("jain"),
        right("x rslock", 8, |r: &Row| {
            times(r.summary.lsps, r.rslock_lsps)
        }),
    ]);
    cols
}

/// What follows a row's columns: what cut it short, and reconnections.
pub fn row_notes(row: &Row) -> String {
    let mut out = notes(&row.summary);
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

/// The targets at 3 nodes and 64 clients, with no hold:
/// reported, not asserted.
pub fn targets(rows: &[Row]) -> String {
    const NODES: usize = 3;
    const CLIENTS: usize = 64;
    let mut out = format!(
        "targets ({NODES} Redis nodes, {CLIENTS} clients, no hold; reported, not asserted):\n"
    );
    let get = |system, names| {
        let key = BaselineKey::unheld(CLIENTS, names);
        out::pick(rows, key, |r: &Row| r.system == system && r.nodes == NODES)
    };
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
            Some(row) if goal => {
                let goals = out::shared_goals(&row.summary, Duration::from_millis(100));
                let _ = writeln!(out, "  one shared name, {label}: {goals}");
            }
            Some(row) => {
                let figures = out::shared_figures(&row.summary);
                let _ = writeln!(out, "  one shared name, {label} (no target): {figures}");
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
pub fn json(opts: &Options, machine: &Machine, redis: &str, rows: &[Row]) -> String {
    let settings = Obj::new()
        .str("backend", "redis")
        .raw("rslock", opts.rslock)
        .raw("setnx", opts.redis != crate::cli::RedisMode::Off)
        .load(opts)
        .raw("retry_ns", opts.redis_retry.as_nanos());
    Doc::now(opts, machine)
        .field("settings", settings)
        .field("redis", string(redis))
        .results(rows.iter().map(result))
}

fn result(row: &Row) -> String {
    let s = &row.summary;
    let c = &row.commands;
    let obj = |n: &Stat| Obj::new().raw("calls", n.calls).raw("usec", n.usec);
    let by_name = (c.by_name.iter()).fold(Obj::new(), |o, (name, n)| o.entry(name, obj(n)));
    let by_node: Vec<String> = c.per_node.iter().map(|n| obj(n).done()).collect();
    Obj::new()
        .str("system", row.system.label())
        .str("wait", row.system.wait())
        .raw("nodes", row.nodes)
        .key(row.key)
        .summary(s, false)
        .maybe("locker_calls", out::calls(s.calls))
        .opt("locker_calls_per_lock", s.calls_per_lock)
        .raw("redis_network_commands", c.network)
        .raw("redis_script_calls", c.scripts)
        .raw("redis_executed_commands", c.executed)
        .raw("redis_connects", c.connects)
        .raw("redis_usec", c.usec)
        .opt("network_per_lock", row.network_per_lock())
        .opt("scripts_per_lock", row.scripts_per_lock())
        .opt("executed_per_lock", row.executed_per_lock())
        .raw("commands_by_name", by_name)
        .raw("commands_by_node", format!("[{}]", by_node.join(", ")))
        .raw("hit_count_bound", s.hit_count_bound)
        .opt("rslock_lsps", row.rslock_lsps)
        .opt("ratio_vs_rslock", row.ratio(row.rslock_lsps))
        .done()
}
