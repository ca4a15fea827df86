//! Lock throughput and latency on an in-process cluster.
//!
//! `cargo bench --bench locks -- [--nodes 5] [--clients 1,8,64] [--shared] [--seconds 2]`
//!
//! Each client task runs lock-then-unlock cycles for the given time, on its
//! own name or (with `--shared`) on one name for all. The table shows cycles
//! per second and the acquire latency percentiles. This is the seed of the
//! full harness; network servers, read mixes and baselines come later.

use std::sync::Arc;
use std::time::{Duration, Instant};

use quorum_lock::{Dsync, LocalLocker, NetLocker};

struct Options {
    nodes: usize,
    clients: Vec<usize>,
    shared: bool,
    seconds: f64,
}

fn parse() -> Result<Options, String> {
    let mut opts = Options {
        nodes: 5,
        clients: vec![1, 8, 64],
        shared: false,
        seconds: 2.0,
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = |name: &str| args.next().ok_or(format!("{name} needs a value"));
        match arg.as_str() {
            "--nodes" => {
                opts.nodes = value("--nodes")?
                    .parse()
                    .map_err(|e| format!("--nodes: {e}"))?
            }
            "--clients" => {
                opts.clients = value("--clients")?
                    .split(',')
                    .map(|c| c.parse().map_err(|e| format!("--clients: {e}")))
                    .collect::<Result<_, _>>()?
            }
            "--shared" => opts.shared = true,
            "--seconds" => {
                opts.seconds = value("--seconds")?
                    .parse()
                    .map_err(|e| format!("--seconds: {e}"))?
            }
            // cargo bench passes --bench to every harness.
            "--bench" => {}
            other => return Err(format!("unknown option {other}")),
        }
    }
    if opts.nodes == 0
        || opts.clients.contains(&0)
        || !(opts.seconds > 0.0 && opts.seconds <= 600.0)
    {
        return Err("--nodes and --clients must be positive, --seconds in (0, 600]".into());
    }
    Ok(opts)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}

async fn run(nodes: usize, clients: usize, shared: bool, seconds: f64) -> (usize, Vec<Duration>) {
    let lockers: Vec<Arc<dyn NetLocker>> = (0..nodes)
        .map(|_| Arc::new(LocalLocker::new()) as Arc<dyn NetLocker>)
        .collect();
    let ds = Dsync::new(lockers).expect("at least one node");
    let stop = Instant::now() + Duration::from_secs_f64(seconds);
    let tasks: Vec<_> = (0..clients)
        .map(|c| {
            let name = if shared {
                "shared".to_string()
            } else {
                format!("client-{c}")
            };
            let mutex = ds.rw_mutex([name]).expect("valid name");
            tokio::spawn(async move {
                let mut latencies = Vec::new();
                // Bounded by time and by count.
                while Instant::now() < stop && latencies.len() < 50_000_000 {
                    let asked = Instant::now();
                    let guard = mutex.lock().await.expect("lock");
                    latencies.push(asked.elapsed());
                    guard.unlock().await.expect("unlock");
                }
                latencies
            })
        })
        .collect();
    let mut all = Vec::new();
    for task in tasks {
        all.extend(task.await.expect("client task"));
    }
    all.sort_unstable();
    (all.len(), all)
}

fn main() {
    let opts = match parse() {
        Ok(opts) => opts,
        Err(err) => {
            eprintln!("locks: {err}");
            std::process::exit(2);
        }
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    println!(
        "{:>5} {:>7} {:>7} {:>12} {:>10} {:>10} {:>10} {:>10}",
        "nodes", "clients", "names", "cycles/s", "p50", "p90", "p99", "max"
    );
    for &clients in &opts.clients {
        let (count, lat) = runtime.block_on(run(opts.nodes, clients, opts.shared, opts.seconds));
        println!(
            "{:>5} {:>7} {:>7} {:>12.0} {:>10?} {:>10?} {:>10?} {:>10?}",
            opts.nodes,
            clients,
            if opts.shared { "shared" } else { "own" },
            count as f64 / opts.seconds,
            percentile(&lat, 50.0),
            percentile(&lat, 90.0),
            percentile(&lat, 99.0),
            lat.last().copied().unwrap_or_default(),
        );
    }
}
