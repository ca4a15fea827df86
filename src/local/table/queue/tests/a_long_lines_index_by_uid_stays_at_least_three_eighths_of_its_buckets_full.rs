//! The memory budget charges a place's slot in its line's index by uid as
//! a slot of a map at least 3/8 full (budget.rs). Counted in buckets (the
//! bytes a clone allocates, tombstones included), the index stays at
//! least that full through two histories that once left it sparser:
//! waiters joining and leaving a line of 20 to 70 at random (an insert
//! that found no room doubled an index of 36 places to 128 buckets) and a
//! line of 110 drained in a random order to 17 (judged by `capacity()`,
//! which leaves tombstones out, the index kept 17 places in 128 buckets).

use std::time::Duration;

use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};
use tokio::time::Instant;

use super::super::super::counting::buckets;
use super::super::super::{Name, Shard, Wounded};
use crate::locker::wait::Ticket;
use crate::LockMode;

/// A line's waiters, and the index the shard keeps of them.
struct Line {
    shard: Shard,
    live: Vec<usize>,
    joined: usize,
    start: Instant,
}

use super::waiter as args;

impl Line {
    fn new() -> Self {
        Line {
            shard: Shard::default(),
            live: Vec::new(),
            joined: 0,
            start: Instant::now(),
        }
    }

    /// A new waiter joins the end of the line.
    fn join(&mut self) {
        self.joined += 1;
        let a = args(self.joined);
        self.shard.enqueue(
            Name::new(&a.resources, 0),
            &a,
            LockMode::Read,
            Ticket {
                at: self.joined as u64,
                tiebreak: 0,
            },
            self.start + Duration::from_secs(1000),
            None,
            &mut Vec::new(),
            &mut Wounded::default(),
            &mut Vec::new(),
        );
        self.live.push(self.joined);
    }

    /// A waiter anywhere in the line leaves it.
    fn leave(&mut self, rng: &mut SmallRng) {
        let uid = self.live.swap_remove(rng.random_range(0..self.live.len()));
        let a = args(uid);
        let left = self.shard.leave(
            Name::new(&a.resources, 0),
            &a.uid,
            None,
            None,
            &mut Vec::new(),
        );
        assert!(left);
    }

    /// Fails unless the index agrees with the line and fills at least 3/8
    /// of its buckets.
    fn check(&self, history: &str, seed: u64, step: usize) {
        let queue = &self.shard.map.get("name").unwrap().queue;
        assert!(
            queue.index_agrees(),
            "{history}, seed {seed}, step {step}: the index"
        );
        let Some(index) = &queue.index else { return };
        let buckets = buckets(index);
        assert!(
            index.len() * 8 >= buckets * 3,
            "{history}, seed {seed}, step {step}: a line of {} places keeps an index of {buckets} \
             buckets ({:.0}% in use; it reports room for {}); the budget charges a place's slot \
             at 3/8",
            index.len(),
            100.0 * index.len() as f64 / buckets as f64,
            index.capacity()
        );
    }
}

#[test]
fn a_long_lines_index_by_uid_stays_at_least_three_eighths_of_its_buckets_full() {
    for seed in 0..40u64 {
        let mut rng = SmallRng::seed_from_u64(seed);
        let mut line = Line::new();
        let low = rng.random_range(20..40usize);
        let high = low + rng.random_range(1..30usize);
        for step in 0..6000 {
            if line.live.len() < low || (line.live.len() < high && rng.random_bool(0.5)) {
                line.join();
            } else {
                line.leave(&mut rng);
            }
            line.check("churn", seed, step);
        }
    }
    for seed in 0..20u64 {
        let mut rng = SmallRng::seed_from_u64(seed);
        let mut line = Line::new();
        for _ in 0..110 {
            line.join();
        }
        for step in 0..93 {
            line.leave(&mut rng);
            line.check("drain", seed, step);
        }
    }
}
