//! The record of released and forced uids: its bounds, its ttl, and its
//! queues and index against a plain model of them.

use super::*;

#[tokio::test(start_paused = true)]
async fn remembers_for_the_ttl_only() {
    let released = Released::new(Duration::from_secs(60), 1 << 20);
    released.remember("a");
    assert!(released.contains("a"));
    assert!(!released.contains("b"));
    tokio::time::sleep(Duration::from_secs(61)).await;
    assert!(!released.contains("a"));
    released.remember("b");
    let inner = released.inner.lock().unwrap();
    assert_eq!(
        inner.ordinary.order.len(),
        1,
        "expired uids must be dropped, not kept"
    );
    assert_eq!(inner.bytes(), tombstone_bytes("b"));
}

#[tokio::test(start_paused = true)]
async fn usage_counts_the_live_tombstones_only() {
    let released = Released::new(Duration::from_secs(60), 1 << 20);
    assert_eq!(released.usage(), (0, 0));
    released.remember("b");
    released.remember("c");
    tokio::time::sleep(Duration::from_secs(30)).await;
    released.remember("dd");
    let three = 2 * tombstone_bytes("b") + tombstone_bytes("dd");
    assert_eq!(released.usage(), (3, three));
    tokio::time::sleep(Duration::from_secs(31)).await;
    // "b" and "c" are past the ttl: counting forgets them, "dd" stays.
    assert_eq!(released.usage(), (1, tombstone_bytes("dd")));
}

/// Issue #9: a 2 MB uid left a 1.9 MiB tombstone and a million were
/// kept. Now the total is bounded in bytes, and the oldest go first.
#[tokio::test(start_paused = true)]
async fn total_bytes_are_bounded_and_the_oldest_are_forgotten_first() {
    let budget = 100 * tombstone_bytes("uid-00000");
    let released = Released::new(Duration::from_secs(60), budget);
    for i in 0..1_000 {
        released.remember(&format!("uid-{i:05}"));
        assert!(released.bytes() <= budget);
    }
    assert!(released.contains("uid-00999"));
    assert!(released.contains("uid-00900"));
    assert!(!released.contains("uid-00899"));
    assert_eq!(released.inner.lock().unwrap().ordinary.order.len(), 100);
    // One uid larger than the whole budget is not kept at all.
    released.remember(&"x".repeat(budget));
    assert!(released.bytes() <= budget);
}

/// The record against a plain model of it (maps and queues of
/// strings, as it was kept before its index): random uids, short and
/// long, many of them sharing their index's home slots, remembered (as
/// released, and forced open when `forced_too`), looked up and
/// forgotten by age and by bytes, with the limits changed now and
/// then.
async fn agrees_with_a_plain_model(forced_too: bool) {
    use std::collections::HashMap;

    #[derive(Default)]
    struct ModelRecord {
        since: HashMap<String, Instant>,
        order: VecDeque<(Instant, String)>,
        bytes: usize,
    }
    impl ModelRecord {
        fn forget_oldest(&mut self) {
            let (_, uid) = self.order.pop_front().expect("one to forget");
            self.since.remove(&uid);
            self.bytes -= tombstone_bytes(&uid);
        }
        fn forget_older_than(&mut self, now: Instant, ttl: Duration) {
            while self
                .order
                .front()
                .is_some_and(|(at, _)| now.saturating_duration_since(*at) >= ttl)
            {
                self.forget_oldest();
            }
        }
        fn push(&mut self, uid: &str, now: Instant) {
            self.since.insert(uid.to_owned(), now);
            self.order.push_back((now, uid.to_owned()));
            self.bytes += tombstone_bytes(uid);
        }
        fn contains(&self, uid: &str, now: Instant, ttl: Duration) -> bool {
            self.since
                .get(uid)
                .is_some_and(|at| now.saturating_duration_since(*at) < ttl)
        }
    }
    struct Model {
        ttl: Duration,
        max_bytes: usize,
        ordinary: ModelRecord,
        forced: ModelRecord,
    }
    impl Model {
        fn bytes(&self) -> usize {
            self.ordinary.bytes + self.forced.bytes
        }
        fn len(&self) -> usize {
            self.ordinary.order.len() + self.forced.order.len()
        }
        fn forget_older_than(&mut self, now: Instant) {
            self.ordinary.forget_older_than(now, self.ttl);
            self.forced.forget_older_than(now, self.ttl);
        }
        fn fit(&mut self) {
            while self.forced.bytes > self.max_bytes / 2 {
                self.forced.forget_oldest();
            }
            while self.bytes() > self.max_bytes {
                self.ordinary.forget_oldest();
            }
        }
        fn remember(&mut self, uid: &str, forced: bool, now: Instant) {
            self.forget_older_than(now);
            if self.forced.since.contains_key(uid)
                || (!forced && self.ordinary.since.contains_key(uid))
            {
                return;
            }
            let bytes = tombstone_bytes(uid);
            if forced {
                if bytes > self.max_bytes / 2 {
                    return;
                }
                while self.forced.bytes + bytes > self.max_bytes / 2 {
                    self.forced.forget_oldest();
                }
                self.forced.push(uid, now);
            } else {
                let room = self.max_bytes - self.forced.bytes;
                if bytes > room {
                    return;
                }
                while self.ordinary.bytes + bytes > room {
                    self.ordinary.forget_oldest();
                }
                self.ordinary.push(uid, now);
            }
            self.fit();
        }
        fn contains(&self, uid: &str, now: Instant) -> bool {
            self.ordinary.contains(uid, now, self.ttl) || self.forced.contains(uid, now, self.ttl)
        }
    }

    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move |below: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % below
    };
    let ttl = Duration::from_secs(10);
    let max_bytes = 300 * tombstone_bytes("uid-0000");
    let released = Released::new(ttl, max_bytes);
    let mut model = Model {
        ttl,
        max_bytes,
        ordinary: ModelRecord::default(),
        forced: ModelRecord::default(),
    };
    let uid = |n: u64| {
        if n.is_multiple_of(7) {
            format!("{}-{n}", "long".repeat(12))
        } else {
            format!("uid-{n:04}")
        }
    };
    for step in 0..60_000 {
        let now = Instant::now();
        match next(100) {
            0..=44 => {
                let u = uid(next(2_000));
                // A quarter of them forced open, when forced too.
                let forced = forced_too && next(4) == 0;
                if forced {
                    if next(2) == 0 {
                        released.remember_forced(&Arc::from(u.as_str()));
                    } else {
                        released.remember_forced_at(&Arc::from(u.as_str()), now);
                    }
                } else if next(2) == 0 {
                    released.remember(&u);
                } else {
                    released.remember_shared_at(&Arc::from(u.as_str()), now);
                }
                model.remember(&u, forced, now);
            }
            45..=94 => {
                let u = uid(next(2_000));
                assert_eq!(
                    released.contains(&u),
                    model.contains(&u, now),
                    "step {step}: {u}"
                );
            }
            95..=97 => tokio::time::advance(Duration::from_millis(next(400))).await,
            98 => {
                let max_bytes = (100 + next(400) as usize) * tombstone_bytes("uid-0000");
                released.set_limits(ttl, max_bytes);
                model.max_bytes = max_bytes;
                model.fit();
            }
            _ => {
                let (uids, bytes) = released.usage();
                model.forget_older_than(now);
                assert_eq!((uids, bytes), (model.len(), model.bytes()), "step {step}");
            }
        }
        let inner = released.inner.lock().unwrap();
        assert_eq!(inner.ordinary.bytes, model.ordinary.bytes, "step {step}");
        assert_eq!(inner.forced.bytes, model.forced.bytes, "step {step}");
        assert!(inner.bytes() <= inner.max_bytes, "step {step}");
        assert!(inner.forced.bytes <= inner.max_bytes / 2, "step {step}");
    }
    let inner = released.inner.lock().unwrap();
    if forced_too {
        assert!(
            !inner.forced.order.is_empty(),
            "the forced uids' record was used"
        );
    }
    for (record, kept) in [
        (&inner.ordinary, &model.ordinary),
        (&inner.forced, &model.forced),
    ] {
        assert_eq!(record.order.len(), kept.order.len());
        // Every remembered uid is in the index once, and no probe
        // meets a gap before it.
        assert_eq!(
            record
                .index
                .iter()
                .filter(|&&s| s != 0 && record.position(s).is_some())
                .count(),
            record.order.len()
        );
        assert_eq!(record.uids.len(), record.order.len());
        assert!(record.used * 4 <= record.index.len() * 3);
        for u in kept.since.keys() {
            let hash = released.hasher.hash_one(u.as_str());
            let pos = record.find(u, hash).expect("remembered");
            assert_eq!(record.order[pos].len as usize, u.len());
        }
    }
}

#[tokio::test(start_paused = true)]
async fn agrees_with_a_plain_model_of_releases() {
    agrees_with_a_plain_model(false).await;
}

#[tokio::test(start_paused = true)]
async fn agrees_with_a_plain_model_of_releases_and_forced_uids() {
    agrees_with_a_plain_model(true).await;
}

/// A release stamped with a clock reading older than the newest one
/// remembered (its caller read the clock, then waited for the mutex)
/// is kept for the ttl after the newest.
#[tokio::test(start_paused = true)]
async fn an_older_reading_is_stamped_as_the_newest() {
    let ttl = Duration::from_secs(60);
    let released = Released::new(ttl, 1 << 20);
    let before = Instant::now();
    tokio::time::advance(Duration::from_secs(5)).await;
    released.remember("newer");
    released.remember_shared_at(&Arc::from("older"), before);
    tokio::time::advance(ttl - Duration::from_secs(1)).await;
    assert!(released.contains("older"));
    tokio::time::advance(Duration::from_secs(1)).await;
    assert!(!released.contains("older"));
    assert!(!released.contains("newer"));
}

#[test]
fn a_stamp_takes_16_bytes() {
    assert_eq!(std::mem::size_of::<Stamp>(), 16);
}

/// Forgotten uids' slots are reused or dropped: a record that keeps
/// a few uids and forgets many keeps a small index.
#[tokio::test(start_paused = true)]
async fn forgotten_slots_do_not_pile_up() {
    let released = Released::new(Duration::from_secs(60), 10 * tombstone_bytes("uid-000000"));
    for i in 0..100_000 {
        released.remember(&format!("uid-{i:06}"));
        assert!(released.contains(&format!("uid-{i:06}")));
    }
    assert!(released.contains("uid-099990"));
    assert!(!released.contains("uid-099989"));
    let inner = released.inner.lock().unwrap();
    assert_eq!(inner.ordinary.order.len(), 10);
    assert_eq!(inner.ordinary.index.len(), INDEX_KEPT);
}

/// A uid is told from another of the same length by all its bytes,
/// past the ones the queue keeps too (what a probe that meets a slot
/// of the same tag relies on).
#[tokio::test(start_paused = true)]
async fn uids_are_compared_whole() {
    let released = Released::new(Duration::from_secs(60), 1 << 20);
    let head = "h".repeat(INLINE);
    let (a, b, c) = (
        format!("{head}-a"),
        format!("{head}-b"),
        format!("{head}-cc"),
    );
    released.remember(&a);
    released.remember("short");
    released.remember(&b);
    let inner = &released.inner.lock().unwrap().ordinary;
    assert!(inner.is_at(0, &a) && !inner.is_at(0, &b) && !inner.is_at(0, &c));
    assert!(inner.is_at(1, "short") && !inner.is_at(1, "shore"));
    assert!(inner.is_at(2, &b) && !inner.is_at(2, &a));
}

/// A flood of releases (of uids held or not) forgets older releases
/// only: a uid forced open stays refused for the ttl. Forced uids keep
/// within half the bound, the newest kept.
#[tokio::test(start_paused = true)]
async fn releases_never_push_out_a_forced_uid() {
    let budget = 100 * tombstone_bytes("uid-00000");
    let released = Released::new(Duration::from_secs(60), budget);
    released.remember_forced(&Arc::from("forced-0"));
    released.remember("uid-released");
    released.remember_forced(&Arc::from("uid-released"));
    for i in 0..1_000 {
        released.remember(&format!("uid-{i:05}"));
        assert!(released.bytes() <= budget);
    }
    assert!(released.contains("forced-0"));
    assert!(released.contains("uid-released"), "released, then forced");
    assert!(!released.contains("uid-00000"));
    for i in 0..1_000 {
        released.remember_forced(&Arc::from(format!("forced-{i:03}")));
        assert!(released.bytes() <= budget);
    }
    {
        let inner = released.inner.lock().unwrap();
        assert!(inner.forced.bytes <= budget / 2);
        let hash = released.hasher.hash_one("forced-999");
        assert!(inner.forced.find("forced-999", hash).is_some());
        assert!(!inner.ordinary.order.is_empty(), "releases keep room");
    }
    tokio::time::sleep(Duration::from_secs(61)).await;
    assert!(!released.contains("forced-999"), "kept for the ttl only");
    assert_eq!(released.usage(), (0, 0));
}
