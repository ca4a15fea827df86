//! Reproduces a past break: a name whose only waiter's place expired is kept in the table, empty, for good once its holder lets go: the promotion drops the place but never removes the name.
//!
//! src/local/table.rs, `Resource`: "A name with no holders and nobody
//! waiting is removed, after its fencing token is folded into the shard's
//! floor, so freed names never accumulate." `Shard::promote`
//! (src/local/table/promote.rs) drops the expired places of a name's line
//! and returns when none is left to grant, without settling the name; no
//! later pass looks at it again (`expire_places` settles only the names
//! whose line it shortened), so every such name stays in the map, counted
//! by `counts()` and in no connection's charge.

use std::sync::Arc;
use std::time::Duration;

use super::{args, locker_with};
use crate::{LockMode, NetLocker, PushEvent, PushSink, Ticket, WaitArgs, WaitReply, Wake};

struct Ignore;

impl PushSink for Ignore {
    fn push(&self, _slot: usize, _uid: &str, _event: PushEvent) {}
}

#[tokio::test(start_paused = true)]
async fn a_name_whose_waiter_s_place_expired_leaves_the_table_when_its_holder_lets_go() {
    let l = locker_with(60, 0);
    let names: Vec<String> = (0..100).map(|i| format!("n-{i}")).collect();
    for name in &names {
        assert!(l.lock(&args("w", &[name])).await.unwrap());
        let wait = WaitArgs {
            ticket: Ticket { at: 1, tiebreak: 0 },
            place_ttl: Duration::from_millis(100),
            wake: Some(Wake::new(Arc::new(Ignore), 0)),
        };
        assert_eq!(
            l.lock_wait(&args(&format!("v-{name}"), &[name]), LockMode::Read, &wait)
                .await
                .unwrap(),
            WaitReply::Queued,
            "control: the reader waits behind the writer"
        );
    }
    // The places expire (their waiters went away), before the next sweep.
    tokio::time::sleep(Duration::from_millis(200)).await;
    for name in &names {
        assert!(l.unlock(&args("w", &[name])).await.unwrap());
    }
    // Long after, with every sweep run.
    tokio::time::sleep(Duration::from_secs(120)).await;
    let c = l.counts();
    assert_eq!(
        (c.entries, c.resources, l.waiting()),
        (0, 0, 0),
        "nothing holds or waits for the 100 names, yet the table keeps them"
    );
}
