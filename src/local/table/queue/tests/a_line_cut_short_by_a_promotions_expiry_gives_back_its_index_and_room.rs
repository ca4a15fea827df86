//! A promotion that drops a long line's expired places, and grants
//! nothing (the name is still held), leaves the line's index by uid and
//! its vector at their peak size for the one place left; the next expiry
//! pass finds nothing to drop there and does not fit it either. The
//! invariant (queue.rs): the index "is dropped when [the line] falls below
//! half of [32]"; the memory budget (budget.rs) charges a place a vector
//! "at least half full" and "a line keeps an index only while at least 16
//! places stand in it", so the places' charges go with their expiry while
//! the room they used stays.

use std::time::Duration;

use tokio::time::Instant;

use super::super::super::{Name, Promotions, Shard, Wounded};
use super::super::INDEXED;
use crate::locker::wait::Ticket;
use crate::{LockArgs, LockMode};

#[test]
fn a_line_cut_short_by_a_promotions_expiry_gives_back_its_index_and_room() {
    let args = |uid: &str| LockArgs {
        uid: uid.into(),
        resources: vec!["name".to_string()].into(),
        owner: "o".into(),
        source: "s".into(),
        quorum: 1,
    };
    let mut shard = Shard::default();
    let now = Instant::now();
    let mut freed = Vec::new();
    let h = args("h");
    shard.grant(
        Name::new(&h.resources, 0),
        &h,
        LockMode::Write,
        now,
        None,
        None,
        &mut freed,
    );
    let places = 2 * INDEXED + 8;
    for i in 0..places {
        let a = args(&format!("w{i}"));
        // All but the last expire after 10 ms.
        let ttl = if i + 1 == places { 10_000 } else { 10 };
        shard.enqueue(
            Name::new(&a.resources, 0),
            &a,
            LockMode::Read,
            Ticket {
                at: i as u64,
                tiebreak: 0,
            },
            now + Duration::from_millis(ttl),
            None,
            &mut Vec::new(),
            &mut Wounded::default(),
            &mut freed,
        );
    }
    assert!(shard.map.get("name").unwrap().queue.index.is_some());
    // The name is freed for some other reason (say a place left) after
    // the places expired: the promotion drops them, and h still holds.
    let later = now + Duration::from_millis(20);
    let name = Name::new(&h.resources, 0);
    shard.promote(&name, later, &|_| false, &mut Promotions::default());
    // The locker's expiry pass comes next.
    shard.expire_places(later + Duration::from_millis(10), &mut freed);
    let queue = &shard.map.get("name").unwrap().queue;
    assert_eq!(queue.len(), 1, "one live place left");
    assert!(queue.index_agrees());
    assert!(
        queue.index.is_none(),
        "a line of {} place keeps its index by uid of {} (kept only while at least {} places stand)",
        queue.len(),
        queue.index.as_ref().map_or(0, |i| i.capacity()),
        INDEXED / 2
    );
    assert!(
        queue.capacity() <= 2 * queue.len(),
        "a line of {} place keeps room for {} (at least half full, the budget says)",
        queue.len(),
        queue.capacity()
    );
}
