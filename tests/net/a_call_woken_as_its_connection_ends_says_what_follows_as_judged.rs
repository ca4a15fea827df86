//! Reproduces a past break: a call cut off by its connection's end read what follows before that end was judged, and said "reconnecting in the background" where the next call connects.
//!
//! docs/lock-servers.md: a failing call's reason says what follows,
//! "reconnecting in the background" or "a later call connects again"
//! (after an idle close, a runtime that shut down, ...), and "a call cut
//! off by its connection's end says the same". A connection's end wakes
//! the calls waiting on it (their reply slots are dropped) before its
//! owner is told how it ended; a caller that runs in that moment (its
//! thread scheduled first, the closing one preempted) must not read the
//! verdict of before. Here the caller's waker holds the closing thread in
//! that moment until the caller has been polled, as a preemption would.
#![cfg(feature = "net")]

use std::future::Future;
use std::pin::pin;
use std::sync::mpsc as std_mpsc;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::thread::ThreadId;
use std::time::Duration;

use quorum_lock::{Error, NetLocker};
use tokio::sync::oneshot;

use crate::stand_in::{self, args};
use crate::wire;

/// Wakes the polling thread and, when called from another thread, waits
/// (at most 2 s) until that thread has polled the future once more.
struct HoldingWaker {
    poller: ThreadId,
    wake: Mutex<std_mpsc::Sender<()>>,
    polled: Mutex<std_mpsc::Receiver<()>>,
}

impl Wake for HoldingWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        let _ = self.wake.lock().unwrap().send(());
        if std::thread::current().id() != self.poller {
            let _ = self
                .polled
                .lock()
                .unwrap()
                .recv_timeout(Duration::from_secs(2));
        }
    }
}

/// Polls `fut` on this thread, in `handle`'s context, until it is ready
/// (at most 8 s), telling the waker after each poll that follows a wake.
fn run_here<F: Future>(handle: &tokio::runtime::Handle, fut: F) -> Option<F::Output> {
    let _entered = handle.enter();
    let (wake_tx, wake_rx) = std_mpsc::channel();
    let (polled_tx, polled_rx) = std_mpsc::channel();
    let waker = Waker::from(Arc::new(HoldingWaker {
        poller: std::thread::current().id(),
        wake: Mutex::new(wake_tx),
        polled: Mutex::new(polled_rx),
    }));
    let mut cx = Context::from_waker(&waker);
    let mut fut = pin!(fut);
    let deadline = std::time::Instant::now() + Duration::from_secs(8);
    let mut woken = false;
    loop {
        let polled = fut.as_mut().poll(&mut cx);
        if woken {
            let _ = polled_tx.send(());
        }
        woken = true;
        if let Poll::Ready(out) = polled {
            return Some(out);
        }
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() || wake_rx.recv_timeout(left).is_err() {
            return None;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_woken_as_its_connection_ends_says_what_follows_as_judged() {
    let (listener, addr) = stand_in::bind().await;
    let (asked_tx, asked_rx) = oneshot::channel::<()>();
    let server = tokio::spawn(async move {
        // The first connection: welcomed, its request read and never
        // answered; it stays open.
        let mut first = stand_in::accept_hello(&listener).await.expect("hello");
        assert!(stand_in::welcome(&mut first).await, "welcome");
        let _request = wire::read_frame(&mut first, 1 << 20).await;
        let _ = asked_tx.send(());
        // Every later connection is welcomed and granted.
        loop {
            let Some(mut stream) = stand_in::accept_hello(&listener).await else {
                break;
            };
            if stand_in::welcome(&mut stream).await {
                tokio::spawn(stand_in::grant_all(stream));
            }
        }
        drop(first);
    });

    // The locker connects from a runtime of its own: its connection's
    // reader and writer run there, and die when it shuts down.
    let (locker, runtime) = stand_in::connect_from_a_runtime_of_its_own(addr).await;
    assert!(locker.protocol_version().is_some(), "set-up: connected");

    // A call polled on a thread of its own, in flight when the
    // connection's runtime shuts down.
    let handle = tokio::runtime::Handle::current();
    let caller = std::thread::spawn({
        let locker = locker.clone();
        move || run_here(&handle, locker.lock(&args("uid-cut-off")))
    });
    tokio::time::timeout(Duration::from_secs(3), asked_rx)
        .await
        .expect("set-up: the server got the request in time")
        .expect("set-up: the server got the request");
    tokio::task::spawn_blocking(move || drop(runtime))
        .await
        .expect("the runtime shut down");
    let failed = tokio::task::spawn_blocking(move || caller.join())
        .await
        .expect("the joining thread")
        .expect("the caller's thread")
        .expect("the call ends within 8 s once its connection's runtime is gone");
    let reason = match failed {
        Err(Error::LockerUnavailable { reason, .. }) => reason,
        other => panic!("set-up: the call fails as unavailable, got {other:?}"),
    };

    // As judged: the runtime shut down, the next call connects.
    let online = locker.is_online();
    let next = tokio::time::timeout(Duration::from_secs(3), locker.lock(&args("uid-next"))).await;
    server.abort();
    assert!(
        online,
        "set-up: the locker stays online after its runtime shut down"
    );
    assert!(
        matches!(next, Ok(Ok(true))),
        "set-up: the next call connects again ({next:?})"
    );
    assert!(
        reason.contains("a later call connects again") && !reason.contains("in the background"),
        "the call says {reason:?}, though its connection's end was judged a runtime that shut \
         down (the locker stays online, the next call connects): it read what follows before \
         the judgement"
    );
}
