//! What `--scenario election` prints and saves: the figures of each system
//! as lines of text, the Markdown table of BENCHMARKS.md and the JSON.

use std::fmt::Write as _;
use std::time::Duration;

use crate::cli::Options;
use crate::out::{human, number, string, Doc, Machine, Obj};
use crate::stats::fmt_duration;

use crate::election::*;
use crate::election_child::*;

/// What the run measured for one system.
pub struct SystemResult {
    pub label: &'static str,
    pub handoff: Option<Handoff>,
    pub failovers: Vec<Failover>,
    /// Why something was not measured.
    pub notes: Vec<String>,
}

impl SystemResult {
    /// Nothing measured yet.
    pub fn new(label: &'static str) -> SystemResult {
        SystemResult {
            label,
            handoff: None,
            failovers: Vec::new(),
            notes: Vec::new(),
        }
    }

    /// The failover measured at `validity`, if it was.
    fn failover_at(&self, validity: Duration) -> Option<&Failover> {
        self.failovers.iter().find(|f| f.validity == validity)
    }
}

/// p50, p99 and max, nearest-rank.
#[derive(Clone, Copy)]
pub struct Figures {
    pub n: usize,
    pub p50: Duration,
    pub p99: Duration,
    pub max: Duration,
}

pub fn figures(samples: &[Duration]) -> Option<Figures> {
    let mut sorted = samples.to_vec();
    sorted.sort_unstable();
    let n = sorted.len();
    let rank = |q: f64| sorted[((q * n as f64).ceil() as usize).clamp(1, n) - 1];
    (n > 0).then(|| Figures {
        n,
        p50: rank(0.50),
        p99: rank(0.99),
        max: sorted[n - 1],
    })
}

impl Figures {
    /// The figures as a JSON object, for [`Obj::maybe`] (`null` without
    /// samples).
    pub fn json(f: Option<Figures>) -> Option<Obj> {
        f.map(|f| {
            let o = Obj::new().raw("samples", f.n).ns("p50_ns", f.p50);
            o.ns("p99_ns", f.p99).ns("max_ns", f.max)
        })
    }
}

pub(crate) fn fig_text(f: Option<Figures>) -> String {
    f.map_or("no samples".into(), |f| {
        format!(
            "p50 {} p99 {} max {} ({} samples)",
            fmt_duration(f.p50),
            fmt_duration(f.p99),
            fmt_duration(f.max),
            f.n
        )
    })
}

pub(crate) fn handoff_lines(label: &str, h: &Handoff) -> String {
    let mut out = format!(
        "{label}: hand-off {}\n{label}: hand-off counted from the resign's return {}\n{label}: observer lag {}; {} early (counted as 0), {} missed; {} leaders in {:.1}s",
        fig_text(figures(&h.handoffs)),
        fig_text(figures(&h.after_resign)),
        fig_text(figures(&h.lags)),
        h.early,
        h.missed,
        h.leaders,
        h.seconds
    );
    if let Some(cpu) = h.cpu_per_change {
        let _ = write!(
            out,
            "; CPU (this process and the servers) per leader change {}",
            fmt_duration(cpu)
        );
    }
    if let Some(calls) = &h.calls_per_change {
        let total: f64 = calls.iter().map(|(_, n)| n).sum();
        let each: Vec<String> = calls
            .iter()
            .map(|(kind, n)| format!("{kind:?} {n:.1}"))
            .collect();
        let _ = write!(
            out,
            "\n{label}: calls to lockers per leader change {total:.1} ({})",
            each.join(", ")
        );
    }
    if let Some(note) = &h.note {
        let _ = write!(out, " ({note})");
    }
    out
}

pub(crate) fn failover_samples(f: &Failover) -> Vec<Duration> {
    f.samples.iter().map(|s| s.failover).collect()
}

/// The longest time past the lease of any sample, in seconds.
fn worst_past(f: &Failover) -> f64 {
    (f.samples.iter().map(|s| s.past_lease)).fold(f64::NEG_INFINITY, f64::max)
}

pub(crate) fn failover_line(label: &str, f: &Failover) -> String {
    let mut out = format!(
        "{label}: failover at {}: {}; past the lease: at most {:+.0} ms",
        fmt_duration(f.validity),
        fig_text(figures(&failover_samples(f))),
        worst_past(f) * 1e3
    );
    if let Some(note) = &f.note {
        let _ = write!(out, " ({note})");
    }
    out
}

/// "p50 / p99 / max (samples)" for prose and tables, or `none`.
pub(crate) fn cell(f: Option<Figures>, none: &str) -> String {
    f.map_or(none.into(), |f| {
        let (p50, p99, max) = (human(f.p50), human(f.p99), human(f.max));
        format!("{p50} / {p99} / {max} ({})", f.n)
    })
}

/// Whether a target is met: `Some(true)`, `Some(false)`, or `None` without
/// samples.
pub(crate) fn met(f: Option<Figures>, limit: Duration, use_max: bool) -> Option<bool> {
    f.map(|f| if use_max { f.max } else { f.p99 } <= limit)
}

pub(crate) fn yes_no(m: Option<bool>) -> &'static str {
    match m {
        Some(true) => "met",
        Some(false) => "**not met**",
        None => "not measured",
    }
}

/// The table for BENCHMARKS.md: one row per figure, one column per system.
pub(crate) fn markdown(results: &[&SystemResult]) -> String {
    let mut out = String::from(
        "Markdown (p50 / p99 / max (samples); nearest-rank; failover: SIGKILL of the leader's process → next campaign returned):\n\n",
    );
    let names: Vec<&str> = results.iter().map(|r| r.label).collect();
    let _ = writeln!(out, "| figure | {} | target | ours |", names.join(" | "));
    let _ = writeln!(out, "|---|{}---|---|", "---|".repeat(names.len()));
    let two_ms = Duration::from_millis(2);
    let handoff = |r: &SystemResult| r.handoff.as_ref().and_then(|h| figures(&h.handoffs));
    let lag = |r: &SystemResult| r.handoff.as_ref().and_then(|h| figures(&h.lags));
    let row = |out: &mut String,
               what: &str,
               f: &dyn Fn(&SystemResult) -> Option<Figures>,
               target: String,
               status: &str| {
        let cells: Vec<String> = results.iter().map(|r| cell(f(r), "—")).collect();
        let _ = writeln!(
            out,
            "| {what} | {} | {target} | {status} |",
            cells.join(" | ")
        );
    };
    let ours = results[0];
    row(
        &mut out,
        "hand-off (resign → next campaign returned)",
        &handoff,
        "p99 ≤ 2 ms".into(),
        yes_no(met(handoff(ours), two_ms, false)),
    );
    row(
        &mut out,
        "observer lag (campaign returned → observer yields it)",
        &lag,
        "p99 ≤ 2 ms".into(),
        yes_no(met(lag(ours), two_ms, false)),
    );
    let mut validities: Vec<Duration> = Vec::new();
    for f in results.iter().flat_map(|r| &r.failovers) {
        if !validities.contains(&f.validity) {
            validities.push(f.validity);
        }
    }
    for validity in validities {
        let fo = move |r: &SystemResult| {
            (r.failover_at(validity)).and_then(|f| figures(&failover_samples(f)))
        };
        let limit = validity + Duration::from_millis(100);
        row(
            &mut out,
            &format!("failover, validity / TTL {}", human(validity)),
            &fo,
            format!("≤ {}", human(limit)),
            yes_no(met(fo(ours), limit, true)),
        );
        let past = |r: &SystemResult| {
            (r.failover_at(validity))
                .map_or("—".into(), |f| format!("{:+.0} ms", worst_past(f) * 1e3))
        };
        let cells: Vec<String> = results.iter().map(|r| past(r)).collect();
        let ours_past =
            (ours.failover_at(validity)).map(|f| f.samples.iter().all(|s| s.past_lease <= 0.1));
        let _ = writeln!(
            out,
            "| at {}: worst time past the lease (leader's lease end → next leader) | {} | ≤ +100 ms | {} |",
            human(validity),
            cells.join(" | "),
            yes_no(ours_past)
        );
    }
    out
}

pub(crate) fn json(
    opts: &Options,
    machine: &Machine,
    load_end: &str,
    etcd_status: &str,
    results: &[&SystemResult],
) -> String {
    let e = &opts.election;
    let settings = Obj::new()
        .str("scenario", "election")
        .raw("nodes", e.nodes)
        .raw("candidates", e.candidates)
        .raw("observers", e.observers)
        .raw("handoffs", e.handoffs)
        .num("seconds", opts.seconds)
        .num("failover_seconds", e.failover_seconds);
    let fig = Figures::json;
    let result = |r: &&SystemResult| {
        let h = r.handoff.as_ref();
        let failovers: Vec<String> = r
            .failovers
            .iter()
            .map(|f| {
                let past: Vec<String> = f.samples.iter().map(|s| number(s.past_lease)).collect();
                Obj::new()
                    .raw("validity_ms", f.validity.as_millis())
                    .maybe("failover", fig(figures(&failover_samples(f))))
                    .raw("past_lease_s", format!("[{}]", past.join(", ")))
                    .done()
            })
            .collect();
        Obj::new()
            .str("system", r.label)
            .maybe("handoff", fig(h.and_then(|h| figures(&h.handoffs))))
            .maybe(
                "handoff_after_resign",
                fig(h.and_then(|h| figures(&h.after_resign))),
            )
            .opt_ns("cpu_per_change_ns", h.and_then(|h| h.cpu_per_change))
            .maybe("observer_lag", fig(h.and_then(|h| figures(&h.lags))))
            .raw("early", h.map_or(0, |h| h.early))
            .raw("missed", h.map_or(0, |h| h.missed))
            .raw("failover", format!("[{}]", failovers.join(", ")))
            .done()
    };
    Doc::new(opts, machine, load_end, Obj::new())
        .field("settings", settings)
        .field("etcd", string(etcd_status))
        .results(results.iter().map(result))
}
