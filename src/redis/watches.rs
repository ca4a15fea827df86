//! The observers' watches of one `RedisLocker` (leader election), kept in
//! this process, and the change notices that fire them.
//!
//! Every script that stores a proclamation, or drops one (a release, a
//! forced unlock, an expired holder it noticed), publishes on the prefix's
//! leader channel (`<prefix>~leader`) what a read of the key reports now
//! (`P` and the proclamation's stamp, or `N` for no leader), then the key.
//! A locker that has watches subscribes to that channel and, for each
//! notice, pushes [`PushEvent::Changed`] once to every live watch on that
//! key whose read reported something else; the observer reads again,
//! which registers its watch again.
//!
//! The comparison matters because a notice travels on another connection
//! than the read: the notice of a change made just before an observer's
//! read can arrive after it, and would otherwise use up the watch that
//! read registered, so that the next change went unpushed. A notice that
//! arrives before the read's answer is kept on the watch and compared when
//! the answer comes ([`Watches::settle`]); a watch whose read failed fires
//! on any notice.
//!
//! What this cannot see: an entry that expires while no script runs on
//! its key (the key's `PEXPIRE` takes it silently), and a notice lost while
//! the subscription reconnects. The observer's periodic re-check
//! (`Timeouts::wait_recheck`) finds both; a subscription that comes back
//! fires every watch at once, so only what happens while it is down waits
//! for that.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::time::Instant;

use crate::locker::proclamation::WatchArgs;
use crate::locker::wait::{PushEvent, Wake};
use crate::quorum::clock::after;
use crate::Error;

use super::feed::Feed;

/// Most watches one resource keeps in one locker; more are refused, so
/// that a caller that registers without end cannot grow the process
/// without bound (the same limit as `LocalLocker`'s).
pub(super) const MAX_WATCHES_PER_RESOURCE: usize = 10_000;

/// What a read of a key reports, as the notices and [`Watches::settle`]
/// name it: the stamp (term and seq, 40 digits) of the leader's
/// proclamation, or `None` for no leader.
pub(super) type Seen = Option<[u8; 40]>;

/// Notices a watch keeps while its read has not answered; past this, it
/// fires when the read answers.
const PENDING: usize = 4;

enum Known {
    /// The read that registered the watch has not answered (or failed):
    /// the states of the notices heard meanwhile.
    Unknown { pending: Vec<Seen>, overflow: bool },
    /// What the read reported.
    Read(Seen),
    /// The read failed: any notice fires the watch.
    Any,
}

struct Watch {
    uid: Arc<str>,
    wake: Wake,
    expires: Instant,
    /// Tells this registration from a later one of the same uid.
    id: u64,
    known: Known,
}

#[derive(Default)]
struct Watching {
    /// By the resource's key (prefix and name), as the notices name it.
    by_key: HashMap<String, Vec<Watch>>,
    /// Watches kept in all.
    count: usize,
    /// `count` after the last sweep; the next sweep runs at twice this.
    swept_at: usize,
    /// The id of the last registration.
    last_id: u64,
}

pub(super) struct Watches {
    /// The leader channel of the locker's prefix, and whether this locker
    /// is subscribed to it.
    pub feed: Feed,
    watching: Mutex<Watching>,
}

impl Watches {
    pub(super) fn new(channel: String) -> Watches {
        Watches {
            feed: Feed::new(channel),
            watching: Mutex::new(Watching::default()),
        }
    }

    fn watching(&self) -> MutexGuard<'_, Watching> {
        self.watching.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Keeps a one-shot watch of `uid` on `key`, replacing an earlier one
    /// of the same uid there; lapses after `watch.ttl`. Answers its id, for
    /// [`settle`](Self::settle) once the read answered.
    pub(super) fn register(
        &self,
        key: &str,
        uid: &Arc<str>,
        watch: &WatchArgs,
    ) -> Result<u64, Error> {
        let now = Instant::now();
        let mut watching = self.watching();
        if watching.count >= watching.swept_at.max(64) * 2 {
            watching.by_key.retain(|_, list| {
                list.retain(|w| w.expires > now);
                !list.is_empty()
            });
            watching.count = watching.by_key.values().map(Vec::len).sum();
            watching.swept_at = watching.count;
        }
        watching.last_id += 1;
        let id = watching.last_id;
        let list = watching.by_key.entry(key.to_owned()).or_default();
        let before = list.len();
        list.retain(|w| w.expires > now && w.uid != *uid);
        let full = list.len() >= MAX_WATCHES_PER_RESOURCE;
        if !full {
            list.push(Watch {
                uid: uid.clone(),
                wake: watch.wake.clone(),
                expires: after(now, watch.ttl),
                id,
                known: Known::Unknown {
                    pending: Vec::new(),
                    overflow: false,
                },
            });
        }
        let after_len = list.len();
        let empty = list.is_empty();
        if empty {
            watching.by_key.remove(key);
        }
        watching.count = (watching.count + after_len).saturating_sub(before);
        if full {
            return Err(Error::invalid(format!(
                "{MAX_WATCHES_PER_RESOURCE} observers already watch {key:?} through this \
                 locker; observe through fewer handles"
            )));
        }
        Ok(id)
    }

    /// Records what the read of registration `id` on `key` reported; fires
    /// the watch at once if a notice heard meanwhile reported otherwise.
    pub(super) fn settle(&self, key: &str, id: u64, read: Seen) {
        let fired = {
            let mut watching = self.watching();
            let Some(list) = watching.by_key.get_mut(key) else {
                return;
            };
            let Some(at) = list.iter().position(|w| w.id == id) else {
                return;
            };
            let fire = match &list[at].known {
                Known::Unknown { pending, overflow } => {
                    *overflow || pending.iter().any(|seen| *seen != read)
                }
                Known::Read(_) | Known::Any => false,
            };
            if !fire {
                list[at].known = Known::Read(read);
                return;
            }
            let watch = list.swap_remove(at);
            if list.is_empty() {
                watching.by_key.remove(key);
            }
            watching.count = watching.count.saturating_sub(1);
            watch
        };
        deliver(vec![fired]);
    }

    /// Notes that the read of registration `id` on `key` failed: any
    /// notice fires the watch, and so does one heard already.
    pub(super) fn unsettled(&self, key: &str, id: u64) {
        let fired = {
            let mut watching = self.watching();
            let Some(list) = watching.by_key.get_mut(key) else {
                return;
            };
            let Some(at) = list.iter().position(|w| w.id == id) else {
                return;
            };
            let heard = matches!(&list[at].known, Known::Unknown { pending, overflow } if *overflow || !pending.is_empty());
            if !heard {
                list[at].known = Known::Any;
                return;
            }
            let watch = list.swap_remove(at);
            if list.is_empty() {
                watching.by_key.remove(key);
            }
            watching.count = watching.count.saturating_sub(1);
            watch
        };
        deliver(vec![fired]);
    }

    /// Acts on a notice of the leader channel: `payload` is what a read of
    /// the key reports now, then the key.
    pub(super) fn on_message(&self, payload: &[u8]) {
        let Some((seen, key)) = parse_notice(payload) else {
            return;
        };
        let fired = {
            let mut watching = self.watching();
            let Some(list) = watching.by_key.get_mut(key) else {
                return;
            };
            let mut fired = Vec::new();
            let mut kept = Vec::with_capacity(list.len());
            for mut watch in list.drain(..) {
                match &mut watch.known {
                    Known::Read(read) if *read == seen => kept.push(watch),
                    Known::Read(_) | Known::Any => fired.push(watch),
                    Known::Unknown { pending, overflow } => {
                        if pending.len() < PENDING {
                            pending.push(seen);
                        } else {
                            *overflow = true;
                        }
                        kept.push(watch);
                    }
                }
            }
            if kept.is_empty() {
                watching.by_key.remove(key);
            } else {
                *list = kept;
            }
            watching.count = watching.count.saturating_sub(fired.len());
            fired
        };
        deliver(fired);
    }

    /// Fires every watch: notices may have been lost.
    pub(super) fn fire_all(&self) {
        let fired: Vec<Watch> = {
            let mut watching = self.watching();
            watching.count = 0;
            watching.by_key.drain().flat_map(|(_, list)| list).collect()
        };
        deliver(fired);
    }

    /// How many watches are kept (lapsed ones not yet swept included).
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.watching().count
    }
}

/// A notice's state and key: `P` and 40 digits, or `N`, then the key.
fn parse_notice(payload: &[u8]) -> Option<(Seen, &str)> {
    let (&kind, rest) = payload.split_first()?;
    let (seen, key) = match kind {
        b'N' => (None, rest),
        b'P' => {
            let stamp = rest.get(..40)?;
            (Some(<[u8; 40]>::try_from(stamp).ok()?), rest.get(40..)?)
        }
        _ => return None,
    };
    Some((seen, std::str::from_utf8(key).ok()?))
}

/// Pushes one change to each live watch, after the mutex is let go.
fn deliver(fired: Vec<Watch>) {
    let now = Instant::now();
    for watch in fired {
        if watch.expires > now {
            watch.wake.notify(&watch.uid, PushEvent::Changed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[derive(Default)]
    struct Inbox(Mutex<Vec<(usize, String, PushEvent)>>);

    impl crate::PushSink for Inbox {
        fn push(&self, slot: usize, uid: &str, event: PushEvent) {
            self.0.lock().unwrap_or_else(PoisonError::into_inner).push((
                slot,
                uid.to_owned(),
                event,
            ));
        }
    }

    impl Inbox {
        fn take(&self) -> Vec<(usize, String, PushEvent)> {
            std::mem::take(&mut *self.0.lock().unwrap_or_else(PoisonError::into_inner))
        }
    }

    fn args(inbox: &Arc<Inbox>, slot: usize, ttl: Duration) -> WatchArgs {
        WatchArgs {
            ttl,
            wake: Wake::new(inbox.clone(), slot),
        }
    }

    fn stamp(term: u64) -> Seen {
        let mut seen = [0u8; 40];
        seen.copy_from_slice(format!("{term:020}{:020}", 0).as_bytes());
        Some(seen)
    }

    fn notice(seen: Seen, key: &str) -> Vec<u8> {
        let mut payload = match seen {
            Some(stamp) => [&b"P"[..], &stamp[..]].concat(),
            None => b"N".to_vec(),
        };
        payload.extend_from_slice(key.as_bytes());
        payload
    }

    #[tokio::test]
    async fn a_notice_fires_each_watch_of_its_key_once() {
        let watches = Watches::new("p~leader".into());
        let inbox = Arc::new(Inbox::default());
        let ttl = Duration::from_secs(30);
        let (a, b): (Arc<str>, Arc<str>) = ("a".into(), "b".into());
        watches.register("p:e", &a, &args(&inbox, 0, ttl)).unwrap();
        // The same uid again replaces its watch.
        let id = watches.register("p:e", &a, &args(&inbox, 1, ttl)).unwrap();
        watches.settle("p:e", id, stamp(3));
        let id = watches.register("p:e", &b, &args(&inbox, 2, ttl)).unwrap();
        watches.settle("p:e", id, stamp(3));
        let id = watches
            .register("p:other", &a, &args(&inbox, 3, ttl))
            .unwrap();
        watches.settle("p:other", id, None);
        assert_eq!(watches.len(), 3);
        // What the reads reported already: nothing fires.
        watches.on_message(&notice(stamp(3), "p:e"));
        assert!(inbox.take().is_empty());
        watches.on_message(&notice(None, "p:e"));
        let mut got = inbox.take();
        got.sort_by_key(|(slot, _, _)| *slot);
        assert_eq!(
            got,
            [
                (1, "a".to_owned(), PushEvent::Changed),
                (2, "b".to_owned(), PushEvent::Changed)
            ]
        );
        // One-shot: a second notice finds nothing to fire.
        watches.on_message(&notice(stamp(4), "p:e"));
        assert!(inbox.take().is_empty());
        assert_eq!(watches.len(), 1);
        // Garbage is ignored.
        watches.on_message(b"");
        watches.on_message(b"P12");
        watches.on_message(b"Xp:other");
        assert!(inbox.take().is_empty());
        watches.fire_all();
        assert_eq!(inbox.take(), [(3, "a".to_owned(), PushEvent::Changed)]);
        assert_eq!(watches.len(), 0);
    }

    /// A notice heard before the read answered is weighed against the
    /// answer: the late notice of a change the read saw fires nothing, one
    /// the read did not see fires at once.
    #[tokio::test]
    async fn a_notice_before_the_read_answered_is_weighed_when_it_does() {
        let watches = Watches::new("p~leader".into());
        let inbox = Arc::new(Inbox::default());
        let ttl = Duration::from_secs(30);
        let a: Arc<str> = "a".into();
        let id = watches.register("p:e", &a, &args(&inbox, 0, ttl)).unwrap();
        watches.on_message(&notice(stamp(5), "p:e"));
        watches.settle("p:e", id, stamp(5));
        assert!(inbox.take().is_empty(), "a notice the read saw fired");
        watches.on_message(&notice(None, "p:e"));
        assert_eq!(inbox.take(), [(0, "a".to_owned(), PushEvent::Changed)]);

        let id = watches.register("p:e", &a, &args(&inbox, 0, ttl)).unwrap();
        watches.on_message(&notice(stamp(6), "p:e"));
        watches.settle("p:e", id, stamp(5));
        assert_eq!(inbox.take(), [(0, "a".to_owned(), PushEvent::Changed)]);
        assert_eq!(watches.len(), 0);

        // A read that never answers: any notice fires once settled or not.
        let id = watches.register("p:e", &a, &args(&inbox, 0, ttl)).unwrap();
        for term in 0..=PENDING as u64 {
            watches.on_message(&notice(stamp(term), "p:e"));
        }
        assert!(inbox.take().is_empty());
        watches.settle("p:e", id, stamp(0));
        assert_eq!(inbox.take(), [(0, "a".to_owned(), PushEvent::Changed)]);

        // A read that failed: the next notice fires, whatever it reports.
        let id = watches.register("p:e", &a, &args(&inbox, 0, ttl)).unwrap();
        watches.unsettled("p:e", id);
        assert!(inbox.take().is_empty());
        watches.on_message(&notice(None, "p:e"));
        assert_eq!(inbox.take(), [(0, "a".to_owned(), PushEvent::Changed)]);
        // ... and one heard before it failed fires at once.
        let id = watches.register("p:e", &a, &args(&inbox, 0, ttl)).unwrap();
        watches.on_message(&notice(None, "p:e"));
        watches.unsettled("p:e", id);
        assert_eq!(inbox.take(), [(0, "a".to_owned(), PushEvent::Changed)]);
        assert_eq!(watches.len(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_watch_lapses_after_its_ttl() {
        let watches = Watches::new("p~leader".into());
        let inbox = Arc::new(Inbox::default());
        let uid: Arc<str> = "a".into();
        let id = watches
            .register("p:e", &uid, &args(&inbox, 0, Duration::from_secs(1)))
            .unwrap();
        watches.settle("p:e", id, None);
        tokio::time::advance(Duration::from_secs(2)).await;
        watches.on_message(&notice(stamp(1), "p:e"));
        assert!(inbox.take().is_empty(), "a lapsed watch was fired");
        // Lapsed watches are swept once enough are registered.
        for i in 0..200 {
            let uid: Arc<str> = format!("u{i}").into();
            watches
                .register(
                    &format!("p:{i}"),
                    &uid,
                    &args(&inbox, 0, Duration::from_secs(1)),
                )
                .unwrap();
        }
        tokio::time::advance(Duration::from_secs(2)).await;
        for i in 0..200 {
            let uid: Arc<str> = format!("v{i}").into();
            watches
                .register(
                    &format!("q:{i}"),
                    &uid,
                    &args(&inbox, 0, Duration::from_secs(60)),
                )
                .unwrap();
        }
        assert!(watches.len() < 400, "lapsed watches were never swept");
    }
}
