//! `--scenario election`: leader election, ours against etcd's, in one run
//! (what is measured: `--help`; the figures: BENCHMARKS.md).
//!
//! * **hand-off**: from just before the leader's resign to the return of
//!   the next candidate's campaign. The leader first waits until every
//!   observer reported it (at most [`LAG_LIMIT`]), and campaigns again
//!   after resigning, so the line stays full; the first [`WARMUP_ROUNDS`]
//!   leaders are not counted.
//! * **observer lag**: from a counted leader's campaign returning to each
//!   observer yielding its value; a sighting before the return counts as 0
//!   ("early"), none within [`LAG_LIMIT`] as missed.
//! * **failover** (`election_child`): a candidate in a child process leads
//!   and is SIGKILLed [`SETTLE`] after the candidates of this process took
//!   their places behind it, before its first refresh, so its lease ran
//!   from its campaign: the run also gives the time past that lease.
//!
//! Percentiles are nearest-rank over the samples.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use quorum_lock::testing::{CallKind, FaultyLocker};
use quorum_lock::{Dsync, Election, Leadership, Lease, LocalLocker, NetLocker};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::{sleep, sleep_until, timeout, timeout_at, Instant};

use crate::cli::Options;
use crate::context::Context;
use crate::election_child::*;
use crate::election_report::*;
use crate::etcd;
use crate::out::{self, loadavg, say, Machine};
use crate::scenario::Transport;
use crate::servers::{Kind, Servers};
use crate::stats::{fmt_duration, gather, process_cpu};

/// The election's name (ours: the resource `election/bench`).
pub(crate) const NAME: &str = "bench";
/// Leaders before the counted ones: connections and caches warm up.
pub(crate) const WARMUP_ROUNDS: u64 = 10;
/// How long a leader waits for every observer to report it.
pub(crate) const LAG_LIMIT: Duration = Duration::from_secs(2);
/// From the child's "leading" to its kill: time for the candidates of this
/// process to take their places in line. Shorter than the first refresh
/// of the shortest lease measured (validity/6 for ours, TTL/3 for etcd).
pub(crate) const SETTLE: Duration = Duration::from_millis(100);
/// The default validity of our locks and the TTL etcd's sessions default to.
pub(crate) const DEFAULT_VALIDITY: Duration = Duration::from_secs(60);

/// A candidate in an election: one client of its own.
pub trait Contender: Send + 'static {
    type Lead: Send + 'static;
    /// Waits in line until it leads with `value`.
    fn campaign(
        &mut self,
        value: String,
    ) -> impl Future<Output = Result<Self::Lead, String>> + Send;
    /// Gives the lead up.
    fn resign(&mut self, lead: Self::Lead) -> impl Future<Output = Result<(), String>> + Send;
    /// Ends the client once the run is done with it.
    fn close(self) -> impl Future<Output = ()> + Send
    where
        Self: Sized,
    {
        async {}
    }
}

/// An observer of an election: one client of its own.
pub trait Watch: Send + 'static {
    /// The next leader reported: its value, or `None` for "no leader".
    fn next(&mut self) -> impl Future<Output = Result<Option<String>, String>> + Send;
}

/// What an election is measured on (our lockers, an etcd server): it
/// opens each candidate and observer as a client of its own, and reads
/// what the measurement reports beside them.
pub(crate) trait Electorate {
    type Candidate: Contender;
    type Observer: Watch;

    async fn candidate(&self, validity: Duration, c: usize) -> Result<Self::Candidate, String>;

    async fn observer(&self, validity: Duration, o: usize) -> Result<Self::Observer, String>;

    /// CPU time of the server processes so far.
    fn server_cpu(&self) -> Option<Duration>;

    /// Calls seen so far by every counted locker, by kind.
    fn calls(&self) -> Option<Vec<u64>> {
        None
    }

    /// The system and target a child candidate is started with
    /// (`--election-child`), when there is a process to kill.
    fn child(&self) -> Option<(&'static str, String)>;
}

/// Ours: a `Dsync` of its own over its own connections.
pub struct OursCandidate {
    election: Election,
    _ds: Dsync,
}

impl Contender for OursCandidate {
    type Lead = Leadership;

    fn campaign(
        &mut self,
        value: String,
    ) -> impl Future<Output = Result<Leadership, String>> + Send {
        let election = self.election.clone();
        async move {
            election
                .campaign(value.into_bytes())
                .await
                .context("campaign failed")
        }
    }

    async fn resign(&mut self, mut lead: Leadership) -> Result<(), String> {
        lead.resign().await.context("resign failed")
    }
}

pub struct OursObserver {
    observer: quorum_lock::Observer,
    _ds: Dsync,
}

impl Watch for OursObserver {
    async fn next(&mut self) -> Result<Option<String>, String> {
        match self.observer.recv().await {
            Some(Some(leader)) => Ok(Some(leader.value_lossy())),
            Some(None) => Ok(None),
            None => Err("the observer ended".into()),
        }
    }
}

/// The lease of our clients at `validity`: the library's default at 60 s,
/// else refreshes and safety margin of validity/6, as `quorum-lock` does
/// for servers that announce a shorter validity.
pub(crate) fn lease(validity: Duration) -> Lease {
    if validity == DEFAULT_VALIDITY {
        Lease::default()
    } else {
        Lease {
            validity,
            refresh_interval: validity / 6,
            safety_margin: validity / 6,
        }
    }
}

/// Where our candidates' lockers are.
pub(crate) enum Where {
    Tcp(Servers),
    InProcess(Vec<Arc<dyn NetLocker>>),
}

/// Our lockers, and the call counters of every client's lockers when
/// calls are counted (`--count-rpcs on`).
pub(crate) struct OursNodes {
    at: Where,
    counters: Option<Mutex<Vec<Arc<FaultyLocker>>>>,
}

impl OursNodes {
    async fn start(
        transport: Transport,
        nodes: usize,
        validity: Duration,
        count: bool,
    ) -> Result<Self, String> {
        let counters = count.then(|| Mutex::new(Vec::new()));
        let at = match transport {
            Transport::Tcp => {
                let given = (validity != DEFAULT_VALIDITY).then_some(validity);
                let (servers, _first) = Servers::start_kind(nodes, given, Kind::Ours).await?;
                Where::Tcp(servers)
            }
            Transport::InProcess => Where::InProcess(
                (0..nodes)
                    .map(|n| {
                        let config = quorum_lock::LockerConfig {
                            validity,
                            ..quorum_lock::LockerConfig::default()
                        };
                        Arc::new(LocalLocker::with_config(format!("local-{n}"), config))
                            as Arc<dyn NetLocker>
                    })
                    .collect(),
            ),
            Transport::Redis => return Err("--scenario election runs over tcp or inproc".into()),
        };
        Ok(OursNodes { at, counters })
    }

    async fn dsync(&self, validity: Duration, owner: String) -> Result<Dsync, String> {
        let mut lockers = match &self.at {
            Where::Tcp(servers) => servers.connect().await?,
            Where::InProcess(lockers) => lockers.clone(),
        };
        if let Some(counters) = &self.counters {
            // A FaultyLocker with no faults set only counts the calls.
            let mut counters = counters.lock().unwrap_or_else(PoisonError::into_inner);
            for locker in &mut lockers {
                let counted = Arc::new(FaultyLocker::new(locker.clone(), counters.len() as u64));
                counters.push(counted.clone());
                *locker = counted;
            }
        }
        Dsync::builder(lockers)
            .lease(lease(validity))
            .owner(owner)
            .build()
            .context("cannot build a Dsync")
    }
}

impl Electorate for OursNodes {
    type Candidate = OursCandidate;
    type Observer = OursObserver;

    async fn candidate(&self, validity: Duration, c: usize) -> Result<OursCandidate, String> {
        let ds = self.dsync(validity, format!("bench-candidate-{c}")).await?;
        let election = ds.election(NAME).context("cannot make the election")?;
        Ok(OursCandidate { election, _ds: ds })
    }

    async fn observer(&self, validity: Duration, o: usize) -> Result<OursObserver, String> {
        let ds = self.dsync(validity, format!("bench-observer-{o}")).await?;
        let observer = ds
            .election(NAME)
            .and_then(|e| e.observe())
            .context("cannot observe the election")?;
        Ok(OursObserver { observer, _ds: ds })
    }

    /// The child process reaches the lockers by their addresses.
    fn child(&self) -> Option<(&'static str, String)> {
        match &self.at {
            Where::Tcp(servers) => Some(("ours", servers.addrs.join(","))),
            Where::InProcess(_) => None,
        }
    }

    /// CPU time of the server processes; none in process.
    fn server_cpu(&self) -> Option<Duration> {
        match &self.at {
            Where::Tcp(servers) => servers.cpu(),
            Where::InProcess(_) => Some(Duration::ZERO),
        }
    }

    fn calls(&self) -> Option<Vec<u64>> {
        let counters = self
            .counters
            .as_ref()?
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        Some(
            CallKind::ALL
                .iter()
                .map(|&kind| counters.iter().map(|c| c.stats(kind).seen).sum())
                .collect(),
        )
    }
}

/// What one hand-off run measured.
#[derive(Default)]
pub struct Handoff {
    pub handoffs: Vec<Duration>,
    /// The same hand-offs counted from the moment the resign returned
    /// (`etcd-election-bench.go`'s definition), 0 when the next leader's
    /// campaign returned first.
    pub after_resign: Vec<Duration>,
    /// CPU time (this process and the servers) per leader change, when
    /// the servers' CPU could be read.
    pub cpu_per_change: Option<Duration>,
    /// Calls to lockers per leader change, by kind (`--count-rpcs on`).
    pub calls_per_change: Option<Vec<(CallKind, f64)>>,
    pub lags: Vec<Duration>,
    /// Observer samples taken before the campaign returned (counted as 0).
    pub early: usize,
    /// Observer samples never taken within `LAG_LIMIT`.
    pub missed: usize,
    /// Leaders counted (after the warm-up).
    pub leaders: u64,
    pub seconds: f64,
    /// Why it stopped, when not after `--handoffs` hand-offs.
    pub note: Option<String>,
}

/// The book the tasks of a hand-off run keep.
#[derive(Default)]
pub(crate) struct Book {
    /// For each round, when its leader called resign and when that
    /// returned.
    resigns: HashMap<u64, (Instant, Instant)>,
    /// Leaders in the order they won: value, round, when.
    won: Vec<(String, u64, Instant)>,
    /// For each value, each observer's first sighting.
    seen: HashMap<String, Vec<(usize, Instant)>>,
    rounds: u64,
}

pub(crate) struct Run {
    pub(crate) book: Mutex<Book>,
    /// Bumped at every sighting, for leaders waiting on the observers.
    pub(crate) sightings: watch::Sender<u64>,
    pub(crate) stop: watch::Sender<bool>,
    pub(crate) observers: usize,
    pub(crate) warmup: u64,
    pub(crate) target: u64,
    pub(crate) deadline: Instant,
}

impl Run {
    /// A run's shared state, and its observers started on `watchers`.
    pub(crate) fn start<W: Watch>(
        watchers: Vec<W>,
        warmup: u64,
        target: u64,
        deadline: Instant,
    ) -> (Arc<Run>, Vec<JoinHandle<Result<(), String>>>) {
        let run = Arc::new(Run {
            book: Mutex::new(Book::default()),
            sightings: watch::channel(0).0,
            stop: watch::channel(false).0,
            observers: watchers.len(),
            warmup,
            target,
            deadline,
        });
        let observers = (watchers.into_iter().enumerate())
            .map(|(o, w)| tokio::spawn(observe_into(o, w, run.clone())))
            .collect();
        (run, observers)
    }

    fn book(&self) -> std::sync::MutexGuard<'_, Book> {
        self.book.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn seen_by_all(&self, value: &str) -> bool {
        self.observers == 0
            || self
                .book()
                .seen
                .get(value)
                .is_some_and(|s| s.len() >= self.observers)
    }
}

pub(crate) async fn stopped(mut stop: watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
}

pub(crate) async fn observe_into<W: Watch>(
    o: usize,
    mut watch: W,
    run: Arc<Run>,
) -> Result<(), String> {
    let stop = run.stop.subscribe();
    loop {
        let value = tokio::select! {
            value = watch.next() => value?,
            () = stopped(stop.clone()) => return Ok(()),
        };
        let at = Instant::now();
        if let Some(value) = value {
            {
                let mut book = run.book();
                let seen = book.seen.entry(value).or_default();
                if !seen.iter().any(|&(who, _)| who == o) {
                    seen.push((o, at));
                }
            }
            run.sightings.send_modify(|n| *n += 1);
        }
    }
}

pub(crate) async fn campaign_loop<C: Contender>(
    c: usize,
    mut cand: C,
    run: Arc<Run>,
) -> Result<C, String> {
    let stop = run.stop.subscribe();
    for i in 0u64.. {
        if *stop.borrow() {
            break;
        }
        let value = format!("c{c}-{i}");
        let lead = tokio::select! {
            lead = cand.campaign(value.clone()) => lead?,
            () = stopped(stop.clone()) => break,
        };
        let won = Instant::now();
        if *stop.borrow() {
            // Won as the run ended (the last leader stopped it and
            // resigned): not a measured leader, and nobody observes now.
            cand.resign(lead).await?;
            break;
        }
        let round = {
            let mut book = run.book();
            let round = book.rounds;
            book.rounds += 1;
            book.won.push((value.clone(), round, won));
            round
        };
        // Every observer reports this leader before the next hand-off.
        let mut sightings = run.sightings.subscribe();
        let limit = won + LAG_LIMIT;
        while !run.seen_by_all(&value) {
            if timeout_at(limit, sightings.changed()).await.is_err() {
                break;
            }
        }
        let done = round + 1 >= run.warmup + run.target || Instant::now() >= run.deadline;
        if done {
            run.stop.send_replace(true);
            cand.resign(lead).await?;
            break;
        }
        let resigning = Instant::now();
        cand.resign(lead).await?;
        let resigned = Instant::now();
        run.book().resigns.insert(round, (resigning, resigned));
    }
    Ok(cand)
}

/// Hand-offs and observer lag on `candidates` and `watchers`.
pub(crate) async fn handoff<C: Contender, W: Watch>(
    candidates: Vec<C>,
    watchers: Vec<W>,
    target: u64,
    seconds: Duration,
    server_cpu: impl Fn() -> Option<Duration>,
    calls: impl Fn() -> Option<Vec<u64>>,
) -> Result<(Handoff, Vec<C>), String> {
    let started = Instant::now();
    let (run, observers) = Run::start(watchers, WARMUP_ROUNDS, target, started + seconds);
    // The observers' first reads are done before anyone campaigns.
    sleep(Duration::from_millis(500)).await;
    let cpu_before = (process_cpu(), server_cpu());
    let calls_before = calls();
    let tasks: Vec<JoinHandle<Result<C, String>>> = candidates
        .into_iter()
        .enumerate()
        .map(|(c, cand)| tokio::spawn(campaign_loop(c, cand, run.clone())))
        .collect();
    // The leader stops the run; this stops it if nobody can lead.
    let hard = started + seconds + LAG_LIMIT + Duration::from_secs(5);
    let stopper = {
        let run = run.clone();
        tokio::spawn(async move {
            sleep_until(hard).await;
            run.stop.send_replace(true);
        })
    };
    let mut back = Vec::new();
    let mut failure = None;
    for task in tasks {
        match timeout_at(hard + Duration::from_secs(10), task).await {
            Ok(Ok(Ok(cand))) => back.push(cand),
            Ok(Ok(Err(err))) => failure = failure.or(Some(err)),
            Ok(Err(err)) => failure = failure.or(Some(format!("a candidate failed: {err}"))),
            Err(_) => failure = failure.or(Some("a candidate did not stop".to_owned())),
        }
    }
    stopper.abort();
    run.stop.send_replace(true);
    for task in observers {
        match timeout(Duration::from_secs(5), task).await {
            Ok(Ok(Ok(()))) => {}
            Ok(Ok(Err(err))) => failure = failure.or(Some(err)),
            Ok(Err(err)) => failure = failure.or(Some(format!("an observer failed: {err}"))),
            Err(_) => failure = failure.or(Some("an observer did not stop".to_owned())),
        }
    }
    if let Some(err) = failure {
        return Err(err);
    }
    let seconds_taken = started.elapsed().as_secs_f64();
    let book = std::mem::take(&mut *run.book());
    let cpu_after = (process_cpu(), server_cpu());
    let cpu_per_change = match (cpu_before.1, cpu_after.1) {
        (Some(a), Some(b)) if book.rounds > 0 => {
            let spent = cpu_after.0.saturating_sub(cpu_before.0) + b.saturating_sub(a);
            Some(spent / u32::try_from(book.rounds).unwrap_or(u32::MAX))
        }
        _ => None,
    };
    let calls_per_change = match (calls_before, calls()) {
        (Some(a), Some(b)) if book.rounds > 0 => Some(
            CallKind::ALL
                .iter()
                .zip(b.iter().zip(&a))
                .map(|(kind, (b, a))| (*kind, b.saturating_sub(*a) as f64 / book.rounds as f64))
                .filter(|&(_, n)| n > 0.0)
                .collect(),
        ),
        _ => None,
    };
    let mut out = Handoff {
        seconds: seconds_taken,
        cpu_per_change,
        calls_per_change,
        ..Handoff::default()
    };
    for (value, round, won) in &book.won {
        if *round < WARMUP_ROUNDS {
            continue;
        }
        out.leaders += 1;
        if let Some(&(resigning, resigned)) = round
            .checked_sub(1)
            .and_then(|previous| book.resigns.get(&previous))
        {
            out.handoffs.push(won.saturating_duration_since(resigning));
            out.after_resign
                .push(won.saturating_duration_since(resigned));
        }
        let seen = book.seen.get(value).map_or(&[][..], Vec::as_slice);
        for o in 0..run.observers {
            match seen.iter().find(|&&(who, _)| who == o) {
                Some(&(_, at)) if at < *won => {
                    out.early += 1;
                    out.lags.push(Duration::ZERO);
                }
                Some(&(_, at)) if at <= *won + LAG_LIMIT => out.lags.push(at - *won),
                _ => out.missed += 1,
            }
        }
    }
    if (out.handoffs.len() as u64) < target {
        out.note = Some(format!(
            "stopped by --seconds after {} hand-offs",
            out.handoffs.len()
        ));
    }
    Ok((out, back))
}

/// Runs a phase on a fresh runtime.
pub(crate) fn phase<T, F: Future<Output = Result<T, String>>>(
    opts: &Options,
    run: impl FnOnce() -> F,
) -> Result<T, String> {
    crate::on_runtime(opts, Duration::from_secs(2), run())
}

/// Hand-offs and observer lag on `on`'s candidates and observers.
pub(crate) async fn handoff_on<E: Electorate>(opts: &Options, on: &E) -> Result<Handoff, String> {
    let e = &opts.election;
    let candidates = gather(0..e.candidates, |c| on.candidate(DEFAULT_VALIDITY, c)).await?;
    let observers = gather(0..e.observers, |o| on.observer(DEFAULT_VALIDITY, o)).await?;
    let (out, back) = handoff(
        candidates,
        observers,
        e.handoffs,
        Duration::from_secs_f64(opts.seconds),
        || on.server_cpu(),
        || on.calls(),
    )
    .await?;
    close(back).await;
    Ok(out)
}

pub(crate) fn sample_count(opts: &Options, validity: Duration) -> usize {
    let e = &opts.election;
    let each = validity.as_secs_f64() + 1.0;
    ((e.failover_seconds / each) as usize).clamp(1, e.failovers)
}

/// Failover at `validity` on `on`: a child process leads, the other
/// `--candidates` − 1 candidates wait behind it.
pub(crate) async fn failover_on<E: Electorate>(
    opts: &Options,
    on: &E,
    validity: Duration,
) -> Result<Failover, String> {
    let e = &opts.election;
    let (system, target) = on
        .child()
        .ok_or("failover needs --transport tcp: a process to kill")?;
    let candidates = gather(1..e.candidates, |c| on.candidate(validity, c)).await?;
    let observers = gather(0..e.observers, |o| on.observer(validity, o)).await?;
    let (out, back) = failover(
        candidates,
        observers,
        || spawn_child(system, validity, &target),
        validity,
        sample_count(opts, validity),
        Duration::from_secs_f64(e.failover_seconds),
    )
    .await?;
    close(back).await;
    Ok(out)
}

/// Ends the candidates a run gave back.
async fn close<C: Contender>(candidates: Vec<C>) {
    for cand in candidates {
        cand.close().await;
    }
}

/// Our lockers for one phase of the run, their locks valid `validity`.
async fn our_nodes(opts: &Options, validity: Duration) -> Result<OursNodes, String> {
    let e = &opts.election;
    OursNodes::start(opts.transport, e.nodes, validity, opts.count_rpcs).await
}

/// The whole `--scenario election` run.
pub fn run(opts: &Options) -> Result<(), String> {
    let machine = Machine::read();
    let e = &opts.election;
    if opts.transport == Transport::Tcp {
        crate::servers::binary()?;
    }
    let (etcd, etcd_status) = etcd::start_wanted(opts)?;
    let ours_label = opts.transport.ours();
    say(format!(
        "{}\
         settings: {} nodes ({}), {} candidates and {} observers, each a client of its own; \
         {} hand-offs (after {WARMUP_ROUNDS} uncounted) or {:.0}s; failover at {} \
         ({} s per validity, at most {} samples); tokio multi-thread runtime with {} threads\n\
         etcd: {etcd_status}\n",
        crate::out::banner("quorum-lock leader election against etcd's", &machine),
        e.nodes,
        opts.transport.lockers(),
        e.candidates,
        e.observers,
        e.handoffs,
        opts.seconds,
        e.validities
            .iter()
            .map(|v| fmt_duration(*v))
            .collect::<Vec<_>>()
            .join(", "),
        e.failover_seconds,
        e.failovers,
        opts.threads,
    ));
    let mut ours = SystemResult::new(ours_label);
    let mut theirs = etcd.as_ref().map(|_| SystemResult::new("etcd"));
    let load_start = loadavg();
    let handoff = phase(opts, || async {
        handoff_on(opts, &our_nodes(opts, DEFAULT_VALIDITY).await?).await
    })?;
    say(handoff_lines(ours.label, &handoff));
    ours.handoff = Some(handoff);
    if let (Some(server), Some(theirs)) = (&etcd, &mut theirs) {
        let handoff = phase(opts, || handoff_on(opts, server))?;
        say(handoff_lines(theirs.label, &handoff));
        theirs.handoff = Some(handoff);
    }
    for &validity in &e.validities {
        if opts.transport == Transport::Tcp {
            let f = phase(opts, || async {
                failover_on(opts, &our_nodes(opts, validity).await?, validity).await
            })?;
            say(failover_line(ours.label, &f));
            ours.failovers.push(f);
        } else if ours.notes.is_empty() {
            ours.notes
                .push("failover not measured: --transport inproc has no process to kill".into());
        }
        if let (Some(server), Some(theirs)) = (&etcd, &mut theirs) {
            let f = phase(opts, || failover_on(opts, server, validity))?;
            say(failover_line(theirs.label, &f));
            theirs.failovers.push(f);
        }
    }
    let load_end = loadavg();
    if let Some(server) = etcd {
        let pid = server.pid();
        drop(server);
        say(format!("stopped etcd {pid}"));
    }
    let results: Vec<&SystemResult> = std::iter::once(&ours).chain(theirs.as_ref()).collect();
    say(format!(
        "\nload average at the start {load_start}, at the end {load_end}\n"
    ));
    say(markdown(&results));
    for note in results.iter().flat_map(|r| &r.notes) {
        say(note);
    }
    out::save(opts, || {
        json(opts, &machine, &load_end, &etcd_status, &results)
    })
}
