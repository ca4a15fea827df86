//! What a load run measures, the loop driver shared by our locks and the
//! Redis baseline, and the numbers derived from it.

use std::future::Future;
use std::time::Duration;

use hdrhistogram::Histogram;
use tokio::time::{timeout_at, Instant};

use crate::counting::CallCounts;
use crate::scenario::Hold;

/// Longest wait the histograms can hold; waits are bounded far below it.
const MAX_TRACKED_NS: u64 = 3_600_000_000_000;

/// The bounds of one load run, shared by every client.
#[derive(Debug, Clone, Copy)]
pub struct Window {
    /// Acquisitions asked for before this are warm-up and are not recorded.
    pub start: Instant,
    /// No acquisition is waited for past this.
    pub end: Instant,
    /// Locks (warm-up included) after which a client stops.
    pub max_per_client: u64,
}

/// What every measurement of a comparing backend needs besides its own
/// settings.
#[derive(Clone, Copy)]
pub struct Bounds {
    pub warmup: Duration,
    pub seconds: Duration,
    pub max_locks: u64,
    pub count_rpcs: bool,
    /// The retry sleep of rslock and the SET NX lock.
    pub retry: Duration,
}

impl Bounds {
    pub fn of(opts: &crate::cli::Options) -> Bounds {
        Bounds {
            warmup: Duration::from_secs_f64(opts.warmup),
            seconds: Duration::from_secs_f64(opts.seconds),
            max_locks: opts.max_locks,
            count_rpcs: opts.count_rpcs,
            retry: opts.redis_retry,
        }
    }

    /// The window of a measurement of `clients` clients: it opens after
    /// the warm-up from now and shares `max_locks` out among the clients.
    pub fn window(&self, clients: usize) -> Window {
        let start = Instant::now() + self.warmup;
        Window {
            start,
            end: start + self.seconds,
            max_per_client: self.max_locks.div_ceil(clients as u64),
        }
    }

    /// [`Window::load`] in a window starting now.
    pub async fn load<L: Locking + 'static>(
        &self,
        clients: usize,
        hold: Hold,
        snapshot: impl Fn() -> Snapshot,
        client: impl FnMut(usize) -> L,
    ) -> Result<Summary, String> {
        (self.window(clients).load(clients, hold, snapshot, client)).await
    }
}

impl Window {
    /// One client's loop, the same for every system: take the lock (cut
    /// off by the window's end), record the wait when it was asked for
    /// inside the window, hold, give back; until the window closes or the
    /// client's share of `--max-locks` is taken.
    pub async fn client<L: Locking>(self, mut l: L, hold: Hold) -> Result<ClientTally, String> {
        let mut tally = ClientTally::new();
        let mut done = 0u64;
        let mut cut_off = false;
        loop {
            let asked = Instant::now();
            if asked >= self.end {
                break;
            }
            if done >= self.max_per_client {
                tally.hit_count_bound = true;
                break;
            }
            let held = match timeout_at(self.end, l.acquire()).await {
                Ok(held) => held?,
                Err(_) => {
                    tally.unfinished = Some(asked.elapsed());
                    cut_off = true;
                    break;
                }
            };
            let counted = asked >= self.start;
            if counted {
                tally.record(asked.elapsed());
            }
            done += 1;
            hold.run().await;
            l.release(held, &mut tally, counted).await?;
        }
        tally.finished_at = Instant::now();
        l.finish(cut_off).await;
        Ok(tally)
    }

    /// The end of what was measured (the window's end, or when the last
    /// client stopped before it) and its length in seconds.
    pub fn measured(&self, tallies: &[ClientTally]) -> (Instant, f64) {
        let last_finish = tallies.iter().map(|t| t.finished_at).max();
        let until = last_finish.map_or(self.end, |f| f.min(self.end));
        let seconds = until.saturating_duration_since(self.start).as_secs_f64();
        (until, seconds.max(1e-9))
    }

    /// The load run every system shares: `clients` clients made by
    /// `client`, each looping through [`Window::client`] with `hold`,
    /// [`drive`]n with `snapshot` and summarized.
    pub async fn load<L: Locking + 'static>(
        self,
        clients: usize,
        hold: Hold,
        snapshot: impl Fn() -> Snapshot,
        mut client: impl FnMut(usize) -> L,
    ) -> Result<Summary, String> {
        let (tallies, first, last) =
            drive(clients, self, snapshot, |c| self.client(client(c), hold)).await?;
        Ok(summarize(self, &tallies, &first, &last))
    }
}

/// How one client of a system takes and gives back its lock, for
/// [`Window::client`].
pub trait Locking: Send {
    type Held: Send;

    /// Takes the lock. Dropped when the window's end cuts it off: what a
    /// cut-off call leaves behind is the system's to clean up (the
    /// measurements use names of their own per run for that reason).
    fn acquire(&mut self) -> impl Future<Output = Result<Self::Held, String>> + Send;

    /// Gives the lock back after the hold; `counted` says whether the lock
    /// was asked for inside the window, for systems that count their own
    /// requests in `tally.calls`.
    fn release(
        &mut self,
        held: Self::Held,
        tally: &mut ClientTally,
        counted: bool,
    ) -> impl Future<Output = Result<(), String>> + Send;

    /// After the loop; `cut_off` when it ended inside an acquire.
    fn finish(self, cut_off: bool) -> impl Future<Output = ()> + Send
    where
        Self: Sized,
    {
        let _ = cut_off;
        async {}
    }
}

/// One client's record.
pub struct ClientTally {
    pub locks: u64,
    pub hist: Histogram<u64>,
    pub sum_ns: u128,
    /// A wait still unfinished when the window closed.
    pub unfinished: Option<Duration>,
    /// Requests sent in the window, when the client counts them itself.
    pub calls: CallCounts,
    pub hit_count_bound: bool,
    pub finished_at: Instant,
}

impl ClientTally {
    pub fn new() -> Self {
        ClientTally {
            locks: 0,
            hist: new_histogram(),
            sum_ns: 0,
            unfinished: None,
            calls: CallCounts::default(),
            hit_count_bound: false,
            finished_at: Instant::now(),
        }
    }

    pub fn record(&mut self, waited: Duration) {
        let ns = u64::try_from(waited.as_nanos()).unwrap_or(u64::MAX);
        self.hist.saturating_record(ns.max(1));
        self.sum_ns += u128::from(ns);
        self.locks += 1;
    }
}

fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, MAX_TRACKED_NS, 3).expect("constant, valid histogram bounds")
}

/// Resource use at one instant.
#[derive(Debug, Clone, Copy)]
pub struct Snapshot {
    pub at: Instant,
    /// User + system CPU time of this process.
    pub cpu: Duration,
    /// Calls seen by the counting lockers, when they are in use.
    pub calls: Option<CallCounts>,
    /// CPU time of a server process measured alongside (redis-server).
    pub server_cpu: Option<Duration>,
}

impl Snapshot {
    /// This process's CPU time now, with the calls and the server CPU
    /// time the measurement reads beside it.
    pub fn now(calls: Option<CallCounts>, server_cpu: Option<Duration>) -> Snapshot {
        Snapshot {
            at: Instant::now(),
            cpu: process_cpu(),
            calls,
            server_cpu,
        }
    }
}

/// Between two snapshots: this process's and the server's CPU time, in
/// cores of the wall time between them, and the calls counted.
pub struct Usage {
    pub cpu: f64,
    pub server_cpu: Option<f64>,
    pub calls: Option<CallCounts>,
}

impl Usage {
    pub fn between(first: &Snapshot, last: &Snapshot) -> Usage {
        let wall = last.at.saturating_duration_since(first.at).as_secs_f64();
        let cores = |a: Duration, b: Duration| b.saturating_sub(a).as_secs_f64() / wall.max(1e-9);
        Usage {
            cpu: cores(first.cpu, last.cpu),
            server_cpu: first
                .server_cpu
                .zip(last.server_cpu)
                .map(|(a, b)| cores(a, b)),
            calls: first.calls.zip(last.calls).map(|(a, b)| b.since(&a)),
        }
    }
}

/// The calls the counting lockers saw, when there are any.
pub fn counted(calls: &[std::sync::Arc<crate::counting::Calls>]) -> Option<CallCounts> {
    (!calls.is_empty()).then(|| crate::counting::total(calls))
}

/// User + system CPU time of another process, from /proc.
pub fn pid_cpu(pid: u32) -> Option<Duration> {
    let fields = proc_stat(pid)?;
    ticks(fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?)
}

/// The fields of /proc/`pid`/stat after the command name (which is in
/// parentheses and may hold spaces): state (0), ppid (1), ..., utime (11),
/// stime (12), cutime (13), cstime (14).
pub fn proc_stat(pid: u32) -> Option<Vec<String>> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 2..];
    Some(rest.split_whitespace().map(str::to_owned).collect())
}

/// `n` clock ticks, the unit of CPU time in /proc, as a duration.
pub fn ticks(n: u64) -> Option<Duration> {
    // SAFETY: sysconf reads a constant and has no side effects.
    let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    (per_second > 0).then(|| Duration::from_secs_f64(n as f64 / per_second as f64))
}

pub fn process_cpu() -> Duration {
    rusage(libc::RUSAGE_SELF).unwrap_or(Duration::ZERO)
}

/// User + system CPU time of this process (`RUSAGE_SELF`) or of its
/// children that have been waited for (`RUSAGE_CHILDREN`).
pub fn rusage(who: libc::c_int) -> Option<Duration> {
    // SAFETY: getrusage only writes the struct it is given; an all-zero
    // rusage is a valid value of that plain C struct.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        if libc::getrusage(who, &mut usage) != 0 {
            return None;
        }
        usage
    };
    let tv = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec.max(0) as u64) + Duration::from_micros(t.tv_usec.max(0) as u64)
    };
    Some(tv(usage.ru_utime) + tv(usage.ru_stime))
}

/// What `make` opens for each item (clients, connections, sessions), one
/// after another, before any clock starts.
pub async fn gather<I, T, F: Future<Output = Result<T, String>>>(
    items: impl IntoIterator<Item = I>,
    make: impl FnMut(I) -> F,
) -> Result<Vec<T>, String> {
    let mut out = Vec::new();
    for f in items.into_iter().map(make) {
        out.push(f.await?);
    }
    Ok(out)
}

/// Runs `clients` client futures made by `client` inside `window`, taking a
/// snapshot when the window opens and after every client has finished.
pub async fn drive<T, F, Fut>(
    clients: usize,
    window: Window,
    snapshot: impl Fn() -> Snapshot,
    mut client: F,
) -> Result<(Vec<T>, Snapshot, Snapshot), String>
where
    T: Send + 'static,
    F: FnMut(usize) -> Fut,
    Fut: Future<Output = Result<T, String>> + Send + 'static,
{
    let tasks: Vec<_> = (0..clients).map(|c| tokio::spawn(client(c))).collect();
    tokio::time::sleep_until(window.start).await;
    let first = snapshot();
    let mut tallies = Vec::with_capacity(clients);
    let mut failure = None;
    for task in tasks {
        match task.await {
            Ok(Ok(tally)) => tallies.push(tally),
            Ok(Err(err)) => failure = failure.or(Some(err)),
            Err(err) => failure = failure.or(Some(format!("a client task failed: {err}"))),
        }
    }
    if let Some(err) = failure {
        return Err(err);
    }
    Ok((tallies, first, snapshot()))
}

/// The derived figures of one run.
#[derive(Debug, Clone)]
pub struct Summary {
    pub locks: u64,
    pub seconds: f64,
    pub lsps: f64,
    pub mean: Duration,
    pub p50: Duration,
    pub p70: Duration,
    pub p90: Duration,
    pub p99: Duration,
    pub max: Duration,
    /// The longest wait, counting waits the window cut short.
    pub longest_wait: Duration,
    /// Clients still waiting when the window closed.
    pub unfinished: usize,
    pub min_client: u64,
    pub max_client: u64,
    pub jain: f64,
    /// (user + sys) / wall of this process, in cores.
    pub cpu: f64,
    /// The same for the server process, when there is one.
    pub server_cpu: Option<f64>,
    /// Requests to lock servers per lock acquired, by kind when known.
    pub calls: Option<CallCounts>,
    pub calls_per_lock: Option<f64>,
    pub hit_count_bound: bool,
    /// System calls, frames and context switches of the window
    /// (`--counts on`).
    pub counts: Option<crate::counts::Counts>,
}

pub fn summarize(
    window: Window,
    tallies: &[ClientTally],
    first: &Snapshot,
    last: &Snapshot,
) -> Summary {
    let mut hist = new_histogram();
    let mut sum_ns = 0u128;
    for t in tallies {
        // Same bounds on both sides, so adding cannot fail.
        let _ = hist.add(&t.hist);
        sum_ns += t.sum_ns;
    }
    let locks = hist.len();
    let (_, seconds) = window.measured(tallies);
    let usage = Usage::between(first, last);
    let per_client: Vec<u64> = tallies.iter().map(|t| t.locks).collect();
    let q = |quantile: f64| {
        Duration::from_nanos(if locks == 0 {
            0
        } else {
            hist.value_at_quantile(quantile)
        })
    };
    let max = q(1.0);
    let unfinished_waits = tallies.iter().filter_map(|t| t.unfinished);
    // Counted by the lockers, or else by the clients themselves.
    let calls = usage.calls.or_else(|| {
        let own = tallies
            .iter()
            .fold(CallCounts::default(), |sum, t| sum.plus(&t.calls));
        (own.total() > 0).then_some(own)
    });
    Summary {
        locks,
        seconds,
        lsps: locks as f64 / seconds,
        mean: Duration::from_nanos(if locks == 0 {
            0
        } else {
            u64::try_from(sum_ns / u128::from(locks)).unwrap_or(u64::MAX)
        }),
        p50: q(0.50),
        p70: q(0.70),
        p90: q(0.90),
        p99: q(0.99),
        max,
        longest_wait: unfinished_waits.clone().fold(max, Duration::max),
        unfinished: unfinished_waits.count(),
        min_client: per_client.iter().copied().min().unwrap_or(0),
        max_client: per_client.iter().copied().max().unwrap_or(0),
        jain: jain(&per_client),
        cpu: usage.cpu,
        server_cpu: usage.server_cpu,
        calls_per_lock: calls.map(|c| c.total() as f64 / locks.max(1) as f64),
        calls,
        hit_count_bound: tallies.iter().any(|t| t.hit_count_bound),
        counts: None,
    }
}

/// Jain's fairness index: 1 when every client got the same number of locks,
/// 1/n when one client got them all, 0 when nobody got any.
pub fn jain(counts: &[u64]) -> f64 {
    let sum: f64 = counts.iter().map(|&c| c as f64).sum();
    let squares: f64 = counts.iter().map(|&c| (c as f64) * (c as f64)).sum();
    if squares == 0.0 {
        return 0.0;
    }
    sum * sum / (counts.len() as f64 * squares)
}

/// A short human form: 850ns, 12.3us, 4.56ms, 1.20s.
pub fn fmt_duration(d: Duration) -> String {
    let ns = d.as_nanos() as f64;
    if ns < 1e3 {
        format!("{ns:.0}ns")
    } else if ns < 1e6 {
        format!("{}us", three_digits(ns / 1e3))
    } else if ns < 1e9 {
        format!("{}ms", three_digits(ns / 1e6))
    } else {
        format!("{:.2}s", ns / 1e9)
    }
}

fn three_digits(x: f64) -> String {
    if x >= 99.95 {
        format!("{x:.0}")
    } else if x >= 9.995 {
        format!("{x:.1}")
    } else {
        format!("{x:.2}")
    }
}

/// 512, 12.3k, 1.25M.
pub fn fmt_rate(r: f64) -> String {
    if r < 1e3 {
        format!("{r:.0}")
    } else if r < 1e6 {
        format!("{:.1}k", r / 1e3)
    } else {
        format!("{:.2}M", r / 1e6)
    }
}
