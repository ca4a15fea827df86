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
//!
//! Observers' watches (protocol version 5) are kept apart, also by uid: the
//! latest [`Wake`] of each watching uid, until its ttl (at most
//! [`MAX_WATCH_TTL`]) ends. A `Changed` push does not end it: the observer
//! registers again before it reads again, and a push of the watch it
//! replaced may still be on its way, so ending the registration on delivery
//! could drop the push of the new watch. A push after the ttl is dropped,
//! and expired registrations are swept when the registry has grown.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use crate::locker::wait::{PushEvent, Wake};

/// How long a registration nobody renewed is kept at least. Far beyond the
/// longest place a server keeps (60 s without hearing from the waiter):
/// only a `Wounded` for a uid whose waiter went silent can come later.
pub(crate) const STALE_AFTER: Duration = Duration::from_secs(600);

/// The longest a watch is kept, here as on the servers: a server keeps a
/// watch at most 60 s without hearing from the observer again.
pub(crate) const MAX_WATCH_TTL: Duration = Duration::from_secs(60);

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
    /// Observers' watches: the latest wake of each uid, and when it lapses.
    watches: HashMap<Arc<str>, (Wake, Instant)>,
    /// The size at which the next watch sweeps lapsed ones.
    watches_sweep_at: usize,
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

    /// Sends the `Changed` pushes for the watching `uid` to `wake` for
    /// `ttl` (at most [`MAX_WATCH_TTL`]), replacing an earlier watch of
    /// the uid.
    pub(crate) fn watch(&self, uid: &Arc<str>, wake: &Wake, ttl: Duration) {
        self.watch_at(uid, wake, Instant::now(), ttl);
    }

    fn watch_at(&self, uid: &Arc<str>, wake: &Wake, now: Instant, ttl: Duration) {
        let until = now
            .checked_add(ttl.min(MAX_WATCH_TTL))
            .unwrap_or(now + MAX_WATCH_TTL);
        let mut inner = self.inner();
        if inner
            .watches
            .insert(uid.clone(), (wake.clone(), until))
            .is_none()
            && inner.watches.len() >= inner.watches_sweep_at.max(SWEEP_FLOOR)
        {
            inner.watches.retain(|_, (_, until)| *until > now);
            inner.watches_sweep_at = inner.watches.len().saturating_mul(2);
        }
    }

    /// Hands a push to the waiter of `uid`, or a `Changed` to the watch of
    /// `uid`. Returns whether one was registered; a push for an unknown
    /// uid (released meanwhile, or a watch that lapsed) is dropped.
    pub(crate) fn deliver(&self, uid: &str, event: PushEvent) -> bool {
        if event == PushEvent::Changed {
            return self.deliver_changed(uid, Instant::now());
        }
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

    fn deliver_changed(&self, uid: &str, now: Instant) -> bool {
        let wake = {
            let mut inner = self.inner();
            match inner.watches.get(uid) {
                Some((wake, until)) if *until > now => Some(wake.clone()),
                Some(_) => {
                    inner.watches.remove(uid);
                    None
                }
                None => None,
            }
        };
        match wake {
            Some(wake) => {
                wake.notify(uid, PushEvent::Changed);
                true
            }
            None => false,
        }
    }

    /// Whether no wait and no watch is registered; lapsed watches, swept
    /// here, do not count.
    pub(crate) fn is_idle(&self) -> bool {
        if self.live.load(Ordering::Acquire) != 0 {
            return false;
        }
        let mut inner = self.inner();
        if inner.watches.is_empty() {
            return true;
        }
        let now = Instant::now();
        inner.watches.retain(|_, (_, until)| *until > now);
        inner.watches.is_empty()
    }

    /// How many watches are registered, lapsed or not.
    #[cfg(test)]
    pub(crate) fn watches(&self) -> usize {
        self.inner().watches.len()
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
    use crate::locker::wait::PushSink;

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

    #[test]
    fn changed_pushes_reach_the_latest_watch_until_it_lapses() {
        let old = Arc::new(Log::default());
        let new = Arc::new(Log::default());
        let pushes = Pushes::default();
        let uid: Arc<str> = "observer".into();
        let start = Instant::now();
        pushes.watch_at(
            &uid,
            &Wake::new(old.clone(), 1),
            start,
            Duration::from_secs(5),
        );
        pushes.watch_at(
            &uid,
            &Wake::new(new.clone(), 2),
            start,
            Duration::from_secs(5),
        );
        assert_eq!(pushes.watches(), 1, "one watch per uid");
        // Delivered, and still there for a push of the watch it replaced.
        assert!(pushes.deliver_changed("observer", start));
        assert!(pushes.deliver_changed("observer", start + Duration::from_secs(4)));
        assert!(old.0.lock().unwrap().is_empty());
        assert_eq!(new.0.lock().unwrap().len(), 2);
        // A watch is not a wait: grants for the uid go nowhere.
        assert!(!pushes.deliver("observer", PushEvent::Granted));
        assert_eq!(pushes.len(), 0);
        // Lapsed: dropped, and the registration with it.
        assert!(!pushes.deliver_changed("observer", start + Duration::from_secs(5)));
        assert_eq!(pushes.watches(), 0);
        // Never kept past the longest ttl a server keeps.
        pushes.watch_at(&uid, &Wake::new(new.clone(), 2), start, Duration::MAX);
        assert!(!pushes.deliver_changed("observer", start + MAX_WATCH_TTL));
    }

    #[test]
    fn lapsed_watches_are_swept_once_the_registry_grew() {
        let wake = Wake::new(Arc::new(Log::default()), 0);
        let pushes = Pushes::default();
        let start = Instant::now();
        let ttl = Duration::from_secs(10);
        for i in 0..SWEEP_FLOOR - 1 {
            pushes.watch_at(&format!("old-{i}").into(), &wake, start, ttl);
        }
        assert_eq!(pushes.watches(), SWEEP_FLOOR - 1);
        pushes.watch_at(&"new".into(), &wake, start + ttl, ttl);
        assert_eq!(pushes.watches(), 1, "the lapsed ones were swept");
    }
}
