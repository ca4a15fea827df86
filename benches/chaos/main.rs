//! A chaos run with real processes: `quorum-lock server`s on loopback,
//! clients fighting over a few names, and a seeded schedule of faults:
//! servers killed and restarted (in quarantine), paused with SIGSTOP for
//! less and more than the validity, cut off, slowed down or disconnected
//! by a proxy in front of each, and clients whose refreshes are
//! blackholed for longer than the validity. At the end a checker goes over
//! the ledger of every grant and reports violations (must be 0), late loss
//! reports (must be 0), fencing-token regressions (must be 0), availability
//! with a quorum of servers healthy and without, and entries left on the
//! servers once the validity has passed (must be 0).
//!
//! ```sh
//! cargo build --release -p quorum-lock-cli
//! cargo run --release -p quorum-lock-benches --bin chaos -- --servers 5 --clients 64 --seconds 60 --seed 7
//! ```
//!
//! `--no-faults` runs the same clients without the fault schedule, to show
//! what contention alone costs.
//!
//! `--permits K` checks the command line's semaphore instead (permits.rs):
//!
//! ```sh
//! cargo run --release -p quorum-lock-benches --bin chaos -- --permits 3 --runners 12 --servers 5 --seconds 20 --seed 1 --validity-ms 3000
//! ```
//!
//! With `CHAOS_DEBUG` set, the report lists every failed acquire with the
//! grants on its names during its wait, and every grant made while a
//! majority was silent with the faults around it. The same seed gives the
//! same fault schedule (the interleaving of real processes still varies).
//! Exit status 1 means a check failed; the report then names the seed, the
//! grants involved and the faults around them.

use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use quorum_lock::net::{RemoteConfig, RemoteLocker};
use quorum_lock::{Dsync, Lease, NetLocker};
use tokio::time::Instant;

mod clients;
#[path = "../context.rs"]
mod context;
mod ledger;
mod permits;
mod proxy;
mod schedule;
mod servers;

use ledger::{availability, offset, overlaps, token_regressions, Ledger, Overlap};
use proxy::{Proxy, Switch};
use servers::ServerSet;

#[derive(clap::Parser)]
#[command(disable_help_flag = true, args_override_self = true)]
struct Settings {
    #[arg(short, long)]
    help: bool,
    #[arg(long, default_value = "5", value_parser = |s: &str| within::<usize>(s, 1, 9))]
    servers: usize,
    #[arg(long, default_value = "64", value_parser = |s: &str| within::<usize>(s, 1, 256))]
    clients: usize,
    #[arg(long, default_value = "60", value_parser = |s: &str| within::<u64>(s, 5, 3600))]
    seconds: u64,
    #[arg(long, default_value_t = rand::random(), value_parser = |s: &str| within::<u64>(s, 0, u64::MAX))]
    seed: u64,
    #[arg(long = "validity-ms", default_value = "2000",
          value_parser = |s: &str| within(s, 500, 60_000).map(Duration::from_millis))]
    validity: Duration,
    #[arg(long, value_parser = |s: &str| within::<usize>(s, 1, 4096))]
    names: Option<usize>,
    /// No fault schedule: the same clients on healthy servers, to tell what
    /// contention alone costs.
    #[arg(long = "no-faults")]
    calm: bool,
    /// `--permits K`: the semaphore run of permits.rs instead.
    #[arg(long, value_parser = |s: &str| within::<usize>(s, 1, 100))]
    permits: Option<usize>,
    /// How many `run --permits` loops.
    #[arg(long, default_value = "12", value_parser = |s: &str| within::<usize>(s, 1, 64))]
    runners: usize,
    /// How many runs must complete. Default: K per second of the run.
    #[arg(long, value_parser = |s: &str| within::<u64>(s, 0, u64::MAX))]
    min_runs: Option<u64>,
}

impl Settings {
    fn names(&self) -> usize {
        self.names
            .unwrap_or_else(|| clients::default_names(self.clients))
    }
}

const USAGE: &str =
    "usage: chaos [--servers N (1..=9, default 5)] [--clients N (1..=256, default 64)] \
                     [--seconds N (5..=3600, default 60)] [--seed N (default: random)] \
                     [--validity-ms N (500..=60000, default 2000)] \
                     [--names N (1..=4096, default: clients / 2, at least 8)] [--no-faults]\n       \
                     chaos --permits K (1..=100) [--runners N (1..=64, default 12)] \
                     [--min-runs N (default: K x --seconds)] [--servers N] [--seconds N] [--seed N] \
                     [--validity-ms N]";

/// A mutex's guard, poisoned or not: a panicked holder has already failed
/// the run, and what it left is still worth reporting.
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A whole number in `lo..=hi`.
fn within<T: TryFrom<u64>>(value: &str, lo: u64, hi: u64) -> Result<T, String> {
    let number: u64 = (value.parse()).map_err(|_| format!("{value:?} is not a whole number"))?;
    (lo..=hi)
        .contains(&number)
        .then(|| T::try_from(number).ok())
        .flatten()
        .ok_or_else(|| format!("must be in {lo}..={hi}, not {number}"))
}

fn settings() -> Result<Settings, String> {
    use clap::Parser as _;
    let s = Settings::try_parse().map_err(|e| {
        let text = e.render().to_string();
        let first = text.lines().next().unwrap_or_default();
        format!("{}\n{USAGE}", first.trim_start_matches("error: "))
    })?;
    if s.help {
        return Err(USAGE.into());
    }
    Ok(s)
}

fn main() -> ExitCode {
    // A run's command in the --permits run: this program again.
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some(permits::WORK) {
        return permits::work(&args[2..]);
    }
    let settings = match settings() {
        Ok(s) => s,
        Err(msg) => {
            eprintln!("{msg}");
            return ExitCode::from(2);
        }
    };
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("error")),
        )
        .with_writer(std::io::stderr)
        .init();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(err) => {
            eprintln!("cannot start a tokio runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    if let Some(k) = settings.permits {
        return permits_run(&runtime, &settings, k);
    }
    println!(
        "chaos run: seed {}, {} servers, {} clients on {} names, {} s, validity {:?}{}",
        settings.seed,
        settings.servers,
        settings.clients,
        settings.names(),
        settings.seconds,
        settings.validity,
        if settings.calm { ", no faults" } else { "" }
    );
    servers::exit(runtime.block_on(run(&settings)), || {
        format!(
            "--seed {} --servers {} --clients {} --seconds {} --names {} --validity-ms {}",
            settings.seed,
            settings.servers,
            settings.clients,
            settings.seconds,
            settings.names(),
            settings.validity.as_millis()
        )
    })
}

/// `--permits K`: the semaphore run of permits.rs.
fn permits_run(runtime: &tokio::runtime::Runtime, s: &Settings, k: usize) -> ExitCode {
    println!(
        "chaos run of `quorum-lock run --permits {k}`: seed {}, {} servers, {} runners, {} s, \
         validity {:?}{}",
        s.seed,
        s.servers,
        s.runners,
        s.seconds,
        s.validity,
        if s.calm { ", no faults" } else { "" }
    );
    servers::exit(runtime.block_on(permits::run(s, k)), || {
        format!(
            "--permits {k} --runners {} --seed {} --servers {} --seconds {} --validity-ms {}{}",
            s.runners,
            s.seed,
            s.servers,
            s.seconds,
            s.validity.as_millis(),
            if s.calm { " --no-faults" } else { "" }
        )
    })
}

/// The whole run; whether every check passed.
async fn run(s: &Settings) -> Result<bool, String> {
    let validity = s.validity;
    let lease = Lease {
        validity,
        refresh_interval: validity / 4,
        safety_margin: validity * 3 / 10,
    };
    let set = ServerSet::start_blocking(s.servers, validity).await?;
    let addrs = set.addrs();
    let (token, admin) = (set.client_token().to_owned(), set.admin_token().to_owned());
    let set = Arc::new(set);

    let server_switches: Vec<Switch> = (0..s.servers).map(|_| Switch::default()).collect();
    let client_switches: Vec<Switch> = (0..s.clients).map(|_| Switch::default()).collect();
    let mut proxies: Vec<Proxy> = Vec::new();
    let mut dsyncs = Vec::new();
    for (c, client_switch) in client_switches.iter().enumerate() {
        let mut lockers: Vec<Arc<dyn NetLocker>> = Vec::new();
        for (addr, server_switch) in addrs.iter().zip(&server_switches) {
            let proxy = Proxy::start(*addr, vec![server_switch.clone(), client_switch.clone()])
                .await
                .map_err(|e| format!("cannot start a proxy for {addr}: {e}"))?;
            let locker = RemoteLocker::connect(proxy.addr().to_string(), RemoteConfig::new(&token))
                .await
                .map_err(|e| format!("client {c} cannot reach {addr}: {e}"))?;
            lockers.push(Arc::new(locker));
            proxies.push(proxy);
        }
        let ds = Dsync::builder(lockers)
            .owner(format!("chaos-client-{c}"))
            .lease(lease)
            .build()
            .map_err(|e| format!("client {c}: {e}"))?;
        dsyncs.push(ds);
    }

    let run_for = Duration::from_secs(s.seconds);
    let events = if s.calm {
        Vec::new()
    } else {
        schedule::draw(s.seed, s.servers, s.clients, run_for, validity)
    };
    let fault_log: Arc<Mutex<Vec<(Duration, String)>>> = Arc::default();
    let start = Instant::now();
    let taken: Arc<Mutex<Vec<schedule::Event>>> = Arc::default();
    let chaos = tokio::spawn(schedule::apply(
        events.clone(),
        set.clone(),
        (server_switches.clone(), client_switches.clone()),
        start,
        taken.clone(),
        {
            let fault_log = fault_log.clone();
            move |line: String| {
                let at = start.elapsed();
                tracing::info!("{at:>8.3?} {line}");
                lock(&fault_log).push((at, line));
            }
        },
    ));

    let ledger = Arc::new(Ledger::default());
    // How late the clients' runtime runs a task that is due: with every
    // process of the run on the same cores, a grant can be recorded this
    // long after its quorum answered.
    let lag = tokio::spawn({
        let stop = start + run_for;
        async move {
            let tick = Duration::from_millis(10);
            let mut lags = Vec::new();
            while Instant::now() < stop {
                let asked = Instant::now();
                tokio::time::sleep(tick).await;
                lags.push(asked.elapsed().saturating_sub(tick));
            }
            lags.sort_unstable();
            let at = |q: f64| {
                lags.get(((lags.len() as f64 * q) as usize).min(lags.len().saturating_sub(1)))
                    .copied()
                    .unwrap_or_default()
            };
            (at(0.99), lags.last().copied().unwrap_or_default())
        }
    });
    let gates = clients::gates(s.names());
    let stop = start + run_for;
    let mut tasks = Vec::new();
    for (c, ds) in dsyncs.into_iter().enumerate() {
        tasks.push(tokio::spawn(clients::run(
            c,
            ds,
            s.seed,
            stop,
            lease.refresh_interval,
            ledger.clone(),
            gates.clone(),
        )));
    }
    // A client ends its last acquire within its timeout and its last hold
    // within 1.5 refresh intervals; the bound only guards against a hang.
    let bound = run_for + clients::ACQUIRE_TIMEOUT + validity * 4 + Duration::from_secs(30);
    for task in tasks {
        let left = bound.saturating_sub(start.elapsed());
        match tokio::time::timeout(left, task).await {
            Ok(Ok(())) => {}
            Ok(Err(err)) => return Err(format!("a client task failed: {err}")),
            Err(_) => return Err(format!("a client did not finish within {bound:?}")),
        }
    }
    let left = bound.saturating_sub(start.elapsed()) + Duration::from_secs(30);
    match tokio::time::timeout(left, chaos).await {
        Ok(Ok(Ok(()))) => {}
        Ok(Ok(Err(err))) => return Err(format!("the fault schedule did not end cleanly: {err}")),
        Ok(Err(err)) => return Err(format!("the fault schedule failed: {err}")),
        Err(_) => return Err("the fault schedule did not end".into()),
    }
    let ran_for = start.elapsed();
    let (lag_p99, lag_max) = lag.await.unwrap_or_default();

    // Every server healthy again, and every entry of the run has had a
    // validity to expire: whatever is left is kept alive by something.
    tokio::time::sleep(validity * 2).await;
    let leaked = servers::leftovers(&addrs, &admin).await?;
    drop(proxies);

    println!(
        "the clients' runtime ran due timers late by {lag_p99:.0?} at p99, {lag_max:.0?} at most"
    );
    let events_by_kind = schedule::counts(&events);
    // Which servers were down when is read from the faults as they took
    // effect, not as scheduled: under load they begin and end late.
    let mut taken = lock(&taken).clone();
    taken.sort_by_key(|e| e.at);
    let ok = report(
        s,
        &ledger,
        &taken,
        &events_by_kind,
        &fault_log,
        &leaked,
        start,
        ran_for,
    );
    if !ok {
        println!("server logs kept in {}", set.keep_dir().display());
    }
    // The last reference: the servers stop here.
    drop(set);
    Ok(ok)
}

#[allow(clippy::too_many_arguments)]
fn report(
    s: &Settings,
    ledger: &Ledger,
    events: &[schedule::Event],
    by_kind: &[(&'static str, usize)],
    fault_log: &Mutex<Vec<(Duration, String)>>,
    leaked: &[String],
    start: Instant,
    ran_for: Duration,
) -> bool {
    let grants = ledger.grants();
    let attempts = ledger.attempts();
    let overlaps = overlaps(&grants);
    let (late, exclusion): (Vec<&Overlap>, Vec<&Overlap>) =
        overlaps.iter().partition(|o| o.is_late_loss());
    let regressions = token_regressions(&grants);
    let refused = ledger.refused_tokens();
    let losses = grants.iter().filter(|g| g.end == ledger::End::Lost).count();
    let tokens = grants.iter().filter(|g| g.token.is_some()).count();
    let writes = grants
        .iter()
        .filter(|g| g.mode == quorum_lock::LockMode::Write)
        .count();

    // A quorum of servers is healthy when at most n - W are impaired. An
    // attempt counts as healthy when that held for its whole span, from
    // its start until it was granted or gave up.
    let tolerated = s.servers - (s.servers / 2 + 1);
    let most = |a: &ledger::Attempt| {
        schedule::most_unavailable(
            events,
            offset(start, a.at),
            offset(start, a.ended),
            s.validity,
        )
    };
    let (healthy, unhealthy): (Vec<&ledger::Attempt>, Vec<&ledger::Attempt>) =
        attempts.iter().partition(|a| most(a) <= tolerated);
    let (ok_share, ok_count) = availability(&healthy);
    let (bad_share, bad_count) = availability(&unhealthy);
    // Grants made while a majority was impaired, and how many of those
    // had a majority silent (killed, in quarantine, stopped or cut off) as
    // opposed to slow: a slow server's replies time out, but its pushed
    // grants still count. Grants with a silent majority must not happen.
    let in_outage: Vec<Duration> = attempts
        .iter()
        .filter(|a| a.granted)
        .map(|a| offset(start, a.ended))
        .filter(|&t| schedule::unavailable_at(events, t, s.validity) > tolerated)
        .collect();
    let with_silent_majority = in_outage
        .iter()
        .filter(|&&t| schedule::silent_at(events, t, s.validity) > tolerated)
        .count();
    // How long after a majority went silent each such grant came: a grant
    // whose quorum answered just before a kill is returned a little later.
    // Each grant made while a majority was silent, with the faults in
    // effect around it.
    if std::env::var_os("CHAOS_DEBUG").is_some() {
        for &t in &in_outage {
            let Some(since) = schedule::silent_majority_since(events, t, s.validity, tolerated)
            else {
                continue;
            };
            println!(
                "GRANT IN SILENCE at {t:.3?}, {:.3?} after the majority went silent",
                t - since
            );
            for e in events.iter().filter(|e| {
                e.at <= t
                    && e.at + e.fault.duration() + s.validity * 2 >= since
                    && e.fault.impairs()
            }) {
                println!(
                    "    {} (took {:.3?})",
                    schedule::describe(e),
                    e.fault.duration()
                );
            }
        }
    }
    let latest_in_silence = in_outage
        .iter()
        .filter_map(|&t| {
            schedule::silent_majority_since(events, t, s.validity, tolerated).map(|since| t - since)
        })
        .max();

    println!("ran for {ran_for:.1?}");
    println!(
        "operations: {} acquire attempts, {} grants ({} write, {} read), {} losses reported, {} fencing tokens",
        attempts.len(),
        grants.len(),
        writes,
        grants.len() - writes,
        losses,
        tokens
    );
    let kinds: Vec<String> = by_kind.iter().map(|(k, n)| format!("{k} {n}")).collect();
    println!("faults injected: {}", kinds.join(", "));
    println!(
        "mutual-exclusion violations: {}   late loss reports: {}   guards lost at birth: {}",
        exclusion.len(),
        late.len(),
        ledger.lost_at_birth_count()
    );
    println!(
        "fencing: {} token regressions, {} tokens refused while their holder held the lock",
        regressions.len(),
        refused.len()
    );
    let share = |share: f64, count: usize| {
        if count == 0 {
            "no attempts".to_owned()
        } else {
            format!("{:.2}% of {count}", share * 100.0)
        }
    };
    println!(
        "availability (acquire granted within {:?}): {} of the attempts that never saw more than {} of {} servers unavailable; \
         {} of those that did; {} granted while more were unavailable ({} of them while more were silent, not just slow{})",
        clients::ACQUIRE_TIMEOUT,
        share(ok_share, ok_count),
        tolerated,
        s.servers,
        share(bad_share, bad_count),
        in_outage.len(),
        with_silent_majority,
        latest_in_silence
            .map(|d| format!(", each at most {d:.0?} after the majority went silent"))
            .unwrap_or_default(),
    );
    // What held the names of each failed acquire while it waited.
    if std::env::var_os("CHAOS_DEBUG").is_some() {
        for a in healthy.iter().filter(|a| !a.granted) {
            let during: Vec<&ledger::Grant> = grants
                .iter()
                .filter(|g| {
                    g.resources.iter().any(|r| a.resources.contains(r))
                        && g.from < a.ended
                        && g.until > a.at
                })
                .collect();
            let busy: Duration = during
                .iter()
                .map(|g| {
                    g.until
                        .min(a.ended)
                        .saturating_duration_since(g.from.max(a.at))
                })
                .sum();
            println!("FAILED client {} {:?} {:?} at {:?}..{:?}: {} grants on its names during, busy {:?}", a.client, a.mode, a.resources, offset(start, a.at), offset(start, a.ended), during.len(), busy);
            for g in during.iter().take(12) {
                println!(
                    "    client {} {:?} {:?} {:?}..{:?}",
                    g.client,
                    g.mode,
                    g.resources,
                    offset(start, g.from),
                    offset(start, g.until)
                );
            }
        }
    }
    let reasons: Vec<String> = ledger::failures(&healthy)
        .into_iter()
        .map(|(why, n)| format!("{n} x {why}"))
        .collect();
    if !reasons.is_empty() {
        // Holders whose lock outlived their use of it: lost, or let go
        // while their client was cut off (the unlock never arrived).
        let stuck: Vec<&ledger::Grant> = grants
            .iter()
            .filter(|g| {
                g.end == ledger::End::Lost
                    || schedule::client_cut_off_at(events, g.client, offset(start, g.until))
            })
            .collect();
        let cut_off_themselves = healthy
            .iter()
            .filter(|a| {
                !a.granted
                    && schedule::client_cut_off_during(
                        events,
                        a.client,
                        offset(start, a.at),
                        offset(start, a.ended),
                    )
            })
            .count();
        println!(
            "failed attempts with at most {tolerated} unavailable: {}; {cut_off_themselves} by a client cut off itself; \
             {} waited behind a holder whose client was cut off or lost its lock",
            reasons.join("; "),
            ledger::behind_stuck_holders(&healthy, &stuck, s.validity)
        );
    }
    println!(
        "entries left on the servers after the run: {}",
        leaked.len()
    );

    let failed = !overlaps.is_empty()
        || !regressions.is_empty()
        || !refused.is_empty()
        || !leaked.is_empty();
    if failed {
        let faults = lock(fault_log).clone();
        for o in overlaps.iter().chain(&regressions).take(5) {
            describe(o, start, s.validity, &faults);
        }
        for r in refused.iter().take(5) {
            println!("token refused while held: {r}");
        }
        for l in leaked.iter().take(10) {
            println!("left: {l}");
        }
    } else {
        println!("all checks passed");
    }
    !failed
}

fn describe(o: &Overlap, start: Instant, validity: Duration, faults: &[(Duration, String)]) {
    let show = |g: &ledger::Grant| {
        format!(
            "client {} uid {} {:?} {:?} held {:.3?}..{:.3?} ended {:?} token {:?}",
            g.client,
            g.uid,
            g.mode,
            g.resources,
            offset(start, g.from),
            offset(start, g.until),
            g.end,
            g.token
        )
    };
    println!(
        "on {}:\n  earlier: {}\n  later:   {}",
        o.resource,
        show(&o.earlier),
        show(&o.later)
    );
    let from = offset(start, o.earlier.from).saturating_sub(validity * 2);
    let until = offset(start, o.later.from) + validity;
    for (at, line) in faults.iter().filter(|(at, _)| *at >= from && *at <= until) {
        println!("  fault {at:>8.3?} {line}");
    }
}
