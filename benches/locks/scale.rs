//! `--scenario scale`: how far one `quorum-lock server` goes. Three parts,
//! each on a server of its own started with the limits it needs raised:
//! locks held (`--held`), connections open (`--connections`) and waiters
//! in line for one name (`--waiters`), each grown through its sizes. At
//! each size: the server's resident memory (VmRSS) before and after the
//! step, what each item the step added cost, and the latency of a
//! lock+unlock of one more name, or of the hand-off between two waiters.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::stream::{self, StreamExt, TryStreamExt};
use quorum_lock::net::{RemoteConfig, RemoteLocker};
use quorum_lock::{
    LockArgs, LockMode, NetLocker, PushEvent, PushSink, Ticket, WaitArgs, WaitReply, Wake,
};
use tokio::sync::mpsc;
use tokio::task::JoinSet;

use crate::cli::Options;
use crate::context::Context;
use crate::out::{self, human, left, right, say, Col, Machine, Obj};
use crate::servers::{connect, Kind, Servers};
use crate::stats::fmt_duration;

/// Each step ends within this, or the part stops there and says so.
const STEP_LIMIT: Duration = Duration::from_secs(600);
/// Calls in flight on each connection while a part fills the server.
const PIPELINE: usize = 256;
/// Connections the held locks are spread over (the default per-address
/// limit is 64).
const FILL_CONNECTIONS: usize = 60;
/// Connections the waiters are spread over (1024 waiters each by default).
const WAIT_CONNECTIONS: usize = 16;
/// Connections that lock and unlock without a pause in the connections part.
const BUSY: usize = 32;
const ADMIN: &str = "bench-admin";

pub struct Row {
    pub part: &'static str,
    pub size: usize,
    /// How long adding this step's items took, and how many it added.
    pub took: Duration,
    pub added: usize,
    /// Memory before and after the step: the server's VmRSS, or what the
    /// store says (`scale_stores`).
    pub rss: (u64, u64),
    pub p50: Duration,
    pub p99: Duration,
    pub notes: String,
}

impl Row {
    fn per_item(&self) -> i64 {
        (self.rss.1 as i64 - self.rss.0 as i64) / self.added.max(1) as i64
    }
}

fn columns() -> Vec<Col<Row>> {
    let mib = |b: u64| format!("{:.1}", b as f64 / (1 << 20) as f64);
    vec![
        left("part", 11, |r: &Row| r.part.to_owned()),
        right("size", 8, |r: &Row| r.size.to_string()),
        right("added in", 8, |r: &Row| fmt_duration(r.took)),
        right("rss MiB before", 14, move |r: &Row| mib(r.rss.0)),
        right("after", 7, move |r: &Row| mib(r.rss.1)),
        right("B/item", 7, |r: &Row| r.per_item().to_string()),
        right("p50", 7, |r: &Row| fmt_duration(r.p50)),
        right("p99", 7, |r: &Row| fmt_duration(r.p99)),
        left("notes", 0, |r: &Row| r.notes.clone()),
    ]
}

pub fn run(opts: &Options) -> Result<(), String> {
    let machine = Machine::read();
    let s = &opts.scale;
    if !(s.held.is_empty() && s.connections.is_empty() && s.waiters.is_empty()) {
        crate::servers::binary()?;
    }
    say(format!(
        "{}settings: held {:?}, connections {:?}, waiters {:?}, stores {:?} held {:?}, {} samples \
         per size; open-files \
         limit {}; tokio {} runtime with {} threads\n\
         p50/p99: a lock+unlock of one more name, one at a time (waiters: the hand-off, \
         release sent -> the next waiter's grant pushed); B/item: (after - before) / items added\n",
        out::banner("quorum-lock: how far one server goes", &machine),
        s.held,
        s.connections,
        s.waiters,
        s.stores,
        s.store_held,
        s.samples,
        open_files(),
        out::runtime(opts).0,
        out::runtime(opts).1,
    ));
    let cols = columns();
    say(out::header(&cols));
    let mut rows = Vec::new();
    let mut emit = |row: Row| {
        say(out::line(&cols, &row));
        rows.push(row);
    };
    let work = async {
        held(opts, &mut emit).await?;
        connections(opts, &mut emit).await?;
        waiters(opts, &mut emit).await?;
        crate::scale_stores::run(&s.stores, &s.store_held, s.samples, &mut emit).await
    };
    crate::on_runtime(opts, Duration::from_secs(2), work)?;
    out::save(opts, || {
        let results = rows.iter().map(|r| {
            let o = Obj::new().str("part", r.part).raw("size", r.size);
            let o = o.ns("took_ns", r.took).raw("added", r.added);
            let o = o.raw("rss_before", r.rss.0).raw("rss_after", r.rss.1);
            let o = o.raw("bytes_per_item", r.per_item());
            o.ns("p50_ns", r.p50)
                .ns("p99_ns", r.p99)
                .str("notes", &r.notes)
                .done()
        });
        out::Doc::now(opts, &machine).results(results)
    })
}

fn open_files() -> String {
    let text = std::fs::read_to_string("/proc/self/limits").unwrap_or_default();
    let line = text.lines().find(|l| l.starts_with("Max open files"));
    line.map_or("unknown".into(), |l| {
        l.split_whitespace().nth(3).unwrap_or("?").to_owned()
    })
}

/// A `quorum-lock server` with a long validity (no refresh is needed),
/// the admin token and `flags`, said before it starts.
async fn server(
    part: &str,
    flags: &[String],
) -> Result<(Servers, Arc<dyn NetLocker>, u32), String> {
    let mut extra = vec!["--validity=1h".to_owned(), format!("--admin-token={ADMIN}")];
    extra.extend_from_slice(flags);
    say(format!(
        "{part}: quorum-lock server --no-quarantine {}",
        extra.join(" ")
    ));
    let (servers, mut lockers) = Servers::start_with(1, Kind::Ours, &extra).await?;
    let pid = servers.pids()[0];
    Ok((servers, lockers.remove(0), pid))
}

fn rss(pid: u32) -> Result<u64, String> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .context("cannot read the server's status")?;
    let kb = status.lines().find_map(|l| l.strip_prefix("VmRSS:"));
    let kb = kb.and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok());
    kb.map(|kb| kb * 1024)
        .ok_or_else(|| "no VmRSS in the server's status".into())
}

/// One name, a uid of a UUID's length, an owner and source as short as a
/// client's usually are.
pub fn args(name: String, uid: String) -> LockArgs {
    LockArgs {
        uid: format!("{uid:-<36}").into(),
        resources: vec![name].into(),
        owner: "scale-bench:4242".into(),
        source: "benches/locks/scale.rs:1:1".into(),
        quorum: 1,
    }
}

pub async fn lock(locker: &dyn NetLocker, a: &LockArgs) -> Result<(), String> {
    match locker.lock(a).await {
        Ok(true) => Ok(()),
        Ok(false) => Err(format!("the lock of {} was refused", a.resources[0])),
        Err(e) => Err(format!("the lock of {}: {e}", a.resources[0])),
    }
}

async fn lock_unlock(locker: &dyn NetLocker, a: &LockArgs) -> Result<(), String> {
    lock(locker, a).await?;
    locker.unlock(a).await.context("unlock").map(drop)
}

/// `samples` lock+unlock of fresh names on `locker`, one after another.
pub async fn probe(
    locker: &dyn NetLocker,
    tag: &str,
    samples: usize,
) -> Result<(Duration, Duration), String> {
    let mut took = Vec::with_capacity(samples);
    for i in 0..samples {
        let a = args(format!("probe/{tag}/{i}"), format!("probe-{tag}-{i}"));
        let start = Instant::now();
        lock_unlock(locker, &a).await?;
        took.push(start.elapsed());
    }
    Ok(quantiles(took))
}

fn quantiles(mut took: Vec<Duration>) -> (Duration, Duration) {
    took.sort();
    let at = |q: f64| {
        took.get(((took.len().max(1) - 1) as f64 * q) as usize)
            .copied()
    };
    (at(0.5).unwrap_or_default(), at(0.99).unwrap_or_default())
}

/// What a step measured: how long adding its items took, how many it
/// added, VmRSS before and after, p50 and p99, notes.
type Step = (Duration, usize, (u64, u64), (Duration, Duration), String);

/// Runs `step` within [`STEP_LIMIT`] and emits its row; false (said) where
/// it failed, which ends the part.
async fn bounded(
    (part, size): (&'static str, usize),
    emit: &mut impl FnMut(Row),
    step: impl Future<Output = Result<Step, String>>,
) -> bool {
    let why = match tokio::time::timeout(STEP_LIMIT, step).await {
        Ok(Ok((took, added, rss, (p50, p99), notes))) => {
            emit(Row {
                part,
                size,
                took,
                added,
                rss,
                p50,
                p99,
                notes,
            });
            return true;
        }
        Ok(Err(err)) => err,
        Err(_) => format!("not done within {STEP_LIMIT:?}"),
    };
    say(format!("{part}: stopped at {size}: {why}"));
    false
}

async fn held(opts: &Options, emit: &mut impl FnMut(Row)) -> Result<(), String> {
    let Some(&most) = opts.scale.held.last() else {
        return Ok(());
    };
    // Each lock is charged about 1.7 KB (names, uid, the table's worst case).
    let bytes = format!(
        "--max-lock-bytes={}MiB",
        (most * 2048).div_ceil(1 << 20).max(1024)
    );
    let (servers, first, pid) = server("held", &[bytes]).await?;
    let addr = &servers.addrs[0];
    let mut conns = vec![first];
    conns.extend(crate::stats::gather(1..FILL_CONNECTIONS, |_| connect(addr)).await?);
    let admin = RemoteLocker::connect(addr.clone(), RemoteConfig::new(ADMIN))
        .await
        .context("admin")?;
    let mut have = 0;
    for &size in &opts.scale.held {
        let step = async {
            let before = rss(pid)?;
            let start = Instant::now();
            let mut fill = JoinSet::new();
            for (c, locker) in conns.iter().enumerate() {
                let locker = locker.clone();
                let mine = (have..size).filter(move |i| i % FILL_CONNECTIONS == c);
                fill.spawn(async move {
                    let each = |i| args(format!("scale/{i:08}"), format!("held-{i}"));
                    let calls = stream::iter(mine).map(|i| {
                        let (locker, a) = (locker.clone(), each(i));
                        async move { lock(&*locker, &a).await }
                    });
                    calls
                        .buffer_unordered(PIPELINE)
                        .try_for_each(|()| async { Ok(()) })
                        .await
                });
            }
            while let Some(done) = fill.join_next().await {
                done.context("a filling task failed")??;
            }
            let took = start.elapsed();
            let after = rss(pid)?;
            let probed = probe(&*conns[0], &size.to_string(), opts.scale.samples).await?;
            let start = Instant::now();
            let listed = admin.locks().await.context("cannot list the locks")?.len();
            let notes = format!("listed {listed} locks in {}", human(start.elapsed()));
            Ok((took, size - have, (before, after), probed, notes))
        };
        if !bounded(("held locks", size), emit, step).await {
            break;
        }
        have = size;
    }
    Ok(())
}

async fn connections(opts: &Options, emit: &mut impl FnMut(Row)) -> Result<(), String> {
    let Some(&most) = opts.scale.connections.last() else {
        return Ok(());
    };
    let cap = (most + 8).to_string();
    let flags = [
        format!("--max-connections={cap}"),
        format!("--max-connections-per-address={cap}"),
    ];
    let (servers, probe_conn, pid) = server("connections", &flags).await?;
    let addr = &servers.addrs[0];
    let mut open: Vec<Arc<dyn NetLocker>> = vec![probe_conn];
    // B/item over every connection but the probe's, from the server with it alone.
    let before = rss(pid)?;
    for &size in &opts.scale.connections {
        let step = async {
            let start = Instant::now();
            let mut more = stream::iter(open.len()..size)
                .map(|_| connect(addr))
                .buffer_unordered(64);
            while let Some(conn) = more.next().await {
                open.push(conn.map_err(|e| format!("{e} (with {} open)", open.len()))?);
            }
            let (took, after) = (start.elapsed(), rss(pid)?);
            // The busy ones loop lock+unlock while the probe runs.
            let (stop, cycles) = (
                Arc::new(AtomicBool::new(false)),
                Arc::new(AtomicU64::new(0)),
            );
            let mut busy = JoinSet::new();
            for (b, locker) in open.iter().skip(1).take(BUSY).enumerate() {
                let (locker, stop, cycles) = (locker.clone(), stop.clone(), cycles.clone());
                busy.spawn(async move {
                    for i in 0..10_000_000_u64 {
                        if stop.load(Ordering::Relaxed) {
                            break;
                        }
                        lock_unlock(
                            &*locker,
                            &args(format!("busy/{b}"), format!("busy-{size}-{b}-{i}")),
                        )
                        .await?;
                        cycles.fetch_add(1, Ordering::Relaxed);
                    }
                    Ok::<_, String>(())
                });
            }
            let start = Instant::now();
            let probed = probe(&*open[0], &format!("c{size}"), opts.scale.samples).await;
            let rate = cycles.load(Ordering::Relaxed) as f64 / start.elapsed().as_secs_f64();
            stop.store(true, Ordering::Relaxed);
            while let Some(done) = busy.join_next().await {
                done.context("a busy task failed")??;
            }
            let busy = BUSY.min(size - 1);
            let notes = format!("{busy} of them busy, {rate:.0} lock+unlock/s besides the probe");
            Ok((took, size - 1, (before, after), probed?, notes))
        };
        if !bounded(("connections", size), emit, step).await {
            break;
        }
    }
    Ok(())
}

/// Where the server pushes grants: the uid and when it arrived.
struct Grants(mpsc::UnboundedSender<(String, Instant)>);

impl PushSink for Grants {
    fn push(&self, _: usize, uid: &str, event: PushEvent) {
        if event == PushEvent::Granted {
            let _ = self.0.send((uid.to_owned(), Instant::now()));
        }
    }
}

async fn waiters(opts: &Options, emit: &mut impl FnMut(Row)) -> Result<(), String> {
    for &size in &opts.scale.waiters {
        // A fresh server and line per size: a place lives 60 s at most
        // without its waiter asking again, and these never ask again.
        let (servers, holder, pid) = server("waiters", &[]).await?;
        let addr = &servers.addrs[0];
        let mut conns = vec![holder];
        conns.extend(crate::stats::gather(1..WAIT_CONNECTIONS, |_| connect(addr)).await?);
        let (tx, mut grants) = mpsc::unbounded_channel();
        let wake = Wake::new(Arc::new(Grants(tx)), 0);
        let step = async {
            let hot = |n: usize| args("hot".into(), format!("wait-{n}"));
            lock(&*conns[0], &hot(0)).await?;
            let mut holder = 0;
            // Waiter n waits on connection n % WAIT_CONNECTIONS.
            let enqueue = |n: usize| {
                let (locker, wake) = (conns[n % WAIT_CONNECTIONS].clone(), wake.clone());
                async move {
                    let wait = WaitArgs {
                        ticket: Ticket::now(),
                        place_ttl: Duration::from_secs(60),
                        wake: Some(wake),
                    };
                    match locker.lock_wait(&hot(n), LockMode::Write, &wait).await {
                        Ok(WaitReply::Queued) => Ok(()),
                        Ok(other) => Err(format!("waiter {n} was answered {other:?}, not queued")),
                        Err(e) => Err(format!("waiter {n}: {e}")),
                    }
                }
            };
            let before = rss(pid)?;
            let start = Instant::now();
            // In order, so that the tickets are too.
            for n in 1..=size {
                enqueue(n).await?;
            }
            let (took, after) = (start.elapsed(), rss(pid)?);
            let mut handoffs = Vec::with_capacity(opts.scale.samples);
            for next in size + 1..=size + opts.scale.samples {
                let released = Instant::now();
                let conn = &conns[holder % WAIT_CONNECTIONS];
                conn.unlock(&hot(holder)).await.context("unlock")?;
                let (uid, at) = grants.recv().await.ok_or("the grants stopped")?;
                handoffs.push(at - released);
                // The old holder goes to the back of the line, so it stays as long.
                enqueue(next).await?;
                let n = uid.trim_end_matches('-').strip_prefix("wait-");
                holder = n
                    .and_then(|n| n.parse().ok())
                    .ok_or("a grant of no waiter")?;
            }
            let notes = format!("over {WAIT_CONNECTIONS} connections");
            Ok((took, size, (before, after), quantiles(handoffs), notes))
        };
        if !bounded(("waiters", size), emit, step).await {
            break;
        }
    }
    Ok(())
}
