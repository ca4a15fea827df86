//! A promotion that drops the last places of names nobody holds removes
//! those names from their shards' maps without fitting the maps. Four
//! holders' locks of 1,000 names each expire together, each name with
//! only the place of a released uid in its line: the sweep's promotion
//! drops those places and the names with them, and leaves every shard's map
//! at its peak (some 63 names' room) holding nothing; nothing fits it
//! until something else is removed from that shard. memory.rs: a shard's
//! map shrinks "when below 3/8 full", after a removal; budget.rs charges a
//! name's slot "at the map's lowest load: 3/8 full", and the names'
//! charges went with the expiry and the release.

use std::sync::Arc;
use std::time::Duration;

use super::super::memory::map_sparse;
use crate::{
    LocalLocker, LockArgs, LockMode, NetLocker, PushEvent, PushSink, Ticket, WaitArgs, WaitReply,
    Wake,
};

struct Ignore;

impl PushSink for Ignore {
    fn push(&self, _slot: usize, _uid: &str, _event: PushEvent) {}
}

/// Reproduces a promotion removing names from a shard's map without fitting it.
#[tokio::test(start_paused = true)]
async fn a_shard_gives_back_its_maps_room_after_a_promotion_drops_its_names() {
    let args = |uid: &str, resources: Vec<String>| LockArgs {
        uid: uid.into(),
        resources: resources.into(),
        owner: "o".into(),
        source: "s".into(),
        quorum: 1,
    };
    let chunk = |k: usize| -> Vec<String> {
        (1000 * k..1000 * (k + 1))
            .map(|i| format!("name-{i}"))
            .collect()
    };
    let l = LocalLocker::new();
    for k in 0..4 {
        assert!(l.lock(&args(&format!("h{k}"), chunk(k))).await.unwrap());
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    for k in 0..4 {
        let (x, own) = (format!("x{k}"), vec![format!("a{k}")]);
        assert!(l.lock(&args(&x, own.clone())).await.unwrap());
        let wait = WaitArgs {
            ticket: Ticket {
                at: 1 + k as u64,
                tiebreak: 0,
            },
            place_ttl: Duration::from_secs(60),
            wake: Some(Wake::new(Arc::new(Ignore), 0)),
        };
        let r = l
            .lock_wait(&args(&x, chunk(k)), LockMode::Write, &wait)
            .await;
        assert_eq!(r.unwrap(), WaitReply::Queued);
        // x's uid is released (a confirmed unlock of its own name): its
        // places stay until their lines move on.
        assert!(l.unlock(&args(&x, own)).await.unwrap());
    }
    // The holders' locks expire (validity 60 s) before x's places do, and
    // the next call's sweep promotes every name.
    tokio::time::sleep(Duration::from_millis(59_500)).await;
    assert!(l.lock(&args("z", vec!["z".into()])).await.unwrap());
    let c = l.counts();
    assert_eq!((c.entries, l.waiting()), (1, 0), "control: all went but z");
    let mut worst = (0, 0);
    l.shards.any_shard(|shard| {
        if map_sparse(shard.map.len(), shard.map.room()) && shard.map.room() > worst.1 {
            worst = (shard.map.len(), shard.map.room());
        }
        false
    });
    assert_eq!(
        worst,
        (0, 0),
        "a shard's map of (names, room) left below 3/8 full after the promotion"
    );
}
