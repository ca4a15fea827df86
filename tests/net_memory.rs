//! The lock server's memory budget, counted byte by byte: a `#[global_allocator]`
//! wrapper counts what the
//! server's runtime threads keep alive, as glibc's malloc would lay it
//! out, while one client with the ordinary token sends the requests that
//! cost the most per byte charged: single-name locks with short names,
//! locks on 1,000 short or long names, read locks shared by many holders,
//! waits queued on 1,000 names, and `Health`/`Status` on a full table.
//!
//! The bound each phase checks is the part of
//! `ServerConfig::memory_budget` that the phase can reach: the lock table
//! (`max_lock_bytes`), the remembered releases (`max_released_bytes`) and
//! the allowance of the one connection it uses. The client runs on the
//! test's own thread, which is not counted.
//!
//! They run in an optimized build: `cargo test --release --all-features
//! --test net_memory`, as CI does. A debug build marks them ignored: the
//! same counts, but filling the tables took 100 s of the README's test
//! command (an optimized build: 28 s).
#![cfg(feature = "net")]

#[path = "net_support/wire.rs"]
mod wire;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use quorum_lock::net::{LockServer, ServerConfig};
use quorum_lock::LocalLocker;
use tokio::io::AsyncWriteExt;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use wire::{
    args_request, authenticate_as, frame, leader_request, lock_wait_request, proclaim_request,
    request, response, OP_HEALTH, OP_LOCK, OP_RLOCK, OP_RUNLOCK, OP_STATUS, OP_UNLOCK, REPLY_BOOL,
    REPLY_ERROR, REPLY_LEADER, REPLY_WAIT, VERSION_3, VERSION_4, VERSION_5,
};

const MIB: usize = 1 << 20;
const TOKEN: &str = "client-secret";

/// Bytes live in blocks allocated by the server's threads.
static LIVE: AtomicUsize = AtomicUsize::new(0);
/// The most `LIVE` reached since the last [`reset_peak`].
static PEAK: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// Set on the server runtime's threads: only their blocks are counted.
    static COUNTED: Cell<bool> = const { Cell::new(false) };
}

/// What glibc's malloc takes for a request of `size` bytes: an 8-byte
/// header, 16-byte granules, 32 bytes at least.
fn chunk(size: usize) -> usize {
    ((size + 8 + 15) & !15).max(32)
}

/// Counts live bytes. Each block carries a header in front of it with the
/// bytes it was counted for (0 when it was not), so that a block is
/// uncounted exactly as it was counted, on whichever thread frees it.
struct Counting;

fn prefix(layout: Layout) -> usize {
    layout.align().max(16)
}

fn with_header(layout: Layout, size: usize) -> Option<Layout> {
    Layout::from_size_align(size.checked_add(prefix(layout))?, layout.align()).ok()
}

fn counted_here() -> bool {
    COUNTED.try_with(Cell::get).unwrap_or(false)
}

fn add(bytes: usize) {
    let live = LIVE.fetch_add(bytes, Ordering::Relaxed) + bytes;
    PEAK.fetch_max(live, Ordering::Relaxed);
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        unsafe {
            let Some(outer) = with_header(layout, layout.size()) else {
                return std::ptr::null_mut();
            };
            let base = System.alloc(outer);
            if base.is_null() {
                return base;
            }
            let user = base.add(prefix(layout));
            let counted = if counted_here() {
                chunk(layout.size())
            } else {
                0
            };
            (user as *mut usize).sub(1).write(counted);
            add(counted);
            user
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe {
            let counted = (ptr as *mut usize).sub(1).read();
            LIVE.fetch_sub(counted, Ordering::Relaxed);
            let outer = with_header(layout, layout.size()).expect("allocated with this layout");
            System.dealloc(ptr.sub(prefix(layout)), outer);
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        unsafe {
            let old = (ptr as *mut usize).sub(1).read();
            let outer = with_header(layout, layout.size()).expect("allocated with this layout");
            let Some(new_outer) = with_header(layout, new_size) else {
                return std::ptr::null_mut();
            };
            let base = System.realloc(ptr.sub(prefix(layout)), outer, new_outer.size());
            if base.is_null() {
                return base;
            }
            let user = base.add(prefix(layout));
            let counted = if old > 0 || counted_here() {
                chunk(new_size)
            } else {
                0
            };
            (user as *mut usize).sub(1).write(counted);
            LIVE.fetch_sub(old, Ordering::Relaxed);
            add(counted);
            user
        }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn live() -> usize {
    LIVE.load(Ordering::Relaxed)
}

fn reset_peak() {
    PEAK.store(live(), Ordering::Relaxed);
}

fn peak() -> usize {
    PEAK.load(Ordering::Relaxed)
}

/// The counts are process-wide: one phase at a time.
static SERIAL: Mutex<()> = Mutex::new(());

/// The lock table's size in most phases.
const TABLE: usize = 24 * MIB;

/// A table that short single-name locks fill to about 29,000 entries, 454
/// a shard: just past the point where the shards' maps double (from 448
/// to 449 names in 512 slots), where a name costs the most while they
/// grow. It follows the charge per lock: 40 MiB until the readers' index
/// and the expiry nodes' uids added about 100 bytes to it, which left the
/// shards at 404 names, short of the doubling; 45 MiB until the ledger's
/// record of each set of names grew a touch time and a flag (about 100
/// bytes more for its room of four), which left 27,449 locks.
const TABLE_PAST_DOUBLING: usize = 48 * MIB;

/// The server's limits, scaled down: one connection may fill the table.
fn config(table: usize) -> ServerConfig {
    let mut config = ServerConfig::new(TOKEN);
    config.max_connections = 2;
    config.max_lock_bytes = table;
    config.max_bytes_per_connection = 4 * config.max_lock_bytes;
    config.max_entries_per_connection = 1_000_000;
    config.max_released_bytes = MIB;
    config
}

/// `ServerConfig::memory_budget` for clients, without the lock table's cap
/// and the released uids, with `more` connections more than [`config`].
fn bare_budget(more: usize) -> usize {
    let mut bare = config(0);
    bare.max_lock_bytes = 0;
    bare.max_released_bytes = 0;
    bare.max_connections += more;
    bare.memory_budget().client
}

/// What one connection may add to the server per
/// `ServerConfig::memory_budget`: its frames, its record of waiters and
/// pushes, its task and buffers.
fn per_connection() -> usize {
    bare_budget(1) - bare_budget(0)
}

/// What the budget adds to the lock table's cap for the room its shards
/// keep while nearly empty: the part that does not grow with connections
/// (every connection the budget allows for: `max_connections`, the
/// `admin_reserve` and those being evicted; docs/lock-servers.md: "about
/// 600 KiB in all").
fn table_kept() -> usize {
    let c = config(0);
    let conns = c.max_connections + c.admin_reserve + quorum_lock::net::EVICTING;
    bare_budget(0) - conns * per_connection()
}

/// The part of the budget one connection can reach.
fn allowance(table: usize) -> usize {
    let c = config(table);
    c.max_lock_bytes + table_kept() + c.max_released_bytes + per_connection()
}

/// A server on its own runtime, whose threads alone are counted.
struct Counted {
    _runtime: tokio::runtime::Runtime,
    addr: String,
    locker: Arc<LocalLocker>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl Counted {
    fn start(table: usize) -> Counted {
        Counted::start_with(config(table))
    }

    fn start_with(config: ServerConfig) -> Counted {
        Counted::start_full(config, LocalLocker::new())
    }

    fn start_full(config: ServerConfig, locker: LocalLocker) -> Counted {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .on_thread_start(|| COUNTED.with(|c| c.set(true)))
            .build()
            .expect("server runtime");
        let locker = Arc::new(locker);
        let server = LockServer::new(locker.clone(), config).expect("server config");
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let (addr, serve) = runtime
            .block_on(async {
                server
                    .bind("127.0.0.1:0".parse().unwrap(), async {
                        let _ = stopped.await;
                    })
                    .await
            })
            .expect("bind");
        runtime.spawn(serve);
        Counted {
            _runtime: runtime,
            addr: addr.to_string(),
            locker,
            stop: Some(stop),
        }
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// One authenticated connection, split for pipelining.
struct Client {
    read: OwnedReadHalf,
    write: OwnedWriteHalf,
    next_id: u64,
}

impl Client {
    async fn connect(addr: &str, version: u16) -> Client {
        let (stream, welcome) = authenticate_as(addr, TOKEN, version)
            .await
            .expect("authenticated");
        assert_eq!(welcome.first(), Some(&0), "welcome {welcome:?}");
        let (read, write) = TcpStream::into_split(stream);
        Client {
            read,
            write,
            next_id: 1,
        }
    }

    fn id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    /// Sends `requests` pipelined and reads their replies; the reply bytes
    /// after each response id.
    async fn batch(&mut self, requests: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
        let n = requests.len();
        let write = &mut self.write;
        let read = &mut self.read;
        let send = async move {
            let mut bytes = Vec::new();
            for r in requests {
                bytes.extend(frame(&r));
                if bytes.len() > 256 * 1024 {
                    write.write_all(&bytes).await.expect("request sent");
                    bytes.clear();
                }
            }
            write.write_all(&bytes).await.expect("request sent");
        };
        let receive = async move {
            let mut replies = Vec::with_capacity(n);
            for _ in 0..n {
                let payload = tokio::time::timeout(Duration::from_secs(30), read_frame_any(read))
                    .await
                    .expect("a reply within 30 s")
                    .expect("a reply");
                replies.push(response(&payload).1.to_vec());
            }
            replies
        };
        let ((), replies) = tokio::join!(send, receive);
        replies
    }
}

async fn read_frame_any(read: &mut OwnedReadHalf) -> std::io::Result<Vec<u8>> {
    use tokio::io::AsyncReadExt;
    let mut header = [0u8; 4];
    read.read_exact(&mut header).await?;
    let mut payload = vec![0; u32::from_be_bytes(header) as usize];
    read.read_exact(&mut payload).await?;
    Ok(payload)
}

fn granted(reply: &[u8]) -> bool {
    reply == [REPLY_BOOL, 1]
}

fn refused_full(reply: &[u8]) -> bool {
    reply.first() == Some(&REPLY_ERROR)
        && String::from_utf8_lossy(reply).contains("lock table is full")
}

/// A lock request (`op`) for `uid` on `names`, with a UUID-sized uid.
fn lock(id: u64, op: u8, uid: &str, names: &[String]) -> Vec<u8> {
    let names: Vec<&[u8]> = names.iter().map(|n| n.as_bytes()).collect();
    args_request(id, op, uid.as_bytes(), &names, b"owner", b"source")
}

fn uid(phase: &str, n: usize) -> String {
    format!("{phase:>8}-{n:027}")
}

/// Sends requests made by `make` in batches until one is refused because
/// the table is full, asserting that every other one got `ok`. Returns how
/// many were granted.
async fn fill(
    client: &mut Client,
    batch: usize,
    ok: impl Fn(&[u8]) -> bool,
    mut make: impl FnMut(u64, usize) -> Vec<u8>,
) -> usize {
    let mut done = 0;
    loop {
        let requests: Vec<Vec<u8>> = (0..batch)
            .map(|i| {
                let id = client.id();
                make(id, done + i)
            })
            .collect();
        let replies = client.batch(requests).await;
        for reply in replies {
            if refused_full(&reply) {
                return done;
            }
            assert!(ok(&reply), "unexpected reply {reply:?}");
            done += 1;
        }
        assert!(done < 10_000_000, "the table never filled");
    }
}

/// What a phase measured, in bytes over the server's baseline.
struct Measured {
    table: usize,
    peak: usize,
    now: usize,
}

fn report(phase: &str, granted: usize, m: &Measured) {
    eprintln!(
        "{phase}: {granted} requests granted; live +{:.2} MiB, peak +{:.2} MiB; allowance {:.2} \
         MiB (table {} MiB + kept {:.2} MiB + released {} MiB + one connection {:.2} MiB)",
        m.now as f64 / MIB as f64,
        m.peak as f64 / MIB as f64,
        allowance(m.table) as f64 / MIB as f64,
        m.table / MIB,
        table_kept() as f64 / MIB as f64,
        config(m.table).max_released_bytes / MIB,
        per_connection() as f64 / MIB as f64,
    );
}

/// Starts a counted server, connects one client, runs `attack` with it and
/// the server's lock table, and measures what the server kept.
fn phase<F, Fut>(name: &str, version: u16, table: usize, attack: F) -> (usize, Measured)
where
    F: FnOnce(Client, Arc<LocalLocker>) -> Fut,
    Fut: std::future::Future<Output = (usize, Client)>,
{
    let _serial = SERIAL.lock().unwrap_or_else(PoisonError::into_inner);
    let server = Counted::start(table);
    let client_rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("client runtime");
    let addr = server.addr.clone();
    let client = client_rt.block_on(Client::connect(&addr, version));
    // Let the connection's task settle before the baseline.
    std::thread::sleep(Duration::from_millis(100));
    let base = live();
    reset_peak();
    let (granted, client) = client_rt.block_on(attack(client, server.locker.clone()));
    let measured = Measured {
        table,
        peak: peak().saturating_sub(base),
        now: live().saturating_sub(base),
    };
    report(name, granted, &measured);
    drop(client);
    drop(server);
    (granted, measured)
}

fn assert_within(phase: &str, m: &Measured) {
    let table = m.table + table_kept() + config(m.table).max_released_bytes;
    assert!(
        m.now <= table,
        "{phase}: the server keeps {} bytes once the requests are answered, over the {table} \
         bytes its lock table (with the room its shards keep) and released uids may take",
        m.now
    );
    assert!(
        m.peak <= allowance(m.table),
        "{phase}: the server kept {} bytes at its peak, over the {} bytes the budget allows",
        m.peak,
        allowance(m.table)
    );
}

#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "fills a server's memory budget: run optimized, `cargo test --release --all-features --test net_memory` (CI does)"
)]
fn short_single_name_locks_stay_within_the_budget() {
    let (granted, m) = phase(
        "short single-name locks",
        VERSION_4,
        TABLE_PAST_DOUBLING,
        |mut c, _| async move {
            let n = fill(&mut c, 512, granted, |id, i| {
                lock(id, OP_LOCK, &uid("short", i), &[format!("{i:016}")])
            })
            .await;
            (n, c)
        },
    );
    // 64 shards, each past 448 names (see `TABLE_PAST_DOUBLING`): the
    // phase measures the maps where they cost the most.
    assert!(
        granted >= 64 * 449,
        "control: {granted} locks leave the shards short of their maps' doubling; \
         raise TABLE_PAST_DOUBLING"
    );
    assert_within("short single-name locks", &m);
}

#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "fills a server's memory budget: run optimized, `cargo test --release --all-features --test net_memory` (CI does)"
)]
fn read_locks_shared_by_many_holders_stay_within_the_budget() {
    let (granted, m) = phase(
        "shared read locks",
        VERSION_4,
        TABLE,
        |mut c, _| async move {
            let n = fill(&mut c, 512, granted, |id, i| {
                lock(id, OP_RLOCK, &uid("read", i), &[format!("{:016}", i % 997)])
            })
            .await;
            (n, c)
        },
    );
    assert!(granted > 1000);
    assert_within("shared read locks", &m);
}

fn thousand(prefix: usize, len: usize) -> Vec<String> {
    let mut names: Vec<String> = (0..1000)
        .map(|i| format!("{prefix:06}-{i:0w$}", w = len - 7))
        .collect();
    names.sort();
    names
}

#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "fills a server's memory budget: run optimized, `cargo test --release --all-features --test net_memory` (CI does)"
)]
fn locks_on_a_thousand_short_names_stay_within_the_budget() {
    let (granted, m) = phase(
        "1,000-name locks, short names",
        VERSION_4,
        TABLE,
        |mut c, _| async move {
            let n = fill(&mut c, 4, granted, |id, i| {
                lock(id, OP_LOCK, &uid("many", i), &thousand(i, 16))
            })
            .await;
            (n, c)
        },
    );
    assert!(granted > 10);
    assert_within("1,000-name locks, short names", &m);
}

#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "fills a server's memory budget: run optimized, `cargo test --release --all-features --test net_memory` (CI does)"
)]
fn locks_on_a_thousand_long_names_stay_within_the_budget() {
    let (granted, m) = phase(
        "1,000-name locks, 1 KiB names",
        VERSION_4,
        TABLE,
        |mut c, _| async move {
            let n = fill(&mut c, 1, granted, |id, i| {
                lock(id, OP_LOCK, &uid("long", i), &thousand(i, 1024))
            })
            .await;
            (n, c)
        },
    );
    assert!(granted > 5);
    assert_within("1,000-name locks, 1 KiB names", &m);
}

#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "fills a server's memory budget: run optimized, `cargo test --release --all-features --test net_memory` (CI does)"
)]
fn waits_queued_on_a_thousand_names_stay_within_the_budget() {
    let (granted, m) = phase(
        "waits on 1,000 names",
        VERSION_3,
        TABLE,
        |mut c, _| async move {
            // One name of every wait is held, so all of them queue.
            let id = c.id();
            let held = c
                .batch(vec![lock(id, OP_LOCK, &uid("holder", 0), &["held".into()])])
                .await;
            assert!(granted(&held[0]), "{held:?}");
            let queued = |r: &[u8]| r == [REPLY_WAIT, wire::QUEUED];
            let n = fill(&mut c, 4, queued, |id, i| {
                let mut names = thousand(i, 16);
                names[999] = "held".into();
                names.sort();
                let names: Vec<&str> = names.iter().map(String::as_str).collect();
                lock_wait_request(
                    id,
                    &uid("wait", i),
                    &names,
                    (1, i as u64),
                    Duration::from_secs(60),
                    true,
                )
            })
            .await;
            (n, c)
        },
    );
    assert!(granted > 10);
    assert_within("waits on 1,000 names", &m);
}

/// The table's cap for the replaced waiter below: a few of its requests.
const SMALL_TABLE: usize = 8 * MIB;

/// One waiter that asks again and again with the same ticket, each time
/// under a new uid for 1,000 other long names (one of them held, so each
/// request keeps a reservation): the server keeps and charges the places
/// of its newest request only, so its memory stays within the table's
/// cap however often it asks.
#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "fills a server's memory budget: run optimized, `cargo test --release --all-features --test net_memory` (CI does)"
)]
fn a_waiter_replaced_under_new_uids_on_other_names_stays_within_the_budget() {
    const STEPS: usize = 60;
    let mut most = 0;
    let (asked, m) = phase(
        "a waiter replaced under new uids",
        VERSION_3,
        SMALL_TABLE,
        |mut c, locker| {
            let most = &mut most;
            async move {
                let id = c.id();
                let held = c
                    .batch(vec![lock(id, OP_LOCK, &uid("holder", 0), &["held".into()])])
                    .await;
                assert!(granted(&held[0]), "{held:?}");
                for step in 0..STEPS {
                    let mut names = thousand(step, 1024);
                    names[999] = "held".into();
                    names.sort();
                    let names: Vec<&str> = names.iter().map(String::as_str).collect();
                    let id = c.id();
                    let wait = lock_wait_request(
                        id,
                        &uid("replaced", step),
                        &names,
                        (1, 7),
                        Duration::from_secs(60),
                        false,
                    );
                    let reply = c.batch(vec![wait]).await;
                    assert_eq!(reply[0], [REPLY_WAIT, wire::REFUSED], "step {step}");
                    *most = (*most).max(locker.waiting());
                }
                (STEPS, c)
            }
        },
    );
    assert_eq!(asked, STEPS);
    assert_within("a waiter replaced under new uids", &m);
    assert_eq!(most, 1000, "the places of the newest request only");
}

/// `Health` and `Status` on a full table of short entries: they count
/// without copying the table, and answer at once.
#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "fills a server's memory budget: run optimized, `cargo test --release --all-features --test net_memory` (CI does)"
)]
fn health_and_status_on_a_full_table_copy_nothing() {
    let mut during = (0, Duration::ZERO);
    let (_, m) = phase(
        "Health and Status on a full table",
        VERSION_4,
        TABLE_PAST_DOUBLING,
        |mut c, _| {
            let during = &mut during;
            async move {
                let n = fill(&mut c, 512, granted, |id, i| {
                    lock(id, OP_LOCK, &uid("full", i), &[format!("{i:016}")])
                })
                .await;
                let before = live();
                reset_peak();
                let started = Instant::now();
                for op in [OP_HEALTH, OP_STATUS, OP_HEALTH, OP_STATUS] {
                    let id = c.id();
                    let reply = c.batch(vec![request(id, op)]).await;
                    assert_ne!(reply[0].first(), Some(&REPLY_ERROR), "{reply:?}");
                }
                *during = (peak().saturating_sub(before), started.elapsed());
                (n, c)
            }
        },
    );
    let (added, took) = during;
    eprintln!(
        "Health and Status: +{:.2} MiB at their peak over the full table, 4 answers in {took:?}",
        added as f64 / MIB as f64
    );
    assert_within("Health and Status on a full table", &m);
    assert!(
        added <= 256 * 1024,
        "Health and Status took {added} bytes beyond the full table"
    );
    assert!(took < Duration::from_secs(2), "4 answers took {took:?}");
}

/// The shard of the server's lock table that `name` falls in: FNV-1a, as
/// `src/local/shards.rs` places names, over its 64 shards.
fn shard_of(name: &str) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in name.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash % 64
}

/// `count` short names that all fall in shard `shard`, distinct per `pass`.
fn names_in_shard(pass: usize, shard: u64, count: usize) -> Vec<String> {
    (0..)
        .map(|i: usize| format!("{pass:02}-{i:013}"))
        .filter(|n| shard_of(n) == shard)
        .take(count)
        .collect()
}

/// Fills the table with single-name locks (`op`) of `uids(i)` on
/// `names(i)`, or takes `limit` of them, then releases (`undo`) all but the
/// first `keep`. Returns how many were granted.
async fn fill_and_release(
    c: &mut Client,
    (op, undo): (u8, u8),
    (limit, keep): (Option<usize>, usize),
    uids: impl Fn(usize) -> String,
    names: impl Fn(usize) -> String,
) -> usize {
    let n = match limit {
        None => fill(c, 512, granted, |id, i| lock(id, op, &uids(i), &[names(i)])).await,
        Some(limit) => {
            let requests: Vec<Vec<u8>> = (0..limit)
                .map(|i| {
                    let id = c.id();
                    lock(id, op, &uids(i), &[names(i)])
                })
                .collect();
            for reply in c.batch(requests).await {
                assert!(granted(&reply), "lock refused: {reply:?}");
            }
            limit
        }
    };
    let requests: Vec<Vec<u8>> = (keep..n)
        .map(|i| {
            let id = c.id();
            lock(id, undo, &uids(i), &[names(i)])
        })
        .collect();
    for reply in c.batch(requests).await {
        assert!(granted(&reply), "release refused: {reply:?}");
    }
    n
}

/// Readers of one name in [`refilling_with_long_names_after_short_ones_stays_within_the_budget`]:
/// each request scans the name's holders, so a whole table of them would
/// take minutes in a debug build.
const READERS: usize = 4_000;

/// Memory the table keeps after a peak: a client fills the
/// table with the entries that cost the maps, the expiry index and the
/// readers' lists the most, releases them (all, or all but one, which
/// keeps a shard's expiry index from emptying), and fills the table again
/// with locks on 1,000 names of 1 KiB, which need little of that. Its
/// first fill spreads short names over every shard; the next ones put
/// them all in one shard, a different one each time, so that every shard
/// would keep room for a whole table's names; the last ones give one name,
/// then another, thousands of readers. Memory kept from the earlier fills must fit in
/// the same allowance as the last fill.
#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "fills a server's memory budget: run optimized, `cargo test --release --all-features --test net_memory` (CI does)"
)]
fn refilling_with_long_names_after_short_ones_stays_within_the_budget() {
    let (granted_long, m) = phase(
        "refill with 1 KiB names after short ones",
        VERSION_4,
        TABLE,
        |mut c, _| async move {
            let short = fill_and_release(
                &mut c,
                (OP_LOCK, OP_UNLOCK),
                (None, 0),
                |i| uid("spread", i),
                |i| format!("{i:016}"),
            )
            .await;
            eprintln!("  {short} short names over all shards, released");
            for pass in 1..=4 {
                let names = names_in_shard(pass, pass as u64, 40_000);
                let n = fill_and_release(
                    &mut c,
                    (OP_LOCK, OP_UNLOCK),
                    (None, 1),
                    |i| uid(&format!("shard{pass}"), i),
                    |i| names[i].clone(),
                )
                .await;
                eprintln!("  {n} short names in shard {pass}, all but one released");
            }
            for pass in 0..4 {
                let n = fill_and_release(
                    &mut c,
                    (OP_RLOCK, OP_RUNLOCK),
                    (Some(READERS), 1),
                    |i| uid(&format!("reader{pass}"), i),
                    |_| format!("shared-{pass}"),
                )
                .await;
                eprintln!("  {n} readers of one name, all but one released");
            }
            let n = fill(&mut c, 1, granted, |id, i| {
                lock(id, OP_LOCK, &uid("long", i), &thousand(i, 1024))
            })
            .await;
            (n, c)
        },
    );
    assert!(granted_long > 5);
    assert_within("refill with 1 KiB names after short ones", &m);
}

/// A version-2 client's plain lock polls: the server remembers each
/// poller (its owner, names and mode) for its turn. What it remembers must
/// stay within the budget, also when the poll is refused or its place
/// lapses and its charge goes.
#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "fills a server's memory budget: run optimized, `cargo test --release --all-features --test net_memory` (CI does)"
)]
fn refused_polls_of_a_version_two_client_stay_within_the_budget() {
    let (polls, m) = phase(
        "refused version-2 polls on a thousand long names",
        2,
        TABLE,
        |mut c, _| async move {
            let id = c.id();
            let held = "aaa-held".to_string();
            let first = c
                .batch(vec![lock(
                    id,
                    OP_LOCK,
                    &uid("holder", 0),
                    std::slice::from_ref(&held),
                )])
                .await;
            assert!(granted(&first[0]), "the first lock is free: {:?}", first[0]);
            let mut polls = 0;
            for round in 0..15 {
                let requests: Vec<Vec<u8>> = (0..10)
                    .map(|k| {
                        let i = round * 10 + k + 1;
                        let mut names = thousand(i, 1000);
                        names.pop();
                        names.insert(0, held.clone());
                        let id = c.id();
                        lock(id, OP_LOCK, &uid("poll", i), &names)
                    })
                    .collect();
                for reply in c.batch(requests).await {
                    assert!(!granted(&reply), "a poll on a held name is not granted");
                    polls += 1;
                }
            }
            (polls, c)
        },
    );
    assert_eq!(polls, 150);
    assert_within("refused version-2 polls on a thousand long names", &m);
}

/// Unlocks of uids nothing holds: each is remembered as a released uid,
/// which docs/lock-servers.md bounds ("the server remembers at most 64 MiB
/// of released lock ids": `max_released_bytes`, 1 MiB here). What the
/// remembered uids take is measured against the same unlocks of one uid
/// (remembered once), with 8- and 50-byte uids (12,000 of them fill the
/// bound).
#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "fills a server's memory budget: run optimized, `cargo test --release --all-features --test net_memory` (CI does)"
)]
fn remembered_releases_stay_within_their_bound() {
    let unlocks = |len: usize, distinct: bool| {
        let name = format!("unlocks of {len}-byte uids never held (distinct: {distinct})");
        phase(&name, VERSION_4, MIB, move |mut c, _| async move {
            let n = 12_000;
            let requests: Vec<Vec<u8>> = (0..n)
                .map(|i| {
                    let id = c.id();
                    let uid = format!("{:0len$}", if distinct { i } else { 0 });
                    lock(id, OP_UNLOCK, &uid, &["r".to_string()])
                })
                .collect();
            for reply in c.batch(requests).await {
                assert_eq!(reply.first(), Some(&REPLY_BOOL), "{reply:?}");
            }
            (n, c)
        })
        .1
    };
    for len in [8usize, 50] {
        let one = unlocks(len, false);
        let many = unlocks(len, true);
        let kept = many.now.saturating_sub(one.now);
        let peak = many.peak.saturating_sub(one.peak);
        let bound = config(MIB).max_released_bytes;
        assert!(
            kept <= bound && peak <= bound,
            "{len}-byte uids: the remembered releases take {kept} bytes ({peak} at the peak), \
             over the {bound} bytes max_released_bytes allows"
        );
    }
}

/// A table that watches by new uids on names of their own fill to about
/// 14,900 watches: just past the point where the boards' map and the
/// ledger's map of uids double (at 14,336 of 16,384 slots).
const WATCH_TABLE: usize = 10 * MIB;

/// Observers' watches, each by a new uid on an election name of its own,
/// fill the lock table's cap (docs/lock-servers.md: "an observer's watch
/// counts its name and uid plus about 650 bytes"; the table's cap "holds
/// after a peak too ... keeping only each shard's room while nearly
/// empty"). What the server keeps once they are answered must fit in the
/// cap, that room and the released uids' bound.
#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "fills a server's memory budget: run optimized, `cargo test --release --all-features --test net_memory` (CI does)"
)]
fn watches_of_new_observers_stay_within_the_table_cap() {
    let (watches, m) = phase(
        "watches by new uids on names of their own",
        VERSION_5,
        WATCH_TABLE,
        |mut c, _| async move {
            let n = fill(
                &mut c,
                256,
                |r| r.first() == Some(&REPLY_LEADER),
                |id, i| {
                    let name = format!("election/{i:016}");
                    leader_request(
                        id,
                        &uid("watch", i),
                        &[&name],
                        Some(Duration::from_secs(60)),
                    )
                },
            )
            .await;
            (n, c)
        },
    );
    assert!(watches > 1000);
    let bound = m.table + table_kept() + config(m.table).max_released_bytes;
    assert!(
        m.now <= bound,
        "{watches} watches: the server keeps {} bytes once they are answered, over the {bound} \
         bytes its lock table's cap ({}), the room it keeps ({}) and the released uids ({}) \
         allow",
        m.now,
        m.table,
        table_kept(),
        config(m.table).max_released_bytes
    );
}

/// Waits that keep reservations (no pushes) on 1,000 names of 1 KiB, one
/// of them held: a place in line keeps its whole request alive, so that
/// it can be granted on every name later. docs/lock-servers.md: "The lock
/// table's cap counts each name of a lock (or of a place in line) as its
/// bytes plus what it costs the table at worst ... The cap holds after a
/// peak too". What the server keeps once they are answered must fit in
/// the cap and the room the table keeps.
#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "fills a server's memory budget: run optimized, `cargo test --release --all-features --test net_memory` (CI does)"
)]
fn reservations_on_a_thousand_long_names_stay_within_the_budget() {
    let (places, m) = phase(
        "reservations on 1,000 names of 1 KiB",
        VERSION_3,
        TABLE,
        |mut c, locker| async move {
            let id = c.id();
            let held = c
                .batch(vec![lock(
                    id,
                    OP_LOCK,
                    &uid("holder", 0),
                    &["aaa-held".into()],
                )])
                .await;
            assert!(granted(&held[0]), "{held:?}");
            let kept = |r: &[u8]| r == [REPLY_WAIT, wire::REFUSED];
            fill(&mut c, 1, kept, |id, i| {
                let mut names = thousand(i, 1024);
                names[999] = "aaa-held".into();
                names.sort();
                let names: Vec<&str> = names.iter().map(String::as_str).collect();
                lock_wait_request(
                    id,
                    &uid("resv", i),
                    &names,
                    (1, i as u64),
                    Duration::from_secs(60),
                    false,
                )
            })
            .await;
            let places = locker.waiting() / 1000;
            (places, c)
        },
    );
    assert!(places > 5, "{places} reservations kept");
    assert_within("reservations on 1,000 names of 1 KiB", &m);
}

/// Connections in [`reservations_behind_released_single_name_holders_stay_within_the_cap`].
const RESERVING_CONNECTIONS: usize = 8;

/// Single-name reservations (waits without pushes) on 1 KiB names that a
/// single-name lock of another uid held first, and released once the
/// reservation stood in line: the name stays in the table for the place,
/// keyed by the released holder's own list of names, whose charge went
/// with the release. docs/lock-servers.md: "The lock table's cap counts
/// each name of a lock (or of a place in line) as its bytes plus what it
/// costs the table at worst"; what the server keeps once the requests are
/// answered must fit in the cap, the room the table keeps and the released
/// uids.
#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "fills a server's memory budget: run optimized, `cargo test --release --all-features --test net_memory` (CI does)"
)]
fn reservations_behind_released_single_name_holders_stay_within_the_cap() {
    const RESV_TABLE: usize = 20 * MIB;
    let _serial = SERIAL.lock().unwrap_or_else(PoisonError::into_inner);
    let mut cfg = config(RESV_TABLE);
    cfg.max_connections = RESERVING_CONNECTIONS + 1;
    cfg.max_connections_per_address = RESERVING_CONNECTIONS + 1;
    let server = Counted::start_with(cfg);
    let client_rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("client runtime");
    let addr = server.addr.clone();
    let mut clients = Vec::new();
    for _ in 0..RESERVING_CONNECTIONS {
        clients.push(client_rt.block_on(Client::connect(&addr, VERSION_3)));
    }
    std::thread::sleep(Duration::from_millis(100));
    let base = live();
    reset_peak();
    let name = |conn: usize, i: usize| format!("{conn:02}-{i:06}-{}", "n".repeat(1014));
    let places = client_rt.block_on(async {
        let mut places = 0;
        'all: for (conn, c) in clients.iter_mut().enumerate() {
            for chunk in 0..8 {
                let mut requests = Vec::new();
                for i in chunk * 128..(chunk + 1) * 128 {
                    let n = name(conn, i);
                    let holder = uid(&format!("h{conn}"), i);
                    let id = c.id();
                    requests.push(lock(id, OP_LOCK, &holder, std::slice::from_ref(&n)));
                    let id = c.id();
                    requests.push(lock_wait_request(
                        id,
                        &uid(&format!("w{conn}"), i),
                        &[n.as_str()],
                        (conn as u64 + 1, i as u64),
                        Duration::from_secs(60),
                        false,
                    ));
                    let id = c.id();
                    requests.push(lock(id, OP_UNLOCK, &holder, std::slice::from_ref(&n)));
                }
                let replies = c.batch(requests).await;
                for r in replies.chunks(3) {
                    if refused_full(&r[0]) || refused_full(&r[1]) {
                        break 'all;
                    }
                    assert!(granted(&r[0]), "holder: {:?}", r[0]);
                    assert_eq!(r[1], [REPLY_WAIT, wire::REFUSED], "reservation");
                    assert!(granted(&r[2]), "release: {:?}", r[2]);
                    places += 1;
                }
            }
        }
        places
    });
    let m = Measured {
        table: RESV_TABLE,
        peak: peak().saturating_sub(base),
        now: live().saturating_sub(base),
    };
    report("reservations behind released holders", places, &m);
    let waiting = server.locker.waiting();
    drop(clients);
    drop(server);
    assert!(places > 1000, "{places} reservations kept");
    assert_eq!(waiting, places, "every reservation stands in line");
    // Each connection's own record of its places is in its part of the
    // budget (`max_waiters_per_connection` records): allow for all of it.
    let bound = m.table
        + table_kept()
        + config(m.table).max_released_bytes
        + RESERVING_CONNECTIONS * waiter_records();
    assert!(
        m.now <= bound,
        "{places} reservations: the server keeps {} bytes once they are answered, over the \
         {bound} bytes its lock table's cap, the room it keeps, the released uids and {} \
         connections' records of their places allow",
        m.now,
        RESERVING_CONNECTIONS
    );
}

/// What `ServerConfig::memory_budget` allows one connection for its record
/// of its places in line.
fn waiter_records() -> usize {
    let mut none = config(0);
    none.max_lock_bytes = 0;
    none.max_released_bytes = 0;
    none.max_waiters_per_connection = 0;
    let mut one = none.clone();
    one.max_connections += 1;
    let without = one.memory_budget().client - none.memory_budget().client;
    per_connection() - without
}

/// Observers that watched one name after another, 2,250 at a time, then
/// stopped reading, so that their watches and their charges lapsed; one
/// observer per name goes on reading, which keeps that name's board.
/// docs/lock-servers.md: "The cap holds after a peak too: the table gives
/// back the room of entries that went"; what the server keeps must fit in
/// the cap, the room it keeps and the released uids, however many names
/// were watched that way.
#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "fills a server's memory budget: run optimized, `cargo test --release --all-features --test net_memory` (CI does)"
)]
fn lapsed_watches_give_back_their_room() {
    const WATCHED_TABLE: usize = 3 * MIB;
    const NAMES: usize = 34;
    const WATCHES: usize = 2_250;
    let validity = Duration::from_millis(400);
    let _serial = SERIAL.lock().unwrap_or_else(PoisonError::into_inner);
    let locker = LocalLocker::with_config(
        "local",
        quorum_lock::LockerConfig {
            validity,
            quarantine: validity,
        },
    );
    let server = Counted::start_full(config(WATCHED_TABLE), locker);
    let client_rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("client runtime");
    let addr = server.addr.clone();
    let mut c = client_rt.block_on(Client::connect(&addr, VERSION_5));
    std::thread::sleep(Duration::from_millis(100));
    let base = live();
    reset_peak();
    let name = |n: usize| format!("election/{n:04}");
    let watched = client_rt.block_on(async {
        let started = Instant::now();
        let mut watched = 0;
        let keepers = |c: &mut Client, upto: usize| -> Vec<Vec<u8>> {
            (0..=upto)
                .map(|k| {
                    let id = c.id();
                    let n = name(k);
                    leader_request(id, &uid("keeper", k), &[&n], Some(validity))
                })
                .collect()
        };
        for n in 0..NAMES {
            let mut i = 0;
            while i < WATCHES {
                assert!(
                    started.elapsed() < Duration::from_secs(240),
                    "took too long"
                );
                let mut requests = keepers(&mut c, n);
                let k = requests.len();
                for j in 0..256.min(WATCHES - i) {
                    let id = c.id();
                    let resource = name(n);
                    requests.push(leader_request(
                        id,
                        &uid(&format!("w{n}"), i + j),
                        &[&resource],
                        Some(validity),
                    ));
                }
                let replies = c.batch(requests).await;
                let mut full = false;
                for (at, r) in replies.iter().enumerate() {
                    if refused_full(r) {
                        full = true;
                        continue;
                    }
                    assert_eq!(r.first(), Some(&REPLY_LEADER), "reply {r:?}");
                    if at >= k {
                        i += 1;
                        watched += 1;
                    }
                }
                if full {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
        // Every watch but the keepers' lapses, with its charge.
        let until = Instant::now() + 2 * validity + Duration::from_millis(500);
        while Instant::now() < until {
            let requests = keepers(&mut c, NAMES - 1);
            for r in c.batch(requests).await {
                assert_eq!(r.first(), Some(&REPLY_LEADER), "reply {r:?}");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        watched
    });
    let m = Measured {
        table: WATCHED_TABLE,
        peak: peak().saturating_sub(base),
        now: live().saturating_sub(base),
    };
    report("lapsed watches", watched, &m);
    drop(c);
    drop(server);
    let bound = m.table + table_kept() + config(m.table).max_released_bytes;
    assert!(
        m.now <= bound,
        "{watched} watches on {NAMES} names lapsed: the server keeps {} bytes for {NAMES} \
         live watches, over the {bound} bytes its lock table's cap, the room it keeps and the \
         released uids allow",
        m.now
    );
}

/// Leaders that each hold a lock of their own and proclaim a value of the
/// largest size, 4 KiB, until the table is full. docs/lock-servers.md: "a
/// leader's proclamation counts its value, name and uid plus about 840
/// bytes against the leader's lock"; what the server keeps must fit in the
/// cap, the room it keeps and the released uids.
#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "fills a server's memory budget: run optimized, `cargo test --release --all-features --test net_memory` (CI does)"
)]
fn proclamations_of_the_largest_values_stay_within_the_budget() {
    let (leaders, m) = phase(
        "proclamations of 4 KiB values",
        VERSION_5,
        TABLE,
        |mut c, _| async move {
            let value = vec![b'v'; 4096];
            let mut leaders = 0;
            'all: loop {
                let mut requests = Vec::new();
                for i in leaders..leaders + 128 {
                    let name = format!("election/{i:016}");
                    let id = c.id();
                    requests.push(lock(
                        id,
                        OP_LOCK,
                        &uid("leader", i),
                        std::slice::from_ref(&name),
                    ));
                    let id = c.id();
                    requests.push(proclaim_request(
                        id,
                        &uid("leader", i),
                        &[&name],
                        1,
                        1,
                        &value,
                    ));
                }
                let replies = c.batch(requests).await;
                for r in replies.chunks(2) {
                    if refused_full(&r[0]) || refused_full(&r[1]) {
                        break 'all;
                    }
                    assert!(granted(&r[0]), "lock: {:?}", r[0]);
                    assert_ne!(
                        r[1].first(),
                        Some(&REPLY_ERROR),
                        "proclaim: {:?}",
                        String::from_utf8_lossy(&r[1])
                    );
                    leaders += 1;
                }
                assert!(leaders < 1_000_000, "the table never filled");
            }
            (leaders, c)
        },
    );
    assert!(leaders > 1000, "{leaders} leaders");
    assert_within("proclamations of 4 KiB values", &m);
}

/// Reproduces a past break: one uid's locks on many different names, all
/// but one released, leave the ledger's list of that uid's resource sets
/// at its peak size (`Charge::sets` in src/net/ledger.rs, shrunk by
/// `retain` but never given back), while the charge left is one lock's,
/// whose `LOCK_OVERHEAD` counts room for four sets. A client repeats this
/// under uid after uid: each keeps a list of 2,048 sets (32 KiB) for a
/// charge of one single-name lock, and the server keeps many times its
/// lock table's cap. With 384 uids under a 3 MiB table the server keeps
/// 12.8 MiB, over the whole allowance of 9.4 MiB (one connection's frames
/// included) and 2.6 times what its table, kept room and released uids
/// may take. The same requests with a uid of their own for each lock (256
/// uids' worth under a 2 MiB table) keep 0.9 MiB.
///
/// docs/lock-servers.md, "A compromised client": "The server's memory
/// stays within `memory_budget()` whatever it sends"; "Limits and memory":
/// everything the table keeps after a peak is given back, so memory
/// follows the charges of the locks held now.
#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "fills a server's memory budget: run optimized, `cargo test --release --all-features --test net_memory` (CI does)"
)]
fn locks_of_one_uid_on_many_names_released_but_one_stay_within_the_budget() {
    one_uid_on_many_names_released_but_one(
        "one uid's locks on many names, all but one released",
        VERSION_4,
        3 * MIB,
        384,
        false,
    );
}

/// Reproduces a past break: one leader uid's proclamations on many names,
/// each beside a lock of its own, all but one released with their locks,
/// leave the ledger's list of that uid's board records at its peak size
/// (`Charge::boards` in src/net/ledger.rs, shrunk by `retain` but never
/// given back, as `Charge::sets` once was), while the charge left is one
/// lock's and one proclamation's, whose `BOARD_RECORD` counts room for
/// four records. A client repeats this under uid after uid: each keeps a
/// list of 2,048 records (48 KiB) for one proclamation.
///
/// docs/lock-servers.md, "A compromised client": "The server's memory
/// stays within `memory_budget()` whatever it sends"; "Limits and memory":
/// everything the table keeps after a peak is given back, so memory
/// follows the charges of the locks held now.
#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "fills a server's memory budget: run optimized, `cargo test --release --all-features --test net_memory` (CI does)"
)]
fn proclamations_of_one_uid_on_many_names_released_but_one_stay_within_the_budget() {
    one_uid_on_many_names_released_but_one(
        "one uid's proclamations on many names, all but one released",
        VERSION_5,
        4 * MIB,
        256,
        true,
    );
}

/// The scene of the two tests above: under each of `uids` uids in turn,
/// locks on 1,025 names of their own (just past a power of two, so a list
/// of the uid's sets or records doubles its room to 2,048), each with a
/// proclamation beside it if `proclaim`, then releases all but the first;
/// the server must keep what it keeps within the allowance of a `table`
/// cap.
fn one_uid_on_many_names_released_but_one(
    phase_name: &str,
    version: u16,
    table: usize,
    uids: usize,
    proclaim: bool,
) {
    const SETS: usize = 1025;
    let (kept, m) = phase(phase_name, version, table, |mut c, _| async move {
        let started = Instant::now();
        for u in 0..uids {
            let holder = uid(if proclaim { "boards" } else { "sets" }, u);
            let name = |i: usize| format!("{u:06}-{i:06}");
            let mut requests = Vec::new();
            for i in 0..SETS {
                let id = c.id();
                requests.push(lock(id, OP_LOCK, &holder, &[name(i)]));
                if proclaim {
                    let id = c.id();
                    requests.push(proclaim_request(id, &holder, &[&name(i)], 1, 1, b"v"));
                }
            }
            let per_name = if proclaim { 2 } else { 1 };
            for r in c.batch(requests).await.chunks(per_name) {
                assert!(granted(&r[0]), "control: lock refused: {:?}", r[0]);
                if proclaim {
                    assert_ne!(
                        r[1].first(),
                        Some(&REPLY_ERROR),
                        "control: proclaim refused: {:?}",
                        String::from_utf8_lossy(&r[1])
                    );
                }
            }
            let unlocks: Vec<Vec<u8>> = (1..SETS)
                .map(|i| {
                    let id = c.id();
                    lock(id, OP_UNLOCK, &holder, &[name(i)])
                })
                .collect();
            for reply in c.batch(unlocks).await {
                assert!(granted(&reply), "control: release refused: {reply:?}");
            }
            assert!(
                started.elapsed() < Duration::from_secs(300),
                "the scene took too long"
            );
        }
        eprintln!("  {uids} uids in {:?}", started.elapsed());
        (uids, c)
    });
    assert_eq!(kept, uids);
    assert_within(phase_name, &m);
}

/// Clients that each connect, take one single-name lock and close their
/// connection, until the table is full; the locks stay (their validity
/// outlasts the scene). With `push`, each lock is a pushed wait granted at
/// once. Returns how many locks were granted and what the server keeps
/// once every connection closed.
fn locks_of_closed_connections(table: usize, push: bool) -> (usize, Measured) {
    const MOST: usize = 40_000;
    let _serial = SERIAL.lock().unwrap_or_else(PoisonError::into_inner);
    let locker = LocalLocker::with_config(
        "local",
        quorum_lock::LockerConfig {
            validity: Duration::from_secs(600),
            quarantine: Duration::from_secs(600),
        },
    );
    let mut churn = config(table);
    churn.max_connections = 16;
    let server = Counted::start_full(churn, locker);
    let client_rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("client runtime");
    let addr = server.addr.clone();
    std::thread::sleep(Duration::from_millis(100));
    let base = live();
    reset_peak();
    let locks = client_rt.block_on(async {
        let started = Instant::now();
        let mut locks = 0;
        for i in 0..MOST {
            assert!(
                started.elapsed() < Duration::from_secs(240),
                "took too long"
            );
            let mut c = Client::connect(&addr, VERSION_3).await;
            let id = c.id();
            let name = format!("churn-{i:08}");
            let holder = uid("churn", i);
            let request = if push {
                wire::lock_wait_request(
                    id,
                    &holder,
                    &[&name],
                    (i as u64 + 1, 1),
                    Duration::from_secs(60),
                    true,
                )
            } else {
                lock(id, OP_LOCK, &holder, &[name])
            };
            let reply = c.batch(vec![request]).await;
            drop(c);
            if refused_full(&reply[0]) {
                break;
            }
            let ok: &[u8] = if push {
                &[REPLY_WAIT, wire::GRANTED]
            } else {
                &[REPLY_BOOL, 1]
            };
            assert_eq!(reply[0], ok, "reply {:?}", reply[0]);
            locks += 1;
        }
        eprintln!(
            "  {locks} locks over as many connections in {:?}",
            started.elapsed()
        );
        // Every connection's task has ended.
        tokio::time::sleep(Duration::from_millis(1000)).await;
        locks
    });
    let m = Measured {
        table,
        peak: peak().saturating_sub(base),
        now: live().saturating_sub(base),
    };
    let name = if push {
        "pushed waits of closed connections"
    } else {
        "plain locks of closed connections"
    };
    report(name, locks, &m);
    assert!(locks > 100, "control: only {locks} locks granted");
    assert_eq!(
        server.locker.snapshot().len(),
        locks,
        "control: the locks stand"
    );
    drop(server);
    (locks, m)
}

/// Clients that each connect, take one single-name lock with a pushed
/// wait (granted at once) and close their connection, until the table is
/// full; the locks stay, as they would while their holders refresh them
/// over other connections. The table keeps, in each entry a pushed wait
/// granted, the `Wake` of the connection that asked, and with it that
/// connection's push sink. Reproduces a past break: the sink kept the
/// connection's push channel and the room of its record of places for as
/// long as the entry stood, charged to nothing (26.8 MiB kept where 18.6
/// MiB were the bound); the sink now lets them go when its session ends.
/// docs/lock-servers.md, "Memory budget": "A client with the ordinary
/// token cannot make it use more than 2.5 GiB beyond its locks (...),
/// whose table is capped at 1 GiB"; "The cap holds after a peak too": once
/// every connection closed, what the server keeps must fit in the cap, the
/// room it keeps and the released uids. The same locks taken by plain
/// lock calls (control) fit.
#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "fills a server's memory budget: run optimized, `cargo test --release --all-features --test net_memory` (CI does)"
)]
fn locks_granted_to_pushed_waits_of_closed_connections_stay_within_the_budget() {
    const CHURN_TABLE: usize = 16 * MIB;
    let bound = |m: &Measured| m.table + table_kept() + config(m.table).max_released_bytes;
    let (plain, pm) = locks_of_closed_connections(CHURN_TABLE, false);
    assert!(
        pm.now <= bound(&pm),
        "control: {plain} plain locks of as many closed connections: the server keeps {} \
         bytes, over the {} bytes allowed",
        pm.now,
        bound(&pm)
    );
    let (locks, m) = locks_of_closed_connections(CHURN_TABLE, true);
    assert!(
        m.now <= bound(&m),
        "{locks} locks granted to pushed waits of as many closed connections: the server keeps \
         {} bytes, over the {} bytes its lock table's cap, the room it keeps and the released \
         uids allow (plain locks of as many closed connections: {plain} locks, {} bytes kept)",
        m.now,
        bound(&m),
        pm.now
    );
}
