//! Command-line options and the scenarios they select, parsed by clap; the
//! help text is [`HELP`], kept by hand in `cli_help.rs`.
//!
//! Bad input is reported as an `Err(String)` and never panics: `main` turns it
//! into exit code 2.

use std::path::PathBuf;
use std::time::Duration;

use clap::parser::ValueSource;
use clap::{CommandFactory, FromArgMatches, Parser, ValueEnum};

pub use crate::cli_help::HELP;
use crate::scenario::{matrix, Hold, Mix, Names, Scenario, Transport, Wait};
use crate::sql_recipes::Recipe;

/// A comma-separated list given as one value (clap would read a `Vec` as
/// repeated options), and an `on|off` switch (clap would read a `bool` as a
/// flag without a value).
type List<T> = Vec<T>;
type Switch = bool;

/// Whether to measure a system that needs a server installed here
/// (`--redis`, `--etcd`): when it is there, always, or never.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum RedisMode {
    Auto,
    On,
    Off,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Flavor {
    Multi,
    Current,
}

/// The settings of `--scenario election`.
#[derive(Debug, Clone, clap::Args)]
pub struct ElectionSettings {
    #[arg(skip = 5_usize)]
    pub nodes: usize,
    #[arg(long, default_value = "8", value_parser = |s: &str| count(s, 2, 256))]
    pub candidates: usize,
    #[arg(long, default_value = "8", value_parser = |s: &str| count(s, 0, 256))]
    pub observers: usize,
    #[arg(long, default_value = "200", value_parser = |s: &str| count(s, 1, 100_000).map(|n| n as u64))]
    pub handoffs: u64,
    /// Validities (and etcd TTLs) at which failover is measured.
    #[arg(long = "failover-validity", default_value = "2s,60s", value_parser = validities)]
    pub validities: List<Duration>,
    #[arg(long, default_value = "20", value_parser = |s: &str| count(s, 1, 1000))]
    pub failovers: usize,
    #[arg(long, default_value = "200", value_parser = |s: &str| seconds(s, 1.0, 3600.0))]
    pub failover_seconds: f64,
}

/// The settings of `--scenario semaphore`; all but `--permits` come from
/// the lock options.
#[derive(Debug, Clone, clap::Args)]
pub struct SemaphoreSettings {
    #[arg(long, default_value = "4", value_parser = |s: &str| count(s, 1, 1000))]
    pub permits: usize,
    #[arg(skip = 5_usize)]
    pub nodes: usize,
    #[arg(skip = 64_usize)]
    pub clients: usize,
    #[arg(skip = Hold::Exact(Duration::from_millis(1)))]
    pub hold: Hold,
    #[arg(skip = Wait::Push)]
    pub wait: Wait,
}

/// The settings of `--scenario scale`: the sizes each part grows through,
/// in increasing order, and the lock+unlock samples taken at each.
#[derive(Debug, Clone, clap::Args)]
pub struct ScaleSettings {
    #[arg(long, default_value = "1000,10000,100000,1000000", value_parser = |s: &str| sizes(s, 10_000_000))]
    pub held: List<usize>,
    #[arg(long, default_value = "100,1000,10000", value_parser = |s: &str| sizes(s, 15_000))]
    pub connections: List<usize>,
    #[arg(long, default_value = "10,100,1000,10000", value_parser = |s: &str| sizes(s, 16_000))]
    pub waiters: List<usize>,
    #[arg(long, default_value = "2000", value_parser = |s: &str| count(s, 10, 100_000))]
    pub samples: usize,
    /// Other lockers' stores measured after the lock server: `redis`,
    /// `postgres`, `mysql`, or `none`.
    #[arg(long, default_value = "none", value_parser = stores)]
    pub stores: List<String>,
    #[arg(long, default_value = "1000,10000,100000", value_parser = |s: &str| sizes(s, 1_000_000))]
    pub store_held: List<usize>,
}

#[derive(Debug, Clone, Parser)]
#[command(name = "locks", disable_help_flag = true, args_override_self = true)]
pub struct Options {
    #[arg(short, long)]
    help: bool,
    /// cargo bench passes --bench to every harness.
    #[arg(long = "bench", hide = true)]
    _bench: bool,
    #[arg(long, default_value = "locks", value_parser = ["locks", "election", "semaphore", "scale"])]
    scenario: String,
    /// `--scenario election`: leader election instead of the lock runs.
    #[arg(skip)]
    pub election_scenario: bool,
    #[command(flatten)]
    pub election: ElectionSettings,
    /// `--scenario semaphore`: a counting semaphore instead of the lock runs.
    #[arg(skip)]
    pub semaphore_scenario: bool,
    #[command(flatten)]
    pub semaphore: SemaphoreSettings,
    /// `--scenario scale`: how far one lock server goes.
    #[arg(skip)]
    pub scale_scenario: bool,
    #[command(flatten)]
    pub scale: ScaleSettings,
    #[arg(long, default_value = "5", value_parser = |s: &str| list(s, |s| count(s, 1, MAX_NODES)))]
    pub nodes: List<usize>,
    #[arg(long, default_value = "1,8,64", value_parser = |s: &str| list(s, |s| count(s, 1, MAX_CLIENTS)))]
    pub clients: List<usize>,
    #[arg(long, default_value = "own", value_parser = names)]
    pub names: List<Names>,
    #[arg(long)]
    shared: bool,
    #[arg(long = "mix", default_value = "write", value_parser = mixes)]
    pub mixes: List<Mix>,
    #[arg(long = "hold", default_value = "0", value_parser = |s: &str| list(s, hold))]
    pub holds: List<Hold>,
    #[arg(long, default_value = "inproc", value_parser = transport)]
    pub transport: Transport,
    /// Run back to back, in this order, for every scenario.
    #[arg(long = "wait", default_value = "push", value_parser = waits)]
    pub waits: List<Wait>,
    #[arg(long)]
    pub matrix: bool,
    /// `--wait` was given; with `--backend redis`, a shared name otherwise
    /// runs with both push and poll.
    #[arg(skip)]
    pub waits_given: bool,
    #[arg(long, default_value = "lockers",
          value_parser = ["lockers", "redis", "compare", "postgres", "mysql", "mariadb"])]
    backend: String,
    /// `--backend redis` or `compare`: measure rslock beside ours.
    #[arg(long, default_value = "on", value_parser = on_off)]
    pub rslock: Switch,
    /// `--backend compare`: every system side by side.
    #[arg(skip)]
    pub compare: bool,
    /// `--backend postgres` or `mysql`: SqlLocker and the SQL recipes.
    #[arg(skip)]
    pub sql: Option<quorum_lock::sql::Backend>,
    /// `--sql-url`: an existing database instead of a server of our own.
    #[arg(long, value_parser = |s: &str| nonempty(s, "a database URL"))]
    pub sql_url: Option<String>,
    /// `--sql-counters`: count statements on the server.
    #[arg(long, default_value = "on", value_parser = on_off)]
    pub sql_counters: Switch,
    /// `--sql-lockers`: how many `SqlLocker`s (each with its own pool and
    /// `Dsync`, as separate processes have) ours spreads its clients over.
    #[arg(long, default_value = "1", value_parser = |s: &str| count(s, 1, 64))]
    pub sql_lockers: usize,
    /// `--sql-systems`: ours (`None`), and which recipes.
    #[arg(long, default_value = "ours,insert,for-update,advisory", value_parser = |s: &str| list(s, system))]
    sql_systems: List<Option<Recipe>>,
    #[arg(skip)]
    pub sql_ours: bool,
    #[arg(skip)]
    pub sql_recipes: Vec<Recipe>,
    /// `--backend compare`: whether to measure etcd (auto, on, off as for
    /// Redis).
    #[arg(long, value_enum, default_value = "auto")]
    pub etcd: RedisMode,
    #[arg(long, default_value = "2", value_parser = |s: &str| seconds(s, f64::MIN_POSITIVE, 600.0))]
    pub seconds: f64,
    #[arg(long, default_value = "0.2", value_parser = |s: &str| seconds(s, 0.0, 60.0))]
    pub warmup: f64,
    #[arg(long, default_value = "20000000", value_parser = clap::value_parser!(u64).range(1..))]
    pub max_locks: u64,
    #[arg(long, default_value_t = std::thread::available_parallelism().map_or(2, |n| n.get()),
          value_parser = |s: &str| count(s, 1, 256))]
    pub threads: usize,
    #[arg(long = "runtime", value_enum, default_value = "multi")]
    pub flavor: Flavor,
    #[arg(long, default_value = "on", value_parser = on_off)]
    pub count_rpcs: Switch,
    /// `--ceiling`: the trivial servers' rows before each TCP row.
    #[arg(long, default_value = "on", value_parser = on_off)]
    pub ceiling: Switch,
    /// `--ceiling-threads`: tokio workers of a trivial server (0: current
    /// thread).
    #[arg(long, default_value = "0", value_parser = |s: &str| count(s, 0, 64))]
    pub ceiling_threads: usize,
    /// `--counts`: syscalls, frames and context switches per lock.
    #[arg(long, default_value = "off", value_parser = on_off)]
    pub counts: Switch,
    /// Install a Prometheus recorder before the runs (feature `metrics`).
    #[arg(long = "metrics", default_value = "off", value_parser = metrics)]
    pub prometheus: Switch,
    #[arg(long, value_enum, default_value = "auto")]
    pub redis: RedisMode,
    #[arg(long, default_value = "1ms", value_parser = redis_retry)]
    pub redis_retry: Duration,
    #[arg(long, value_parser = |s: &str| nonempty(s, "a file name").map(PathBuf::from))]
    pub json: Option<PathBuf>,
    /// The arguments as given, for the record.
    #[arg(skip)]
    pub args: Vec<String>,
}

const MAX_NODES: usize = 64;
const MAX_CLIENTS: usize = 4096;
const MAX_HOLD: Duration = Duration::from_secs(10);

/// The lock options, refused with `--scenario election`; the options of
/// `--scenario election` alone; the options that choose the lists
/// --matrix decides itself.
const LOCK_OPTIONS: &str = "--hold --mix --clients --names --shared --wait --matrix --backend \
    --max-locks --warmup --rslock --redis --redis-retry --sql-url --sql-counters --sql-systems \
    --sql-lockers";
const ELECTION_OPTIONS: &str =
    "--candidates --observers --handoffs --failover-validity --failovers --failover-seconds";
const LIST_OPTIONS: &str = "--nodes --clients --names --shared --mix";
const SCALE_OPTIONS: &str = "--held --connections --waiters --samples --stores --store-held";

/// Whether `set`, one of the lists above, names the option `name`.
fn in_set(set: &str, name: &str) -> bool {
    set.split_whitespace().any(|o| o == name)
}

/// The options to run with, or `None` when help was asked for.
pub fn parse(args: Vec<String>) -> Result<Option<Options>, String> {
    let command = Options::command();
    let clap_error = |e: clap::Error| {
        let text = e.render().to_string();
        text.lines()
            .next()
            .unwrap_or_default()
            .trim_start_matches("error: ")
            .to_owned()
    };
    let matches = command
        .clone()
        .try_get_matches_from(std::iter::once("locks".to_owned()).chain(args.iter().cloned()))
        .map_err(clap_error)?;
    let mut opts = Options::from_arg_matches(&matches).map_err(clap_error)?;
    if opts.help {
        return Ok(None);
    }
    opts.args = args;
    // The options given on the command line, as `--name`, in the order of
    // the struct.
    let given: Vec<String> = command
        .get_arguments()
        .filter(|a| matches.value_source(a.get_id().as_str()) == Some(ValueSource::CommandLine))
        .filter_map(|a| Some(format!("--{}", a.get_long()?)))
        .collect();
    let has = |name: &str| given.iter().any(|g| g == name);
    let of = |set| -> Vec<&str> {
        let given = given.iter().map(String::as_str);
        given.filter(|g| in_set(set, g)).collect()
    };
    if opts.shared {
        opts.names = vec![Names::Shared];
    }
    opts.waits_given = has("--wait");
    opts.election_scenario = opts.scenario == "election";
    opts.semaphore_scenario = opts.scenario == "semaphore";
    opts.scale_scenario = opts.scenario == "scale";
    opts.compare = opts.backend == "compare";
    opts.sql = match opts.backend.as_str() {
        "postgres" => Some(quorum_lock::sql::Backend::Postgres),
        "mysql" | "mariadb" => Some(quorum_lock::sql::Backend::MySql),
        _ => None,
    };
    opts.sql_ours = opts.sql_systems.contains(&None);
    opts.sql_recipes = Recipe::ALL
        .into_iter()
        .filter(|r| opts.sql_systems.contains(&Some(*r)))
        .collect();
    let election_given = of(ELECTION_OPTIONS);
    if !opts.election_scenario && !election_given.is_empty() {
        return Err(format!(
            "{} only apply to --scenario election",
            election_given.join(", ")
        ));
    }
    let scale_given = of(SCALE_OPTIONS);
    if opts.scale_scenario {
        let refused = [of(LOCK_OPTIONS), of(LIST_OPTIONS), of("--transport")].concat();
        if !refused.is_empty() {
            return Err(format!(
                "--scenario scale sets its own load (one server over TCP); drop {}",
                refused.join(", ")
            ));
        }
        return Ok(Some(opts));
    }
    if !scale_given.is_empty() {
        return Err(format!(
            "{} only apply to --scenario scale",
            scale_given.join(", ")
        ));
    }
    if opts.semaphore_scenario {
        semaphore_defaults(&mut opts, &given, &has)?;
        return Ok(Some(opts));
    }
    if has("--permits") {
        return Err("--permits only applies to --scenario semaphore".into());
    }
    if opts.election_scenario {
        let lock_given = of(LOCK_OPTIONS);
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
        if !has("--transport") {
            opts.transport = Transport::Tcp;
        }
        if !has("--seconds") {
            opts.seconds = 60.0;
        }
        // Counted only when asked: the counters are FaultyLockers, which
        // take a mutex per call.
        if !has("--count-rpcs") {
            opts.count_rpcs = false;
        }
        return Ok(Some(opts));
    }
    let chose = of(LIST_OPTIONS);
    if opts.matrix && !chose.is_empty() {
        return Err(format!(
            "--matrix chooses nodes, clients, names and mix itself; drop {}",
            chose.join(", ")
        ));
    }
    let chose_names = has("--names") || has("--shared");
    if opts.backend == "redis" {
        own_set(&opts, &has, [
            "--backend redis reaches its lockers over Redis; drop --transport",
            "--backend redis runs its own set; drop --matrix",
            "--backend redis measures write locks only (rslock and SET NX have no read mode); drop --mix",
        ])?;
        opts.transport = Transport::Redis;
        if !has("--nodes") {
            opts.nodes = vec![1, 3, 5];
        }
    } else if opts.sql.is_some() {
        own_set(&opts, &has, [
            "--backend postgres and mysql reach the database over SQL; drop --transport",
            "--backend postgres and mysql run their own set; drop --matrix",
            "--backend postgres and mysql measure write locks only (the recipes have no read mode); drop --mix",
        ])?;
        if has("--nodes") {
            return Err("--backend postgres and mysql measure a Dsync over one SqlLocker, beside recipes on the same server; drop --nodes".into());
        }
        opts.nodes = vec![1];
    } else if opts.compare {
        own_set(&opts, &has, [
            "--backend compare measures ours over TCP and over Redis itself; drop --transport",
            "--backend compare runs its own set; drop --matrix",
            "--backend compare measures write locks only (the others have no read mode); drop --mix",
        ])?;
        if has("--wait") {
            return Err(
                "--backend compare measures ours as it ships, waiting in line (push); drop --wait"
                    .into(),
            );
        }
        if !has("--nodes") {
            opts.nodes = vec![3];
        } else if opts.nodes.len() != 1 {
            return Err(
                "--backend compare: give one --nodes value (the cluster size of ours and rslock)"
                    .into(),
            );
        }
        if !has("--seconds") {
            opts.seconds = 3.0;
        }
    }
    if opts.sql.is_none() && given.iter().any(|o| o.starts_with("--sql-")) {
        return Err(
            "--sql-url, --sql-systems and --sql-counters only apply to --backend postgres or mysql"
                .into(),
        );
    }
    if opts.backend != "lockers" && !chose_names {
        opts.names = vec![Names::Own, Names::Shared];
    }
    Ok(Some(opts))
}

/// Checks and completes the options of `--scenario semaphore`: one value
/// each of `--nodes`, `--clients`, `--hold` and `--wait`.
fn semaphore_defaults(
    opts: &mut Options,
    given: &[String],
    has: &dyn Fn(&str) -> bool,
) -> Result<(), String> {
    let allowed = "--hold --clients --nodes --wait --max-locks --warmup";
    let refused: Vec<&str> = given
        .iter()
        .map(String::as_str)
        .filter(|o| in_set(LOCK_OPTIONS, o) || in_set(LIST_OPTIONS, o))
        .filter(|o| !in_set(allowed, o))
        .collect();
    if !refused.is_empty() {
        return Err(format!(
            "--scenario semaphore sets its own load (one semaphore, write permits); drop {}",
            refused.join(", ")
        ));
    }
    let one = |name: &str, n: usize| match (has(name), n) {
        (true, 1) => Ok(true),
        (true, _) => Err(format!("--scenario semaphore: give one {name} value")),
        _ => Ok(false),
    };
    let s = &mut opts.semaphore;
    if one("--nodes", opts.nodes.len())? {
        s.nodes = opts.nodes[0];
    }
    if one("--clients", opts.clients.len())? {
        s.clients = opts.clients[0];
    }
    if one("--hold", opts.holds.len())? {
        s.hold = opts.holds[0];
    }
    if one("--wait", opts.waits.len())? {
        s.wait = opts.waits[0];
    }
    if !has("--seconds") {
        opts.seconds = 3.0;
    }
    Ok(())
}

/// The checks of every backend that runs its own set: it picks the
/// transport, the set and the mix (write locks only) itself. `drop` holds
/// the error for each of --transport, --matrix and --mix given.
fn own_set(opts: &Options, has: &dyn Fn(&str) -> bool, drop: [&str; 3]) -> Result<(), String> {
    let given = [has("--transport"), opts.matrix, opts.mixes != [Mix::Write]];
    match given.iter().position(|&g| g) {
        Some(i) => Err(drop[i].into()),
        None => Ok(()),
    }
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

fn list<T>(value: &str, item: impl Fn(&str) -> Result<T, String>) -> Result<Vec<T>, String> {
    value.split(',').map(|s| item(s.trim())).collect()
}

/// The stores of `--stores`, each once; `none` measures none.
fn stores(s: &str) -> Result<Vec<String>, String> {
    if s == "none" {
        return Ok(Vec::new());
    }
    let mut given: Vec<String> = Vec::new();
    for store in s.split(',') {
        if !["redis", "postgres", "mysql"].contains(&store) {
            return Err(format!(
                "{store:?}: expected redis, postgres or mysql (or none)"
            ));
        }
        if !given.iter().any(|g| g == store) {
            given.push(store.to_owned());
        }
    }
    Ok(given)
}

/// Sizes in increasing order, each from 1 to `max`; `none` skips the part.
fn sizes(s: &str, max: usize) -> Result<Vec<usize>, String> {
    if s == "none" {
        return Ok(Vec::new());
    }
    let sizes = list(s, |s| count(s, 1, max))?;
    match sizes.windows(2).all(|w| w[0] < w[1]) {
        true => Ok(sizes),
        false => Err(format!("{s:?}: give the sizes in increasing order")),
    }
}

fn count(s: &str, min: usize, max: usize) -> Result<usize, String> {
    s.parse::<usize>()
        .ok()
        .filter(|n| (min..=max).contains(n))
        .ok_or_else(|| format!("{s:?}: expected a whole number from {min} to {max}"))
}

fn seconds(s: &str, min: f64, max: f64) -> Result<f64, String> {
    s.parse::<f64>()
        .ok()
        .filter(|v| v.is_finite() && *v >= min && *v <= max)
        .ok_or_else(|| format!("{s:?} is not a number of seconds in range (max {max})"))
}

fn on_off(s: &str) -> Result<bool, String> {
    match s {
        "on" => Ok(true),
        "off" => Ok(false),
        _ => Err(format!("expected on or off, got {s:?}")),
    }
}

fn nonempty(s: &str, what: &str) -> Result<String, String> {
    match s {
        "" => Err(format!("needs {what}")),
        s => Ok(s.to_owned()),
    }
}

fn names(s: &str) -> Result<Vec<Names>, String> {
    match s {
        "own" => Ok(vec![Names::Own]),
        "shared" => Ok(vec![Names::Shared]),
        "both" => Ok(vec![Names::Own, Names::Shared]),
        v => Err(format!("expected own, shared or both, got {v:?}")),
    }
}

fn mixes(s: &str) -> Result<Vec<Mix>, String> {
    match s {
        "write" => Ok(vec![Mix::Write]),
        "read90" => Ok(vec![Mix::Read90]),
        "both" => Ok(vec![Mix::Write, Mix::Read90]),
        v => Err(format!("expected write, read90 or both, got {v:?}")),
    }
}

fn transport(s: &str) -> Result<Transport, String> {
    match s {
        "inproc" => Ok(Transport::InProcess),
        "tcp" => Ok(Transport::Tcp),
        v => Err(format!("expected inproc or tcp, got {v:?}")),
    }
}

/// `0`, `yield`, a duration (a tokio sleep), `spin:DUR` or `exact:DUR`.
fn hold(s: &str) -> Result<Hold, String> {
    let (kind, time) = match s.split_once(':') {
        Some((kind @ ("spin" | "exact"), time)) => (kind, time),
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
}

fn waits(s: &str) -> Result<Vec<Wait>, String> {
    let waits = match s {
        "both" => vec![Wait::Push, Wait::Poll],
        v => list(v, |s| match s {
            "push" => Ok(Wait::Push),
            "poll" => Ok(Wait::Poll),
            s => Err(format!("expected push, poll or both, got {s:?}")),
        })?,
    };
    let mut seen = waits.clone();
    seen.dedup();
    if seen.len() != waits.len() || waits.len() > 2 {
        return Err("name push and poll at most once each".into());
    }
    Ok(waits)
}

fn validities(s: &str) -> Result<Vec<Duration>, String> {
    if s == "none" {
        return Ok(Vec::new());
    }
    list(s, |s| match duration(s)? {
        d if d.subsec_nanos() == 0 && (2..=600).contains(&d.as_secs()) => Ok(d),
        _ => Err(format!(
            "{s}: whole seconds from 2s to 600s (etcd's TTL is in seconds)"
        )),
    })
}

/// One of `--sql-systems`: ours (`None`) or a recipe.
fn system(s: &str) -> Result<Option<Recipe>, String> {
    match s {
        "ours" => Ok(None),
        "insert" => Ok(Some(Recipe::Insert)),
        "for-update" => Ok(Some(Recipe::ForUpdate)),
        "advisory" | "get_lock" => Ok(Some(Recipe::Advisory)),
        s => Err(format!(
            "expected ours, insert, for-update, advisory or get_lock, got {s:?}"
        )),
    }
}

fn metrics(s: &str) -> Result<bool, String> {
    match s {
        "off" => Ok(false),
        #[cfg(feature = "metrics")]
        "prometheus" => Ok(true),
        #[cfg(not(feature = "metrics"))]
        "prometheus" => Err("build the benchmark with its default feature metrics".into()),
        v => Err(format!("expected off or prometheus, got {v:?}")),
    }
}

fn redis_retry(s: &str) -> Result<Duration, String> {
    match duration(s)? {
        d if d.is_zero() || d > Duration::from_secs(1) => Err("must be in (0, 1s]".into()),
        d => Ok(d),
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
