//! Command-line options and the scenarios they select.
//!
//! Bad input is reported as an `Err(String)` and never panics: `main` turns it
//! into exit code 2.

use std::path::PathBuf;
use std::time::Duration;

pub use crate::cli_help::HELP;
use crate::scenario::{matrix, Hold, Mix, Names, Scenario, Transport, Wait};

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
    /// `--sql-lockers`: how many `SqlLocker`s (each with its own pool and
    /// `Dsync`, as separate processes have) ours spreads its clients over.
    pub sql_lockers: usize,
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
        sql_lockers: 1,
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
            | "--redis-retry" | "--sql-url" | "--sql-counters" | "--sql-systems"
            | "--sql-lockers" => lock_given.push(name.clone()),
            "--candidates"
            | "--observers"
            | "--handoffs"
            | "--failover-validity"
            | "--failovers"
            | "--failover-seconds" => election_given.push(name.clone()),
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
                opts.semaphore.permits = named_count(&name, &value()?, 1, 1000)?;
                permits_given = true;
            }
            "--candidates" => opts.election.candidates = named_count(&name, &value()?, 2, 256)?,
            "--observers" => opts.election.observers = named_count(&name, &value()?, 0, 256)?,
            "--handoffs" => {
                opts.election.handoffs = named_count(&name, &value()?, 1, 100_000)? as u64
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
            }
            "--failovers" => opts.election.failovers = named_count(&name, &value()?, 1, 1000)?,
            "--failover-seconds" => {
                opts.election.failover_seconds = seconds(&name, &value()?, 1.0, 3600.0)?
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
            "--sql-lockers" => opts.sql_lockers = named_count(&name, &value()?, 1, 64)?,
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
            "--threads" => opts.threads = named_count(&name, &value()?, 1, 256)?,
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
    own_set(opts, given.transport, [
        "--backend compare measures ours over TCP and over Redis itself; drop --transport",
        "--backend compare runs its own set; drop --matrix",
        "--backend compare measures write locks only (the others have no read mode); drop --mix",
    ])?;
    if given.wait {
        return Err(
            "--backend compare measures ours as it ships, waiting in line (push); drop --wait"
                .into(),
        );
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

/// The checks of every backend that runs its own set: it picks the
/// transport, the set and the mix (write locks only) itself. `drop` holds
/// the error for each of --transport, --matrix and --mix given.
fn own_set(opts: &Options, transport_given: bool, drop: [&str; 3]) -> Result<(), String> {
    let given = [transport_given, opts.matrix, opts.mixes != [Mix::Write]];
    match given.iter().position(|&g| g) {
        Some(i) => Err(drop[i].into()),
        None => Ok(()),
    }
}

/// Checks and completes the options of `--backend postgres` and `mysql`.
fn sql_defaults(opts: &mut Options, chose: &[&str], transport_given: bool) -> Result<(), String> {
    own_set(opts, transport_given, [
        "--backend postgres and mysql reach the database over SQL; drop --transport",
        "--backend postgres and mysql run their own set; drop --matrix",
        "--backend postgres and mysql measure write locks only (the recipes have no read mode); drop --mix",
    ])?;
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
    own_set(opts, transport_given, [
        "--backend redis reaches its lockers over Redis; drop --transport",
        "--backend redis runs its own set; drop --matrix",
        "--backend redis measures write locks only (rslock and SET NX have no read mode); drop --mix",
    ])?;
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

/// [`count`], its error prefixed with the option's name.
fn named_count(name: &str, s: &str, min: usize, max: usize) -> Result<usize, String> {
    count(s, min, max).map_err(|e| format!("{name}: {e}"))
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
