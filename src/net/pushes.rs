//! The client's half of pushed wake-ups: which [`Wake`] each waiting uid
//! registered, so that the connection's reader can hand a push from the
//! server to the waiter.
//!
//! One registry serves a [`RemoteLocker`](super::RemoteLocker) for its whole
//! life, across reconnects: the coordinator sends its waiting requests again
//! after a reconnect, and the server pushes on the connection the latest
//! request came from.
//!
//! A registration lasts while the uid may still get pushes: a `Wounded`
//! can follow a `Granted`. It ends when an unlock, runlock or force-unlock
//! of the uid is sent, or when the server answers that it kept no place.
//! Registrations nobody renewed for [`STALE_AFTER`] are swept when the
//! registry has grown, so that a caller that never releases cannot grow it
//! without bound.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use crate::wait::{PushEvent, Wake};

/// How long a registration nobody renewed is kept at least. Far beyond the
/// longest place a server keeps (60 s without hearing from the waiter):
/// only a `Wounded` for a uid whose waiter went silent can come later.
pub(crate) const STALE_AFTER: Duration = Duration::from_secs(600);

/// The registry size below which it is never swept.
const SWEEP_FLOOR: usize = 1024;

#[derive(Default)]
pub(crate) struct Pushes {
    /// How many uids are registered, read without the lock so that the
    /// releases of a locker nobody waits on cost nothing extra.
    live: AtomicUsize,
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    waits: HashMap<Arc<str>, Registered>,
    /// The size at which the next registration sweeps stale entries.
    sweep_at: usize,
}

struct Registered {
    wake: Wake,
    renewed: Instant,
}

impl Pushes {
    fn inner(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Sends the pushes for `uid` to `wake` from now on, replacing an
    /// earlier registration of the uid.
    pub(crate) fn register(&self, uid: &Arc<str>, wake: &Wake) {
        self.register_at(uid, wake, Instant::now(), STALE_AFTER);
    }

    fn register_at(&self, uid: &Arc<str>, wake: &Wake, now: Instant, stale_after: Duration) {
        let mut inner = self.inner();
        let registered = Registered {
            wake: wake.clone(),
            renewed: now,
        };
        if inner.waits.insert(uid.clone(), registered).is_none()
            && inner.waits.len() >= inner.sweep_at.max(SWEEP_FLOOR)
        {
            inner
                .waits
                .retain(|_, r| now.saturating_duration_since(r.renewed) < stale_after);
            inner.sweep_at = inner.waits.len().saturating_mul(2);
        }
        self.live.store(inner.waits.len(), Ordering::Release);
    }

    /// Ends the registration of `uid`, if any.
    pub(crate) fn forget(&self, uid: &str) {
        if self.live.load(Ordering::Acquire) == 0 {
            return;
        }
        let mut inner = self.inner();
        inner.waits.remove(uid);
        self.live.store(inner.waits.len(), Ordering::Release);
    }

    /// Hands a push to the waiter of `uid`. Returns whether one was
    /// registered; a push for an unknown uid (released meanwhile) is
    /// dropped.
    pub(crate) fn deliver(&self, uid: &str, event: PushEvent) -> bool {
        let wake = self.inner().waits.get(uid).map(|r| r.wake.clone());
        match wake {
            // Outside the lock: the waiter's sink may take its own.
            Some(wake) => {
                wake.notify(uid, event);
                true
            }
            None => false,
        }
    }

    /// How many uids are registered.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.live.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wait::PushSink;

    #[derive(Default)]
    struct Log(Mutex<Vec<(usize, String, PushEvent)>>);

    impl PushSink for Log {
        fn push(&self, slot: usize, uid: &str, event: PushEvent) {
            self.0.lock().unwrap().push((slot, uid.to_owned(), event));
        }
    }

    #[test]
    fn pushes_reach_the_registered_waiter_until_it_is_forgotten() {
        let log = Arc::new(Log::default());
        let pushes = Pushes::default();
        let uid: Arc<str> = "u1".into();
        pushes.register(&uid, &Wake::new(log.clone(), 4));
        assert!(pushes.deliver("u1", PushEvent::Granted));
        assert!(pushes.deliver("u1", PushEvent::Wounded));
        assert!(!pushes.deliver("u2", PushEvent::Granted));
        pushes.forget("u1");
        assert!(!pushes.deliver("u1", PushEvent::Granted));
        assert_eq!(pushes.len(), 0);
        let seen = log.0.lock().unwrap().clone();
        assert_eq!(
            seen,
            vec![
                (4, "u1".to_owned(), PushEvent::Granted),
                (4, "u1".to_owned(), PushEvent::Wounded)
            ]
        );
    }

    #[test]
    fn stale_registrations_are_swept_once_the_registry_grew() {
        let log = Arc::new(Log::default());
        let wake = Wake::new(log, 0);
        let pushes = Pushes::default();
        let start = Instant::now();
        let stale = Duration::from_secs(10);
        for i in 0..SWEEP_FLOOR - 1 {
            pushes.register_at(&format!("old-{i}").into(), &wake, start, stale);
        }
        assert_eq!(pushes.len(), SWEEP_FLOOR - 1);
        let later = start + Duration::from_secs(11);
        pushes.register_at(&"new".into(), &wake, later, stale);
        assert_eq!(pushes.len(), 1, "the old ones were swept");
        // Renewed ones stay.
        for i in 0..SWEEP_FLOOR {
            pushes.register_at(&format!("b-{i}").into(), &wake, later, stale);
        }
        assert_eq!(pushes.len(), SWEEP_FLOOR + 1);
    }
}
