//! The uids a server released recently. A lock or refresh for one of them
//! can only be a message that was overtaken by its own release (across a
//! reconnect, or after the client gave up on an acquire), so it is refused
//! instead of leaving an entry nobody will unlock.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

/// At most this many uids are remembered; past it the oldest are forgotten
/// early, so a client flooding unlocks cannot grow the server without bound.
const MAX_REMEMBERED: usize = 1_000_000;

pub(crate) struct Released {
    ttl: Duration,
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    since: HashMap<Arc<str>, Instant>,
    order: VecDeque<(Instant, Arc<str>)>,
}

impl Released {
    pub(crate) fn new(ttl: Duration) -> Self {
        Released {
            ttl,
            inner: Mutex::default(),
        }
    }

    pub(crate) fn remember(&self, uid: &str) {
        if uid.is_empty() {
            return;
        }
        let now = Instant::now();
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        inner.forget_older_than(now, self.ttl);
        if inner.since.contains_key(uid) {
            return;
        }
        let uid: Arc<str> = uid.into();
        inner.since.insert(uid.clone(), now);
        inner.order.push_back((now, uid));
        while inner.order.len() > MAX_REMEMBERED {
            if let Some((_, old)) = inner.order.pop_front() {
                inner.since.remove(&old);
            }
        }
    }

    pub(crate) fn contains(&self, uid: &str) -> bool {
        let inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        inner
            .since
            .get(uid)
            .is_some_and(|at| at.elapsed() < self.ttl)
    }
}

impl Inner {
    fn forget_older_than(&mut self, now: Instant, ttl: Duration) {
        while let Some((at, _)) = self.order.front() {
            if now.saturating_duration_since(*at) < ttl {
                break;
            }
            if let Some((_, uid)) = self.order.pop_front() {
                self.since.remove(&uid);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn remembers_for_the_ttl_only() {
        let released = Released::new(Duration::from_secs(60));
        released.remember("a");
        assert!(released.contains("a"));
        assert!(!released.contains("b"));
        tokio::time::sleep(Duration::from_secs(61)).await;
        assert!(!released.contains("a"));
        released.remember("b");
        let inner = released.inner.lock().unwrap();
        assert_eq!(
            inner.order.len(),
            1,
            "expired uids must be dropped, not kept"
        );
    }
}
