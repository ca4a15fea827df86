//! Command-line options and the scenarios they select.
//!
//! Bad input is reported as an `Err(String)` and never panics: `main` turns it
//! into exit code 2.

use std::path::PathBuf;
use std::time::Duration;

use crate::scenario::{matrix, Hold, Mix, Names, Scenario, Transport, Wait};

pub const HELP: &str = "\
Lock throughput and latency of quorum-lock, with a Redis baseline when
redis-server is installed, and side by side with Redis, Redlock and etcd
(--backend compare).

USAGE:
    cargo bench -p quorum-lock-benches --bench locks -- [OPTIONS]

SCENARIOS (lists are comma-separated; every combination runs):
    --nodes LIST         lockers in the cluster, e.g. 1,3,5,8,16     [default: 5]
    --clients LIST       concurrent client tasks, e.g. 1,8,64       [default: 1,8,64]
    --names own|shared|both
                         a distinct name per client, or one name for all
                                                                    [default: own]
    --shared             same as --names shared
    --mix write|read90|both
                         write locks only, or 90% reads / 10% writes [default: write]
    --hold LIST          how long each lock is held: 0 (unlock at once), yield
                         (one trip through the scheduler while holding, so
                         other clients run and find the lock taken), a
                         time such as 1ms (a tokio sleep: its timer rounds up
                         to whole milliseconds), spin:1ms (exactly that
                         long, yielding in a loop; burns the holder's worker),
                         or exact:1ms (a thread of tokio's blocking pool
                         sleeps that long: no rounding to the timer's
                         milliseconds, no CPU burnt; over by the kernel's
                         sleep and a wake-up, 1ms measures about 1.2ms on
                         2 vCPUs)
                                                                    [default: 0]
    --transport inproc|tcp
                         how the coordinator reaches its lockers: inproc
                         means LocalLockers in this process; tcp starts one
                         `quorum-lock server` process per node on 127.0.0.1
                         (build the server first:
                         cargo build --release -p quorum-lock-cli)
                                                                    [default: inproc]
    --wait push|poll|both
                         how a waiter learns that a lock was freed
                         (DsyncBuilder::waiting): push waits in line on every
                         locker and is granted by a pushed wake-up; poll
                         repeats rounds with jittered backoff; both runs each
                         scenario with push, then at once with poll
                         (also accepted: a list, e.g. poll,push)    [default: push]
    --matrix             run the default set described in BENCHMARKS.md instead
                         of --nodes/--clients/--names/--mix
    --backend lockers|redis|compare|postgres|mysql
                         lockers: our own lockers, reached as --transport says;
                         redis: start max(--nodes) redis-server processes on
                         127.0.0.1 and measure, on the first N of them for
                         each N in --nodes, our Dsync over RedisLockers, rslock
                         (Redlock) and the single-node SET NX lock, with the
                         Redis commands each one sends per lock. Defaults
                         change with it: --nodes
                         1,3,5, --names both, and a shared name runs with push
                         and poll unless --wait is given; write locks only.
                         compare: one run that measures, for each client
                         count and naming in turn, back to back: ours over
                         --nodes `quorum-lock server` processes via TCP (as
                         --transport tcp; build the server first), ours over
                         --nodes redis-servers (RedisLocker), the SET NX lock
                         on one redis-server, rslock (Redlock) over --nodes
                         redis-servers, and etcd's lock on one etcd node
                         (lease per client, Lock/Unlock of its lock service).
                         Ours waits in line (push). Defaults change with it:
                         --nodes 3 (one value), --names both, --seconds 3;
                         write locks only. Ends with a Markdown table of
                         every row (the one in BENCHMARKS.md).
                         postgres, mysql: start a PostgreSQL or MariaDB
                         server of the run's own (temporary directory, free
                         127.0.0.1 port, stopped by its PID) and measure on
                         it, for each client count and naming, our Dsync
                         over one SqlLocker and the classic SQL lock
                         recipes: a unique-index lock table (INSERT to
                         lock, a 50 ms sleep and a retry on a duplicate
                         key, DELETE to unlock; autocommit), SELECT ... FOR
                         UPDATE of a pre-created row in a transaction held
                         while locked, and session advisory locks
                         (pg_advisory_lock) or GET_LOCK on MariaDB. Counts
                         the statements each sends per lock (see
                         --sql-counters). Defaults change with it: --names
                         both; write locks only, one locker (no --nodes);
                         ours waits in line (push) unless --wait is given.
                         Ends with the targets of the SQL issue and a
                         Markdown table.
                                                                    [default: lockers]
    --sql-url URL        with --backend postgres or mysql: measure on this
                         existing database instead of starting a server
                         (no server CPU then, and statements are counted
                         only where the server shows them)
    --sql-systems LIST   with --backend postgres or mysql: which to measure,
                         of ours, insert, for-update and advisory (get_lock
                         on MySQL)
                                  [default: ours,insert,for-update,advisory]
    --sql-counters on|off
                         with --backend postgres or mysql: count the
                         statements each system makes the server run
                         (PostgreSQL: pg_stat_statements, preloaded in the
                         server started here, and pg_stat_database's
                         transactions; MariaDB: SHOW GLOBAL STATUS
                         Questions); off leaves pg_stat_statements out of
                         the server, to see what it costs  [default: on]
    --rslock on|off      with --backend redis or compare: measure rslock too
                                                                    [default: on]
    --etcd auto|on|off   with --backend compare: auto measures etcd when
                         etcd is on PATH (apt-get install -y etcd-server) and
                         prints why not otherwise; on fails without it
                                                                    [default: auto]

LEADER ELECTION (--scenario election):
    --scenario locks|election|semaphore
                         locks: the lock runs above; election: leader
                         election, ours against etcd's in one run:
                         hand-off (the leader resigns -> the next
                         candidate's campaign returns), observer lag (a
                         campaign returned -> each observer yields that
                         leader) and failover (the leader's process is
                         SIGKILLed -> the next campaign returns) at each
                         --failover-validity. Ours: a Dsync per candidate
                         and per observer over --nodes (one value, default
                         5) `quorum-lock server` processes via TCP (build
                         the server first), or with --transport inproc
                         over LocalLockers (no failover then). etcd (as
                         --etcd says): one node, the recipe of etcd's Go
                         client (concurrency.Election), a client and session
                         per candidate and per observer, session TTL = the
                         validity. --seconds bounds the hand-off run
                         (default 60 with it); --count-rpcs on counts our
                         calls to lockers per leader change (off by
                         default with it). Ends with a Markdown table.
                                                                    [default: locks]
    --candidates N       candidates, each a client of its own      [default: 8]
    --observers N        observers, each a client of its own       [default: 8]
    --handoffs N         hand-offs to measure, after 10 uncounted   [default: 200]
    --failover-validity LIST
                         validities (our servers' --validity and the
                         clients' lease; etcd's session TTL) at which
                         failover is measured, whole seconds; none: off
                                                                    [default: 2s,60s]
    --failovers N        most failover samples per validity and system
                                                                    [default: 20]
    --failover-seconds S time for the failover samples of one validity and
                         system: as many as fit, at least one      [default: 200]

COUNTING SEMAPHORE (--scenario semaphore):
    --scenario semaphore one semaphore of --permits permits on --nodes
                         lockers (one value, default 5), in process or
                         over TCP as --transport says; --clients clients
                         (one value, default 64) loop acquire, hold for
                         --hold (one value, default exact:1ms), release,
                         until --seconds (default 3) or --max-locks. Reports
                         permits/s against the ideal permits / hold, how
                         full the permits were (from the grant and release
                         times), fairness (Jain, fewest per client), waits,
                         the time a slot stays free between two holders,
                         and with --count-rpcs on the calls to lockers per
                         permit. Fails loudly if more than --permits
                         holders (or two holders of one slot) ever overlap.
                         Ends with a Markdown table.
    --permits K          permits of the semaphore, 1 to 1000        [default: 4]

BOUNDS AND MEASUREMENT:
    --seconds S          measured time per scenario, (0, 600]       [default: 2]
    --warmup S           unmeasured run-in per scenario, [0, 60]    [default: 0.2]
    --max-locks N        stop a scenario after N locks in all       [default: 20000000]
    --threads N          tokio worker threads                       [default: CPUs]
    --runtime multi|current
                         tokio runtime flavour; current ignores --threads
                                                                    [default: multi]
    --metrics off|prometheus
                         prometheus: install metrics-exporter-prometheus's
                         recorder before any Dsync is built, so the library's
                         metrics are recorded (feature metrics, on by default)
                                                                    [default: off]
    --ceiling on|off     with --transport tcp: before each of our rows, the
                         same scenario on trivial servers (ceiling-server
                         processes of the benches package: our framing,
                         encoding and handshake, every request answered at
                         once, no lock table), first with a trivial client
                         loop (a lock to every server, a quorum of replies,
                         an unlock likewise; row `ceiling`), then with our
                         client (Dsync over RemoteLockers; row `ours-triv`).
                         Our rows show their locks/s as a share of the
                         ceiling (`x ceil`)                  [default: on with tcp]
    --ceiling-threads N  tokio workers of each trivial server; 0 runs a
                         current-thread runtime                     [default: 0]
    --counts on|off      with --transport tcp: count, in each row's window,
                         the system calls of this process and of the
                         servers (perf stat on their tracepoints; needs perf
                         and root or perf_event_paranoid <= -1), their
                         context switches (/proc/PID/task/*/status) and the
                         frames per write and per read on each side; printed
                         per lock under the row and in the JSON  [default: off]
    --count-rpcs on|off  wrap every locker in a call counter (one atomic add
                         per call); off measures without it         [default: on]

BASELINE:
    --redis auto|on|off  auto: measure Redis when redis-server is on PATH;
                         on: fail without it                        [default: auto]
    --redis-retry DUR    sleep before a Redis waiter retries SET NX, and with
                         --backend redis before rslock tries again   [default: 1ms]
                         (with --backend redis, --redis off leaves out SET NX;
                         with --backend compare, every Redis row)

OUTPUT:
    --json FILE          also write the results as JSON to FILE
    -h, --help           print this help

Every scenario is bounded by --warmup + --seconds and by --max-locks. Only
127.0.0.1 is used; the servers started here (redis-server, quorum-lock
server, etcd) are stopped by their PIDs at the end.
";

/// Whether to measure a system that needs a server installed here
/// (`--redis`, `--etcd`): when it is there, always, or never.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RedisMode {
    Auto,
    On,
    Off,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavor {
    Multi,
    Current,
}

/// The settings of `--scenario election`.
#[derive(Debug, Clone)]
pub struct ElectionSettings {
    pub nodes: usize,
    pub candidates: usize,
    pub observers: usize,
    pub handoffs: u64,
    /// Validities (and etcd TTLs) at which failover is measured.
    pub validities: Vec<Duration>,
    pub failovers: usize,
    pub failover_seconds: f64,
}

/// The settings of `--scenario semaphore`.
#[derive(Debug, Clone)]
pub struct SemaphoreSettings {
    pub permits: usize,
    pub nodes: usize,
    pub clients: usize,
    pub hold: Hold,
    pub wait: Wait,
}

#[derive(Debug, Clone)]
pub struct Options {
    /// `--scenario election`: leader election instead of the lock runs.
    pub election_scenario: bool,
    pub election: ElectionSettings,
    /// `--scenario semaphore`: a counting semaphore instead of the lock runs.
    pub semaphore_scenario: bool,
    pub semaphore: SemaphoreSettings,
    pub nodes: Vec<usize>,
    pub clients: Vec<usize>,
    pub names: Vec<Names>,
    pub mixes: Vec<Mix>,
    pub holds: Vec<Hold>,
    pub transport: Transport,
    /// Run back to back, in this order, for every scenario.
    pub waits: Vec<Wait>,
    pub matrix: bool,
    /// `--wait` was given; with `--backend redis`, a shared name otherwise
    /// runs with both push and poll.
    pub waits_given: bool,
    /// `--backend redis` or `compare`: measure rslock beside ours.
    pub rslock: bool,
    /// `--backend compare`: every system side by side.
    pub compare: bool,
    /// `--backend postgres` or `mysql`: SqlLocker and the SQL recipes.
    pub sql: Option<quorum_lock::sql::Backend>,
    /// `--sql-url`: an existing database instead of a server of our own.
    pub sql_url: Option<String>,
    /// `--sql-counters`: count statements on the server.
    pub sql_counters: bool,
    /// `--sql-systems`: ours, and which recipes.
    pub sql_ours: bool,
    pub sql_recipes: Vec<crate::sql_recipes::Recipe>,
    /// `--backend compare`: whether to measure etcd (auto, on, off as for
    /// Redis).
    pub etcd: RedisMode,
    pub seconds: f64,
    pub warmup: f64,
    pub max_locks: u64,
    pub threads: usize,
    pub flavor: Flavor,
    pub count_rpcs: bool,
    /// `--ceiling`: the trivial servers' rows before each TCP row.
    pub ceiling: bool,
    /// `--ceiling-threads`: tokio workers of a trivial server (0: current
    /// thread).
    pub ceiling_threads: usize,
    /// `--counts`: syscalls, frames and context switches per lock.
    pub counts: bool,
    /// Install a Prometheus recorder before the runs (feature `metrics`).
    pub prometheus: bool,
    pub redis: RedisMode,
    pub redis_retry: Duration,
    pub json: Option<PathBuf>,
    /// The arguments as given, for the record.
    pub args: Vec<String>,
}

const MAX_NODES: usize = 64;
const MAX_CLIENTS: usize = 4096;
const MAX_HOLD: Duration = Duration::from_secs(10);

/// The options to run with, or `None` when help was asked for.
pub fn parse(args: Vec<String>) -> Result<Option<Options>, String> {
    let mut opts = Options {
        election_scenario: false,
        election: ElectionSettings {
            nodes: 5,
            candidates: 8,
            observers: 8,
            handoffs: 200,
            validities: vec![Duration::from_secs(2), Duration::from_secs(60)],
            failovers: 20,
            failover_seconds: 200.0,
        },
        semaphore_scenario: false,
        semaphore: SemaphoreSettings {
            permits: 4,
            nodes: 5,
            clients: 64,
            hold: Hold::Exact(Duration::from_millis(1)),
            wait: Wait::Push,
        },
        nodes: vec![5],
        clients: vec![1, 8, 64],
        names: vec![Names::Own],
        mixes: vec![Mix::Write],
        holds: vec![Hold::None],
        transport: Transport::InProcess,
        waits: vec![Wait::Push],
        matrix: false,
        waits_given: false,
        rslock: true,
        compare: false,
        sql: None,
        sql_url: None,
        sql_counters: true,
        sql_ours: true,
        sql_recipes: crate::sql_recipes::Recipe::ALL.to_vec(),
        etcd: RedisMode::Auto,
        seconds: 2.0,
        warmup: 0.2,
        max_locks: 20_000_000,
        threads: std::thread::available_parallelism().map_or(2, |n| n.get()),
        flavor: Flavor::Multi,
        count_rpcs: true,
        ceiling: true,
        ceiling_threads: 0,
        counts: false,
        prometheus: false,
        redis: RedisMode::Auto,
        redis_retry: Duration::from_millis(1),
        json: None,
        args: args.clone(),
    };
    // Options that --matrix decides itself; naming one with it is a mistake.
    let mut chose_lists = Vec::new();
    let mut redis_backend = false;
    let mut transport_given = false;
    // Options --backend compare decides itself when they are not given.
    let mut seconds_given = false;
    let mut chose_wait = false;
    // Options of --scenario election, and the lock options given with it.
    let mut election_given = Vec::new();
    let mut lock_given = Vec::new();
    let mut count_given = false;
    let mut permits_given = false;
    let mut it = args.into_iter();
    while let Some(arg) = it.next() {
        // Accept both `--opt value` and `--opt=value`.
        let (name, inline) = match arg.split_once('=') {
            Some((n, v)) if n.starts_with("--") => (n.to_owned(), Some(v.to_owned())),
            _ => (arg.clone(), None),
        };
        let mut value = || -> Result<String, String> {
            match inline.clone() {
                Some(v) => Ok(v),
                // An option where a value should be (cargo appends --bench)
                // means the value was left out.
                None => it
                    .next()
                    .filter(|v| !v.starts_with("--"))
                    .ok_or_else(|| format!("{name} needs a value")),
            }
        };
        match name.as_str() {
            "--hold" | "--mix" | "--clients" | "--names" | "--shared" | "--wait" | "--matrix"
            | "--backend" | "--max-locks" | "--warmup" | "--rslock" | "--redis"
            | "--redis-retry" | "--sql-url" | "--sql-counters" | "--sql-systems" => {
                lock_given.push(name.clone())
            }
            _ => {}
        }
        match name.as_str() {
            "-h" | "--help" => return Ok(None),
            "--scenario" => {
                (opts.election_scenario, opts.semaphore_scenario) = match value()?.as_str() {
                    "locks" => (false, false),
                    "election" => (true, false),
                    "semaphore" => (false, true),
                    v => {
                        return Err(format!(
                            "--scenario: expected locks, election or semaphore, got {v:?}"
                        ))
                    }
                }
            }
            "--permits" => {
                opts.semaphore.permits =
                    count(&value()?, 1, 1000).map_err(|e| format!("{name}: {e}"))?;
                permits_given = true;
            }
            "--candidates" => {
                opts.election.candidates =
                    count(&value()?, 2, 256).map_err(|e| format!("{name}: {e}"))?;
                election_given.push("--candidates");
            }
            "--observers" => {
                opts.election.observers =
                    count(&value()?, 0, 256).map_err(|e| format!("{name}: {e}"))?;
                election_given.push("--observers");
            }
            "--handoffs" => {
                opts.election.handoffs =
                    count(&value()?, 1, 100_000).map_err(|e| format!("{name}: {e}"))? as u64;
                election_given.push("--handoffs");
            }
            "--failover-validity" => {
                let v = value()?;
                opts.election.validities = if v == "none" {
                    Vec::new()
                } else {
                    list(&name, &v, |s| {
                        let d = duration(s)?;
                        if d.subsec_nanos() != 0 || d < Duration::from_secs(2) || d > Duration::from_secs(600) {
                            return Err(format!(
                                "{s}: whole seconds from 2s to 600s (etcd's TTL is in seconds)"
                            ));
                        }
                        Ok(d)
                    })?
                };
                election_given.push("--failover-validity");
            }
            "--failovers" => {
                opts.election.failovers =
                    count(&value()?, 1, 1000).map_err(|e| format!("{name}: {e}"))?;
                election_given.push("--failovers");
            }
            "--failover-seconds" => {
                opts.election.failover_seconds = seconds(&name, &value()?, 1.0, 3600.0)?;
                election_given.push("--failover-seconds");
            }
            // cargo bench passes --bench to every harness.
            "--bench" => {}
            "--nodes" => {
                opts.nodes = list(&name, &value()?, |s| count(s, 1, MAX_NODES))?;
                chose_lists.push("--nodes");
            }
            "--clients" => {
                opts.clients = list(&name, &value()?, |s| count(s, 1, MAX_CLIENTS))?;
                chose_lists.push("--clients");
            }
            "--names" => {
                opts.names = match value()?.as_str() {
                    "own" => vec![Names::Own],
                    "shared" => vec![Names::Shared],
                    "both" => vec![Names::Own, Names::Shared],
                    v => return Err(format!("--names: expected own, shared or both, got {v:?}")),
                };
                chose_lists.push("--names");
            }
            "--shared" => {
                opts.names = vec![Names::Shared];
                chose_lists.push("--shared");
            }
            "--mix" => {
                opts.mixes = match value()?.as_str() {
                    "write" => vec![Mix::Write],
                    "read90" => vec![Mix::Read90],
                    "both" => vec![Mix::Write, Mix::Read90],
                    v => return Err(format!("--mix: expected write, read90 or both, got {v:?}")),
                };
                chose_lists.push("--mix");
            }
            "--hold" => {
                opts.holds = list(&name, &value()?, |s| {
                    let (kind, time) = match s.split_once(':') {
                        Some(("spin", time)) => ("spin", time),
                        Some(("exact", time)) => ("exact", time),
                        _ => ("", s),
                    };
                    match (time, kind) {
                        ("yield", "") => Ok(Hold::Yield),
                        (time, _) => match duration(time)? {
                            d if d.is_zero() => Ok(Hold::None),
                            d if d > MAX_HOLD => Err(format!("{s}: at most {MAX_HOLD:?}")),
                            d if kind == "spin" => Ok(Hold::Spin(d)),
                            d if kind == "exact" => Ok(Hold::Exact(d)),
                            d => Ok(Hold::For(d)),
                        },
                    }
                })?
            }
            "--transport" => {
                transport_given = true;
                opts.transport = match value()?.as_str() {
                    "inproc" => Transport::InProcess,
                    "tcp" => Transport::Tcp,
                    v => return Err(format!("--transport: expected inproc or tcp, got {v:?}")),
                }
            }
            "--wait" => {
                opts.waits = match value()?.as_str() {
                    "both" => vec![Wait::Push, Wait::Poll],
                    v => list(&name, v, |s| match s {
                        "push" => Ok(Wait::Push),
                        "poll" => Ok(Wait::Poll),
                        s => Err(format!("expected push, poll or both, got {s:?}")),
                    })?,
                };
                opts.waits_given = true;
                chose_wait = true;
                let mut seen = opts.waits.clone();
                seen.dedup();
                if seen.len() != opts.waits.len() || opts.waits.len() > 2 {
                    return Err(format!("{name}: name push and poll at most once each"));
                }
            }
            "--matrix" => opts.matrix = true,
            "--backend" => {
                use quorum_lock::sql::Backend;
                (redis_backend, opts.compare, opts.sql) = match value()?.as_str() {
                    "lockers" => (false, false, None),
                    "redis" => (true, false, None),
                    "compare" => (false, true, None),
                    "postgres" => (false, false, Some(Backend::Postgres)),
                    "mysql" | "mariadb" => (false, false, Some(Backend::MySql)),
                    v => {
                        return Err(format!(
                            "--backend: expected lockers, redis, compare, postgres or mysql, got {v:?}"
                        ))
                    }
                }
            }
            "--sql-url" => {
                let url = value()?;
                if url.is_empty() {
                    return Err("--sql-url needs a database URL".into());
                }
                opts.sql_url = Some(url);
            }
            "--sql-counters" => opts.sql_counters = on_off(&name, &value()?)?,
            "--sql-systems" => {
                use crate::sql_recipes::Recipe;
                let systems = list(&name, &value()?, |s| match s {
                    "ours" => Ok(None),
                    "insert" => Ok(Some(Recipe::Insert)),
                    "for-update" => Ok(Some(Recipe::ForUpdate)),
                    "advisory" | "get_lock" => Ok(Some(Recipe::Advisory)),
                    s => Err(format!(
                        "expected ours, insert, for-update, advisory or get_lock, got {s:?}"
                    )),
                })?;
                opts.sql_ours = systems.contains(&None);
                opts.sql_recipes = Recipe::ALL
                    .into_iter()
                    .filter(|r| systems.contains(&Some(*r)))
                    .collect();
            }
            "--rslock" => opts.rslock = on_off(&name, &value()?)?,
            "--etcd" => opts.etcd = mode(&name, &value()?)?,
            "--seconds" => {
                opts.seconds = seconds(&name, &value()?, f64::MIN_POSITIVE, 600.0)?;
                seconds_given = true;
            }
            "--warmup" => opts.warmup = seconds(&name, &value()?, 0.0, 60.0)?,
            "--max-locks" => {
                opts.max_locks = value()?
                    .parse()
                    .ok()
                    .filter(|&n: &u64| n > 0)
                    .ok_or_else(|| format!("{name}: expected a positive whole number"))?
            }
            "--threads" => {
                opts.threads = count(&value()?, 1, 256).map_err(|e| format!("{name}: {e}"))?
            }
            "--runtime" => {
                opts.flavor = match value()?.as_str() {
                    "multi" => Flavor::Multi,
                    "current" => Flavor::Current,
                    v => return Err(format!("--runtime: expected multi or current, got {v:?}")),
                }
            }
            "--ceiling" => opts.ceiling = on_off(&name, &value()?)?,
            "--ceiling-threads" => {
                opts.ceiling_threads = value()?
                    .parse()
                    .ok()
                    .filter(|n| *n <= 64)
                    .ok_or("--ceiling-threads: expected 0 to 64")?;
            }
            "--counts" => opts.counts = on_off(&name, &value()?)?,
            "--count-rpcs" => {
                opts.count_rpcs = on_off(&name, &value()?)?;
                count_given = true;
            }
            "--metrics" => {
                opts.prometheus = match value()?.as_str() {
                    "off" => false,
                    #[cfg(feature = "metrics")]
                    "prometheus" => true,
                    #[cfg(not(feature = "metrics"))]
                    "prometheus" => {
                        return Err("--metrics prometheus: build the benchmark with its default feature metrics".into())
                    }
                    v => return Err(format!("--metrics: expected off or prometheus, got {v:?}")),
                }
            }
            "--redis" => opts.redis = mode(&name, &value()?)?,
            "--redis-retry" => {
                let d = duration(&value()?).map_err(|e| format!("{name}: {e}"))?;
                if d.is_zero() || d > Duration::from_secs(1) {
                    return Err(format!("{name}: must be in (0, 1s]"));
                }
                opts.redis_retry = d;
            }
            "--json" => {
                let path = value()?;
                if path.is_empty() {
                    return Err("--json needs a file name".into());
                }
                opts.json = Some(PathBuf::from(path));
            }
            other if other.starts_with('-') => {
                return Err(format!("unknown option {other} (try --help)"))
            }
            // A bare word is what `cargo bench -- FILTER` passes to libtest
            // harnesses; this harness has no filters, so say so.
            other => {
                return Err(format!(
                    "unexpected argument {other:?}: this harness selects scenarios with options (try --help)"
                ))
            }
        }
    }
    if opts.semaphore_scenario {
        if !election_given.is_empty() {
            return Err(format!(
                "{} only apply to --scenario election",
                election_given.join(", ")
            ));
        }
        semaphore_defaults(&mut opts, &lock_given, &chose_lists, seconds_given)?;
        return Ok(Some(opts));
    }
    if permits_given {
        return Err("--permits only applies to --scenario semaphore".into());
    }
    if opts.election_scenario {
        if !lock_given.is_empty() {
            return Err(format!(
                "--scenario election sets its own load; drop {}",
                lock_given.join(", ")
            ));
        }
        if opts.nodes.len() != 1 {
            return Err("--scenario election: give one --nodes value".into());
        }
        opts.election.nodes = opts.nodes[0];
        if !transport_given {
            opts.transport = Transport::Tcp;
        }
        if !seconds_given {
            opts.seconds = 60.0;
        }
        // Counted only when asked: the counters are FaultyLockers, which
        // take a mutex per call.
        if !count_given {
            opts.count_rpcs = false;
        }
        return Ok(Some(opts));
    }
    if !election_given.is_empty() {
        return Err(format!(
            "{} only apply to --scenario election",
            election_given.join(", ")
        ));
    }
    if opts.matrix && !chose_lists.is_empty() {
        return Err(format!(
            "--matrix chooses nodes, clients, names and mix itself; drop {}",
            chose_lists.join(", ")
        ));
    }
    if redis_backend {
        redis_defaults(&mut opts, &chose_lists, transport_given)?;
    }
    if opts.sql.is_some() {
        sql_defaults(&mut opts, &chose_lists, transport_given)?;
    } else if lock_given.iter().any(|o| o.starts_with("--sql-")) {
        return Err(
            "--sql-url, --sql-systems and --sql-counters only apply to --backend postgres or mysql"
                .into(),
        );
    }
    if opts.compare {
        let given = Given {
            lists: &chose_lists,
            transport: transport_given,
            wait: chose_wait,
            seconds: seconds_given,
        };
        compare_defaults(&mut opts, &given)?;
    }
    Ok(Some(opts))
}

/// Checks and completes the options of `--scenario semaphore`: one value
/// each of `--nodes`, `--clients`, `--hold` and `--wait`.
fn semaphore_defaults(
    opts: &mut Options,
    lock_given: &[String],
    chose: &[&str],
    seconds_given: bool,
) -> Result<(), String> {
    let mut refused: Vec<&str> = lock_given
        .iter()
        .map(String::as_str)
        .chain(chose.iter().copied())
        .filter(|o| {
            !matches!(
                *o,
                "--hold" | "--clients" | "--nodes" | "--wait" | "--max-locks" | "--warmup"
            )
        })
        .collect();
    refused.sort_unstable();
    refused.dedup();
    if !refused.is_empty() {
        return Err(format!(
            "--scenario semaphore sets its own load (one semaphore, write permits); drop {}",
            refused.join(", ")
        ));
    }
    let one = |name: &str, n: usize| {
        if n == 1 {
            Ok(())
        } else {
            Err(format!("--scenario semaphore: give one {name} value"))
        }
    };
    let s = &mut opts.semaphore;
    if chose.contains(&"--nodes") {
        one("--nodes", opts.nodes.len())?;
        s.nodes = opts.nodes[0];
    }
    if chose.contains(&"--clients") {
        one("--clients", opts.clients.len())?;
        s.clients = opts.clients[0];
    }
    if lock_given.iter().any(|o| o == "--hold") {
        one("--hold", opts.holds.len())?;
        s.hold = opts.holds[0];
    }
    if opts.waits_given {
        one("--wait", opts.waits.len())?;
        s.wait = opts.waits[0];
    }
    if !seconds_given {
        opts.seconds = 3.0;
    }
    Ok(())
}

/// Which of the options `--backend compare` decides itself were given.
struct Given<'a> {
    lists: &'a [&'a str],
    transport: bool,
    wait: bool,
    seconds: bool,
}

/// Checks and completes the options of `--backend compare`.
fn compare_defaults(opts: &mut Options, given: &Given) -> Result<(), String> {
    if given.transport {
        return Err(
            "--backend compare measures ours over TCP and over Redis itself; drop --transport"
                .into(),
        );
    }
    if opts.matrix {
        return Err("--backend compare runs its own set; drop --matrix".into());
    }
    if given.wait {
        return Err(
            "--backend compare measures ours as it ships, waiting in line (push); drop --wait"
                .into(),
        );
    }
    if opts.mixes != [Mix::Write] {
        return Err("--backend compare measures write locks only (the others have no read mode); drop --mix".into());
    }
    if given.lists.contains(&"--nodes") {
        if opts.nodes.len() != 1 {
            return Err(
                "--backend compare: give one --nodes value (the cluster size of ours and rslock)"
                    .into(),
            );
        }
    } else {
        opts.nodes = vec![3];
    }
    if !given.lists.contains(&"--names") && !given.lists.contains(&"--shared") {
        opts.names = vec![Names::Own, Names::Shared];
    }
    if !given.seconds {
        opts.seconds = 3.0;
    }
    opts.waits = vec![Wait::Push];
    Ok(())
}

/// Checks and completes the options of `--backend postgres` and `mysql`.
fn sql_defaults(opts: &mut Options, chose: &[&str], transport_given: bool) -> Result<(), String> {
    if transport_given {
        return Err(
            "--backend postgres and mysql reach the database over SQL; drop --transport".into(),
        );
    }
    if opts.matrix {
        return Err("--backend postgres and mysql run their own set; drop --matrix".into());
    }
    if opts.mixes != [Mix::Write] {
        return Err("--backend postgres and mysql measure write locks only (the recipes have no read mode); drop --mix".into());
    }
    if chose.contains(&"--nodes") {
        return Err("--backend postgres and mysql measure a Dsync over one SqlLocker, beside recipes on the same server; drop --nodes".into());
    }
    opts.nodes = vec![1];
    if !chose.contains(&"--names") && !chose.contains(&"--shared") {
        opts.names = vec![Names::Own, Names::Shared];
    }
    Ok(())
}

/// Checks and completes the options of `--backend redis`.
fn redis_defaults(opts: &mut Options, chose: &[&str], transport_given: bool) -> Result<(), String> {
    if transport_given {
        return Err("--backend redis reaches its lockers over Redis; drop --transport".into());
    }
    if opts.matrix {
        return Err("--backend redis runs its own set; drop --matrix".into());
    }
    if opts.mixes != [Mix::Write] {
        return Err("--backend redis measures write locks only (rslock and SET NX have no read mode); drop --mix".into());
    }
    opts.transport = Transport::Redis;
    if !chose.contains(&"--nodes") {
        opts.nodes = vec![1, 3, 5];
    }
    if !chose.contains(&"--names") && !chose.contains(&"--shared") {
        opts.names = vec![Names::Own, Names::Shared];
    }
    Ok(())
}

impl Options {
    /// Every run, with the wait strategies innermost, so that push and
    /// poll of one scenario run back to back.
    pub fn scenarios(&self) -> Vec<Scenario> {
        let base = |nodes, clients, names, mix, hold, wait| Scenario {
            nodes,
            clients,
            names,
            mix,
            hold,
            transport: self.transport,
            wait,
        };
        let mut shapes = Vec::new();
        for &hold in &self.holds {
            if self.matrix {
                shapes.extend(matrix().map(|(n, c, names, mix)| (n, c, names, mix, hold)));
                continue;
            }
            for &mix in &self.mixes {
                for &names in &self.names {
                    for &nodes in &self.nodes {
                        for &clients in &self.clients {
                            shapes.push((nodes, clients, names, mix, hold));
                        }
                    }
                }
            }
        }
        shapes
            .into_iter()
            .flat_map(|(n, c, names, mix, hold)| {
                self.waits
                    .iter()
                    .map(move |&wait| base(n, c, names, mix, hold, wait))
            })
            .collect()
    }
}

fn list<T>(
    name: &str,
    value: &str,
    item: impl Fn(&str) -> Result<T, String>,
) -> Result<Vec<T>, String> {
    let items: Vec<T> = value
        .split(',')
        .map(|s| item(s.trim()).map_err(|e| format!("{name}: {e}")))
        .collect::<Result<_, _>>()?;
    if items.is_empty() {
        return Err(format!("{name} needs at least one value"));
    }
    Ok(items)
}

fn count(s: &str, min: usize, max: usize) -> Result<usize, String> {
    s.parse::<usize>()
        .ok()
        .filter(|n| (min..=max).contains(n))
        .ok_or_else(|| format!("{s:?}: expected a whole number from {min} to {max}"))
}

fn seconds(name: &str, s: &str, min: f64, max: f64) -> Result<f64, String> {
    s.parse::<f64>()
        .ok()
        .filter(|v| v.is_finite() && *v >= min && *v <= max)
        .ok_or_else(|| format!("{name}: {s:?} is not a number of seconds in range (max {max})"))
}

fn mode(name: &str, s: &str) -> Result<RedisMode, String> {
    match s {
        "auto" => Ok(RedisMode::Auto),
        "on" => Ok(RedisMode::On),
        "off" => Ok(RedisMode::Off),
        _ => Err(format!("{name}: expected auto, on or off, got {s:?}")),
    }
}

fn on_off(name: &str, s: &str) -> Result<bool, String> {
    match s {
        "on" => Ok(true),
        "off" => Ok(false),
        _ => Err(format!("{name}: expected on or off, got {s:?}")),
    }
}

/// `0`, or a number with one of the units ns, us, ms, s.
pub fn duration(s: &str) -> Result<Duration, String> {
    if s == "0" {
        return Ok(Duration::ZERO);
    }
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .ok_or_else(|| format!("{s:?}: give a unit, e.g. 500us, 2ms, 1s"))?;
    let (number, unit) = s.split_at(split);
    let number: f64 = number
        .parse()
        .ok()
        .filter(|v: &f64| v.is_finite())
        .ok_or_else(|| format!("{s:?}: not a duration"))?;
    let scale = match unit {
        "ns" => 1e-9,
        "us" | "µs" => 1e-6,
        "ms" => 1e-3,
        "s" => 1.0,
        _ => return Err(format!("{s:?}: unknown unit {unit:?}; use ns, us, ms or s")),
    };
    Duration::try_from_secs_f64(number * scale).map_err(|_| format!("{s:?}: out of range"))
}
