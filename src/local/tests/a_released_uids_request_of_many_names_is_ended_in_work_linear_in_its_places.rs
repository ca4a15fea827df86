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

use std::time::Duration;

use std::sync::Arc;

use futures::executor::block_on;

use super::Granted;
use crate::local::table::STEPS;

use crate::{
    LocalLocker, LockArgs, LockMode, NetLocker, Ticket, WaitArgs, WaitReply, Wake, MAX_RESOURCES,
};

/// Released (or live) readers waiting on every name of h's lock.
const READERS: u64 = 4;

/// The steps h's unlock takes: places moved or visited in lines, names
/// walked in the requests handed back (counted by the table itself; a
/// test that timed it could fail on a loaded machine).
fn h_unlock_work(released: bool) -> u64 {
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
        let before = STEPS.with(std::cell::Cell::get);
        assert!(l.unlock(&args("h", names.clone())).await.unwrap());
        STEPS.with(std::cell::Cell::get) - before
    })
}

/// Reproduces end_forced_out walking a request's 1,000 names once per place dropped.
#[test]
fn a_released_uids_request_of_many_names_is_ended_in_work_linear_in_its_places() {
    let live = h_unlock_work(false);
    let released = h_unlock_work(true);
    // The places in the lines of h's names: READERS on each. Ending each
    // request once visits each line and walks each request a few times;
    // walking a request's names once per line that hands it back takes
    // MAX_RESOURCES times more.
    let places = READERS * MAX_RESOURCES as u64;
    assert!(
        released <= 4 * places && live <= 4 * places,
        "h's unlock dropping {READERS} released readers' places on {MAX_RESOURCES} names took \
         {released} steps ({live} when they are live and granted), more than 4 passes over the \
         {places} places"
    );
}
