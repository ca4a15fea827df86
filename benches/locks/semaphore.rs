//! `--scenario semaphore`: one counting semaphore of `--permits` permits
//! under load, `--clients` clients on one `Dsync` looping acquire, hold,
//! release in the window every lock run shares ([`Window::client`]).
//!
//! Every holder notes when its `acquire` returned and when it was about to
//! call `unlock`; every figure (permits/s against `permits / hold`,
//! occupancy, slot idle, waits, fairness) comes from those notes. A noted
//! interval lies inside the time the permit was really held, all on this
//! process's monotonic clock, so an overlap of more than k holders, or of
//! two on one slot, is a real one: the run fails with it. Permits reported
//! lost at release are counted and left out of that check.

use std::fmt::Write as _;
use std::time::Duration;

use std::sync::{Arc, Mutex, PoisonError};

use quorum_lock::{Error, Semaphore, SemaphorePermit};
use tokio::time::Instant;

use crate::cli::{Options, SemaphoreSettings};
use crate::context::Context;
use crate::counting::{self, CallCounts};
use crate::election_report::{figures, yes_no, Figures};
use crate::out::{self, human, loadavg, say, Doc, Machine, Obj};
use crate::scenario::{Hold, Mix, Names, Scenario, Transport};
use crate::servers::Kind;
use crate::stats::{
    counted, drive, fmt_duration, fmt_rate, jain, ClientTally, Locking, Snapshot, Usage,
};

/// The semaphore's name (its locks: `semaphore/bench/...`).
const NAME: &str = "bench";
/// The share of the ideal rate the issue asks for.
const TARGET: f64 = 0.90;

/// One permit, as its holder saw it.
#[derive(Debug, Clone, Copy)]
struct Held {
    client: usize,
    slot: usize,
    /// `acquire` returned.
    granted: Instant,
    /// Just before `unlock` was called.
    released: Instant,
}

/// What one client noted, handed over when its loop ends.
#[derive(Default)]
struct Record {
    held: Vec<Held>,
    /// Waits of the acquisitions asked inside the window.
    waits: Vec<Duration>,
    /// Permits found lost at release.
    lost: u64,
}

/// One client of the semaphore, driven by the loop every lock run shares
/// ([`Window::client`]: the window, `--max-locks`, the hold, the cut-off
/// wait); what it notes goes to `records` when it ends.
struct Client {
    semaphore: Semaphore,
    c: usize,
    record: Record,
    records: Arc<Mutex<Vec<Record>>>,
}

impl Locking for Client {
    /// The permit, when it was asked for and when `acquire` returned.
    type Held = (SemaphorePermit, Instant, Instant);

    async fn acquire(&mut self) -> Result<Self::Held, String> {
        let asked = Instant::now();
        // Cancel safe: whatever a cut-off acquire had taken is released.
        let permit = (self.semaphore.acquire().await)
            .map_err(|err| format!("client {}: acquire failed: {err}", self.c))?;
        Ok((permit, asked, Instant::now()))
    }

    async fn release(
        &mut self,
        (permit, asked, granted): Self::Held,
        _: &mut ClientTally,
        counted: bool,
    ) -> Result<(), String> {
        if counted {
            self.record.waits.push(granted - asked);
        }
        let slots = permit.slots();
        let lost = permit.is_lost();
        let released = Instant::now();
        match permit.unlock().await {
            Ok(()) => {}
            Err(Error::LockLost) if lost => {}
            Err(err) => return Err(format!("client {}: release failed: {err}", self.c)),
        }
        if lost {
            self.record.lost += 1;
        } else {
            let c = self.c;
            self.record.held.extend(slots.into_iter().map(|slot| Held {
                client: c,
                slot,
                granted,
                released,
            }));
        }
        // With hold 0 in process, acquire and release may never return
        // Pending; this gives the worker back once the budget is spent.
        tokio::task::coop::consume_budget().await;
        Ok(())
    }

    async fn finish(self, _: bool) {
        let mut records = self.records.lock().unwrap_or_else(PoisonError::into_inner);
        records.push(self.record);
    }
}

/// The figures of one run.
pub struct Outcome {
    pub settings: SemaphoreSettings,
    pub transport: Transport,
    /// Permits granted inside the window.
    pub granted: u64,
    pub seconds: f64,
    pub rate: f64,
    /// permits / hold, when the hold is a time.
    pub ideal: Option<f64>,
    pub mean_hold: Duration,
    /// Mean of min(holders, k) over the window, / k.
    pub occupancy: f64,
    /// Share of the window with all k permits held.
    pub all_held: f64,
    pub max_holders: usize,
    pub idle: Option<Figures>,
    pub mean_idle: Duration,
    pub waits: Option<Figures>,
    pub longest_wait: Duration,
    pub unfinished: usize,
    pub jain: f64,
    pub min_client: u64,
    pub max_client: u64,
    pub lost: u64,
    pub hit_count_bound: bool,
    /// This process, in cores.
    pub cpu: f64,
    /// The server processes, in cores (TCP only).
    pub server_cpu: Option<f64>,
    pub calls: Option<CallCounts>,
    /// The reentrant re-lock probe, when calls are counted.
    pub relock: Option<Relock>,
}

/// Nested re-locks of a lock a `Holder` already holds: they must call no
/// locker.
#[derive(Debug, Clone, Copy)]
pub struct Relock {
    pub nested: u64,
    /// Locker calls while the nested re-locks ran.
    pub calls: u64,
    /// Locker calls of the first, real acquisition.
    pub first_calls: u64,
    pub each: Duration,
}

/// How many nested re-locks the probe makes.
const RELOCKS: u64 = 10_000;

/// Takes a lock through a `Holder`, then re-locks it `RELOCKS` times
/// (each guard dropped at once), counting the lock, wait and unlock calls
/// of each part (not the outer lock's refreshes). Fails if a nested
/// re-lock made any.
async fn relock_probe(cluster: &crate::ours::Cluster) -> Result<Option<Relock>, String> {
    if cluster.calls.is_empty() {
        return Ok(None);
    }
    // Lock, wait and unlock calls: the outer lock's keeper refreshes it
    // in the background meanwhile (one round per refresh interval), which
    // is no call of a nested re-lock.
    let calls = || {
        let counts = counting::total(&cluster.calls);
        counts.lock + counts.wait + counts.unlock
    };
    // The run's own releases may still be on their way (a drain task's
    // unlocks): they are no call of a nested re-lock, so they land first.
    cluster
        .ds
        .finish_releases(Duration::from_secs(10))
        .await
        .context("the run's releases did not land before the probe")?;
    let mutex = cluster
        .ds
        .rw_mutex(["reentrant-probe"])
        .context("cannot make the probe's mutex")?;
    let holder = cluster.ds.holder();
    let before = calls();
    let outer = holder
        .lock(&mutex)
        .await
        .context("the probe's first lock failed")?;
    let first_calls = calls() - before;
    let started = Instant::now();
    let at = calls();
    for _ in 0..RELOCKS {
        let nested = holder
            .lock(&mutex)
            .await
            .context("a nested re-lock failed")?;
        drop(nested);
    }
    let each = started.elapsed() / u32::try_from(RELOCKS).unwrap_or(u32::MAX);
    let nested_calls = calls() - at;
    outer.unlock().await.context("the probe's unlock failed")?;
    if nested_calls > 0 {
        return Err(format!(
            "REENTRANT RE-LOCK CALLED LOCKERS: {nested_calls} calls in {RELOCKS} nested re-locks"
        ));
    }
    Ok(Some(Relock {
        nested: RELOCKS,
        calls: nested_calls,
        first_calls,
        each,
    }))
}

impl Outcome {
    pub fn calls_per_permit(&self) -> Option<f64> {
        self.calls
            .map(|c| c.total() as f64 / self.granted.max(1) as f64)
    }

    pub fn cpu_per_permit(&self) -> Option<Duration> {
        let cores = self.cpu + self.server_cpu.unwrap_or(0.0);
        (self.rate > 0.0).then(|| Duration::from_secs_f64(cores / self.rate))
    }

    pub fn share_of_ideal(&self) -> Option<f64> {
        self.ideal.map(|ideal| self.rate / ideal)
    }
}

fn hold_time(hold: Hold) -> Option<Duration> {
    match hold {
        Hold::For(d) | Hold::Spin(d) | Hold::Exact(d) => Some(d),
        Hold::None | Hold::Yield => None,
    }
}

/// Every instant the count of holders changes: +1 at a grant, −1 at a
/// release, releases first where two fall on the same instant.
fn steps(held: &[Held]) -> Vec<(Instant, i64)> {
    let mut steps: Vec<(Instant, i64)> = held
        .iter()
        .flat_map(|h| [(h.granted, 1), (h.released, -1)])
        .collect();
    steps.sort_unstable();
    steps
}

/// Fails, loudly, if more than `permits` holders or two holders of one
/// slot ever overlap. Returns the most holders at once.
fn check_safety(held: &[Held], permits: usize, origin: Instant) -> Result<usize, String> {
    let mut holders = 0i64;
    let mut most = 0i64;
    let mut worst_at = origin;
    for (at, step) in steps(held) {
        holders += step;
        if holders > most {
            most = holders;
            worst_at = at;
        }
    }
    let most = usize::try_from(most).unwrap_or(0);
    if most > permits {
        let who: Vec<String> = held
            .iter()
            .filter(|h| h.granted <= worst_at && worst_at < h.released)
            .map(|h| format!("client {} on slot {}", h.client, h.slot))
            .collect();
        return Err(format!(
            "SAFETY VIOLATION: {most} holders of a {permits}-permit semaphore at once, \
             {:.6} s into the run: {}",
            worst_at.saturating_duration_since(origin).as_secs_f64(),
            who.join(", ")
        ));
    }
    let mut by_slot: Vec<&Held> = held.iter().collect();
    by_slot.sort_unstable_by_key(|h| (h.slot, h.granted));
    for pair in by_slot.windows(2) {
        let (a, b) = (pair[0], pair[1]);
        if a.slot == b.slot && b.granted < a.released {
            return Err(format!(
                "SAFETY VIOLATION: slot {} held by client {} and client {} at once, \
                 from {:.6} s to {:.6} s into the run",
                a.slot,
                a.client,
                b.client,
                b.granted.saturating_duration_since(origin).as_secs_f64(),
                a.released.saturating_duration_since(origin).as_secs_f64()
            ));
        }
    }
    Ok(most)
}

/// The mean of min(holders, k) over `[from, until)`, / k, and the share of
/// that time with all k held.
fn occupancy(held: &[Held], permits: usize, from: Instant, until: Instant) -> (f64, f64) {
    let span = until.saturating_duration_since(from).as_secs_f64();
    if span <= 0.0 {
        return (0.0, 0.0);
    }
    let k = permits as i64;
    let (mut holders, mut area, mut full) = (0i64, 0.0, 0.0);
    let mut last = from;
    for (at, step) in steps(held) {
        let at = at.clamp(from, until);
        let d = at.saturating_duration_since(last).as_secs_f64();
        area += holders.min(k) as f64 * d;
        if holders >= k {
            full += d;
        }
        last = at.max(last);
        holders += step;
    }
    let d = until.saturating_duration_since(last).as_secs_f64();
    area += holders.min(k) as f64 * d;
    if holders >= k {
        full += d;
    }
    (area / (k as f64 * span), full / span)
}

/// Release → next grant on each slot, for releases inside the window.
fn idle_times(held: &[Held], from: Instant, until: Instant) -> Vec<Duration> {
    let mut by_slot: Vec<&Held> = held.iter().collect();
    by_slot.sort_unstable_by_key(|h| (h.slot, h.granted));
    by_slot
        .windows(2)
        .filter(|p| p[0].slot == p[1].slot && p[0].released >= from && p[0].released < until)
        .map(|p| p[1].granted.saturating_duration_since(p[0].released))
        .collect()
}

async fn measure(opts: &Options) -> Result<Outcome, String> {
    let s = opts.semaphore.clone();
    let scenario = Scenario {
        nodes: s.nodes,
        clients: s.clients,
        names: Names::Shared,
        mix: Mix::Write,
        hold: s.hold,
        transport: opts.transport,
        wait: s.wait,
    };
    let cluster = crate::ours::cluster(&scenario, opts.count_rpcs, Kind::Ours).await?;
    let semaphore = cluster
        .ds
        .semaphore(NAME, s.permits)
        .context("cannot make the semaphore")?;
    let window = crate::stats::Bounds::of(opts).window(s.clients);
    let origin = Instant::now();
    let snapshot = || Snapshot::now(counted(&cluster.calls), cluster.server_cpu());
    let records = Arc::new(Mutex::new(Vec::new()));
    let (tallies, first, last) = drive(s.clients, window, snapshot, |c| {
        let client = Client {
            semaphore: semaphore.clone(),
            c,
            record: Record::default(),
            records: records.clone(),
        };
        window.client(client, s.hold)
    })
    .await?;
    let records = std::mem::take(&mut *records.lock().unwrap_or_else(PoisonError::into_inner));
    let held: Vec<Held> = records
        .iter()
        .flat_map(|r| r.held.iter().copied())
        .collect();
    let max_holders = check_safety(&held, s.permits, origin)?;

    let (until, seconds) = window.measured(&tallies);
    let in_window = |h: &&Held| h.granted >= window.start && h.granted < until;
    let per_client: Vec<u64> = records
        .iter()
        .map(|r| r.held.iter().filter(in_window).count() as u64)
        .collect();
    let granted: u64 = per_client.iter().sum();
    let holds: Vec<Duration> = held
        .iter()
        .filter(in_window)
        .map(|h| h.released - h.granted)
        .collect();
    let mean = |v: &[Duration]| {
        if v.is_empty() {
            Duration::ZERO
        } else {
            v.iter().sum::<Duration>() / u32::try_from(v.len()).unwrap_or(u32::MAX)
        }
    };
    let (occupancy, all_held) = occupancy(&held, s.permits, window.start, until);
    let idle = idle_times(&held, window.start, until);
    let waits: Vec<Duration> = records
        .iter()
        .flat_map(|r| r.waits.iter().copied())
        .collect();
    let wait_figures = figures(&waits);
    let unfinished: Vec<Duration> = tallies.iter().filter_map(|t| t.unfinished).collect();
    let usage = Usage::between(&first, &last);
    let rate = granted as f64 / seconds;
    let relock = relock_probe(&cluster).await?;
    Ok(Outcome {
        relock,
        settings: s.clone(),
        transport: opts.transport,
        granted,
        seconds,
        rate,
        ideal: hold_time(s.hold).map(|d| s.permits as f64 / d.as_secs_f64()),
        mean_hold: mean(&holds),
        occupancy,
        all_held,
        max_holders,
        idle: figures(&idle),
        mean_idle: mean(&idle),
        longest_wait: unfinished
            .iter()
            .copied()
            .chain(wait_figures.map(|f| f.max))
            .max()
            .unwrap_or_default(),
        waits: wait_figures,
        unfinished: unfinished.len(),
        jain: jain(&per_client),
        min_client: per_client.iter().copied().min().unwrap_or(0),
        max_client: per_client.iter().copied().max().unwrap_or(0),
        lost: records.iter().map(|r| r.lost).sum(),
        hit_count_bound: tallies.iter().any(|t| t.hit_count_bound),
        cpu: usage.cpu,
        server_cpu: usage.server_cpu,
        calls: usage.calls,
    })
}

fn three(f: Option<Figures>) -> String {
    crate::election_report::cell(f, "no samples")
}

fn percent(x: f64) -> String {
    format!("{:.1}%", 100.0 * x)
}

fn calls_text(calls: &CallCounts, granted: u64) -> String {
    let per = |n: u64| n as f64 / granted.max(1) as f64;
    let each: Vec<String> = (calls.kinds().iter())
        .filter(|(_, n)| *n > 0)
        .map(|(kind, n)| format!("{kind} {:.1}", per(*n)))
        .collect();
    format!("{:.1} ({})", per(calls.total()), each.join(", "))
}

/// The run's figures as lines of text.
fn lines(o: &Outcome) -> String {
    let l = o.transport.ours();
    let mut out = format!(
        "{l}: {} permits in {:.2}s: {}/s",
        o.granted,
        o.seconds,
        fmt_rate(o.rate)
    );
    if let (Some(ideal), Some(share)) = (o.ideal, o.share_of_ideal()) {
        let _ = write!(
            out,
            "; ideal {} permits / {} hold = {}/s: {}",
            o.settings.permits,
            o.settings.hold.label(),
            fmt_rate(ideal),
            percent(share)
        );
    }
    let _ = write!(
        out,
        "\n{l}: hold measured (grant -> release) mean {}; occupancy {} (mean permits held / {}), all {} held {} of the time; most holders at once {} (safety: at most {})",
        fmt_duration(o.mean_hold),
        percent(o.occupancy),
        o.settings.permits,
        o.settings.permits,
        percent(o.all_held),
        o.max_holders,
        o.settings.permits
    );
    let _ = write!(
        out,
        "\n{l}: slot idle between holders (release -> next grant) p50/p99/max {}, mean {}",
        three(o.idle),
        fmt_duration(o.mean_idle)
    );
    let _ = write!(
        out,
        "\n{l}: wait p50/p99/max {}; longest counting cut-off waits {} ({} cut off by the end)",
        three(o.waits),
        fmt_duration(o.longest_wait),
        o.unfinished
    );
    let _ = write!(
        out,
        "\n{l}: fairness: Jain {:.4}; per client fewest {}, most {}",
        o.jain, o.min_client, o.max_client
    );
    let _ = write!(out, "\n{l}: CPU this process {:.0}%", 100.0 * o.cpu);
    if let Some(server) = o.server_cpu {
        let _ = write!(out, ", servers {:.0}%", 100.0 * server);
    }
    if let Some(per) = o.cpu_per_permit() {
        let _ = write!(out, "; {} per permit", fmt_duration(per));
    }
    if let Some(calls) = &o.calls {
        let _ = write!(
            out,
            "\n{l}: calls to lockers per permit {}",
            calls_text(calls, o.granted)
        );
    }
    if o.lost > 0 {
        let _ = write!(
            out,
            "\n{l}: WARNING: {} permits were reported lost at release (left out of the safety check)",
            o.lost
        );
    }
    if o.hit_count_bound {
        let _ = write!(out, "\n{l}: stopped by --max-locks");
    }
    if let Some(r) = &o.relock {
        let _ = write!(
            out,
            "\n{l}: reentrant re-lock (Holder): {} nested re-locks made {} lock and unlock calls \
             ({:.1} per re-lock; the first lock {} calls), {} each",
            r.nested,
            r.calls,
            r.calls as f64 / r.nested as f64,
            r.first_calls,
            fmt_duration(r.each)
        );
    }
    out
}

/// Whether a share reaches the target, as the table says it.
fn met(share: f64) -> &'static str {
    yes_no(Some(share >= TARGET))
}

/// The table for BENCHMARKS.md: one row per figure.
fn markdown(o: &Outcome) -> String {
    let s = &o.settings;
    let mut out = format!(
        "Markdown ({} permits, {} clients, hold {}, {} nodes; waits p50 / p99 / max (samples), nearest rank):\n\n",
        s.permits,
        s.clients,
        s.hold.label(),
        s.nodes
    );
    let _ = writeln!(out, "| figure | {} |", o.transport.ours());
    let _ = writeln!(out, "|---|---|");
    let mut row = |what: &str, value: String| {
        let _ = writeln!(out, "| {what} | {value} |");
    };
    row("permits/s", fmt_rate(o.rate));
    if let (Some(ideal), Some(share)) = (o.ideal, o.share_of_ideal()) {
        row(
            "share of the ideal k / hold",
            format!(
                "{} of {}/s ({} target ≥ 90%)",
                percent(share),
                fmt_rate(ideal),
                met(share)
            ),
        );
    }
    row(
        "occupancy (mean permits held / k)",
        format!("{} ({})", percent(o.occupancy), met(o.occupancy)),
    );
    row("share of time all k held", percent(o.all_held));
    row("hold measured (mean)", human(o.mean_hold));
    row(
        "slot idle, release → next grant",
        format!("{}; mean {}", three(o.idle), human(o.mean_idle)),
    );
    row("wait", three(o.waits));
    row("longest wait (with cut-off waits)", human(o.longest_wait));
    row("Jain's index", format!("{:.4}", o.jain));
    row(
        "fewest / most permits of one client",
        format!("{} / {}", o.min_client, o.max_client),
    );
    row(
        "most holders at once",
        format!("{} (≤ {} checked)", o.max_holders, s.permits),
    );
    if let Some(calls) = &o.calls {
        row("calls to lockers per permit", calls_text(calls, o.granted));
    }
    if let Some(per) = o.cpu_per_permit() {
        row("CPU per permit (this process + servers)", human(per));
    }
    out
}

fn json(opts: &Options, machine: &Machine, load_end: &str, o: &Outcome) -> String {
    let s = &o.settings;
    let settings = Obj::new()
        .str("scenario", "semaphore")
        .str("transport", o.transport.label())
        .str("wait", s.wait.label())
        .raw("nodes", s.nodes)
        .raw("clients", s.clients)
        .raw("permits", s.permits)
        .str("hold", &s.hold.label())
        .load(opts);
    let result = Obj::new()
        .str("system", o.transport.ours())
        .raw("permits_granted", o.granted)
        .num("seconds", o.seconds)
        .num("permits_per_s", o.rate)
        .opt("ideal_per_s", o.ideal)
        .opt("share_of_ideal", o.share_of_ideal())
        .ns("mean_hold_ns", o.mean_hold)
        .num("occupancy", o.occupancy)
        .num("all_held_share", o.all_held)
        .raw("max_holders", o.max_holders)
        .maybe("slot_idle", Figures::json(o.idle))
        .ns("mean_slot_idle_ns", o.mean_idle)
        .maybe("wait", Figures::json(o.waits))
        .ns("longest_wait_ns", o.longest_wait)
        .raw("unfinished_waits", o.unfinished)
        .num("jain", o.jain)
        .raw("min_per_client", o.min_client)
        .raw("max_per_client", o.max_client)
        .raw("lost", o.lost)
        .raw("hit_count_bound", o.hit_count_bound)
        .num("cpu_cores", o.cpu)
        .opt("server_cpu_cores", o.server_cpu)
        .opt_ns("cpu_per_permit_ns", o.cpu_per_permit())
        .maybe("calls", out::calls(o.calls))
        .opt("calls_per_permit", o.calls_per_permit());
    Doc::new(opts, machine, load_end, Obj::new())
        .field("settings", settings)
        .last("result", result)
}

/// The whole `--scenario semaphore` run.
pub fn run(opts: &Options) -> Result<(), String> {
    let machine = Machine::read();
    let s = &opts.semaphore;
    if opts.transport == Transport::Tcp {
        crate::servers::binary()?;
    }
    say(format!(
        "{}\
         settings: {} permits, {} clients on one Dsync, hold {}, {} nodes ({}), wait {}; \
         {:.1}s measured + {:.1}s warm-up, at most {} permits; tokio {} runtime with {} threads; rpc counting {}\n",
        crate::out::banner("quorum-lock counting semaphore", &machine),
        s.permits,
        s.clients,
        s.hold.label(),
        s.nodes,
        opts.transport.lockers(),
        s.wait.label(),
        opts.seconds,
        opts.warmup,
        opts.max_locks,
        crate::out::runtime(opts).0,
        crate::out::runtime(opts).1,
        if opts.count_rpcs { "on" } else { "off" },
    ));
    // A runtime of its own, as every lock run has.
    let outcome = crate::on_runtime(opts, Duration::from_secs(2), measure(opts))?;
    let load_end = loadavg();
    say(lines(&outcome));
    say(format!("\nload average at the end {load_end}\n"));
    say(markdown(&outcome));
    out::save(opts, || json(opts, &machine, &load_end, &outcome))
}
