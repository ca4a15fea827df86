//! `chaos --permits K`: the command line's semaphore under process faults.
//! Runners loop `quorum-lock run --permits K` on one name against real
//! `quorum-lock server`s while servers are killed (and restarted in
//! quarantine) and paused with SIGSTOP, never more than a minority at
//! once. Each run's command is this program again (`chaos permit-work`),
//! which writes a `start` line when it begins and an `end` line when its
//! work is over or it is told to stop, both on the monotonic clock that
//! every process of the machine shares.
//!
//! The checks: at no instant do more than K commands run; no two run in
//! the same slot at once, and a slot's fencing tokens grow from one holder
//! to the next; enough runs completed (`--min-runs`); every run ended with
//! an expected exit code; no entry is left on the servers afterwards.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, ExitCode, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

use crate::context::Context;
use crate::lock;
use crate::schedule;
use crate::servers::{self, ServerSet};
use crate::Settings;

/// The first argument that makes this program a run's command instead of
/// a chaos run: `chaos permit-work FILE HOLD_MS`.
pub const WORK: &str = "permit-work";

/// The semaphore every runner takes a permit of.
const NAME: &str = "chaos-permits";

/// How long each command works, drawn per run.
const HOLD_MS: std::ops::RangeInclusive<u64> = 50..=250;

/// Exit codes a run may end with: its command's (0), no permit within
/// --timeout because all were held (75), too few servers reachable or in
/// quarantine (69), the permit lost while the command ran (79), and
/// SIGTERM from the harness at the hard stop (143).
const EXPECTED_CODES: [i32; 5] = [0, 75, 69, 79, 143];

/// Nanoseconds on CLOCK_MONOTONIC, the same clock in every process.
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime only writes the timespec we hand it.
    unsafe {
        libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts);
    }
    (ts.tv_sec as u64) * 1_000_000_000 + ts.tv_nsec as u64
}

static STOPPING: AtomicBool = AtomicBool::new(false);

extern "C" fn on_sigterm(_: libc::c_int) {
    // An atomic store is async-signal-safe.
    STOPPING.store(true, Ordering::SeqCst);
}

/// `chaos permit-work FILE HOLD_MS`: the command of each run. Writes
/// `start NS SLOT TOKEN`, works for HOLD_MS or until SIGTERM (which `run`
/// sends when the permit is lost), then writes `end NS done|stopped`.
pub fn work(args: &[String]) -> ExitCode {
    let [file, hold] = args else {
        eprintln!("usage: chaos {WORK} FILE HOLD_MS");
        return ExitCode::from(2);
    };
    let Ok(hold) = hold.parse::<u64>().map(Duration::from_millis) else {
        eprintln!("chaos {WORK}: HOLD_MS {hold:?} is not a whole number");
        return ExitCode::from(2);
    };
    // SAFETY: the handler only stores to an atomic.
    unsafe {
        let handler: extern "C" fn(libc::c_int) = on_sigterm;
        libc::signal(libc::SIGTERM, handler as libc::sighandler_t);
    }
    let var = |name: &str| std::env::var(name).unwrap_or_else(|_| "-".to_owned());
    let mut out = match OpenOptions::new().create(true).append(true).open(file) {
        Ok(out) => out,
        Err(err) => {
            eprintln!("chaos {WORK}: cannot open {file}: {err}");
            return ExitCode::FAILURE;
        }
    };
    let start = format!(
        "start {} {} {}\n",
        monotonic_ns(),
        var("QUORUM_LOCK_PERMIT_SLOT"),
        var("QUORUM_LOCK_FENCING_TOKEN")
    );
    if out.write_all(start.as_bytes()).is_err() {
        return ExitCode::FAILURE;
    }
    let until = Instant::now() + hold;
    while !STOPPING.load(Ordering::SeqCst) {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        std::thread::sleep(left.min(Duration::from_millis(2)));
    }
    let stopped = STOPPING.load(Ordering::SeqCst);
    let how = if stopped { "stopped" } else { "done" };
    let _ = out.write_all(format!("end {} {how}\n", monotonic_ns()).as_bytes());
    if stopped {
        ExitCode::from(128 + libc::SIGTERM as u8)
    } else {
        ExitCode::SUCCESS
    }
}

/// One `quorum-lock run` as the harness saw it.
struct Run {
    runner: usize,
    n: usize,
    /// When the harness started it (monotonic ns).
    began: u64,
    code: Option<i32>,
    /// When the harness saw the run exit (monotonic ns): after its command
    /// was gone.
    exited: u64,
    file: PathBuf,
    err: PathBuf,
}

/// What a command recorded, its end bounded by the run's exit when it
/// wrote none (killed before it could).
#[derive(Clone, Debug)]
struct Interval {
    runner: usize,
    n: usize,
    start: u64,
    end: u64,
    slot: Option<usize>,
    token: Option<u64>,
    how: String,
}

impl Run {
    fn interval(&self) -> Result<Option<Interval>, String> {
        let text = std::fs::read_to_string(&self.file).unwrap_or_default();
        let mut start = None;
        let mut end = None;
        for line in text.lines() {
            let fields: Vec<&str> = line.split_whitespace().collect();
            match fields[..] {
                ["start", ns, slot, token] => {
                    let ns = ns.parse::<u64>().map_err(|_| self.bad(line))?;
                    start = Some((ns, slot.parse().ok(), token.parse().ok()));
                }
                ["end", ns, how] => {
                    let ns = ns.parse::<u64>().map_err(|_| self.bad(line))?;
                    end = Some((ns, how.to_owned()));
                }
                _ => return Err(self.bad(line)),
            }
        }
        let Some((start, slot, token)) = start else {
            return match end {
                None => Ok(None),
                Some(_) => Err(self.bad("an end line without a start line")),
            };
        };
        let (end, how) = end.unwrap_or((self.exited, "no end line".to_owned()));
        Ok(Some(Interval {
            runner: self.runner,
            n: self.n,
            start,
            end,
            slot,
            token,
            how,
        }))
    }

    fn bad(&self, line: &str) -> String {
        format!(
            "run {}-{} recorded {line:?} in {}",
            self.runner,
            self.n,
            self.file.display()
        )
    }

    fn stderr(&self) -> String {
        std::fs::read_to_string(&self.err)
            .unwrap_or_default()
            .trim()
            .to_owned()
    }
}

/// What every runner needs.
struct Loop {
    bin: PathBuf,
    exe: PathBuf,
    dir: PathBuf,
    nodes: String,
    token_file: PathBuf,
    permits: usize,
    validity: Duration,
    seed: u64,
    /// No run starts after this.
    stop: Instant,
    /// Runs still going are sent SIGTERM then, SIGKILL 5 s later.
    hard_stop: Instant,
}

/// Runner `i`: one run after the other until `stop`.
fn runner(i: usize, l: &Loop) -> Result<Vec<Run>, String> {
    let mut rng = StdRng::seed_from_u64(l.seed.wrapping_add(1 + i as u64));
    let mut runs = Vec::new();
    let owner = format!("runner-{i}");
    let validity = format!("{}ms", l.validity.as_millis());
    let permits = l.permits.to_string();
    for n in 0.. {
        let now = Instant::now();
        if now >= l.stop {
            break;
        }
        let timeout = format!(
            "{}ms",
            (l.stop - now).max(Duration::from_secs(1)).as_millis()
        );
        let hold = rng.random_range(HOLD_MS).to_string();
        let file = l.dir.join(format!("run-{i}-{n}"));
        let err = l.dir.join(format!("run-{i}-{n}.err"));
        let stderr = File::create(&err).map_err(|e| format!("{}: {e}", err.display()))?;
        let mut command = Command::new(&l.bin);
        command
            .arg("run")
            .args(["--nodes", &l.nodes])
            .arg("--token-file")
            .arg(&l.token_file)
            .args(["--validity", &validity, "--connect-timeout", "1s"])
            .args(["--permits", &permits, "--owner", &owner])
            .args(["--timeout", &timeout, NAME, "--"])
            .arg(&l.exe)
            .arg(WORK)
            .arg(&file)
            .arg(&hold);
        for var in [
            "NODES",
            "TOKEN",
            "TOKEN_FILE",
            "TLS_CA",
            "TLS_CERT",
            "TLS_KEY",
            "REDIS",
        ] {
            command.env_remove(format!("QUORUM_LOCK_{var}"));
        }
        let began = monotonic_ns();
        let mut child = command
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", l.bin.display()))?;
        let mut termed = false;
        let status = loop {
            match child.try_wait() {
                Ok(Some(status)) => break status,
                Ok(None) => {}
                Err(err) => return Err(format!("cannot wait for a run: {err}")),
            }
            let now = Instant::now();
            if now >= l.hard_stop && !termed {
                // Our own child, not yet reaped: its pid is still its own.
                if let Ok(pid) = i32::try_from(child.id()) {
                    // SAFETY: kill(2) takes two integers.
                    unsafe {
                        libc::kill(pid, libc::SIGTERM);
                    }
                }
                termed = true;
            }
            if now >= l.hard_stop + Duration::from_secs(5) {
                let _ = child.kill();
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        runs.push(Run {
            runner: i,
            n,
            began,
            code: status.code(),
            exited: monotonic_ns(),
            file,
            err,
        });
    }
    Ok(runs)
}

/// The whole run; whether every check passed.
pub async fn run(s: &Settings, permits: usize) -> Result<bool, String> {
    let validity = s.validity;
    let set = ServerSet::start_blocking(s.servers, validity).await?;
    let addrs = set.addrs();
    let admin = set.admin_token().to_owned();
    let dir = set.dir().join("runs");
    std::fs::create_dir(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let set = Arc::new(set);

    let run_for = Duration::from_secs(s.seconds);
    // A minority of the servers at most, quarantine included.
    let most = s.servers.saturating_sub(1) / 2;
    let events = if s.calm {
        Vec::new()
    } else {
        schedule::draw_process_faults(s.seed, s.servers, most, run_for, validity)
    };
    let start = tokio::time::Instant::now();
    let origin = monotonic_ns();
    let taken: Arc<Mutex<Vec<schedule::Event>>> = Arc::default();
    let fault_log: Arc<Mutex<Vec<String>>> = Arc::default();
    let chaos = tokio::spawn(schedule::apply(
        events.clone(),
        set.clone(),
        (Vec::new(), Vec::new()),
        start,
        taken,
        {
            let fault_log = fault_log.clone();
            move |line: String| {
                tracing::info!("{line}");
                lock(&fault_log).push(line);
            }
        },
    ));

    let begun = Instant::now();
    let lp = Arc::new(Loop {
        bin: servers::binary()?,
        exe: std::env::current_exe().context("cannot find this program")?,
        dir: dir.clone(),
        nodes: addrs
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(","),
        token_file: set.dir().join("token"),
        permits,
        validity,
        seed: s.seed,
        stop: begun + run_for,
        hard_stop: begun + run_for + validity * 2 + Duration::from_secs(10),
    });
    let threads: Vec<_> = (0..s.runners)
        .map(|i| {
            let lp = Arc::clone(&lp);
            std::thread::spawn(move || runner(i, &lp))
        })
        .collect();
    let joined = tokio::task::spawn_blocking(move || {
        threads
            .into_iter()
            .map(|t| t.join().unwrap_or_else(|_| Err("a runner panicked".into())))
            .collect::<Vec<_>>()
    })
    .await
    .context("waiting for the runners failed")?;
    let ran_for = begun.elapsed();
    let mut runs = Vec::new();
    for result in joined {
        runs.extend(result?);
    }
    let schedule_result = match tokio::time::timeout(Duration::from_secs(60), chaos).await {
        Ok(Ok(result)) => result,
        Ok(Err(err)) => Err(format!("the fault schedule failed: {err}")),
        Err(_) => Err("the fault schedule did not end".into()),
    };

    // Every server healthy again and a validity gone twice: whatever is
    // left is kept alive by something.
    tokio::time::sleep(validity * 2).await;
    let leaked = servers::leftovers(&addrs, &admin).await?;

    let ok = report(
        s,
        permits,
        &runs,
        &events,
        schedule_result,
        &leaked,
        ran_for,
        origin,
    );
    if !ok {
        let faults = lock(&fault_log).clone();
        println!("the faults as they took effect:");
        for line in faults {
            println!("  {line}");
        }
        println!(
            "server logs and the runs' records kept in {}",
            set.keep_dir().display()
        );
    }
    Ok(ok)
}

/// The most intervals that overlap at one instant, and how long all
/// `permits` were in use. A start at the same nanosecond as an end counts
/// as overlapping it.
fn concurrency(intervals: &[Interval], permits: usize) -> (usize, Duration) {
    let mut edges: Vec<(u64, i32)> = intervals
        .iter()
        .flat_map(|i| [(i.start, 1), (i.end, -1)])
        .collect();
    // Starts before ends at the same instant: the larger count wins.
    edges.sort_by_key(|&(t, d)| (t, -d));
    let (mut now, mut most, mut full, mut since) = (0i32, 0usize, 0u64, 0u64);
    for (t, d) in edges {
        if now as usize >= permits {
            full += t - since;
        }
        now += d;
        since = t;
        most = most.max(now.max(0) as usize);
    }
    (most, Duration::from_nanos(full))
}

/// Pairs of commands that ran in the same slot at once, and slots whose
/// token did not grow from one holder to the next. A command without a
/// token (`run` could not get one from a quorum, and warned) is left out
/// of the second check.
fn slot_problems(intervals: &[Interval], permits: usize) -> Vec<String> {
    let mut problems = Vec::new();
    for i in intervals {
        if i.slot.is_none_or(|slot| slot >= permits) {
            problems.push(format!("run {}-{} had slot {:?}", i.runner, i.n, i.slot));
        }
    }
    for slot in 0..permits {
        let mut held: Vec<&Interval> = intervals.iter().filter(|i| i.slot == Some(slot)).collect();
        held.sort_by_key(|i| i.start);
        for pair in held.windows(2) {
            let (a, b) = (pair[0], pair[1]);
            if b.start <= a.end {
                problems.push(format!(
                    "slot {slot} held by run {}-{} and run {}-{} at once ({} ns of overlap)",
                    a.runner,
                    a.n,
                    b.runner,
                    b.n,
                    a.end - b.start
                ));
            }
        }
        let tokens: Vec<(&Interval, u64)> =
            held.iter().filter_map(|i| Some((*i, i.token?))).collect();
        for pair in tokens.windows(2) {
            let ((a, ta), (b, tb)) = (pair[0], pair[1]);
            if tb <= ta {
                problems.push(format!(
                    "slot {slot}'s token went from {ta} (run {}-{}) to {tb} (run {}-{})",
                    a.runner, a.n, b.runner, b.n
                ));
            }
        }
    }
    problems
}

#[allow(clippy::too_many_arguments)]
fn report(
    s: &Settings,
    permits: usize,
    runs: &[Run],
    events: &[schedule::Event],
    schedule_result: Result<(), String>,
    leaked: &[String],
    ran_for: Duration,
    origin: u64,
) -> bool {
    let at = |ns: u64| Duration::from_nanos(ns.saturating_sub(origin));
    let mut failures: Vec<String> = Vec::new();
    let mut intervals = Vec::new();
    for run in runs {
        match run.interval() {
            Ok(Some(interval)) => intervals.push(interval),
            Ok(None) => {}
            Err(err) => failures.push(err),
        }
    }
    let completed = intervals.iter().filter(|i| i.how == "done").count();
    let stopped = intervals.iter().filter(|i| i.how != "done").count();
    let code = |c: i32| runs.iter().filter(|r| r.code == Some(c)).count();
    let ran = |r: &Run| r.file.exists();
    let unexpected: Vec<&Run> = runs
        .iter()
        .filter(|r| match r.code {
            Some(0) => !ran(r),
            Some(c) => !EXPECTED_CODES.contains(&c),
            None => true,
        })
        .collect();
    let (most, full) = concurrency(&intervals, permits);
    let min_runs = s.min_runs.unwrap_or(s.seconds * permits as u64) as usize;

    println!("ran for {ran_for:.1?}");
    let kinds: Vec<String> = schedule::counts(events)
        .into_iter()
        .filter(|(_, n)| *n > 0)
        .map(|(k, n)| format!("{k} {n}"))
        .collect();
    println!(
        "faults injected: {} (at most {} of {} servers unavailable at once, quarantine included)",
        if kinds.is_empty() {
            "none".to_owned()
        } else {
            kinds.join(", ")
        },
        s.servers.saturating_sub(1) / 2,
        s.servers
    );
    println!(
        "runs: {} started by {} runners; {} commands ran: {completed} completed, {stopped} \
         stopped when their permit was lost; exit codes: 0 x {}, 75 x {}, 69 x {}, 79 x {}, \
         143 x {}",
        runs.len(),
        s.runners,
        intervals.len(),
        code(0),
        code(75),
        code(69),
        code(79),
        code(143),
    );
    println!(
        "most commands running at once: {most} (permits: {permits}); all {permits} in use for \
         {full:.1?} of {ran_for:.1?}"
    );
    let tokenless = intervals.iter().filter(|i| i.token.is_none()).count();
    println!(
        "commands without a fencing token (run could not get one from a quorum, and warned): \
         {tokenless}"
    );
    let mismatches = runs
        .iter()
        .filter(|r| r.code == Some(2) && r.stderr().contains("permits, but --permits"))
        .count();
    if mismatches > 0 {
        println!(
            "runs refused with another count of permits although every run gives the same: \
             {mismatches}"
        );
    }
    if most > permits {
        failures.push(format!(
            "{most} commands ran at once under {permits} permits"
        ));
    }
    failures.extend(slot_problems(&intervals, permits));
    if completed < min_runs {
        failures.push(format!(
            "only {completed} runs completed, fewer than {min_runs} (--min-runs)"
        ));
    }
    for r in unexpected.iter().take(5) {
        failures.push(format!(
            "run {}-{} ({:.3?} to {:.3?}) exited with {:?}{}: {}",
            r.runner,
            r.n,
            at(r.began),
            at(r.exited),
            r.code,
            if ran(r) {
                ""
            } else {
                " without running its command"
            },
            r.stderr()
        ));
    }
    if unexpected.len() > 5 {
        failures.push(format!("{} more unexpected exits", unexpected.len() - 5));
    }
    if let Err(err) = schedule_result {
        failures.push(format!("the fault schedule: {err}"));
    }
    println!(
        "entries left on the servers after the run: {}",
        leaked.len()
    );
    failures.extend(leaked.iter().take(10).map(|l| format!("left: {l}")));
    if failures.is_empty() {
        println!("all checks passed");
        return true;
    }
    for failure in &failures {
        println!("FAILED: {failure}");
    }
    if most > permits {
        print_crowd(&intervals, permits, origin);
    }
    false
}

/// The commands running at the first instant more than `permits` ran.
fn print_crowd(intervals: &[Interval], permits: usize, origin: u64) {
    let mut starts: Vec<&Interval> = intervals.iter().collect();
    starts.sort_by_key(|i| i.start);
    let first = origin;
    for s in &starts {
        let running: Vec<&&Interval> = starts
            .iter()
            .filter(|i| i.start <= s.start && s.start <= i.end)
            .collect();
        if running.len() > permits {
            println!("at {} ms:", s.start.saturating_sub(first) / 1_000_000);
            for i in running {
                println!(
                    "  run {}-{} slot {:?} token {:?} from {} ms to {} ms ({})",
                    i.runner,
                    i.n,
                    i.slot,
                    i.token,
                    i.start.saturating_sub(first) / 1_000_000,
                    i.end.saturating_sub(first) / 1_000_000,
                    i.how
                );
            }
            return;
        }
    }
}
