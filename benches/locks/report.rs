//! The printed table and the JSON file of the lock runs.

use crate::cli::{Flavor, Options};
use crate::out::{
    self, left, notes, right, stats, string, times, Col, Doc, Machine, Measured, Obj,
};
use crate::scenario::Scenario;
use crate::stats::Summary;

impl out::Measured for Row {
    fn key(&self) -> crate::redis_base::BaselineKey {
        crate::baseline_key(&self.scenario)
    }

    fn summary(&self) -> &Summary {
        &self.summary
    }
}

pub struct Row {
    /// "ours" or "redis".
    pub system: &'static str,
    pub scenario: Scenario,
    pub summary: Summary,
    /// Locks/s of the Redis baseline for the same clients, names and hold.
    pub redis_lsps: Option<f64>,
    /// Locks/s of one client alone with the same nodes, hold and waiting:
    /// the serial rate a shared name with a hold is compared with.
    pub serial_lsps: Option<f64>,
    /// This run is that one client alone, measured for the comparison.
    pub serial_reference: bool,
    /// Locks/s of the trivial client on trivial servers for the same nodes,
    /// clients, names and hold (`--ceiling on`).
    pub ceiling_lsps: Option<f64>,
}

impl Row {
    /// A row with no comparison figures.
    pub fn new(system: &'static str, scenario: Scenario, summary: Summary) -> Row {
        Row {
            system,
            scenario,
            summary,
            redis_lsps: None,
            serial_lsps: None,
            serial_reference: false,
            ceiling_lsps: None,
        }
    }
}

/// The columns of the table, in order.
pub fn columns() -> Vec<Col<Row>> {
    let ratio = |r: &Row, base: Option<f64>, percent: bool| match base {
        Some(b) if b > 0.0 && percent => format!("{:.1}%", 100.0 * r.summary.lsps / b),
        base => times(r.summary.lsps, base),
    };
    let mut cols = vec![
        left("sys", 9, |r: &Row| r.system.to_owned()),
        left("wait", 4, |r: &Row| match r.system {
            "ours" | "ours-triv" => r.scenario.wait.label().to_owned(),
            _ => "-".to_owned(),
        }),
        right("nodes", 5, |r: &Row| r.scenario.nodes.to_string()),
        right("clients", 7, |r: &Row| r.scenario.clients.to_string()),
        left("names", 6, |r: &Row| r.scenario.names.label().to_owned()),
        left("mix", 6, |r: &Row| r.scenario.mix.label().to_owned()),
        right("hold", 6, |r: &Row| r.scenario.hold.label()),
    ];
    cols.extend(stats(&[
        "locks/s", "mean", "p50", "p70", "p90", "p99", "max", "longest", "cpu", "cpu/lk", "rpc/lk",
        "min/cl", "max/cl", "jain",
    ]));
    cols.extend([
        right("x redis", 7, move |r: &Row| {
            ratio(r, r.redis_lsps.filter(|_| r.system == "ours"), false)
        }),
        right("x serial", 8, move |r: &Row| ratio(r, r.serial_lsps, true)),
        right("x ceil", 6, move |r: &Row| ratio(r, r.ceiling_lsps, false)),
    ]);
    cols
}

/// What follows a row's columns: what it is, what cut it short, and
/// with `--counts on` the line of counts under it.
pub fn row_notes(row: &Row) -> String {
    let s = &row.summary;
    let mut out = String::new();
    if row.serial_reference {
        out.push_str("  (serial reference: one client alone)");
    }
    out.push_str(&notes(s));
    if let Some(counts) = &s.counts {
        out.push('\n');
        out.push_str(&counts.line(s.locks));
    }
    out
}

pub const LEGEND: &str = "\
locks/s: locks acquired in the window / window length. mean..max: acquire
latency (HDR histogram, 3 significant digits). longest: the longest wait,
counting waits still unfinished when the window closed. cpu: (user+sys)/wall
of this process (plus the server processes: redis-server, or the lock servers of --transport tcp), 100% = one core.
cpu/lk: that CPU time per lock acquired (client and servers together).
rpc/lk: calls to lockers (ours: lock+wait+unlock+refresh+fence+other,
counted by the wrapper) or Redis commands per lock. min/cl, max/cl: fewest and most locks
of one client. jain: Jain's fairness index over clients. x redis: our
locks/s over Redis's for the same clients, names and hold (write rows only;
the Redis lock has no shared mode). wait: push (waiting in line, pushed
grants) or poll (rounds with backoff). x serial: for one shared name with a
hold, our locks/s as a share of the rate one client reaches holding alone
(the serial reference row: same nodes, hold and wait). ceiling (--ceiling
on, TCP): a trivial client loop on trivial servers (our framing, encoding
and handshake, every request answered at once, no lock table), in
processes of their own like ours; ours-triv: our client (Dsync over
RemoteLockers) on those trivial servers. x ceil: locks/s as a share of the
ceiling row of the same nodes, clients, names and hold.";

/// The whole run as JSON. Written by hand: the schema is flat and small.
pub fn json(opts: &Options, machine: &Machine, redis: &str, rows: &[Row]) -> String {
    let settings = Obj::new()
        .num("seconds", opts.seconds)
        .num("warmup", opts.warmup)
        .raw("max_locks", opts.max_locks)
        .str(
            "runtime",
            match opts.flavor {
                Flavor::Multi => "multi",
                Flavor::Current => "current",
            },
        )
        .raw("threads", opts.threads)
        .raw("count_rpcs", opts.count_rpcs)
        .raw("redis_retry_ns", opts.redis_retry.as_nanos());
    Doc::now(opts, machine)
        .field("settings", settings)
        .field("redis", string(redis))
        .results(rows.iter().map(result))
}

fn result(row: &Row) -> String {
    let s = &row.summary;
    let sc = &row.scenario;
    let (transport, wait) = match row.system {
        "ours" | "ours-triv" => (sc.transport.label(), sc.wait.label()),
        "ceiling" => (sc.transport.label(), "-"),
        _ => ("tcp-loopback", "retry-sleep"),
    };
    Obj::new()
        .str("system", row.system)
        .str("transport", transport)
        .str("wait", wait)
        .raw("nodes", sc.nodes)
        .raw("clients", sc.clients)
        .str("names", sc.names.label())
        .str("mix", sc.mix.label())
        .str("hold", &sc.hold.label())
        .summary(s, true)
        .maybe("calls", out::calls(s.calls))
        .opt("calls_per_lock", s.calls_per_lock)
        .raw("hit_count_bound", s.hit_count_bound)
        .opt("redis_lsps", row.redis_lsps)
        .opt(
            "ratio_vs_redis",
            row.ratio(row.redis_lsps.filter(|_| row.system == "ours")),
        )
        .raw("serial_reference", row.serial_reference)
        .opt("serial_lsps", row.serial_lsps)
        .opt("ratio_vs_serial", row.ratio(row.serial_lsps))
        .opt("ceiling_lsps", row.ceiling_lsps)
        .opt("ratio_vs_ceiling", row.ratio(row.ceiling_lsps))
        .maybe("counts", s.counts.map(|c| c.json(s.locks)))
        .done()
}
