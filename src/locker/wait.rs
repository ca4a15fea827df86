//! Waiting in line on a locker: the ticket that orders waiters the same way
//! on every locker, and the wake-ups a locker pushes to a waiter.
//!
//! A [`Dsync`](crate::Dsync) that waits for a lock draws one [`Ticket`] when
//! the wait begins and sends it with every request of that wait, so its place
//! does not move when it retries. Lockers that support queues keep the place
//! (for [`WaitArgs::place_ttl`], renewed by each request) and, when the
//! resource frees up for it, grant it and say so through its [`Wake`]: a task
//! wake-up in process, a message on the connection over the network.
//!
//! Every locker compares two tickets the same way, so a waiter that is first
//! in line on one locker is first on every locker it reached: split grants
//! between two waiters resolve in favour of the older one instead of
//! deadlocking (see "Fair waiting (FIFO)" in the repository's docs/guarantees.md).

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A waiter's place in line: older tickets go first.
///
/// `at` is wall-clock nanoseconds since the Unix epoch, made strictly
/// increasing within a process, so the waits of one process are ordered by
/// when they began even when the clock does not move between them. `tiebreak`
/// is random and orders waits of different processes that drew the same
/// `at`. Clock skew between hosts only shifts fairness (a host whose clock is
/// behind goes first); it never affects safety, and every locker still orders
/// two tickets the same way.
///
/// ```
/// use quorum_lock::Ticket;
///
/// let first = Ticket::now();
/// let second = Ticket::now();
/// assert!(first < second);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Ticket {
    /// Nanoseconds since the Unix epoch when the wait began.
    pub at: u64,
    /// Orders tickets with equal `at`.
    pub tiebreak: u64,
}

impl Ticket {
    /// A ticket for a wait that begins now, younger than every ticket this
    /// process drew before.
    pub fn now() -> Ticket {
        static LAST: AtomicU64 = AtomicU64::new(0);
        let wall = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
        let mut last = LAST.load(Ordering::Relaxed);
        let at = loop {
            let at = wall.max(last.saturating_add(1));
            match LAST.compare_exchange_weak(last, at, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => break at,
                Err(seen) => last = seen,
            }
        };
        Ticket {
            at,
            tiebreak: rand::random(),
        }
    }
}

/// What a locker tells a waiter without being asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PushEvent {
    /// The locker granted the waiter's uid: its entry now exists, exactly as
    /// if a lock call had just answered `Ok(true)`.
    Granted,
    /// An older waiter is queued behind a grant this uid holds. A waiter
    /// that has not yet reached its quorum gives its grants back and waits
    /// again with the same ticket; a holder ignores it.
    Wounded,
    /// The leader of a resource this uid watches may have changed (see
    /// [`WatchArgs`](crate::WatchArgs)): read it again.
    Changed,
}

/// Receives pushes for the waits of one acquisition.
///
/// Implemented by the coordinator for its waits, and by the lock server for
/// the waits of one connection. `push` is called by a locker while it may
/// hold its own locks, so it must be quick and must not call back into the
/// locker.
pub trait PushSink: Send + Sync {
    /// Delivers `event` for `uid`, which waited through the [`Wake`] built
    /// with `slot`.
    fn push(&self, slot: usize, uid: &str, event: PushEvent);

    /// Delivers [`PushEvent::Granted`] for `uid`, whose wait for `names`
    /// was granted. A sink that keeps account of what each wait asked for
    /// (a lock server) learns here which request the grant was for; the
    /// default delivers the push as [`push`](Self::push) does.
    fn push_granted(&self, slot: usize, uid: &str, names: &[String]) {
        let _ = names;
        self.push(slot, uid, PushEvent::Granted);
    }
}

/// Where a locker sends the pushes of one wait: a sink and the slot that
/// tells the sink which locker is speaking. Cheap to clone.
///
/// ```
/// use std::sync::{Arc, Mutex};
/// use quorum_lock::{PushEvent, PushSink, Wake};
///
/// #[derive(Default)]
/// struct Log(Mutex<Vec<(usize, String, PushEvent)>>);
/// impl PushSink for Log {
///     fn push(&self, slot: usize, uid: &str, event: PushEvent) {
///         self.0.lock().unwrap().push((slot, uid.to_owned(), event));
///     }
/// }
///
/// let log = Arc::new(Log::default());
/// let wake = Wake::new(log.clone(), 2);
/// wake.notify("uid-1", PushEvent::Granted);
/// assert_eq!(log.0.lock().unwrap()[0], (2, "uid-1".to_owned(), PushEvent::Granted));
/// ```
#[derive(Clone)]
pub struct Wake {
    sink: Arc<dyn PushSink>,
    slot: usize,
}

impl Wake {
    /// Pushes for this wait go to `sink`, tagged with `slot`.
    pub fn new(sink: Arc<dyn PushSink>, slot: usize) -> Wake {
        Wake { sink, slot }
    }

    /// Pushes to the same sink, tagged with `slot`.
    #[cfg(feature = "net")]
    pub(crate) fn with_slot(&self, slot: usize) -> Wake {
        Wake {
            sink: self.sink.clone(),
            slot,
        }
    }

    /// Where its pushes go, as a value two wakes share when they deliver
    /// to the same sink and slot.
    pub(crate) fn target(&self) -> (usize, usize) {
        (Arc::as_ptr(&self.sink) as *const () as usize, self.slot)
    }

    /// Delivers `event` for `uid`.
    pub fn notify(&self, uid: &str, event: PushEvent) {
        self.sink.push(self.slot, uid, event);
    }

    /// Delivers [`PushEvent::Granted`] for `uid`, granted `names`.
    pub(crate) fn notify_granted(&self, uid: &str, names: &[String]) {
        self.sink.push_granted(self.slot, uid, names);
    }
}

impl fmt::Debug for Wake {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Wake")
            .field("slot", &self.slot)
            .finish_non_exhaustive()
    }
}

/// What a waiting lock call sends besides its [`LockArgs`](crate::LockArgs).
#[derive(Debug, Clone)]
pub struct WaitArgs {
    /// The waiter's place in line; the same for every request of one wait.
    pub ticket: Ticket,
    /// How long the locker keeps the place without hearing from the waiter
    /// again. The waiter repeats its request well within this, so a place
    /// outlives its waiter by at most this long.
    pub place_ttl: Duration,
    /// Where to push. `None` keeps the place as a reservation only: the
    /// locker never grants it by itself, and the waiter must ask again.
    pub wake: Option<Wake>,
}

/// A locker's answer to a waiting lock call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WaitReply {
    /// Granted now.
    Granted,
    /// Not granted; the place is kept and the locker will push
    /// [`PushEvent::Granted`] when it grants it.
    Queued,
    /// Not granted, and the locker will not push: ask again later. A locker
    /// without queues keeps no place; a locker with queues answers this to
    /// a reservation (`wake: None`), whose place it keeps, holding the
    /// waiter's turn until it asks again or the place expires.
    Refused,
}
