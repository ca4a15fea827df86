//! A `NetLocker` wrapper that counts the calls made to the locker it wraps.
//!
//! The trait is implemented by hand, in the shape `#[async_trait]` expands
//! to, so that each method can bump a counter and return the inner locker's
//! boxed future as it is. An `async fn` wrapper would box a second future per
//! call and make the measurement heavier than the thing it measures; this
//! way the wrapper costs one relaxed atomic add, on a per-thread stripe.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use quorum_lock::{
    Error, ImmediateLocker, LockArgs, LockInfo, LockMode, NetLocker, WaitArgs, WaitReply,
};

type Reply<'a, T> = Pin<Box<dyn Future<Output = Result<T, Error>> + Send + 'a>>;

/// Calls by kind, on one locker, striped by thread.
///
/// Every client bumps the counters of every locker, so one shared counter
/// per locker would bounce its cache line between cores on each call and
/// slow down exactly the parallel runs it is meant to observe. Each thread
/// adds to its own stripe instead; reading sums the stripes.
#[derive(Default)]
pub struct Calls {
    stripes: [Stripe; STRIPES],
}

const STRIPES: usize = 16;

/// One stripe on its own cache lines (128 bytes covers adjacent-line
/// prefetching too).
#[derive(Default)]
#[repr(align(128))]
struct Stripe {
    lock: AtomicU64,
    wait: AtomicU64,
    unlock: AtomicU64,
    refresh: AtomicU64,
    fence: AtomicU64,
    other: AtomicU64,
}

thread_local! {
    static STRIPE: usize = {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        NEXT.fetch_add(1, Ordering::Relaxed) % STRIPES
    };
}

/// A point-in-time reading of one or more `Calls`.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct CallCounts {
    /// `lock` and `rlock`: plain lock calls (polling rounds, and `try_lock`).
    pub lock: u64,
    /// `lock_wait`: lock calls of a waiter in line (`Waiting::Push`). A
    /// locker without queues answers one with a plain lock call of its own,
    /// which the wrapper does not see.
    pub wait: u64,
    /// `unlock` and `runlock`.
    pub unlock: u64,
    /// `refresh` and `refresh_mode`.
    pub refresh: u64,
    /// `fence`: fencing-token draws. The harness never asks for a token, so
    /// this stays 0 unless the library draws one by itself.
    pub fence: u64,
    /// `force_unlock` and `locks`.
    pub other: u64,
}

impl CallCounts {
    /// Each kind by the name the reports print it under, in their order.
    pub fn kinds(&self) -> [(&'static str, u64); 6] {
        [
            ("lock", self.lock),
            ("wait", self.wait),
            ("unlock", self.unlock),
            ("refresh", self.refresh),
            ("fence", self.fence),
            ("other", self.other),
        ]
    }

    pub fn total(&self) -> u64 {
        self.kinds().iter().map(|(_, n)| n).sum()
    }

    /// Kind by kind, `f` of this count and `other`'s.
    fn zip(&self, other: &CallCounts, f: impl Fn(u64, u64) -> u64) -> CallCounts {
        CallCounts {
            lock: f(self.lock, other.lock),
            wait: f(self.wait, other.wait),
            unlock: f(self.unlock, other.unlock),
            refresh: f(self.refresh, other.refresh),
            fence: f(self.fence, other.fence),
            other: f(self.other, other.other),
        }
    }

    pub fn plus(&self, other: &CallCounts) -> CallCounts {
        self.zip(other, |a, b| a + b)
    }

    pub fn since(&self, earlier: &CallCounts) -> CallCounts {
        self.zip(earlier, |a, b| a - b)
    }
}

impl Calls {
    pub fn read(&self) -> CallCounts {
        let load = |n: &AtomicU64| n.load(Ordering::Relaxed);
        self.stripes.iter().fold(CallCounts::default(), |sum, s| {
            sum.plus(&CallCounts {
                lock: load(&s.lock),
                wait: load(&s.wait),
                unlock: load(&s.unlock),
                refresh: load(&s.refresh),
                fence: load(&s.fence),
                other: load(&s.other),
            })
        })
    }

    fn bump(&self, counter: impl Fn(&Stripe) -> &AtomicU64) {
        let stripe = STRIPE.with(|i| &self.stripes[*i]);
        counter(stripe).fetch_add(1, Ordering::Relaxed);
    }
}

/// Sums the counters of a whole cluster.
pub fn total(calls: &[Arc<Calls>]) -> CallCounts {
    calls
        .iter()
        .fold(CallCounts::default(), |sum, c| sum.plus(&c.read()))
}

pub struct CountingLocker {
    inner: Arc<dyn NetLocker>,
    calls: Arc<Calls>,
}

impl CountingLocker {
    pub fn new(inner: Arc<dyn NetLocker>) -> (Self, Arc<Calls>) {
        let calls = Arc::new(Calls::default());
        (
            CountingLocker {
                inner,
                calls: calls.clone(),
            },
            calls,
        )
    }
}

/// One counted method, forwarded as it is, in the shape `#[async_trait]`
/// expands to: `$counter` is the stripe field it bumps.
macro_rules! counted {
    ($name:ident, $counter:ident, $out:ty $(, $arg:ident: $ty:ty)*) => {
        fn $name<'life0, 'life1, 'async_trait>(
            &'life0 self,
            args: &'life1 LockArgs,
            $($arg: $ty,)*
        ) -> Reply<'async_trait, $out>
        where
            'life0: 'async_trait,
            'life1: 'async_trait,
            Self: 'async_trait,
        {
            self.calls.bump(|s| &s.$counter);
            self.inner.$name(args $(, $arg)*)
        }
    };
}

impl NetLocker for CountingLocker {
    counted!(lock, lock, bool);
    counted!(rlock, lock, bool);
    counted!(unlock, unlock, bool);
    counted!(runlock, unlock, bool);
    counted!(refresh, refresh, bool);
    // Forwarded explicitly: the default body would call our `refresh` and
    // drop the mode the inner locker needs for re-granting.
    counted!(refresh_mode, refresh, bool, mode: LockMode);
    // Forwarded for the same reason as `lock_wait` below.
    counted!(fence, fence, Option<u64>, mode: LockMode, floor: u64);
    counted!(force_unlock, other, bool);

    // Forwarded explicitly: the default bodies would answer a waiter with
    // our plain `lock` (so `Waiting::Push` would quietly poll) and refuse
    // fencing, whatever the inner locker can do. Every provided method of
    // `NetLocker` must be forwarded here for the same reason.
    fn lock_wait<'life0, 'life1, 'life2, 'async_trait>(
        &'life0 self,
        args: &'life1 LockArgs,
        mode: LockMode,
        wait: &'life2 WaitArgs,
    ) -> Reply<'async_trait, WaitReply>
    where
        'life0: 'async_trait,
        'life1: 'async_trait,
        'life2: 'async_trait,
        Self: 'async_trait,
    {
        self.calls.bump(|s| &s.wait);
        self.inner.lock_wait(args, mode, wait)
    }

    // Forwarded too: the coordinator reads it to decide how a waiter keeps
    // its grants alive (repeated waiting calls, or refreshes).
    fn queues(&self) -> bool {
        self.inner.queues()
    }

    fn locks<'life0, 'async_trait>(&'life0 self) -> Reply<'async_trait, Vec<LockInfo>>
    where
        'life0: 'async_trait,
        Self: 'async_trait,
    {
        self.calls.bump(|s| &s.other);
        self.inner.locks()
    }

    fn endpoint(&self) -> String {
        self.inner.endpoint()
    }

    fn is_online(&self) -> bool {
        self.inner.is_online()
    }

    fn is_local(&self) -> bool {
        self.inner.is_local()
    }

    // Forwarded so that the coordinator's lease check sees the validity the
    // inner locker (a server's handshake) announces.
    fn validity(&self) -> Option<std::time::Duration> {
        self.inner.validity()
    }

    // Forwarded too, wrapped: in-process lockers answer at once, and the
    // coordinator then calls them without a future; without this the
    // harness would measure the async path instead.
    fn immediate(&self) -> Option<&dyn ImmediateLocker> {
        self.inner.immediate().map(|_| self as &dyn ImmediateLocker)
    }
}

/// The counted calls of an inner locker that answers at once. Only handed
/// out by [`CountingLocker::immediate`] when the inner locker has them.
impl ImmediateLocker for CountingLocker {
    fn lock_now(&self, args: &LockArgs, mode: LockMode) -> Result<bool, Error> {
        self.calls.bump(|s| &s.lock);
        self.inner_now()?.lock_now(args, mode)
    }

    fn unlock_now(&self, args: &LockArgs, mode: LockMode) -> Result<bool, Error> {
        self.calls.bump(|s| &s.unlock);
        self.inner_now()?.unlock_now(args, mode)
    }

    fn refresh_now(&self, args: &LockArgs, mode: LockMode) -> Result<bool, Error> {
        self.calls.bump(|s| &s.refresh);
        self.inner_now()?.refresh_now(args, mode)
    }

    fn lock_wait_now(
        &self,
        args: &LockArgs,
        mode: LockMode,
        wait: &WaitArgs,
    ) -> Result<WaitReply, Error> {
        self.calls.bump(|s| &s.wait);
        self.inner_now()?.lock_wait_now(args, mode, wait)
    }
}

impl CountingLocker {
    fn inner_now(&self) -> Result<&dyn ImmediateLocker, Error> {
        self.inner.immediate().ok_or_else(|| Error::Unsupported {
            endpoint: self.inner.endpoint(),
            what: "immediate calls".into(),
        })
    }
}
