//! `--backend postgres` and `--backend mysql`: our `Dsync` over one
//! `SqlLocker`, measured beside the classic SQL lock recipes
//! (`sql_recipes`) on the same server, in the same run.
//!
//! One run starts a PostgreSQL or MariaDB server of its own (or uses
//! `--sql-url`) and, for each hold, naming and client count, measures in
//! turn the three recipes and ours. Every measurement gets names of its
//! own (`run<N>/...`), so that a wait cut off by the end of an earlier
//! window cannot block it, and the connections such a wait leaves queued
//! in the server are ended before the next one.
//!
//! Ours is a `Dsync` over one `SqlLocker` as it ships (a pool of 16
//! connections shared by every client, waiting in line with pushes), with
//! quarantine off, as for a server that never granted a lock before. Each recipe client has a connection
//! of its own, which the session-level recipes need anyway.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

use quorum_lock::sql::{Backend, SqlConfig, SqlLocker};
use quorum_lock::{DRWMutex, WriteGuard};

use crate::cli::Options;
use crate::context::Context;
use crate::ours::Cluster;
use crate::out::{self, loadavg, say, Machine};
use crate::scenario::{Names, Wait};
use crate::sql_recipes::{self, Recipe, RecipeClient};
use crate::sql_report::{columns, json, legend, markdown, references, row_notes, targets};
use crate::sql_server::{Counted, Database, Probe};
use crate::stats::{counted, Bounds, ClientTally, Locking, Snapshot, Summary};

/// The table prefix of ours.
const PREFIX: &str = "bench_ql_";

/// What a row measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum System {
    /// A `Dsync` over one `SqlLocker`, waiting this way.
    Ours(Wait),
    Recipe(Recipe),
}

impl System {
    pub(crate) fn label(self, backend: Backend) -> &'static str {
        match self {
            System::Ours(_) => "ours",
            System::Recipe(r) => r.label(backend),
        }
    }

    pub(crate) fn wait(self) -> &'static str {
        match self {
            System::Ours(wait) => wait.label(),
            System::Recipe(Recipe::Insert) => "sleep",
            System::Recipe(_) => "block",
        }
    }
}

/// The clients, naming and hold a measurement shares with the others.
pub type Key = crate::redis_base::BaselineKey;

crate::out::measured_fields!(Row);

pub struct Row {
    pub system: System,
    pub key: Key,
    pub summary: Summary,
    /// What the server counted from before the clients started to after
    /// the last stopped, when it counts.
    pub counted: Option<Counted>,
    /// Locks taken in that time, warm-up included: what `counted` is
    /// divided by.
    pub cycles: u64,
    /// Connections left queued in the server by waits the window cut
    /// off, ended after the run.
    pub leftovers: u64,
    /// Locks/s of `insert` and of `advisory`/`get_lock` with the same
    /// clients, names and hold (rows of ours).
    pub insert_lsps: Option<f64>,
    pub advisory_lsps: Option<f64>,
    /// Hand-offs between lockers (rows of ours on one shared name over
    /// several `SqlLocker`s).
    pub handoffs: Option<HandoffFigures>,
}

/// How long hand-offs between lockers took, as between processes: from
/// the moment the holder called unlock to the moment a client of another
/// locker, waiting since before that call, had the lock. The unlock's own
/// round trip is part of it, as it is of what a waiting process sees.
#[derive(Debug, Clone, Copy)]
pub struct HandoffFigures {
    pub count: usize,
    pub p50: Duration,
    pub p99: Duration,
    pub max: Duration,
}

/// The hand-offs of one measurement, recorded by its clients.
struct Handoffs {
    /// Grants asked for before this are warm-up.
    start: Instant,
    state: Mutex<HandoffState>,
}

#[derive(Default)]
struct HandoffState {
    /// When the last unlock was called, and by which locker's client.
    last_unlock: Option<(Instant, usize)>,
    times: Vec<Duration>,
}

impl Handoffs {
    fn unlocking(&self, locker: usize) {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        state.last_unlock = Some((Instant::now(), locker));
    }

    /// A grant to a client of `locker` that asked at `asked`: a hand-off
    /// when the lock's last unlock came from another locker after it
    /// asked (one shared name and write locks only: that unlock freed it).
    fn granted(&self, asked: Instant, locker: usize) {
        let got = Instant::now();
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((at, from)) = state.last_unlock
            && asked >= self.start
            && at >= asked
            && from != locker
        {
            state.times.push(got - at);
        }
    }

    fn figures(&self) -> Option<HandoffFigures> {
        let mut times =
            std::mem::take(&mut self.state.lock().unwrap_or_else(|e| e.into_inner()).times);
        if times.is_empty() {
            return None;
        }
        times.sort_unstable();
        let at = |q: f64| times[((times.len() - 1) as f64 * q).round() as usize];
        Some(HandoffFigures {
            count: times.len(),
            p50: at(0.5),
            p99: at(0.99),
            max: at(1.0),
        })
    }
}

impl Row {
    /// Statements the server ran per lock and its unlock.
    pub fn statements_per_lock(&self) -> Option<f64> {
        let c = self.counted.as_ref()?;
        (self.cycles > 0).then(|| c.statements as f64 / self.cycles as f64)
    }

    pub fn transactions_per_lock(&self) -> Option<f64> {
        let t = self.counted.as_ref()?.transactions?;
        (self.cycles > 0).then(|| t as f64 / self.cycles as f64)
    }

    /// Statements a recipe sent per lock and unlock, counted by the client.
    pub fn sent_per_lock(&self) -> Option<f64> {
        match self.system {
            System::Recipe(_) => self.summary.calls_per_lock,
            System::Ours(_) => None,
        }
    }

    /// Calls of ours to its `SqlLocker` per lock and unlock.
    pub fn calls_per_lock(&self) -> Option<f64> {
        match self.system {
            System::Ours(_) => self.summary.calls_per_lock,
            System::Recipe(_) => None,
        }
    }
}

/// One measurement to make.
#[derive(Clone, Copy)]
struct Planned {
    system: System,
    key: Key,
}

/// Per hold and naming and client count: the recipes, then ours with each
/// wait (`--wait`, push by default), so that ours is printed with its
/// ratios to them.
fn plan(opts: &Options) -> Vec<Planned> {
    let waits = if opts.waits_given {
        opts.waits.clone()
    } else {
        vec![Wait::Push]
    };
    let ours = if opts.sql_ours { &waits[..] } else { &[] };
    let systems: Vec<System> = (opts.sql_recipes.iter().map(|&r| System::Recipe(r)))
        .chain(ours.iter().map(|&w| System::Ours(w)))
        .collect();
    let mut out = Vec::new();
    for key in opts.keys() {
        out.extend(systems.iter().map(|&system| Planned { system, key }));
    }
    out
}

/// A client's lock, whichever system it uses.
enum Locker {
    Ours(DRWMutex),
    Recipe(RecipeClient),
}

/// A lock taken, to be given back.
enum Held {
    Ours(WriteGuard),
    Recipe,
}

impl Locker {
    fn sent(&self) -> u64 {
        match self {
            Locker::Ours(_) => 0,
            Locker::Recipe(r) => r.sent,
        }
    }
}

/// A client of either system. Counts in `cycles` every lock taken, warm-up
/// included, and in its tally's calls the statements a recipe sent for the
/// locks of the window (acquire as `lock`, release as `unlock`).
struct Client {
    locker: Locker,
    cycles: Arc<AtomicU64>,
    /// Which of ours's lockers this client uses, and where its hand-offs
    /// are recorded (one shared name over several lockers).
    of_locker: usize,
    handoffs: Option<Arc<Handoffs>>,
}

impl Locking for Client {
    /// The lock, and the statements sent before it was asked for and for
    /// taking it.
    type Held = (Held, u64, u64);

    async fn acquire(&mut self) -> Result<Self::Held, String> {
        let sent = self.locker.sent();
        let asked = Instant::now();
        // Ours is cancel safe (the library gives back what the round got);
        // a recipe's connection is dropped when the window cuts it off.
        let held = match &mut self.locker {
            Locker::Ours(mutex) => mutex.lock().await.map(Held::Ours).context("lock failed")?,
            Locker::Recipe(r) => r.acquire().await.map(|()| Held::Recipe)?,
        };
        if let Some(handoffs) = &self.handoffs {
            handoffs.granted(asked, self.of_locker);
        }
        Ok((held, sent, self.locker.sent() - sent))
    }

    async fn release(
        &mut self,
        (held, sent, acquired): Self::Held,
        tally: &mut ClientTally,
        counted: bool,
    ) -> Result<(), String> {
        match (&mut self.locker, held) {
            (Locker::Ours(_), Held::Ours(guard)) => {
                if let Some(handoffs) = &self.handoffs {
                    handoffs.unlocking(self.of_locker);
                }
                guard.unlock().await.context("unlock failed")?
            }
            (Locker::Recipe(r), Held::Recipe) => r.release().await?,
            _ => return Err("a lock given back to another system".into()),
        }
        self.cycles.fetch_add(1, Ordering::Relaxed);
        if counted {
            tally.calls.lock += acquired;
            tally.calls.unlock += self.locker.sent() - sent - acquired;
        }
        Ok(())
    }

    async fn finish(self, cut_off: bool) {
        if let (Locker::Recipe(r), false) = (self.locker, cut_off) {
            r.close().await;
        }
    }
}

/// The name client `c` locks in measurement `run`.
fn name(run: usize, names: Names, c: usize) -> String {
    names.of(&format!("run{run}/"), c)
}

/// One measurement, from connecting to ending what it left behind.
async fn measure(
    db: &Database,
    p: Planned,
    run: usize,
    bounds: Bounds,
    lockers_of_ours: usize,
) -> Result<Row, String> {
    let backend = db.backend;
    let window = bounds.window(p.key.clients);
    let mut probe = Probe::connect(backend, &db.url).await?;
    let mut lockers = Vec::with_capacity(p.key.clients);
    let mut calls = Vec::new();
    let mut ds = None;
    match p.system {
        System::Recipe(recipe) => {
            if recipe == Recipe::ForUpdate {
                let mut made = Vec::new();
                for c in 0..p.key.clients {
                    let n = name(run, p.key.names, c);
                    if !made.contains(&n) {
                        probe.execute(&sql_recipes::create_row(backend, &n)).await?;
                        made.push(n);
                    }
                }
            }
            for c in 0..p.key.clients {
                let n = name(run, p.key.names, c);
                let client = RecipeClient::connect(backend, &db.url, recipe, n, window.end).await?;
                lockers.push(Locker::Recipe(client));
            }
        }
        System::Ours(wait) => {
            let config = SqlConfig {
                table_prefix: PREFIX.into(),
                // A server started by this run never granted a lock
                // before it.
                quarantine: Duration::ZERO,
                ..SqlConfig::default()
            };
            // As separate processes would: a locker, its pool and a
            // `Dsync` each, the clients dealt out in turn.
            let mut built = Vec::with_capacity(lockers_of_ours);
            for _ in 0..lockers_of_ours {
                let locker = SqlLocker::connect(&db.url, config.clone())
                    .await
                    .context("cannot connect a SqlLocker")?;
                built.push(Cluster::build(
                    vec![Arc::new(locker)],
                    bounds.count_rpcs,
                    wait,
                    None,
                )?);
            }
            for c in 0..p.key.clients {
                let mutex = built[c % lockers_of_ours]
                    .ds
                    .rw_mutex([name(run, p.key.names, c)])
                    .context("cannot make a mutex")?;
                lockers.push(Locker::Ours(mutex));
            }
            calls = built.iter().flat_map(|b| b.calls.clone()).collect();
            ds = Some(built);
        }
    }
    let settle = backend == Backend::Postgres;
    let before = match db.counting {
        Ok(()) => Some(probe.reading(settle).await?),
        Err(_) => None,
    };
    // The window (its warm-up first) starts once every client is
    // connected and the counters are read: that took from a few
    // milliseconds to over a second (64 connections; PostgreSQL's
    // counters settle for 1.1 s), which an earlier window counted as time
    // measured, understating every rate of the runs before 2026-12-04.
    // The recipes' clients keep the earlier end: they use it only for
    // the timeout of one `GET_LOCK`, asked again when it runs out.
    let window = bounds.window(p.key.clients);
    let cycles = Arc::new(AtomicU64::new(0));
    let snapshot = || Snapshot::now(counted(&calls), db.cpu());
    let handoffs = (matches!(p.system, System::Ours(_))
        && p.key.names == Names::Shared
        && lockers_of_ours > 1)
        .then(|| {
            Arc::new(Handoffs {
                start: window.start,
                state: Mutex::default(),
            })
        });
    let mut lockers = lockers.into_iter().enumerate();
    let driven = window.load(p.key.clients, p.key.hold, snapshot, |_| {
        let (c, locker) = lockers.next().expect("one locker per client");
        Client {
            locker,
            cycles: cycles.clone(),
            of_locker: c % lockers_of_ours,
            handoffs: handoffs.clone(),
        }
    });
    let driven = driven.await;
    // Ours gives back what cut-off waits got in the background: a moment
    // for that before the count ends.
    drop(ds);
    tokio::time::sleep(Duration::from_millis(200)).await;
    let summary = driven?;
    let mut leftovers = 0;
    // PostgreSQL reports an ended backend's transactions as it exits: end
    // the leftovers before the last reading, so that they count here.
    if db.is_own() && backend == Backend::Postgres {
        leftovers = probe.end_leftovers().await?;
    }
    let counted = match &before {
        Some(before) => Some(probe.reading(settle).await?.since(before)),
        None => None,
    };
    // MySQL counts a KILL as a statement: after the reading.
    if db.is_own() && backend == Backend::MySql {
        leftovers = probe.end_leftovers().await?;
    }
    probe.close().await;
    Ok(Row {
        system: p.system,
        key: p.key,
        summary,
        counted,
        cycles: cycles.load(Ordering::Relaxed),
        leftovers,
        insert_lsps: None,
        advisory_lsps: None,
        handoffs: handoffs.and_then(|h| h.figures()),
    })
}

/// The whole run: the server up, every planned measurement, the table,
/// the targets, the JSON, the server down.
pub fn run(opts: &Options, backend: Backend) -> Result<(), String> {
    let machine = Machine::read();
    let mut db = match &opts.sql_url {
        Some(url) => Database::external(backend, url)?,
        None => Database::start(backend, opts.sql_counters)?,
    };
    crate::on_runtime(opts, Duration::from_secs(1), async {
        db.inspect(opts.sql_counters).await?;
        let mut probe = Probe::connect(backend, &db.url).await?;
        for statement in sql_recipes::create_tables(backend) {
            probe.execute(&statement).await?;
        }
        probe.close().await;
        Ok(())
    })?;
    let planned = plan(opts);
    let bounds = Bounds::of(opts);
    let server = match (db.pid(), db.port()) {
        (Some(pid), Some(port)) => format!("started here: pid {pid} on 127.0.0.1:{port}"),
        _ => "an existing database (--sql-url); server CPU not measured".into(),
    };
    let settle = if backend == Backend::Postgres && db.counting.is_ok() {
        2.3
    } else {
        0.3
    };
    let plan = out::Plan {
        title: "quorum-lock SqlLocker beside the SQL lock recipes",
        setup: format!(
            "\ndatabase: {}; {server}; statement counts: {}; ours over {} SqlLocker(s) \
             (--sql-lockers)\n",
            db.version,
            match &db.counting {
                Ok(()) => "on".to_owned(),
                Err(why) => why.clone(),
            },
            opts.sql_lockers,
        ),
        each: settle + 0.2,
        columns: columns(backend),
    };
    let measure_row = |run, p: &Planned, rows: &[Row]| {
        let mut row = crate::on_runtime(
            opts,
            Duration::from_secs(1),
            measure(&db, *p, run, bounds, opts.sql_lockers),
        )?;
        if let System::Ours(_) = row.system {
            let lsps = |recipe| {
                let recipe_row = out::pick(rows, row.key, |r| r.system == System::Recipe(recipe));
                recipe_row.map(|r| r.summary.lsps)
            };
            row.insert_lsps = lsps(Recipe::Insert);
            row.advisory_lsps = lsps(Recipe::Advisory);
        }
        Ok(row)
    };
    let rows = plan.run(opts, &machine, &planned, measure_row, row_notes)?;
    say(format!("\n{}", legend(backend, &db)));
    say(format!("\n{}", targets(&rows, backend)));
    say(references(&rows, backend));
    say(markdown(opts, &rows, backend));
    if let Some(pid) = db.pid() {
        drop(db);
        say(format!("stopped the {} server, pid {pid}", backend.name()));
    }
    say(format!("load average at the end: {}", loadavg()));
    out::save(opts, || json(opts, &machine, backend, &rows))
}
