//! A long line's index by uid, churned by waiters joining and leaving
//! while some 20 to 70 places stand, is left far sparser than the 3/8 of
//! its buckets that the memory budget charges a place's slot for
//! (budget.rs: "its slot in the line's index by uid, in a map at least 3/8
//! full"): removals leave tombstones in the index, and an insert that
//! finds no room left resizes it to twice its buckets though it holds
//! barely more than half its capacity (36 places in 128 buckets). Nothing
//! shrinks it until a place leaves again.

use std::time::Duration;

use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};
use tokio::time::Instant;

use super::super::super::memory::map_sparse;
use super::super::super::{Name, Shard, Wounded};
use crate::locker::wait::Ticket;
use crate::{LockArgs, LockMode};

#[test]
fn a_long_lines_index_by_uid_stays_at_least_three_eighths_full() {
    for seed in 0..40u64 {
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
        let mut fresh = 0usize;
        let low = rng.random_range(20..40usize);
        let high = low + rng.random_range(1..30usize);
        for step in 0..6000u64 {
            let now = start + Duration::from_millis(step);
            if live.len() < low || (live.len() < high && rng.random_bool(0.5)) {
                // A new waiter joins the end of the line.
                fresh += 1;
                let a = args(fresh);
                shard.enqueue(
                    Name::new(&a.resources, 0),
                    &a,
                    LockMode::Read,
                    Ticket {
                        at: fresh as u64,
                        tiebreak: 0,
                    },
                    now + Duration::from_secs(1000),
                    None,
                    &mut Vec::new(),
                    &mut Wounded::default(),
                    &mut freed,
                );
                live.push(fresh);
            } else {
                // A waiter anywhere in the line leaves it.
                let uid = live.swap_remove(rng.random_range(0..live.len()));
                let a = args(uid);
                assert!(shard.leave(Name::new(&a.resources, 0), &a.uid, None, None, &mut freed));
            }
            freed.clear();
            let queue = &shard.map.get("name").unwrap().queue;
            assert!(queue.index_agrees(), "seed {seed} step {step}: the index");
            if let Some(index) = &queue.index {
                assert!(
                    !map_sparse(index.len(), index.capacity()),
                    "seed {seed} step {step}: a line of {} places keeps an index with room for {} \
                     (less than 3/8 of its buckets in use; the budget charges a place's slot at 3/8)",
                    index.len(),
                    index.capacity()
                );
            }
        }
    }
}
