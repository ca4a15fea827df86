//! A name's readers' index by uid, counted in buckets (the bytes a clone
//! of it allocates), is left far sparser than the 3/8 of its buckets that
//! the memory budget charges an entry's slot for (budget.rs: "its slot in
//! the readers' index by uid, in a map at least 3/8 full"): 110 readers
//! released in a random order leave 17 in some 128 buckets. As for a
//! line's index, `tighten` asks `map_sparse` with `HashMap::capacity()`,
//! which leaves out the tombstones of the removals.

use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};
use tokio::time::Instant;

use super::super::super::counting::buckets;
use super::super::super::{Holders, Name, Shard};
use crate::{LockArgs, LockMode};

/// Reproduces a readers' index left below 3/8 of its buckets: tombstones hidden from `capacity()`.
#[test]
fn a_names_readers_index_counted_in_buckets_stays_at_least_three_eighths_full() {
    let mut worst = (1.0f64, 0, 0, 0, 0u64);
    for seed in 0..20u64 {
        let mut rng = SmallRng::seed_from_u64(seed);
        let mut shard = Shard::default();
        let now = Instant::now();
        let args = |uid: usize| LockArgs {
            uid: format!("reader-{uid}").into(),
            resources: vec!["name".to_string()].into(),
            owner: "o".into(),
            source: "s".into(),
            quorum: 1,
        };
        let mut freed = Vec::new();
        let mut live: Vec<usize> = (0..110).collect();
        for &i in &live {
            let a = args(i);
            shard.grant(
                Name::new(&a.resources, 0),
                &a,
                LockMode::Read,
                now,
                None,
                None,
                &mut freed,
            );
        }
        while live.len() > 17 {
            let uid = live.swap_remove(rng.random_range(0..live.len()));
            let a = args(uid);
            assert!(shard.release(Name::new(&a.resources, 0), &a.uid, None, &mut freed));
            let Some(Holders::Readers(readers)) = shard.get("name") else {
                panic!("readers kept");
            };
            if let Some(index) = &readers.index {
                let buckets = buckets(index);
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
        "seed {seed}: a name of {len} readers keeps an index of {buckets} buckets ({:.0}% in use; \
         it reports room for {capacity}); the budget charges an entry's slot at 3/8",
        100.0 * load
    );
}
