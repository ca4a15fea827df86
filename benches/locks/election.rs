//! `--scenario election`: leader election, ours against etcd's, in one run.
//!
//! Three figures, for each system:
//!
//! * **hand-off**: the leader resigns, the next candidate's campaign
//!   returns. `--candidates` candidates (each its own client: its own
//!   `Dsync` and connections, or its own etcd client and session) campaign
//!   on one election; the leader waits until every observer reported it
//!   (at most [`LAG_LIMIT`]), notes the time and calls resign, then
//!   campaigns again at the end of the line, so the line stays full. A
//!   hand-off is the time from just before that resign to the moment the
//!   next candidate's campaign returned. The first [`WARMUP_ROUNDS`]
//!   leaders are not counted; the run stops after `--handoffs` counted
//!   hand-offs or `--seconds`, whichever comes first.
//! * **observer lag**: during the same run, `--observers` observers (each
//!   its own client) read the election's stream; for each counted leader
//!   and each observer, the time from the moment the leader's campaign
//!   returned to the moment that observer yielded the leader's value. An
//!   observer may yield it before the campaign returned (the value is on
//!   the lockers, or the key first in line, before the campaign's last
//!   reply reaches the candidate): such a sample counts as 0 and is
//!   counted as "early". One never yielded within [`LAG_LIMIT`] counts as
//!   missed.
//! * **failover**: the leader's process dies. A candidate runs in a child
//!   process (this benchmark binary, `--election-child`), campaigns on the
//!   free election, and says when it leads; `--candidates` − 1 candidates
//!   of this process then campaign behind it, and after [`SETTLE`] the
//!   child is killed with SIGKILL by its PID: no resign, no release, its
//!   connections cut by the kernel. Failover is the time from the kill to
//!   the moment the first candidate's campaign returned. The child was
//!   killed before its first refresh (keep-alive), so its lease ran from
//!   its campaign: the run also gives "past the lease", the time from
//!   when the child said it leads + validity to the next leader, the
//!   overrun of the lease (a little low: the child's grant was a little
//!   earlier than its saying so). Measured at each `--failover-validity`,
//!   ours with lock servers started with that `--validity` and clients
//!   with the matching lease (refresh and safety margin validity/6),
//!   etcd with that session TTL; as many samples as `--failover-seconds`
//!   allows, at most `--failovers`. The observers run meanwhile.
//!
//! Percentiles are nearest-rank over the samples.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::future::Future;
use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use quorum_lock::testing::{CallKind, FaultyLocker};
use quorum_lock::{Dsync, Election, Leadership, Lease, LocalLocker, NetLocker};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::{sleep, sleep_until, timeout, timeout_at, Instant};

use crate::cli::Options;
use crate::etcd::{self, EtcdServer};
use crate::etcd_election;
use crate::out::{self, human, say, Doc, Obj};
use crate::report::{loadavg, number, string, utc_now, Machine};
use crate::scenario::Transport;
use crate::servers::Servers;
use crate::stats::{fmt_duration, process_cpu};

/// The election's name (ours: the resource `election/bench`).
const NAME: &str = "bench";
/// Leaders before the counted ones: connections and caches warm up.
const WARMUP_ROUNDS: u64 = 10;
/// How long a leader waits for every observer to report it.
const LAG_LIMIT: Duration = Duration::from_secs(2);
/// From the child's "leading" to its kill: time for the candidates of this
/// process to take their places in line. Shorter than the first refresh
/// of the shortest lease measured (validity/6 for ours, TTL/3 for etcd).
const SETTLE: Duration = Duration::from_millis(100);
/// The default validity of our locks and the TTL etcd's sessions default to.
const DEFAULT_VALIDITY: Duration = Duration::from_secs(60);

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
}

/// An observer of an election: one client of its own.
pub trait Watch: Send + 'static {
    /// The next leader reported: its value, or `None` for "no leader".
    fn next(&mut self) -> impl Future<Output = Result<Option<String>, String>> + Send;
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
                .map_err(|e| format!("campaign failed: {e}"))
        }
    }

    async fn resign(&mut self, mut lead: Leadership) -> Result<(), String> {
        lead.resign()
            .await
            .map_err(|e| format!("resign failed: {e}"))
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
fn lease(validity: Duration) -> Lease {
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
enum Where {
    Tcp(Servers),
    InProcess(Vec<Arc<dyn NetLocker>>),
}

/// Our lockers, and the call counters of every client's lockers when
/// calls are counted (`--count-rpcs on`).
struct OursNodes {
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
                let (servers, _first) = Servers::start_with(nodes, given).await?;
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
            .map_err(|e| format!("cannot build a Dsync: {e}"))
    }

    async fn candidate(&self, validity: Duration, c: usize) -> Result<OursCandidate, String> {
        let ds = self.dsync(validity, format!("bench-candidate-{c}")).await?;
        let election = ds
            .election(NAME)
            .map_err(|e| format!("cannot make the election: {e}"))?;
        Ok(OursCandidate { election, _ds: ds })
    }

    async fn observer(&self, validity: Duration, o: usize) -> Result<OursObserver, String> {
        let ds = self.dsync(validity, format!("bench-observer-{o}")).await?;
        let observer = ds
            .election(NAME)
            .and_then(|e| e.observe())
            .map_err(|e| format!("cannot observe the election: {e}"))?;
        Ok(OursObserver { observer, _ds: ds })
    }

    /// What the child process needs to reach the lockers.
    fn child_target(&self) -> Option<String> {
        match &self.at {
            Where::Tcp(servers) => Some(servers.addrs.join(",")),
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

    /// Calls seen so far by every counted locker, by kind.
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
struct Book {
    /// For each round, when its leader called resign and when that
    /// returned.
    resigns: HashMap<u64, (Instant, Instant)>,
    /// Leaders in the order they won: value, round, when.
    won: Vec<(String, u64, Instant)>,
    /// For each value, each observer's first sighting.
    seen: HashMap<String, Vec<(usize, Instant)>>,
    rounds: u64,
}

struct Run {
    book: Mutex<Book>,
    /// Bumped at every sighting, for leaders waiting on the observers.
    sightings: watch::Sender<u64>,
    stop: watch::Sender<bool>,
    observers: usize,
    warmup: u64,
    target: u64,
    deadline: Instant,
}

impl Run {
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

async fn stopped(mut stop: watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
}

async fn observe_into<W: Watch>(o: usize, mut watch: W, run: Arc<Run>) -> Result<(), String> {
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

async fn campaign_loop<C: Contender>(c: usize, mut cand: C, run: Arc<Run>) -> Result<C, String> {
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
async fn handoff<C: Contender, W: Watch>(
    candidates: Vec<C>,
    watchers: Vec<W>,
    target: u64,
    seconds: Duration,
    server_cpu: impl Fn() -> Option<Duration>,
    calls: impl Fn() -> Option<Vec<u64>>,
) -> Result<(Handoff, Vec<C>), String> {
    let started = Instant::now();
    let run = Arc::new(Run {
        book: Mutex::new(Book::default()),
        sightings: watch::channel(0).0,
        stop: watch::channel(false).0,
        observers: watchers.len(),
        warmup: WARMUP_ROUNDS,
        target,
        deadline: started + seconds,
    });
    let observers: Vec<JoinHandle<Result<(), String>>> = watchers
        .into_iter()
        .enumerate()
        .map(|(o, w)| tokio::spawn(observe_into(o, w, run.clone())))
        .collect();
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

/// One failover sample.
#[derive(Clone, Copy)]
pub struct Sample {
    /// Kill → the next campaign returned.
    pub failover: Duration,
    /// The next campaign returned − (the child said it leads + validity):
    /// how long after its lease ran out the next leader got in.
    pub past_lease: f64,
}

pub struct Failover {
    pub validity: Duration,
    pub samples: Vec<Sample>,
    pub note: Option<String>,
}

/// A child process of ours, killed by its PID when dropped.
struct ChildCandidate(Child);

impl Drop for ChildCandidate {
    fn drop(&mut self) {
        // Our own child, not yet reaped: its PID is still its own.
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts this binary as a candidate that campaigns and then waits to be
/// killed. Call it from the thread that runs the measurement (the one in
/// `block_on`): the child dies with that thread (`PR_SET_PDEATHSIG`).
fn spawn_child(system: &str, validity: Duration, target: &str) -> Result<ChildCandidate, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this program: {e}"))?;
    let mut command = Command::new(exe);
    command
        .args(["--election-child", system])
        .arg(validity.as_millis().to_string())
        .arg(target)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    // SAFETY: prctl is async-signal-safe and touches no memory of the
    // parent; the kernel kills the child if its parent thread dies.
    unsafe {
        command.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
    command
        .spawn()
        .map(ChildCandidate)
        .map_err(|e| format!("cannot start a child candidate: {e}"))
}

/// Waits until the child says it leads.
async fn child_leads(child: &mut ChildCandidate, limit: Duration) -> Result<(), String> {
    let stdout = child.0.stdout.take().ok_or("the child has no stdout")?;
    let read = tokio::task::spawn_blocking(move || {
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line).map(|_| line)
    });
    match timeout(limit, read).await {
        Ok(Ok(Ok(line))) if line.starts_with("leading ") => Ok(()),
        Ok(Ok(Ok(line))) => Err(format!("the child candidate said {line:?}")),
        Ok(Ok(Err(e))) => Err(format!("cannot read the child candidate: {e}")),
        Ok(Err(e)) => Err(format!("cannot read the child candidate: {e}")),
        Err(_) => {
            // Killing it ends the read.
            let _ = child.0.kill();
            Err(format!("the child candidate did not lead within {limit:?}"))
        }
    }
}

/// Failover samples: a child leads and is killed, `candidates` wait behind.
async fn failover<C: Contender, W: Watch>(
    mut candidates: Vec<C>,
    watchers: Vec<W>,
    start_child: impl Fn() -> Result<ChildCandidate, String>,
    validity: Duration,
    samples: usize,
    budget: Duration,
) -> Result<(Failover, Vec<C>), String> {
    let started = Instant::now();
    // The observers run meanwhile, as in the hand-off run; nothing of theirs
    // is measured here.
    let run = Arc::new(Run {
        book: Mutex::new(Book::default()),
        sightings: watch::channel(0).0,
        stop: watch::channel(false).0,
        observers: watchers.len(),
        warmup: 0,
        target: 0,
        deadline: started,
    });
    let observers: Vec<JoinHandle<Result<(), String>>> = watchers
        .into_iter()
        .enumerate()
        .map(|(o, w)| tokio::spawn(observe_into(o, w, run.clone())))
        .collect();
    let mut out = Failover {
        validity,
        samples: Vec::new(),
        note: None,
    };
    let each = validity + Duration::from_secs(1);
    let result = async {
        for k in 0..samples {
            if k > 0 && started.elapsed() + each > budget {
                out.note = Some(format!(
                    "{k} samples within --failover-seconds {}",
                    budget.as_secs()
                ));
                break;
            }
            let mut child = start_child()?;
            child_leads(&mut child, Duration::from_secs(20)).await?;
            let leads = Instant::now();
            let (tx, mut first) = tokio::sync::mpsc::unbounded_channel();
            let tasks: Vec<JoinHandle<Result<C, String>>> = candidates
                .drain(..)
                .enumerate()
                .map(|(c, mut cand)| {
                    let tx = tx.clone();
                    tokio::spawn(async move {
                        let lead = cand.campaign(format!("f{k}-c{c}")).await?;
                        let _ = tx.send(Instant::now());
                        cand.resign(lead).await?;
                        Ok(cand)
                    })
                })
                .collect();
            sleep(SETTLE).await;
            let killed = Instant::now();
            child
                .0
                .kill()
                .map_err(|e| format!("cannot kill the child candidate: {e}"))?;
            let won = timeout(validity + Duration::from_secs(10), first.recv())
                .await
                .map_err(|_| {
                    format!(
                        "no new leader within {:?} of the kill",
                        validity + Duration::from_secs(10)
                    )
                })?
                .ok_or("every candidate failed")?;
            drop(child);
            out.samples.push(Sample {
                failover: won.saturating_duration_since(killed),
                past_lease: won.saturating_duration_since(leads).as_secs_f64()
                    - validity.as_secs_f64(),
            });
            // Every candidate leads once in turn and resigns: the election
            // is free for the next child.
            for task in tasks {
                match timeout(Duration::from_secs(30), task).await {
                    Ok(Ok(Ok(cand))) => candidates.push(cand),
                    Ok(Ok(Err(err))) => return Err(err),
                    Ok(Err(err)) => return Err(format!("a candidate failed: {err}")),
                    Err(_) => return Err("a candidate did not lead within 30 s".into()),
                }
            }
        }
        Ok(())
    }
    .await;
    run.stop.send_replace(true);
    for task in observers {
        let _ = timeout(Duration::from_secs(5), task).await;
    }
    result.map(|()| (out, candidates))
}

/// `--election-child SYSTEM VALIDITY_MS TARGET`: campaign, say "leading",
/// wait to be killed (or give up after a bound and exit). Returns the exit
/// code.
pub fn child(args: &[String]) -> i32 {
    match child_run(args) {
        Ok(()) => 0,
        Err(err) => {
            eprintln!("locks --election-child: {err}");
            1
        }
    }
}

fn child_run(args: &[String]) -> Result<(), String> {
    let [system, validity, target] = args else {
        return Err("expected SYSTEM VALIDITY_MS TARGET".into());
    };
    let validity = validity
        .parse::<u64>()
        .ok()
        .filter(|&ms| ms > 0)
        .map(Duration::from_millis)
        .ok_or("VALIDITY_MS: expected a positive whole number")?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start a tokio runtime: {e}"))?;
    rt.block_on(async {
        let value = format!("dead-{}", std::process::id());
        let announce = || {
            use std::io::Write as _;
            let mut out = std::io::stdout().lock();
            writeln!(out, "leading {value}")
                .and_then(|()| out.flush())
                .map_err(|e| format!("cannot say it leads: {e}"))
        };
        // Held until the process is killed.
        let _held: Box<dyn std::any::Any + Send> = match system.as_str() {
            "ours" => {
                let addrs: Vec<String> = target.split(',').map(str::to_owned).collect();
                let lockers = crate::servers::connect_all(&addrs).await?;
                let ds = Dsync::builder(lockers)
                    .lease(lease(validity))
                    .owner(format!("bench-child-{}", std::process::id()))
                    .build()
                    .map_err(|e| format!("cannot build a Dsync: {e}"))?;
                let election = ds.election(NAME).map_err(|e| e.to_string())?;
                let lead = election
                    .campaign(value.clone().into_bytes())
                    .await
                    .map_err(|e| format!("campaign failed: {e}"))?;
                announce()?;
                Box::new((lead, ds))
            }
            "etcd" => {
                let mut cand = etcd_election::Candidate::new(target, validity).await?;
                let lead = cand.campaign_value(&value).await?;
                announce()?;
                Box::new((lead, cand))
            }
            other => return Err(format!("unknown system {other:?}")),
        };
        // Bounded: the parent kills it long before this.
        sleep(validity * 3 + Duration::from_secs(30)).await;
        Err("never killed; giving up".to_owned())
    })
}

/// What the run measured for one system.
pub struct SystemResult {
    pub label: &'static str,
    pub handoff: Option<Handoff>,
    pub failovers: Vec<Failover>,
    /// Why something was not measured.
    pub notes: Vec<String>,
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
    /// The figures as a JSON object, or `null` without samples.
    pub fn json(f: Option<Figures>) -> String {
        f.map_or("null".into(), |f| {
            Obj::new()
                .raw("samples", f.n)
                .ns("p50_ns", f.p50)
                .ns("p99_ns", f.p99)
                .ns("max_ns", f.max)
                .done()
        })
    }
}

/// Runs a phase on a fresh runtime.
fn phase<T, F: Future<Output = Result<T, String>>>(
    opts: &Options,
    run: impl FnOnce() -> F,
) -> Result<T, String> {
    let rt = crate::runtime(opts)?;
    let out = rt.block_on(run());
    rt.shutdown_timeout(Duration::from_secs(2));
    out
}

async fn ours_handoff(opts: &Options) -> Result<Handoff, String> {
    let e = &opts.election;
    let nodes =
        OursNodes::start(opts.transport, e.nodes, DEFAULT_VALIDITY, opts.count_rpcs).await?;
    let mut candidates = Vec::with_capacity(e.candidates);
    for c in 0..e.candidates {
        candidates.push(nodes.candidate(DEFAULT_VALIDITY, c).await?);
    }
    let mut observers = Vec::with_capacity(e.observers);
    for o in 0..e.observers {
        observers.push(nodes.observer(DEFAULT_VALIDITY, o).await?);
    }
    let (out, _back) = handoff(
        candidates,
        observers,
        e.handoffs,
        Duration::from_secs_f64(opts.seconds),
        || nodes.server_cpu(),
        || nodes.calls(),
    )
    .await?;
    Ok(out)
}

async fn etcd_handoff(opts: &Options, server: &EtcdServer) -> Result<Handoff, String> {
    let e = &opts.election;
    let endpoint = server.endpoint();
    let mut candidates = Vec::with_capacity(e.candidates);
    for _ in 0..e.candidates {
        candidates.push(etcd_election::Candidate::new(&endpoint, DEFAULT_VALIDITY).await?);
    }
    let mut observers = Vec::with_capacity(e.observers);
    for _ in 0..e.observers {
        observers.push(etcd_election::Observer::new(&endpoint).await?);
    }
    let (out, back) = handoff(
        candidates,
        observers,
        e.handoffs,
        Duration::from_secs_f64(opts.seconds),
        || server.cpu(),
        || None,
    )
    .await?;
    // Session.Close: the keys of campaigns the end cut off go with the leases.
    for cand in back {
        cand.close().await;
    }
    Ok(out)
}

fn sample_count(opts: &Options, validity: Duration) -> usize {
    let e = &opts.election;
    let each = validity.as_secs_f64() + 1.0;
    ((e.failover_seconds / each) as usize).clamp(1, e.failovers)
}

async fn ours_failover(opts: &Options, validity: Duration) -> Result<Failover, String> {
    let e = &opts.election;
    let nodes = OursNodes::start(opts.transport, e.nodes, validity, opts.count_rpcs).await?;
    let target = nodes
        .child_target()
        .ok_or("failover needs --transport tcp: a process to kill")?;
    let mut candidates = Vec::with_capacity(e.candidates);
    for c in 1..e.candidates {
        candidates.push(nodes.candidate(validity, c).await?);
    }
    let mut observers = Vec::with_capacity(e.observers);
    for o in 0..e.observers {
        observers.push(nodes.observer(validity, o).await?);
    }
    let (out, _back) = failover(
        candidates,
        observers,
        || spawn_child("ours", validity, &target),
        validity,
        sample_count(opts, validity),
        Duration::from_secs_f64(e.failover_seconds),
    )
    .await?;
    Ok(out)
}

async fn etcd_failover(
    opts: &Options,
    server: &EtcdServer,
    validity: Duration,
) -> Result<Failover, String> {
    let e = &opts.election;
    let endpoint = server.endpoint();
    let mut candidates = Vec::with_capacity(e.candidates);
    for _ in 1..e.candidates {
        candidates.push(etcd_election::Candidate::new(&endpoint, validity).await?);
    }
    let mut observers = Vec::with_capacity(e.observers);
    for _ in 0..e.observers {
        observers.push(etcd_election::Observer::new(&endpoint).await?);
    }
    let (out, back) = failover(
        candidates,
        observers,
        || spawn_child("etcd", validity, &endpoint),
        validity,
        sample_count(opts, validity),
        Duration::from_secs_f64(e.failover_seconds),
    )
    .await?;
    for cand in back {
        cand.close().await;
    }
    Ok(out)
}

/// The whole `--scenario election` run.
pub fn run(opts: &Options) -> Result<(), String> {
    let started = utc_now();
    let machine = Machine::read();
    let e = &opts.election;
    if opts.transport == Transport::Tcp {
        crate::servers::binary()?;
    }
    let (etcd, etcd_status) = etcd::start_wanted(opts)?;
    let ours_label = match opts.transport {
        Transport::Tcp => "ours-tcp",
        _ => "ours-inproc",
    };
    say(format!(
        "{}\
         settings: {} nodes ({}), {} candidates and {} observers, each a client of its own; \
         {} hand-offs (after {WARMUP_ROUNDS} uncounted) or {:.0}s; failover at {} \
         ({} s per validity, at most {} samples); tokio multi-thread runtime with {} threads\n\
         etcd: {etcd_status}\n",
        crate::out::banner(
            "quorum-lock leader election against etcd's",
            &started,
            &machine
        ),
        e.nodes,
        match opts.transport {
            Transport::Tcp => "quorum-lock server processes over TCP",
            _ => "LocalLockers in this process",
        },
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
    let mut ours = SystemResult {
        label: ours_label,
        handoff: None,
        failovers: Vec::new(),
        notes: Vec::new(),
    };
    let mut theirs = etcd.as_ref().map(|_| SystemResult {
        label: "etcd",
        handoff: None,
        failovers: Vec::new(),
        notes: Vec::new(),
    });
    let load_start = loadavg();
    let handoff = phase(opts, || ours_handoff(opts))?;
    say(handoff_lines(ours.label, &handoff));
    ours.handoff = Some(handoff);
    if let (Some(server), Some(theirs)) = (&etcd, &mut theirs) {
        let handoff = phase(opts, || etcd_handoff(opts, server))?;
        say(handoff_lines(theirs.label, &handoff));
        theirs.handoff = Some(handoff);
    }
    for &validity in &e.validities {
        if opts.transport == Transport::Tcp {
            let f = phase(opts, || ours_failover(opts, validity))?;
            say(failover_line(ours.label, &f));
            ours.failovers.push(f);
        } else if ours.notes.is_empty() {
            ours.notes
                .push("failover not measured: --transport inproc has no process to kill".into());
        }
        if let (Some(server), Some(theirs)) = (&etcd, &mut theirs) {
            let f = phase(opts, || etcd_failover(opts, server, validity))?;
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
        json(opts, &machine, &started, &load_end, &etcd_status, &results)
    })
}

fn fig_text(f: Option<Figures>) -> String {
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

fn handoff_lines(label: &str, h: &Handoff) -> String {
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

fn failover_samples(f: &Failover) -> Vec<Duration> {
    f.samples.iter().map(|s| s.failover).collect()
}

fn failover_line(label: &str, f: &Failover) -> String {
    let worst_past = f
        .samples
        .iter()
        .map(|s| s.past_lease)
        .fold(f64::NEG_INFINITY, f64::max);
    let mut out = format!(
        "{label}: failover at {}: {}; past the lease: at most {:+.0} ms",
        fmt_duration(f.validity),
        fig_text(figures(&failover_samples(f))),
        worst_past * 1e3
    );
    if let Some(note) = &f.note {
        let _ = write!(out, " ({note})");
    }
    out
}

fn cell(f: Option<Figures>) -> String {
    f.map_or("—".into(), |f| {
        format!(
            "{} / {} / {} ({})",
            human(f.p50),
            human(f.p99),
            human(f.max),
            f.n
        )
    })
}

/// Whether a target is met: `Some(true)`, `Some(false)`, or `None` without
/// samples.
fn met(f: Option<Figures>, limit: Duration, use_max: bool) -> Option<bool> {
    f.map(|f| if use_max { f.max } else { f.p99 } <= limit)
}

fn yes_no(m: Option<bool>) -> &'static str {
    match m {
        Some(true) => "met",
        Some(false) => "**not met**",
        None => "not measured",
    }
}

/// The table for BENCHMARKS.md: one row per figure, one column per system.
fn markdown(results: &[&SystemResult]) -> String {
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
        let cells: Vec<String> = results.iter().map(|r| cell(f(r))).collect();
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
    let validities: Vec<Duration> = results
        .iter()
        .flat_map(|r| r.failovers.iter().map(|f| f.validity))
        .fold(Vec::new(), |mut v, x| {
            if !v.contains(&x) {
                v.push(x);
            }
            v
        });
    for validity in validities {
        let fo = move |r: &SystemResult| {
            r.failovers
                .iter()
                .find(|f| f.validity == validity)
                .and_then(|f| figures(&failover_samples(f)))
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
            r.failovers
                .iter()
                .find(|f| f.validity == validity)
                .map(|f| {
                    let worst = f
                        .samples
                        .iter()
                        .map(|s| s.past_lease)
                        .fold(f64::NEG_INFINITY, f64::max);
                    format!("{:+.0} ms", worst * 1e3)
                })
                .unwrap_or_else(|| "—".into())
        };
        let cells: Vec<String> = results.iter().map(|r| past(r)).collect();
        let ours_past = ours
            .failovers
            .iter()
            .find(|f| f.validity == validity)
            .map(|f| f.samples.iter().all(|s| s.past_lease <= 0.1));
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

fn json(
    opts: &Options,
    machine: &Machine,
    started: &str,
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
                    .raw("failover", fig(figures(&failover_samples(f))))
                    .raw("past_lease_s", format!("[{}]", past.join(", ")))
                    .done()
            })
            .collect();
        Obj::new()
            .str("system", r.label)
            .raw(
                "handoff",
                h.map_or("null".into(), |h| fig(figures(&h.handoffs))),
            )
            .raw(
                "handoff_after_resign",
                h.map_or("null".into(), |h| fig(figures(&h.after_resign))),
            )
            .raw(
                "cpu_per_change_ns",
                h.and_then(|h| h.cpu_per_change)
                    .map_or("null".into(), |c| c.as_nanos().to_string()),
            )
            .raw(
                "observer_lag",
                h.map_or("null".into(), |h| fig(figures(&h.lags))),
            )
            .raw("early", h.map_or(0, |h| h.early))
            .raw("missed", h.map_or(0, |h| h.missed))
            .raw("failover", format!("[{}]", failovers.join(", ")))
            .done()
    };
    Doc::new(opts, machine, started, load_end, Obj::new())
        .field("settings", settings)
        .field("etcd", string(etcd_status))
        .results(results.iter().map(result))
}
