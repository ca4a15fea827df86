//! A long line's index by uid, counted in buckets (the bytes a clone of
//! it allocates), is left far sparser than the 3/8 of its buckets that the
//! memory budget charges a place's slot for (budget.rs: "its slot in the
//! line's index by uid, in a map at least 3/8 full"): a line of 110 places
//! whose waiters leave in a random order keeps 17 places in 128 buckets
//! (13%). `tighten` asks `map_sparse` with `HashMap::capacity()`, which is
//! the items plus the room left before a resize and so leaves out the
//! tombstones that removals from a full map leave behind: the index
//! reports room for some 20 to 40 (the hash is seeded at random) and is never
//! shrunk.

use std::time::Duration;

use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};
use tokio::time::Instant;

use super::super::super::counting::allocated;
use super::super::super::{Name, Shard, Wounded};
use crate::locker::wait::Ticket;
use crate::{LockArgs, LockMode};

/// Reproduces a line's index left at 13% of its buckets: tombstones hidden from `capacity()`.
#[test]
fn a_long_lines_index_by_uid_counted_in_buckets_stays_at_least_three_eighths_full() {
    let slot = std::mem::size_of::<(std::sync::Arc<str>, Ticket)>();
    let mut worst = (1.0f64, 0, 0, 0, 0u64);
    for seed in 0..20u64 {
        let mut rng = SmallRng::seed_from_u64(seed);
        let mut shard = Shard::default();
        let start = Instant::now();
        let args = |uid: usize| LockArgs {
            uid: format!("waiter-{uid}").into(),
            resources: vec!["name".to_string()].into(),
            owner: "o".into(),
            source: "s".into(),
            quorum: 1,
        };
        let mut freed = Vec::new();
        let mut live: Vec<usize> = Vec::new();
        for i in 0..110usize {
            let a = args(i);
            shard.enqueue(
                Name::new(&a.resources, 0),
                &a,
                LockMode::Read,
                Ticket {
                    at: i as u64,
                    tiebreak: 0,
                },
                start + Duration::from_secs(1000),
                None,
                &mut Vec::new(),
                &mut Wounded::default(),
                &mut freed,
            );
            live.push(i);
        }
        while live.len() > 17 {
            let uid = live.swap_remove(rng.random_range(0..live.len()));
            let a = args(uid);
            assert!(shard.leave(Name::new(&a.resources, 0), &a.uid, None, None, &mut freed));
            let queue = &shard.map.get("name").unwrap().queue;
            if let Some(index) = &queue.index {
                let bytes = allocated(|| (**index).clone());
                let buckets = (bytes - 16) / (slot + 1);
                let load = index.len() as f64 / buckets as f64;
                if load < worst.0 {
                    worst = (load, index.len(), index.capacity(), buckets, seed);
                }
            }
        }
    }
    let (load, len, capacity, buckets, seed) = worst;
    assert!(
        load >= 0.375,
        "seed {seed}: a line of {len} places keeps an index of {buckets} buckets ({:.0}% in use; \
         it reports room for {capacity}); the budget charges a place's slot at 3/8",
        100.0 * load
    );
}
