//! Lock throughput, latency, CPU, fairness and RPC cost of quorum-lock, with
//! a single-node Redis lock measured in the same run as a baseline, side by
//! side with Redis, Redlock and etcd (`--backend compare`), and over
//! PostgreSQL and MariaDB beside the classic SQL lock recipes (`--backend
//! postgres`, `--backend mysql`).
//!
//! `cargo bench -p quorum-lock-benches --bench locks -- --help` lists the options; BENCHMARKS.md
//! has the results and how they were taken.
//!
//! Modules live under `benches/locks/` and are named with `#[path]` because
//! a bench crate root looks for modules beside itself, where Cargo would
//! take every file for a bench target of its own.

#[path = "locks/ceiling.rs"]
mod ceiling;
#[path = "locks/cli.rs"]
mod cli;
#[path = "locks/cli_help.rs"]
mod cli_help;
#[path = "locks/compare.rs"]
mod compare;
// Shared with the chaos and ceiling-server programs.
#[path = "context.rs"]
mod context;
#[path = "locks/counting.rs"]
mod counting;
#[path = "locks/counts.rs"]
mod counts;
#[path = "locks/election.rs"]
mod election;
#[path = "locks/election_child.rs"]
mod election_child;
#[path = "locks/election_report.rs"]
mod election_report;
#[path = "locks/etcd.rs"]
mod etcd;
#[path = "locks/etcd_election.rs"]
mod etcd_election;
#[path = "locks/ours.rs"]
mod ours;
#[path = "locks/out.rs"]
mod out;
#[path = "locks/redis_base.rs"]
mod redis_base;
#[path = "locks/redis_nodes.rs"]
mod redis_nodes;
#[path = "locks/redis_table.rs"]
mod redis_table;
#[path = "locks/report.rs"]
mod report;
#[path = "locks/scale.rs"]
mod scale;
#[path = "locks/scale_stores.rs"]
mod scale_stores;
#[path = "locks/scenario.rs"]
mod scenario;
#[path = "locks/semaphore.rs"]
mod semaphore;
#[path = "locks/servers.rs"]
mod servers;
#[path = "locks/sql_bench.rs"]
mod sql_bench;
#[path = "locks/sql_recipes.rs"]
mod sql_recipes;
#[path = "locks/sql_report.rs"]
mod sql_report;
#[path = "locks/sql_server.rs"]
mod sql_server;
// PostgreSQL and MariaDB servers of the run's own, shared with the tests.
#[path = "../tests/sql_support/mod.rs"]
mod sql_support;
// The ports those servers listen on.
#[path = "../tests/common/ports.rs"]
mod ports;
#[path = "locks/stats.rs"]
mod stats;

use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::time::Duration;

use cli::{Flavor, Options, RedisMode};
use context::Context;
use out::say;
use out::Machine;
use redis_base::{BaselineKey, RedisServer};
use report::Row;
use scenario::{Mix, Scenario};
use stats::Summary;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    // A candidate of `--scenario election` that the run kills (failover).
    if args.first().map(String::as_str) == Some("--election-child") {
        std::process::exit(election_child::child(&args[1..]));
    }
    let opts = match cli::parse(args) {
        Ok(Some(opts)) => opts,
        Ok(None) => {
            let _ = std::io::stdout().lock().write_all(cli::HELP.as_bytes());
            return;
        }
        Err(err) => {
            eprintln!("locks: {err}");
            std::process::exit(2);
        }
    };
    // Everything that owns a process or a file is dropped inside `run`,
    // before exit, so the redis-server is gone whichever way it ends.
    if let Err(err) = run(&opts) {
        eprintln!("locks: {err}");
        std::process::exit(1);
    }
}

/// A fresh runtime per measurement, so tasks a run left behind (background
/// releases, keepers) cannot eat into the next one.
fn runtime(opts: &Options) -> Result<tokio::runtime::Runtime, String> {
    let mut builder = match opts.flavor {
        Flavor::Multi => {
            let mut b = tokio::runtime::Builder::new_multi_thread();
            b.worker_threads(opts.threads);
            b
        }
        Flavor::Current => tokio::runtime::Builder::new_current_thread(),
    };
    builder
        .enable_all()
        .build()
        .context("cannot start a tokio runtime")
}

fn measure<F: std::future::Future<Output = Result<Summary, String>>>(
    opts: &Options,
    run: impl FnOnce() -> F,
) -> Result<Summary, String> {
    on_runtime(opts, Duration::from_secs(1), run())
}

/// Runs `work` on a fresh runtime, giving what it left behind `grace` to
/// end.
fn on_runtime<T>(
    opts: &Options,
    grace: Duration,
    work: impl std::future::Future<Output = Result<T, String>>,
) -> Result<T, String> {
    let rt = runtime(opts)?;
    let out = rt.block_on(work);
    rt.shutdown_timeout(grace);
    out
}

/// Starts the baseline server if it is wanted, installed and useful.
fn redis_server(opts: &Options, needed: bool) -> Result<(Option<RedisServer>, String), String> {
    if opts.redis != RedisMode::Off && !needed {
        return Ok((
            None,
            "not run: no write-only scenario to compare with".into(),
        ));
    }
    let words = ["--redis", "redis-server", "apt-get install -y redis-server"];
    servers::wanted(opts.redis, words, |binary| {
        let s = RedisServer::start(binary)?;
        let status = format!("{} (pid {}, 127.0.0.1:{})", s.version, s.pid(), s.port);
        Ok((s, status))
    })
}

/// One measurement of the lock runs, in the order they run.
enum Step {
    /// The Redis baseline of a write scenario's clients, names and hold
    /// (the scenario's index names its keys).
    Redis(usize, Scenario),
    /// One client alone, the serial rate a shared name is compared with.
    Serial(Scenario),
    /// The trivial client on trivial servers (`--ceiling on`, TCP).
    Ceiling(Scenario),
    /// Our client on the trivial servers.
    Trivial(Scenario),
    Ours(Scenario),
}

type CeilingKey = (usize, usize, scenario::Names, scenario::Hold);

fn baseline_key(s: &Scenario) -> BaselineKey {
    BaselineKey {
        clients: s.clients,
        names: s.names,
        hold: s.hold,
    }
}

fn ceiling_key(s: &Scenario) -> CeilingKey {
    (s.nodes, s.clients, s.names, s.hold)
}

/// Every measurement of the run: before each scenario, the Redis baseline
/// of its key (once per key, with `redis`), the serial references of it
/// and of the scenarios that differ from it only in the wait strategy (so
/// that push and poll of one scenario still run back to back), and with
/// `ceiling` its ceiling (once per key) and ours on the trivial servers.
fn plan(scenarios: &[Scenario], redis: bool, ceiling: bool) -> Vec<Step> {
    let mut baselines = HashSet::new();
    let mut references = HashSet::new();
    let mut ceilings = HashSet::new();
    let mut steps = Vec::new();
    for (index, &scenario) in scenarios.iter().enumerate() {
        if redis && scenario.mix == Mix::Write && baselines.insert(baseline_key(&scenario)) {
            steps.push(Step::Redis(index, scenario));
        }
        let same_but_wait = scenarios[index..].iter().filter(|s| {
            Scenario {
                wait: scenario.wait,
                ..**s
            } == scenario
        });
        for reference in same_but_wait.filter_map(Scenario::serial_reference) {
            if references.insert(reference) {
                steps.push(Step::Serial(reference));
            }
        }
        if ceiling {
            if ceilings.insert(ceiling_key(&scenario)) {
                steps.push(Step::Ceiling(scenario));
            }
            steps.push(Step::Trivial(scenario));
        }
        steps.push(Step::Ours(scenario));
    }
    steps
}

fn run(opts: &Options) -> Result<(), String> {
    #[cfg(feature = "metrics")]
    if opts.prometheus {
        install_prometheus()?;
    }
    if opts.election_scenario {
        return election::run(opts);
    }
    if opts.semaphore_scenario {
        return semaphore::run(opts);
    }
    if opts.scale_scenario {
        return scale::run(opts);
    }
    if let Some(backend) = opts.sql {
        return sql_bench::run(opts, backend);
    }
    if opts.transport == scenario::Transport::Redis {
        return redis_nodes::run(opts);
    }
    if opts.compare {
        return compare::run(opts);
    }
    let machine = Machine::read();
    let scenarios = opts.scenarios();
    let bounds = stats::Bounds::of(opts);
    let needs_redis = scenarios.iter().any(|s| s.mix == Mix::Write);
    let (server, redis_status) = redis_server(opts, needs_redis)?;

    let tcp = opts.transport == scenario::Transport::Tcp;
    let steps = plan(&scenarios, server.is_some(), tcp && opts.ceiling);
    let plan = out::Plan {
        title: "quorum-lock lock benchmark",
        setup: format!(
            ", rpc counting {}\nredis baseline: {redis_status}\n",
            if opts.count_rpcs { "on" } else { "off" },
        ),
        each: 0.05,
        columns: report::columns(),
    };
    let mut baseline: HashMap<BaselineKey, f64> = HashMap::new();
    let mut serial: HashMap<Scenario, f64> = HashMap::new();
    let mut ceilings: HashMap<CeilingKey, f64> = HashMap::new();
    let counts = opts.counts && tcp;
    let ours_on = |scenario: Scenario, kind: servers::Kind| {
        measure(opts, || ours::run_on(scenario, bounds, kind, counts))
    };
    let ours = |scenario: Scenario| ours_on(scenario, servers::Kind::Ours);
    let trivial = servers::Kind::Trivial {
        threads: opts.ceiling_threads,
    };
    let measure_row = |_, step: &Step, _: &[Row]| {
        Ok(match *step {
            Step::Redis(index, scenario) => {
                let server =
                    (server.as_ref()).ok_or("the Redis baseline was planned without a server")?;
                let key = baseline_key(&scenario);
                let summary = measure(opts, || redis_base::run(server, index, key, bounds, || {}))?;
                baseline.insert(key, summary.lsps);
                let one = Scenario {
                    nodes: 1,
                    ..scenario
                };
                Row::new("redis", one, summary)
            }
            Step::Serial(reference) => {
                let summary = ours(reference)?;
                serial.insert(reference, summary.lsps);
                Row {
                    serial_reference: true,
                    ..Row::new("ours", reference, summary)
                }
            }
            Step::Ceiling(scenario) => {
                let summary = measure(opts, || {
                    ceiling::run(scenario, bounds, opts.ceiling_threads, counts)
                })?;
                ceilings.insert(ceiling_key(&scenario), summary.lsps);
                let write = Scenario {
                    mix: Mix::Write,
                    ..scenario
                };
                Row::new("ceiling", write, summary)
            }
            Step::Trivial(scenario) => {
                let summary = ours_on(scenario, trivial)?;
                Row {
                    ceiling_lsps: ceilings.get(&ceiling_key(&scenario)).copied(),
                    ..Row::new("ours-triv", scenario, summary)
                }
            }
            Step::Ours(scenario) => {
                let summary = ours(scenario)?;
                Row {
                    ceiling_lsps: ceilings.get(&ceiling_key(&scenario)).copied(),
                    redis_lsps: match scenario.mix {
                        Mix::Write => baseline.get(&baseline_key(&scenario)).copied(),
                        Mix::Read90 => None,
                    },
                    serial_lsps: scenario
                        .serial_reference()
                        .and_then(|r| serial.get(&r).copied()),
                    ..Row::new("ours", scenario, summary)
                }
            }
        })
    };
    let rows = plan.run(opts, &machine, &steps, measure_row, report::row_notes)?;
    say(format!("\n{}", report::LEGEND));
    if let Some(server) = server {
        let pid = server.pid();
        drop(server);
        say(format!("stopped redis-server pid {pid}"));
    }
    out::save(opts, || report::json(opts, &machine, &redis_status, &rows))
}

/// Installs metrics-exporter-prometheus's recorder, as a service that
/// exports the library's metrics would: `_seconds` histograms with buckets
/// (what `histogram_quantile` needs; the same buckets as `quorum-lock
/// server --metrics`), and a thread that does the recorder's upkeep
/// (folding histogram samples) every second, as its HTTP listener would
/// between scrapes.
#[cfg(feature = "metrics")]
fn install_prometheus() -> Result<(), String> {
    use metrics_exporter_prometheus::{Matcher, PrometheusBuilder};
    const SECONDS_BUCKETS: &[f64] = &[
        0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
        0.5, 1.0, 2.5, 5.0, 10.0,
    ];
    let handle = PrometheusBuilder::new()
        .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), SECONDS_BUCKETS)
        .context("cannot set the histogram buckets")?
        .install_recorder()
        .context("cannot install the Prometheus recorder")?;
    std::thread::spawn(move || loop {
        std::thread::sleep(Duration::from_secs(1));
        handle.run_upkeep();
    });
    Ok(())
}
