//! A promotion that drops the places of released uids whose requests
//! cover many names ends their other halves in work quadratic in the
//! request's names: each name's line hands back the whole request in
//! `forced_out` for the place it dropped there, and `end_forced_out`
//! walks all of the request's names for each, so M released readers'
//! places on 1,000 names (M x 1,000 places) cost M x 1,000,000 steps,
//! against M x 1,000 when the same readers are live and granted
//! (promotion.rs: "the work is linear in the lines and holders
//! involved"; args.rs: a client must not multiply a pass by the most names
//! one lock may carry).

use std::time::{Duration, Instant};

use std::sync::Arc;

use futures::executor::block_on;

use super::Granted;

use crate::{
    LocalLocker, LockArgs, LockMode, NetLocker, Ticket, WaitArgs, WaitReply, Wake, MAX_RESOURCES,
};

/// Released (or live) readers waiting on every name of h's lock.
const READERS: u64 = 4;

fn h_unlock_takes(released: bool) -> Duration {
    let args = |uid: &str, resources: Vec<String>| LockArgs {
        uid: uid.into(),
        resources: resources.into(),
        owner: "o".into(),
        source: "s".into(),
        quorum: 1,
    };
    let names: Vec<String> = (0..MAX_RESOURCES).map(|i| format!("name-{i}")).collect();
    let l = LocalLocker::new();
    let sink = Arc::new(Granted::default());
    block_on(async {
        assert!(l.lock(&args("h", names.clone())).await.unwrap());
        for i in 0..READERS {
            let uid = format!("r{i}");
            let own = vec![format!("own-{i}")];
            assert!(l.lock(&args(&uid, own.clone())).await.unwrap());
            let wait = WaitArgs {
                ticket: Ticket {
                    at: 1 + i,
                    tiebreak: 0,
                },
                place_ttl: Duration::from_secs(60),
                wake: Some(Wake::new(sink.clone(), 0)),
            };
            let r = l
                .lock_wait(&args(&uid, names.clone()), LockMode::Read, &wait)
                .await;
            assert_eq!(r.unwrap(), WaitReply::Queued);
            if released {
                assert!(l.unlock(&args(&uid, own)).await.unwrap());
            }
        }
        let start = Instant::now();
        assert!(l.unlock(&args("h", names.clone())).await.unwrap());
        start.elapsed()
    })
}

/// Reproduces end_forced_out walking a request's 1,000 names once per place dropped.
#[test]
fn a_released_uids_request_of_many_names_is_ended_in_work_linear_in_its_places() {
    let live = h_unlock_takes(false);
    let released = h_unlock_takes(true);
    assert!(
        released < 3 * live + Duration::from_millis(50),
        "h's unlock dropping {READERS} released readers' places on {MAX_RESOURCES} names took {released:?}, \
         against {live:?} when they are live and granted"
    );
}
