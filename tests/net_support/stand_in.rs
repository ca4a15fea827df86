//! A stand-in lock server spoken by hand, for the tests of how a
//! `RemoteLocker` opens its connection again: each test scripts what the
//! server does with each connection (welcome it, close it as idle, leave
//! its handshake unanswered, grant what it is asked) from these pieces;
//! and a current-thread runtime that a test stops driving, for calls
//! parked mid-reopen.

#![allow(dead_code)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use quorum_lock::net::{RemoteConfig, RemoteLocker};
use quorum_lock::{LockArgs, NetLocker, RetryPolicy};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::wire;

pub const TOKEN: &str = "client-secret";

/// A write lock on a name of its own, quorum 1.
pub fn args(uid: &str) -> LockArgs {
    LockArgs {
        uid: uid.into(),
        resources: vec![format!("name/{uid}")].into(),
        owner: "owner".into(),
        source: "source".into(),
        quorum: 1,
    }
}

/// A listener on a free loopback port, and its address.
pub async fn bind() -> (TcpListener, String) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("address").to_string();
    (listener, addr)
}

/// The next connection, once its hello has been read (not answered).
/// `None` when the listener fails or the client sent no hello.
pub async fn accept_hello(listener: &TcpListener) -> Option<TcpStream> {
    let (mut stream, _) = listener.accept().await.ok()?;
    wire::read_frame(&mut stream, 4096).await.ok()?;
    Some(stream)
}

/// Answers a hello with a version-6 welcome.
pub async fn welcome(stream: &mut TcpStream) -> bool {
    stream
        .write_all(&wire::frame(&wire::accepted(
            wire::VERSION_6,
            Duration::from_secs(10),
        )))
        .await
        .is_ok()
}

/// Welcomes the connection, then closes it in good order with nothing
/// pending, as a server closes a connection that stayed idle.
pub async fn welcome_then_close_as_idle(mut stream: TcpStream) {
    assert!(welcome(&mut stream).await, "welcome");
    tokio::time::sleep(Duration::from_millis(50)).await;
    close_as_idle(stream).await;
}

/// Closes a welcomed connection in good order with nothing pending, as a
/// server closes a connection that stayed idle.
pub async fn close_as_idle(mut stream: TcpStream) {
    let _ = stream.shutdown().await;
}

/// Answers `request` with `true`.
pub async fn grant(stream: &mut TcpStream, request: &[u8]) -> bool {
    let (id, _) = wire::response(request);
    let mut reply = wire::varint(id);
    reply.extend([wire::REPLY_BOOL, 1]);
    stream.write_all(&wire::frame(&reply)).await.is_ok()
}

/// Answers every request with `true` until the client goes.
pub async fn grant_all(mut stream: TcpStream) {
    while let Ok(request) = wire::read_frame(&mut stream, 1 << 20).await {
        if !grant(&mut stream, &request).await {
            return;
        }
    }
}

/// Welcomes every later connection and grants all it asks, each on a
/// task of its own, until the listener fails.
pub async fn welcome_and_grant_every_connection(listener: TcpListener) {
    while let Ok((mut stream, _)) = listener.accept().await {
        tokio::spawn(async move {
            if wire::read_frame(&mut stream, 4096).await.is_ok() && welcome(&mut stream).await {
                grant_all(stream).await;
            }
        });
    }
}

/// Whether the client shuts `stream` down (its reads end or fail) within
/// `within`; what it sends meanwhile is read and dropped.
pub async fn shut_by_the_client_within(stream: &mut TcpStream, within: Duration) -> bool {
    let mut buf = [0u8; 64];
    tokio::time::timeout(within, async {
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    })
    .await
    .is_ok()
}

/// Ends a connection with a reset rather than in good order.
pub fn reset(stream: TcpStream) {
    let _ = stream.set_zero_linger();
    drop(stream);
}

/// Timeouts short enough for a test: 500 ms to connect, 2 s per call.
pub fn config() -> RemoteConfig {
    let mut config = RemoteConfig::new(TOKEN);
    config.connect_timeout = Duration::from_millis(500);
    config.call_timeout = Duration::from_secs(2);
    config
}

/// [`config`] with a backoff whose step is drawn up to `step`.
pub fn config_stepping(step: Duration) -> RemoteConfig {
    let mut config = config();
    config.reconnect = RetryPolicy {
        initial: step,
        max: step,
    };
    config
}

/// A stand-in on `listener` that welcomes each connection (up to 100)
/// 30 ms after its hello and closes it as idle at once, so that a call
/// that reopened and gave up within 30 ms never sends a request. Returns
/// the server's task and the counts of the connections it accepted and of
/// those it is done with.
pub fn closing_each_connection_before_a_call(
    listener: TcpListener,
) -> (
    tokio::task::JoinHandle<()>,
    Arc<AtomicUsize>,
    Arc<AtomicUsize>,
) {
    let accepted = Arc::new(AtomicUsize::new(0));
    let closed = Arc::new(AtomicUsize::new(0));
    let (counted, closes) = (accepted.clone(), closed.clone());
    let server = tokio::spawn(async move {
        for _ in 0..100 {
            let Some(mut stream) = accept_hello(&listener).await else {
                return;
            };
            counted.fetch_add(1, Ordering::Relaxed);
            let closes = closes.clone();
            tokio::spawn(async move {
                // Welcomed only after the call that reopened gave up, so
                // that no request is ever sent: a close under a call is
                // one the backoff reconnects from in the background.
                tokio::time::sleep(Duration::from_millis(30)).await;
                if welcome(&mut stream).await {
                    close_as_idle(stream).await;
                }
                closes.fetch_add(1, Ordering::Relaxed);
            });
        }
    });
    (server, accepted, closed)
}

/// Waits (at most 5 s) until `count` reaches `at_least`; says whether it
/// did.
pub async fn until_counted(count: &AtomicUsize, at_least: usize) -> bool {
    tokio::time::timeout(Duration::from_secs(5), async {
        while count.load(Ordering::Relaxed) < at_least {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    })
    .await
    .is_ok()
}

/// A locker of the stand-in at `addr` (with [`config`]), once the stand-in
/// has closed its first connection as idle (it must, within 5 s).
pub async fn connected_until_the_idle_close(addr: String) -> Arc<RemoteLocker> {
    let locker = Arc::new(
        RemoteLocker::connect(addr, config())
            .await
            .expect("connect"),
    );
    assert!(until_connected(&locker, false).await, "the idle close");
    locker
}

/// Waits (at most 5 s) until the locker has a connection (`true`) or has
/// none (`false`); says whether it came to that.
pub async fn until_connected(locker: &RemoteLocker, connected: bool) -> bool {
    tokio::time::timeout(Duration::from_secs(5), async {
        while locker.protocol_version().is_some() != connected {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .is_ok()
}

/// What the thread of an [`IdleRuntime`] is told to do.
enum Drive {
    For(Duration),
    UntilTheCallEnds,
}

/// A current-thread runtime on a thread of its own, holding a call that
/// began on it and that the test then stops driving: the call parks
/// wherever it was (mid-reopen, for these tests).
pub struct IdleRuntime {
    drive: Option<std::sync::mpsc::Sender<Drive>>,
    driven: Option<std::sync::mpsc::Receiver<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl IdleRuntime {
    /// Starts `locker.lock(args(uid))` on a new current-thread runtime,
    /// drives it until `began` fires (or 5 s pass), then stops driving
    /// it.
    pub fn park_a_call(
        locker: Arc<RemoteLocker>,
        uid: &'static str,
        began: tokio::sync::oneshot::Receiver<()>,
    ) -> IdleRuntime {
        Self::start(locker, uid, began, false)
    }

    /// Makes `locker.lock(args(uid))` on a new current-thread runtime and
    /// gives it up when `began` fires (or 5 s pass), letting go of the
    /// locker: what the call started as tasks of their own (a reopen)
    /// stays parked on the runtime, which nobody drives from then on.
    pub fn give_up_a_call(
        locker: Arc<RemoteLocker>,
        uid: &'static str,
        began: tokio::sync::oneshot::Receiver<()>,
    ) -> IdleRuntime {
        Self::start(locker, uid, began, true)
    }

    fn start(
        locker: Arc<RemoteLocker>,
        uid: &'static str,
        began: tokio::sync::oneshot::Receiver<()>,
        give_up: bool,
    ) -> IdleRuntime {
        let (parked_tx, parked_rx) = std::sync::mpsc::channel::<()>();
        let (drive_tx, drive_rx) = std::sync::mpsc::channel::<Drive>();
        let (driven_tx, driven_rx) = std::sync::mpsc::channel::<()>();
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            let (ended_tx, mut ended_rx) = tokio::sync::oneshot::channel::<()>();
            if give_up {
                runtime.block_on(async move {
                    let call_args = args(uid);
                    tokio::select! {
                        _ = locker.lock(&call_args) => {}
                        _ = tokio::time::timeout(Duration::from_secs(5), began) => {}
                    }
                    drop(locker);
                    let _ = ended_tx.send(());
                });
            } else {
                let _parked = runtime.spawn(async move {
                    let _ = locker.lock(&args(uid)).await;
                    let _ = ended_tx.send(());
                });
                runtime.block_on(async {
                    let _ = tokio::time::timeout(Duration::from_secs(5), began).await;
                });
            }
            let _ = parked_tx.send(());
            // Driven again each time it is told; dropped when the test
            // lets go of it.
            while let Ok(drive) = drive_rx.recv_timeout(Duration::from_secs(60)) {
                match drive {
                    Drive::For(time) => runtime.block_on(async { tokio::time::sleep(time).await }),
                    Drive::UntilTheCallEnds => runtime.block_on(async {
                        let _ = tokio::time::timeout(Duration::from_secs(10), &mut ended_rx).await;
                    }),
                }
                let _ = driven_tx.send(());
            }
            drop(runtime);
        });
        parked_rx
            .recv_timeout(Duration::from_secs(10))
            .expect("the call on the idle runtime began");
        IdleRuntime {
            drive: Some(drive_tx),
            driven: Some(driven_rx),
            thread: Some(thread),
        }
    }

    /// Drives the runtime for `time`, then leaves it idle again.
    pub async fn drive_for(&mut self, time: Duration) {
        self.drive(Drive::For(time)).await;
    }

    /// Drives the runtime until its call has ended (at most 10 s), then
    /// leaves it idle again: what the call started on it stays parked.
    pub async fn drive_until_the_call_ends(&mut self) {
        self.drive(Drive::UntilTheCallEnds).await;
    }

    /// Drops the runtime, and with it all that is parked on it.
    pub async fn shut_down(mut self) {
        self.drive = None;
        if let Some(thread) = self.thread.take() {
            let _ = tokio::task::spawn_blocking(move || thread.join()).await;
        }
    }

    async fn drive(&mut self, drive: Drive) {
        if let Some(tx) = &self.drive {
            let _ = tx.send(drive);
        }
        if let Some(driven) = self.driven.take() {
            let driven = tokio::task::spawn_blocking(move || {
                let _ = driven.recv_timeout(Duration::from_secs(30));
                driven
            })
            .await
            .expect("waiting thread");
            self.driven = Some(driven);
        }
    }
}

impl Drop for IdleRuntime {
    fn drop(&mut self) {
        self.drive = None;
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// A locker made on a current-thread runtime of a thread of its own,
/// driven until the locker is made (and then until `until` fires, when
/// given, or 5 s pass), then left idle, not dropped, until
/// [`IdleThread::shut_down`]: the locker's connection or reconnect task
/// sits on that runtime.
pub async fn connect_on_an_idle_runtime(
    addr: String,
    config: RemoteConfig,
    until: Option<tokio::sync::oneshot::Receiver<()>>,
) -> (Arc<RemoteLocker>, IdleThread) {
    let (locker_tx, locker_rx) = std::sync::mpsc::channel::<Arc<RemoteLocker>>();
    let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
    let thread = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let locker = runtime.block_on(async move {
            let locker = RemoteLocker::connect(addr, config)
                .await
                .expect("a locker (an unreachable server is no error)");
            if let Some(until) = until {
                let _ = tokio::time::timeout(Duration::from_secs(5), until).await;
            }
            locker
        });
        let _ = locker_tx.send(Arc::new(locker));
        let _ = release_rx.recv_timeout(Duration::from_secs(30));
        drop(runtime);
    });
    let locker =
        tokio::task::spawn_blocking(move || locker_rx.recv_timeout(Duration::from_secs(10)))
            .await
            .expect("thread")
            .expect("the locker was made");
    let idle = IdleThread {
        release: Some(release_tx),
        thread: Some(thread),
    };
    (locker, idle)
}

/// A locker of the stand-in at `addr` (with [`config`]) connected from a
/// multi-thread runtime of one worker of its own, and that runtime: the
/// connection's reader and writer run there, and die when it shuts down.
pub async fn connect_from_a_runtime_of_its_own(
    addr: String,
) -> (Arc<RemoteLocker>, tokio::runtime::Runtime) {
    let (locker, runtime) = tokio::task::spawn_blocking(move || {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("runtime");
        let locker = runtime
            .block_on(RemoteLocker::connect(addr, config()))
            .expect("connect");
        (locker, runtime)
    })
    .await
    .expect("the connecting thread");
    (Arc::new(locker), runtime)
}

/// A locker made on a current-thread runtime of a thread of its own and
/// handed over at once; the runtime is driven until
/// [`DrivenThread::go_idle`] (or `drive_at_most` passes), then left idle,
/// not dropped, until [`DrivenThread::shut_down`] (or 40 s pass): the
/// locker's connection sits on it.
pub async fn connect_on_a_runtime_driven_until_told(
    addr: String,
    config: RemoteConfig,
    drive_at_most: Duration,
) -> (Arc<RemoteLocker>, DrivenThread) {
    let (locker_tx, locker_rx) = std::sync::mpsc::channel::<Arc<RemoteLocker>>();
    let (idle_tx, idle_rx) = std::sync::mpsc::channel::<()>();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
    let thread = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        runtime.block_on(async move {
            let locker = RemoteLocker::connect(addr, config).await.expect("connect");
            let _ = locker_tx.send(Arc::new(locker));
            let _ = tokio::time::timeout(drive_at_most, stop_rx).await;
        });
        let _ = idle_tx.send(());
        let _ = release_rx.recv_timeout(Duration::from_secs(40));
        drop(runtime);
    });
    let locker =
        tokio::task::spawn_blocking(move || locker_rx.recv_timeout(Duration::from_secs(5)))
            .await
            .expect("thread")
            .expect("the locker");
    let driven = DrivenThread {
        stop: Some(stop_tx),
        idle: Some(idle_rx),
        thread: IdleThread {
            release: Some(release_tx),
            thread: Some(thread),
        },
    };
    (locker, driven)
}

/// The thread of [`connect_on_a_runtime_driven_until_told`].
pub struct DrivenThread {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    idle: Option<std::sync::mpsc::Receiver<()>>,
    thread: IdleThread,
}

impl DrivenThread {
    /// Stops driving the runtime, and waits (at most 5 s) until it is idle.
    pub async fn go_idle(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let idle = self.idle.take().expect("the runtime goes idle once");
        tokio::task::spawn_blocking(move || idle.recv_timeout(Duration::from_secs(5)))
            .await
            .expect("thread")
            .expect("the runtime went idle");
    }

    /// Drops the runtime, and all that sits on it, and waits for that.
    pub async fn shut_down(self) {
        self.thread.shut_down().await;
    }
}

/// The thread of [`connect_on_an_idle_runtime`]: its runtime is dropped
/// when told, or when this is dropped.
pub struct IdleThread {
    release: Option<std::sync::mpsc::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl IdleThread {
    /// Drops the runtime, and all that sits on it, and waits for that.
    pub async fn shut_down(mut self) {
        self.release = None;
        if let Some(thread) = self.thread.take() {
            let _ = tokio::task::spawn_blocking(move || thread.join()).await;
        }
    }
}

impl Drop for IdleThread {
    fn drop(&mut self) {
        self.release = None;
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
