//! The printed table, the JSON file, and the facts about the machine that
//! make a result comparable with another.

use std::fmt::Write as _;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::cli::{Flavor, Options};
use crate::scenario::{Mix, Names, Scenario};
use crate::stats::{fmt_duration, fmt_rate, Summary};

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

pub struct Machine {
    /// The commit of the code measured, with `+dirty` for local changes.
    pub commit: String,
    pub cpus: usize,
    pub cpu_model: String,
    pub mem_total: String,
    pub kernel: String,
    pub loadavg: String,
}

impl Machine {
    pub fn read() -> Machine {
        let file = |p: &str| std::fs::read_to_string(p).unwrap_or_default();
        let field = |text: &str, key: &str| {
            text.lines()
                .find(|l| l.starts_with(key))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_owned())
                .unwrap_or_else(|| "unknown".into())
        };
        Machine {
            commit: commit(),
            cpus: std::thread::available_parallelism().map_or(0, |n| n.get()),
            cpu_model: field(&file("/proc/cpuinfo"), "model name"),
            mem_total: field(&file("/proc/meminfo"), "MemTotal"),
            kernel: file("/proc/sys/kernel/osrelease").trim().to_owned(),
            loadavg: loadavg(),
        }
    }
}

fn commit() -> String {
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .args(args)
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
    };
    let Some(head) = git(&["rev-parse", "--short=12", "HEAD"]) else {
        return "unknown".into();
    };
    match git(&["status", "--porcelain", "--untracked-files=no"]) {
        Some(changes) if !changes.is_empty() => format!("{head}+dirty"),
        _ => head,
    }
}

/// The 1, 5 and 15 minute load averages: how busy the machine was with
/// work other than ours.
pub fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

/// The current UTC time as `YYYY-MM-DDTHH:MM:SSZ`.
pub fn utc_now() -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let (days, rem) = ((secs / 86_400) as i64, secs % 86_400);
    // Howard Hinnant's days-to-civil conversion.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

pub fn header() -> String {
    format!(
        "{:<9} {:<4} {:>5} {:>7} {:<6} {:<6} {:>6} {:>8} {:>7} {:>7} {:>7} {:>7} {:>7} {:>7} {:>7} {:>5} {:>7} {:>6} {:>7} {:>7} {:>5} {:>7} {:>8} {:>6}",
        "sys", "wait", "nodes", "clients", "names", "mix", "hold", "locks/s", "mean", "p50", "p70",
        "p90", "p99", "max", "longest", "cpu", "cpu/lk", "rpc/lk", "min/cl", "max/cl", "jain", "x redis",
        "x serial", "x ceil"
    )
}

pub fn line(row: &Row) -> String {
    let s = &row.summary;
    let sc = &row.scenario;
    let d = |d: Duration| fmt_duration(d);
    let cpu = s.cpu + s.server_cpu.unwrap_or(0.0);
    let cpu_per_lock = if s.lsps > 0.0 {
        d(Duration::from_secs_f64(cpu / s.lsps))
    } else {
        "-".into()
    };
    let ratio = match (row.system, row.redis_lsps) {
        ("ours", Some(r)) if r > 0.0 => format!("{:.2}x", s.lsps / r),
        _ => "-".into(),
    };
    let serial = match row.serial_lsps {
        Some(r) if r > 0.0 => format!("{:.1}%", 100.0 * s.lsps / r),
        _ => "-".into(),
    };
    let wait = match row.system {
        "ours" | "ours-triv" => sc.wait.label(),
        _ => "-",
    };
    let ceiling = match row.ceiling_lsps {
        Some(c) if c > 0.0 => format!("{:.2}x", s.lsps / c),
        _ => "-".into(),
    };
    let mut out = format!(
        "{:<9} {:<4} {:>5} {:>7} {:<6} {:<6} {:>6} {:>8} {:>7} {:>7} {:>7} {:>7} {:>7} {:>7} {:>7} {:>4.0}% {:>7} {:>6} {:>7} {:>7} {:>5.3} {:>7} {:>8} {:>6}",
        row.system,
        wait,
        sc.nodes,
        sc.clients,
        sc.names.label(),
        sc.mix.label(),
        sc.hold.label(),
        fmt_rate(s.lsps),
        d(s.mean),
        d(s.p50),
        d(s.p70),
        d(s.p90),
        d(s.p99),
        d(s.max),
        d(s.longest_wait),
        cpu * 100.0,
        cpu_per_lock,
        s.calls_per_lock.map_or("-".into(), |c| format!("{c:.2}")),
        s.min_client,
        s.max_client,
        s.jain,
        ratio,
        serial,
        ceiling,
    );
    if row.serial_reference {
        out.push_str("  (serial reference: one client alone)");
    }
    if s.longest_wait > s.max {
        let _ = write!(out, "  ({} waits cut off by the end)", s.unfinished);
    }
    if s.hit_count_bound {
        out.push_str("  (stopped by --max-locks)");
    }
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
        "  \"settings\": {{\"seconds\": {}, \"warmup\": {}, \"max_locks\": {}, \"runtime\": {}, \"threads\": {}, \"count_rpcs\": {}, \"redis_retry_ns\": {}}},",
        number(opts.seconds),
        number(opts.warmup),
        opts.max_locks,
        string(match opts.flavor {
            Flavor::Multi => "multi",
            Flavor::Current => "current",
        }),
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
    let sc = &row.scenario;
    let ns = |d: Duration| d.as_nanos().to_string();
    let (transport, wait) = match row.system {
        "ours" | "ours-triv" => (sc.transport.label(), sc.wait.label()),
        "ceiling" => (sc.transport.label(), "-"),
        _ => ("tcp-loopback", "retry-sleep"),
    };
    let calls = s.calls.map_or("null".into(), |c| {
        format!(
            "{{\"lock\": {}, \"wait\": {}, \"unlock\": {}, \"refresh\": {}, \"fence\": {}, \"other\": {}}}",
            c.lock, c.wait, c.unlock, c.refresh, c.fence, c.other
        )
    });
    let ratio = row
        .redis_lsps
        .filter(|r| *r > 0.0 && row.system == "ours")
        .map(|r| s.lsps / r);
    format!(
        "{{\"system\": {}, \"transport\": {}, \"wait\": {}, \"nodes\": {}, \"clients\": {}, \
         \"names\": {}, \"mix\": {}, \"hold\": {}, \"locks\": {}, \"seconds\": {}, \"lsps\": {}, \
         \"mean_ns\": {}, \"p50_ns\": {}, \"p70_ns\": {}, \"p90_ns\": {}, \"p99_ns\": {}, \
         \"max_ns\": {}, \"longest_wait_ns\": {}, \"unfinished_clients\": {}, \
         \"min_locks_per_client\": {}, \"max_locks_per_client\": {}, \"jain\": {}, \
         \"cpu_cores\": {}, \"server_cpu_cores\": {}, \"calls\": {}, \"calls_per_lock\": {}, \
         \"hit_count_bound\": {}, \"redis_lsps\": {}, \"ratio_vs_redis\": {}, \
         \"serial_reference\": {}, \"serial_lsps\": {}, \"ratio_vs_serial\": {}, \
         \"ceiling_lsps\": {}, \"ratio_vs_ceiling\": {}, \"counts\": {}}}",
        string(row.system),
        string(transport),
        string(wait),
        sc.nodes,
        sc.clients,
        string(match sc.names {
            Names::Own => "own",
            Names::Shared => "shared",
        }),
        string(match sc.mix {
            Mix::Write => "write",
            Mix::Read90 => "read90",
        }),
        string(&sc.hold.label()),
        s.locks,
        number(s.seconds),
        number(s.lsps),
        ns(s.mean),
        ns(s.p50),
        ns(s.p70),
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
        s.calls_per_lock.map_or("null".into(), number),
        s.hit_count_bound,
        row.redis_lsps.map_or("null".into(), number),
        ratio.map_or("null".into(), number),
        row.serial_reference,
        row.serial_lsps.map_or("null".into(), number),
        row.serial_lsps
            .filter(|r| *r > 0.0)
            .map_or("null".into(), |r| number(s.lsps / r)),
        row.ceiling_lsps.map_or("null".into(), number),
        row.ceiling_lsps
            .filter(|r| *r > 0.0)
            .map_or("null".into(), |r| number(s.lsps / r)),
        s.counts.map_or("null".into(), |c| c.json(s.locks)),
    )
}

pub fn number(x: f64) -> String {
    if x.is_finite() {
        format!("{x:.6}")
            .trim_end_matches('0')
            .trim_end_matches('.')
            .to_owned()
    } else {
        "null".into()
    }
}

pub fn string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}
