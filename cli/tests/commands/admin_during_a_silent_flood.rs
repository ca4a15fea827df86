//! A flood of connections that send nothing only delays an admin whose
//! handshake is a moment behind its connection, never keeps it out
//! (docs/lock-servers.md, "A peer without a token": "a newcomer that had
//! sent nothing either waits at the door, without a slot, for its first
//! bytes ... a flood of silent connections, however fast, delays it by a
//! moment but does not keep it out"), given the door's room. Where the
//! open-files limit leaves the door less than its 256 places, the server
//! says so when it starts (the door takes up to half the descriptors left
//! before the client connections; with fewer places a silent flood can
//! keep the admin out, which a review measured: 15-23 refusals of 30).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::support::pace::Pace;
use crate::support::wire::{frame, hello, VERSION};
use crate::support::{LimitedServer, Scratch, ADMIN};

/// How often the admin asks for the status during the flood.
const ATTEMPTS: usize = 30;

/// Each of the two flooders' pace: 2,500 connections a second, 5,000
/// together, the "few thousand" a second the docs' test speaks of.
const PER_FLOODER_PER_SECOND: u64 = 2500;

/// Opens plain TCP connections to `addr` at [`PER_FLOODER_PER_SECOND`], at
/// most 64 attempts in flight at any time, never sending a byte and
/// keeping the newest 32 open; at most 100,000 connections or 20 s.
fn flood(addr: String, stop: Arc<AtomicBool>, opened: Arc<AtomicU64>) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async move {
        let started = Instant::now();
        let mut pace = Pace::new(PER_FLOODER_PER_SECOND);
        let mut open = VecDeque::new();
        let mut attempts = tokio::task::JoinSet::new();
        while !stop.load(Ordering::Acquire)
            && started.elapsed() < Duration::from_secs(20)
            && opened.load(Ordering::Relaxed) < 100_000
        {
            while attempts.len() < 64 && pace.may_begin() {
                attempts.spawn(tokio::net::TcpStream::connect(addr.clone()));
            }
            if attempts.is_empty() {
                tokio::time::sleep(Duration::from_millis(1)).await;
                continue;
            }
            let joined = tokio::time::timeout(Duration::from_millis(1), attempts.join_next()).await;
            if let Ok(Some(Ok(Ok(stream)))) = joined {
                opened.fetch_add(1, Ordering::Relaxed);
                open.push_back(stream);
                if open.len() > 32 {
                    open.pop_front();
                }
            }
        }
        attempts.abort_all();
    });
}

/// How long the admin waits between its connection and its handshake.
const BEHIND: Duration = Duration::from_millis(10);

/// One admin handshake sent [`BEHIND`] its connection: whether the server
/// accepted it, or why not.
async fn admin_handshake(addr: &str) -> Result<(), String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr)
        .await
        .map_err(|e| format!("connect: {e}"))?;
    tokio::time::sleep(BEHIND).await;
    let read = async {
        stream
            .write_all(&frame(&hello(VERSION, ADMIN.as_bytes())))
            .await?;
        let mut header = [0u8; 4];
        stream.read_exact(&mut header).await?;
        let len = u32::from_be_bytes(header) as usize;
        let mut payload = vec![0; len.min(1 << 16)];
        stream.read_exact(&mut payload).await?;
        Ok::<_, std::io::Error>(payload)
    };
    match tokio::time::timeout(Duration::from_secs(10), read).await {
        Ok(Ok(welcome)) if welcome.first() == Some(&0) => Ok(()),
        Ok(Ok(welcome)) => Err(format!("rejected: {:?}", String::from_utf8_lossy(&welcome))),
        Ok(Err(err)) => Err(format!("closed: {err}")),
        Err(_) => Err("no welcome within 10 s".into()),
    }
}

/// A server started under `ulimit -n open_files` with `extra` arguments,
/// killed by pid when dropped, and its address.
struct Started {
    server: LimitedServer,
    addr: String,
    _dir: Scratch,
}

impl Started {
    fn log(&self) -> String {
        self.server.log_text()
    }
}

async fn start(open_files: u32, extra: &[&str]) -> Started {
    let dir = Scratch::new("door-ulimit");
    let args: Vec<&str> = ["--no-quarantine", "--validity", "6s"]
        .into_iter()
        .chain(extra.iter().copied())
        .collect();
    // It waits for the server's first line: a moment, on a worker of its
    // own (the test runs on a multi-threaded runtime).
    let server = tokio::task::block_in_place(|| LimitedServer::start(&dir, open_files, &args));
    let addr = server.addr.expect("the server started").to_string();
    Started {
        server,
        addr,
        _dir: dir,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_admin_a_moment_behind_its_connection_gets_in_during_a_silent_flood() {
    let server = start(4096, &["--max-connections", "12"]).await;
    let addr = server.addr.clone();

    let stop = Arc::new(AtomicBool::new(false));
    let opened = Arc::new(AtomicU64::new(0));
    let flooders: Vec<_> = (0..2)
        .map(|_| {
            let (stop, opened, addr) = (stop.clone(), opened.clone(), addr.clone());
            std::thread::spawn(move || flood(addr, stop, opened))
        })
        .collect();
    // Let the flood fill the slots first.
    let waited = Instant::now();
    while opened.load(Ordering::Relaxed) < 500 && waited.elapsed() < Duration::from_secs(10) {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }

    let mut refusals = Vec::new();
    for _ in 0..ATTEMPTS {
        if let Err(err) = admin_handshake(&addr).await {
            refusals.push(err);
        }
    }
    stop.store(true, Ordering::Release);
    for flooder in flooders {
        flooder.join().expect("flood thread");
    }
    let opened = opened.load(Ordering::Relaxed);
    let server_log = server.log();
    assert!(
        !server_log.contains("lowering --max-connections")
            && !server_log.contains("is smaller than it should"),
        "--max-connections or the door lowered: {server_log}"
    );
    assert!(opened >= 500, "the flood opened only {opened} connections");
    // A flood may delay the admin, but not keep it out: at most one
    // attempt in ten may be refused.
    assert!(
        refusals.len() <= ATTEMPTS / 10,
        "the admin was refused {} of {ATTEMPTS} times during a flood of {opened} connections; \
         the first: {:?}",
        refusals.len(),
        refusals.first()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_whose_open_files_leave_the_door_small_says_so() {
    // 48 descriptors: the command line keeps its spare ones and the admin
    // reserve aside, gives the door half of the 12 left and the client
    // connections the rest.
    let server = start(48, &[]).await;
    let log = server.log();
    assert!(
        log.contains("lowering --max-connections") && log.contains("max_connections=6"),
        "{log}"
    );
    assert!(
        log.contains("the door for new connections that have not spoken yet is smaller")
            && log.contains("door=6"),
        "{log}"
    );
}
