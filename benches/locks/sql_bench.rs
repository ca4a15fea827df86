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

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use quorum_lock::sql::{Backend, SqlConfig, SqlLocker};
use quorum_lock::{DRWMutex, Dsync, NetLocker, WriteGuard};
use tokio::time::Instant;

use crate::cli::Options;
use crate::counting::{self, CountingLocker};
use crate::out::{self, left, notes, per, right, say, stat, verdict, Col, Doc, Obj};
use crate::report::{loadavg, string, Machine};
use crate::scenario::{Hold, Names, Wait};
use crate::sql_recipes::{self, Recipe, RecipeClient};
use crate::sql_server::{Counted, Database, Probe};
use crate::stats::{
    drive, fmt_duration, fmt_rate, process_cpu, summarize, ClientTally, Locking, Snapshot, Summary,
    Window,
};

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
    fn label(self, backend: Backend) -> &'static str {
        match self {
            System::Ours(_) => "ours",
            System::Recipe(r) => r.label(backend),
        }
    }

    fn wait(self) -> &'static str {
        match self {
            System::Ours(wait) => wait.label(),
            System::Recipe(Recipe::Insert) => "sleep",
            System::Recipe(_) => "block",
        }
    }
}

/// The clients, naming and hold a measurement shares with the others.
pub type Key = crate::redis_base::BaselineKey;

impl Row {
    fn summary(&self) -> &Summary {
        &self.summary
    }
}

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

    fn ratio(&self, other: Option<f64>) -> Option<f64> {
        other.filter(|r| *r > 0.0).map(|r| self.summary.lsps / r)
    }
}

/// What every measurement needs besides its own settings.
#[derive(Clone, Copy)]
struct Bounds {
    warmup: Duration,
    seconds: Duration,
    max_locks: u64,
    count_rpcs: bool,
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
    let mut out = Vec::new();
    for &hold in &opts.holds {
        for &names in &opts.names {
            for &clients in &opts.clients {
                let key = Key {
                    clients,
                    names,
                    hold,
                };
                for &recipe in &opts.sql_recipes {
                    out.push(Planned {
                        system: System::Recipe(recipe),
                        key,
                    });
                }
                let ours = if opts.sql_ours { &waits[..] } else { &[] };
                for &wait in ours {
                    out.push(Planned {
                        system: System::Ours(wait),
                        key,
                    });
                }
            }
        }
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
}

impl Locking for Client {
    /// The lock, and the statements sent before it was asked for and for
    /// taking it.
    type Held = (Held, u64, u64);

    async fn acquire(&mut self) -> Result<Self::Held, String> {
        let sent = self.locker.sent();
        // Ours is cancel safe (the library gives back what the round got);
        // a recipe's connection is dropped when the window cuts it off.
        let held = match &mut self.locker {
            Locker::Ours(mutex) => mutex
                .lock()
                .await
                .map(Held::Ours)
                .map_err(|e| format!("lock failed: {e}"))?,
            Locker::Recipe(r) => r.acquire().await.map(|()| Held::Recipe)?,
        };
        Ok((held, sent, self.locker.sent() - sent))
    }

    async fn release(
        &mut self,
        (held, sent, acquired): Self::Held,
        tally: &mut ClientTally,
        counted: bool,
    ) -> Result<(), String> {
        match (&mut self.locker, held) {
            (Locker::Ours(_), Held::Ours(guard)) => guard
                .unlock()
                .await
                .map_err(|e| format!("unlock failed: {e}"))?,
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
    match names {
        Names::Own => format!("run{run}/client-{c}"),
        Names::Shared => format!("run{run}/shared"),
    }
}

/// One measurement, from connecting to ending what it left behind.
async fn measure(db: &Database, p: Planned, run: usize, bounds: Bounds) -> Result<Row, String> {
    let backend = db.backend;
    let window = Window::new(
        bounds.warmup,
        bounds.seconds,
        bounds.max_locks,
        p.key.clients,
    );
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
            let locker = SqlLocker::connect(&db.url, config)
                .await
                .map_err(|e| format!("cannot connect a SqlLocker: {e}"))?;
            let locker: Arc<dyn NetLocker> = Arc::new(locker);
            let locker = if bounds.count_rpcs {
                let (counted, tally) = CountingLocker::new(locker);
                calls.push(tally);
                Arc::new(counted) as Arc<dyn NetLocker>
            } else {
                locker
            };
            let built = Dsync::builder(vec![locker])
                .waiting(wait.waiting())
                .build()
                .map_err(|e| format!("cannot build the Dsync: {e}"))?;
            for c in 0..p.key.clients {
                let mutex = built
                    .rw_mutex([name(run, p.key.names, c)])
                    .map_err(|e| format!("cannot make a mutex: {e}"))?;
                lockers.push(Locker::Ours(mutex));
            }
            ds = Some(built);
        }
    }
    let settle = backend == Backend::Postgres;
    let before = match db.counting {
        Ok(()) => Some(probe.reading(settle).await?),
        Err(_) => None,
    };
    let cycles = Arc::new(AtomicU64::new(0));
    let snapshot = || Snapshot {
        at: Instant::now(),
        cpu: process_cpu(),
        calls: (!calls.is_empty()).then(|| counting::total(&calls)),
        server_cpu: db.cpu(),
    };
    let mut lockers = lockers.into_iter();
    let driven = drive(p.key.clients, window, snapshot, |_| {
        let locker = lockers.next().expect("one locker per client");
        let cycles = cycles.clone();
        window.client(Client { locker, cycles }, p.key.hold)
    })
    .await;
    // Ours gives back what cut-off waits got in the background: a moment
    // for that before the count ends.
    drop(ds);
    tokio::time::sleep(Duration::from_millis(200)).await;
    let (tallies, first, last) = driven?;
    let summary = summarize(window, &tallies, &first, &last);
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
    })
}

/// The columns of the table, in order.
fn columns(backend: Backend) -> Vec<Col<Row>> {
    let sum: fn(&Row) -> &Summary = Row::summary;
    let ratio =
        |r: &Row, base: Option<f64>| r.ratio(base).map_or("-".into(), |x| format!("{x:.2}x"));
    let mut cols = vec![
        left("sys", 10, move |r: &Row| r.system.label(backend).to_owned()),
        left("wait", 5, |r: &Row| r.system.wait().to_owned()),
        right("clients", 7, |r: &Row| r.key.clients.to_string()),
        left("names", 6, |r: &Row| r.key.names.label().to_owned()),
        right("hold", 5, |r: &Row| r.key.hold.label()),
    ];
    for title in ["locks/s", "p50", "p99", "max", "longest"] {
        cols.push(stat(title, sum));
    }
    cols.extend([
        right("min/cl", 6, |r: &Row| r.summary.min_client.to_string()),
        right("max/cl", 6, |r: &Row| r.summary.max_client.to_string()),
        stat("jain", sum),
        // This process alone: the server has a column of its own.
        right("cpu", 5, |r: &Row| format!("{:.0}%", r.summary.cpu * 100.0)),
        right("srv", 5, |r: &Row| {
            r.summary
                .server_cpu
                .map_or("-".into(), |c| format!("{:.0}%", c * 100.0))
        }),
        stat("cpu/lk", sum),
        right("stmt/lk", 7, |r: &Row| per(r.statements_per_lock())),
        right("xact/lk", 7, |r: &Row| per(r.transactions_per_lock())),
        right("sent/lk", 7, |r: &Row| per(r.sent_per_lock())),
        right("calls/lk", 8, |r: &Row| per(r.calls_per_lock())),
        right("x ins", 7, move |r: &Row| ratio(r, r.insert_lsps)),
        right("x adv", 7, move |r: &Row| ratio(r, r.advisory_lsps)),
    ]);
    cols
}

pub fn line(row: &Row, backend: Backend) -> String {
    let mut out = out::line(&columns(backend), row) + &notes(&row.summary);
    if let Some(c) = &row.counted {
        if let Some(n) = c.deadlocks.filter(|&n| n > 0) {
            let _ = write!(out, "  ({n} deadlocks broken by the server)");
        }
        if let Some(n) = c.lock_waits.filter(|&n| n > 0) {
            let _ = write!(out, "  ({n} row lock waits)");
        }
    }
    if row.leftovers > 0 {
        let _ = write!(out, "  ({} queued connections ended after)", row.leftovers);
    }
    out
}

fn legend(backend: Backend, db: &Database) -> String {
    let counts = match (backend, &db.counting) {
        (_, Err(why)) => format!("not counted on the server: {why}"),
        (Backend::Postgres, Ok(())) => "PostgreSQL's pg_stat_statements: statements that \
            completed (a failed INSERT on a duplicate key, or one cut off, is not in it), \
            without connection set-up (SET) and the harness's own readings; xact/lk: \
            pg_stat_database xact_commit + xact_rollback, the harness's own taken out"
            .to_owned(),
        (Backend::MySql, Ok(())) => "SHOW GLOBAL STATUS: Questions (every statement a \
            client sent, failed ones included) less Com_set_option (a new connection's SETs) \
            and Com_show_status (the harness's readings)"
            .to_owned(),
    };
    let advisory = match backend {
        Backend::Postgres => {
            "advisory: pg_advisory_lock(key) / pg_advisory_unlock(key), session \
            level, the key a 64-bit hash of the name"
        }
        Backend::MySql => {
            "get_lock: GET_LOCK(name, rest of the window) / RELEASE_LOCK(name), a \
            timeout asked again"
        }
    };
    // Every client here shares one locker, whose own releases tell its
    // waiters at once; NOTIFY or the poll carry another locker's.
    let push = match backend {
        Backend::Postgres => {
            "a waiter's turn told by the locker itself after its release commits (by NOTIFY \
             when another locker released)"
        }
        Backend::MySql => {
            "a waiter's turn told by the locker itself after its release commits (by a poll \
             every 50 ms when another locker released)"
        }
    };
    format!(
        "ours: a Dsync over one SqlLocker as it ships (pool of 16 connections shared by every \
client, quarantine off: the server is new; push: waiting in line, {push}). insert: INSERT \
into a table with a unique key to lock, on a duplicate key a 50 ms sleep and another try, \
DELETE to unlock, autocommit (InnoDB's occasional deadlock on the INSERT counts as a duplicate). for-update: BEGIN and SELECT ... FOR UPDATE of a pre-created row, \
the transaction open while held, COMMIT to unlock. {advisory}. Each recipe client has a \
connection of its own.
locks/s: locks acquired in the window / window length. p50..max: acquire latency. longest: the \
longest wait, counting waits still unfinished when the window closed. min/cl, max/cl: fewest \
and most locks of one client; jain: Jain's fairness index over clients. cpu: (user+sys)/wall of \
this process; srv: the same for every process of the server; cpu/lk: both per lock.
stmt/lk, xact/lk: what the server counted from before the clients started to after the last \
stopped (warm-up and cut-off waits included), per lock taken in that time; {counts}. sent/lk: \
statements a recipe sent per lock and unlock in the window, counted by the client. Round \
trips that are not statements count nowhere: sqlx 0.8 pings every connection given back to \
its pool, one more round trip after each call of ours. calls/lk: ours's calls to its SqlLocker \
per lock and unlock (each call one transaction). x ins, x adv: \
ours's locks/s over insert's and over {}'s with the same clients, names and hold.",
        Recipe::Advisory.label(backend)
    )
}

fn find(rows: &[Row], system: System, clients: usize, names: Names) -> Option<&Row> {
    rows.iter().find(|r| {
        r.system == system
            && r.key.clients == clients
            && r.key.names == names
            && r.key.hold == Hold::None
    })
}

/// The targets of the SQL issue, with no hold: reported, not asserted.
pub fn targets(rows: &[Row], backend: Backend) -> String {
    let mut out = String::from("targets (SQL lockers issue; no hold; reported, not asserted):\n");
    let push = System::Ours(Wait::Push);
    let missing = "not measured in this run";
    let adv = Recipe::Advisory.label(backend);
    match find(rows, push, 64, Names::Shared) {
        Some(row) => {
            let s = &row.summary;
            let figures = format!(
                "min {} locks/client, {} waits still open when the window closed (counted in the longest wait), jain {:.3}, longest wait {}",
                s.min_client,
                s.unfinished,
                s.jain,
                fmt_duration(s.longest_wait)
            );
            if backend == Backend::Postgres {
                let _ = writeln!(
                    out,
                    "  (1) one shared name, 64 clients: every client served: {}; jain >= 0.95: {}; longest wait <= 200ms: {}  ({figures})",
                    verdict(s.min_client > 0),
                    verdict(s.jain >= 0.95),
                    verdict(s.longest_wait <= Duration::from_millis(200)),
                );
            } else {
                let _ = writeln!(
                    out,
                    "  (1) one shared name, 64 clients (the target is PostgreSQL's; here for comparison): {figures}"
                );
            }
        }
        None => {
            let _ = writeln!(out, "  (1) one shared name, 64 clients: {missing}");
        }
    }
    for clients in [8, 64] {
        let ours = find(rows, push, clients, Names::Own);
        let insert = find(rows, System::Recipe(Recipe::Insert), clients, Names::Own);
        let advisory = find(rows, System::Recipe(Recipe::Advisory), clients, Names::Own);
        match (ours, insert, advisory) {
            (Some(o), Some(i), Some(a)) if i.summary.lsps > 0.0 && a.summary.lsps > 0.0 => {
                let ri = o.summary.lsps / i.summary.lsps;
                let ra = o.summary.lsps / a.summary.lsps;
                let _ = writeln!(
                    out,
                    "  (2) distinct names, {clients} clients: >= 1.0x insert: ours {} vs {} = {ri:.2}x: {}; >= 0.5x {adv}: vs {} = {ra:.2}x: {}",
                    fmt_rate(o.summary.lsps),
                    fmt_rate(i.summary.lsps),
                    verdict(ri >= 1.0),
                    fmt_rate(a.summary.lsps),
                    verdict(ra >= 0.5),
                );
            }
            _ => {
                let _ = writeln!(out, "  (2) distinct names, {clients} clients: {missing}");
            }
        }
    }
    out
}

/// The reference figures (pgbench on a machine of this kind), and
/// the recipes measured here beside them.
pub fn references(rows: &[Row], backend: Backend) -> String {
    let own = |recipe: Recipe, clients: usize| {
        find(rows, System::Recipe(recipe), clients, Names::Own)
            .map_or("-".into(), |r| fmt_rate(r.summary.lsps))
    };
    let mut out = String::from(
        "the issue's reference figures (pgbench, lock+unlock cycles/s) and the recipes here:\n",
    );
    let lines: &[(&str, Recipe, [&str; 3])] = match backend {
        Backend::Postgres => &[
            (
                "plain unique-index lock",
                Recipe::Insert,
                ["1.6k", "5.6k", "7.1k"],
            ),
            (
                "session advisory locks",
                Recipe::Advisory,
                ["5.8k", "31k", "30k"],
            ),
        ],
        Backend::MySql => &[
            (
                "plain unique-index lock",
                Recipe::Insert,
                ["2.0k", "7.8k", "11.4k"],
            ),
            ("GET_LOCK", Recipe::Advisory, ["5.2k", "25k", "31k"]),
        ],
    };
    for (what, recipe, reference) in lines {
        let _ = writeln!(
            out,
            "  {what}, distinct names, 1/8/64 clients: issue {} / {} / {}; here ({}) {} / {} / {}",
            reference[0],
            reference[1],
            reference[2],
            recipe.label(backend),
            own(*recipe, 1),
            own(*recipe, 8),
            own(*recipe, 64),
        );
    }
    if backend == Backend::Postgres {
        let shared = find(rows, System::Recipe(Recipe::Advisory), 64, Names::Shared)
            .map_or("-".into(), |r| fmt_rate(r.summary.lsps));
        let _ = writeln!(
            out,
            "  one advisory key shared by 64 clients: reference 7.0k; here {shared}"
        );
    }
    out
}

/// Every row as a Markdown table: one line per system and naming, one
/// column per client count.
fn markdown(opts: &Options, rows: &[Row], backend: Backend) -> String {
    let grid = out::grid(
        opts,
        rows,
        "system | names",
        |r| (r.system, r.key),
        |r, naming| {
            let system = match r.system {
                System::Ours(w) if opts.waits_given => format!("ours ({})", w.label()),
                other => other.label(backend).to_owned(),
            };
            format!("{system} | {naming}")
        },
        cell,
    );
    format!(
        "Markdown (locks/s · p50 / p99 of the acquire · jain; the longest wait in brackets; statements per lock after the slash, server-counted):\n\n{grid}"
    )
}

fn cell(row: &Row) -> String {
    let s = &row.summary;
    let mut text = format!(
        "{} · {} / {} · {:.2}",
        fmt_rate(s.lsps),
        fmt_duration(s.p50),
        fmt_duration(s.p99),
        s.jain
    );
    if row.key.names == Names::Shared {
        let _ = write!(text, " [{}]", fmt_duration(s.longest_wait));
    }
    if let Some(st) = row.statements_per_lock() {
        let _ = write!(text, " / {st:.1}");
    }
    text
}

/// The whole run: the server up, every planned measurement, the table,
/// the targets, the JSON, the server down.
pub fn run(opts: &Options, backend: Backend) -> Result<(), String> {
    let started = crate::report::utc_now();
    let machine = Machine::read();
    let mut db = match &opts.sql_url {
        Some(url) => Database::external(backend, url)?,
        None => Database::start(backend, opts.sql_counters)?,
    };
    {
        let rt = crate::runtime(opts)?;
        rt.block_on(async {
            db.inspect(opts.sql_counters).await?;
            let mut probe = Probe::connect(backend, &db.url).await?;
            for statement in sql_recipes::create_tables(backend) {
                probe.execute(&statement).await?;
            }
            probe.close().await;
            Ok::<(), String>(())
        })?;
        rt.shutdown_timeout(Duration::from_secs(1));
    }
    let planned = plan(opts);
    let bounds = Bounds {
        warmup: Duration::from_secs_f64(opts.warmup),
        seconds: Duration::from_secs_f64(opts.seconds),
        max_locks: opts.max_locks,
        count_rpcs: opts.count_rpcs,
    };
    let server = match (db.pid(), db.port()) {
        (Some(pid), Some(port)) => format!("started here: pid {pid} on 127.0.0.1:{port}"),
        _ => "an existing database (--sql-url); server CPU not measured".into(),
    };
    let settle = if backend == Backend::Postgres && db.counting.is_ok() {
        2.3
    } else {
        0.3
    };
    say(format!(
        "{}\
         settings: {:.1}s measured + {:.1}s warm-up per run, at most {} locks, {} runtime with {} threads\n\
         database: {}; {server}; statement counts: {}\n\
         {} runs, about {:.0}s\n",
        crate::out::banner("quorum-lock SqlLocker beside the SQL lock recipes", &started, &machine),
        opts.seconds,
        opts.warmup,
        opts.max_locks,
        crate::out::runtime(opts).0,
        crate::out::runtime(opts).1,
        db.version,
        match &db.counting {
            Ok(()) => "on".to_owned(),
            Err(why) => why.clone(),
        },
        planned.len(),
        planned.len() as f64 * (opts.seconds + opts.warmup + settle + 0.2),
    ));
    say(out::header(&columns(backend)));
    let mut rows: Vec<Row> = Vec::new();
    for (run, p) in planned.iter().enumerate() {
        let rt = crate::runtime(opts)?;
        let row = rt.block_on(measure(&db, *p, run, bounds));
        rt.shutdown_timeout(Duration::from_secs(1));
        let mut row = row?;
        if let System::Ours(_) = row.system {
            let lsps = |recipe| {
                rows.iter()
                    .find(|r| r.system == System::Recipe(recipe) && r.key == row.key)
                    .map(|r| r.summary.lsps)
            };
            row.insert_lsps = lsps(Recipe::Insert);
            row.advisory_lsps = lsps(Recipe::Advisory);
        }
        say(line(&row, backend));
        rows.push(row);
    }
    say(format!("\n{}", legend(backend, &db)));
    say(format!("\n{}", targets(&rows, backend)));
    say(references(&rows, backend));
    say(markdown(opts, &rows, backend));
    if let Some(pid) = db.pid() {
        drop(db);
        say(format!("stopped the {} server, pid {pid}", backend.name()));
    }
    say(format!("load average at the end: {}", loadavg()));
    out::save(opts, || json(opts, &machine, &started, backend, &rows))
}

/// The whole run as JSON, in the spirit of `report::json`.
fn json(
    opts: &Options,
    machine: &Machine,
    started: &str,
    backend: Backend,
    rows: &[Row],
) -> String {
    let settings = Obj::new()
        .str("backend", backend.name())
        .num("seconds", opts.seconds)
        .num("warmup", opts.warmup)
        .raw("max_locks", opts.max_locks)
        .raw("threads", opts.threads)
        .raw("count_rpcs", opts.count_rpcs);
    Doc::now(opts, machine, started)
        .field("settings", settings)
        .results(rows.iter().map(|row| result(row, backend)))
}

fn result(row: &Row, backend: Backend) -> String {
    let s = &row.summary;
    let counted = row.counted.as_ref();
    let count = |n: Option<u64>| n.map_or("null".into(), |n| n.to_string());
    let by_statement: Vec<String> = counted
        .map(|c| {
            c.by_statement
                .iter()
                .map(|(text, n)| format!("{}: {n}", string(text)))
                .collect()
        })
        .unwrap_or_default();
    Obj::new()
        .str("system", row.system.label(backend))
        .str("wait", row.system.wait())
        .raw("clients", row.key.clients)
        .str("names", row.key.names.label())
        .str("hold", &row.key.hold.label())
        .summary(s, false)
        .raw("cycles_counted_by_server", row.cycles)
        .raw("server_statements", count(counted.map(|c| c.statements)))
        .raw(
            "server_transactions",
            count(counted.and_then(|c| c.transactions)),
        )
        .opt("statements_per_lock", row.statements_per_lock())
        .opt("transactions_per_lock", row.transactions_per_lock())
        .opt("sent_per_lock", row.sent_per_lock())
        .opt("locker_calls_per_lock", row.calls_per_lock())
        .raw(
            "statements_by_text",
            format!("{{{}}}", by_statement.join(", ")),
        )
        .raw("server_deadlocks", count(counted.and_then(|c| c.deadlocks)))
        .raw(
            "server_row_lock_waits",
            count(counted.and_then(|c| c.lock_waits)),
        )
        .raw("leftover_connections_ended", row.leftovers)
        .raw("hit_count_bound", s.hit_count_bound)
        .opt("ratio_vs_insert", row.ratio(row.insert_lsps))
        .opt("ratio_vs_advisory", row.ratio(row.advisory_lsps))
        .done()
}
