//! A line that moves on drops the places of uids released here and hands
//! the rest of each back to be ended on its other names
//! (src/local/table/promote.rs: "linear in the places passed, however many
//! are dropped"; src/local/promotion.rs: "the work is linear in the lines
//! and holders involved"). When the dropped places' requests all cover a
//! second name, their ends there cost a removal from that name's line
//! each, which shifts every place behind it: a release of c that drops N
//! such places, standing at the head of e's line of M places, costs
//! N × M place moves, instead of taking them out of e's line in one pass.

use std::sync::Arc;

use futures::executor::block_on;

use super::{args, queue, Granted};
use crate::local::table::STEPS;
use crate::{LocalLocker, LockMode, NetLocker};

const PLACES: usize = 4_000;
/// Live waiters on `e` alone, behind them.
const BEHIND: usize = 40_000;

/// The places `h`'s unlock of `c` moves or visits in lines (counted by
/// the lines themselves, `queue::STEPS`; a test that timed it
/// failed on a loaded machine), with `PLACES` readers waiting on
/// both `c` and `e` (which `g` holds), whose uids were released on another
/// name first when `release` (else they are live), and `BEHIND` writers
/// waiting on `e` behind them.
fn unlock_work(release: bool) -> u64 {
    let l = LocalLocker::new();
    let sink = Arc::new(Granted::default());
    block_on(async {
        assert!(l.lock(&args("h", &["c"])).await.unwrap());
        assert!(l.lock(&args("g", &["e"])).await.unwrap());
        for i in 0..PLACES {
            let uid = format!("x{i}");
            queue(&l, &sink, &uid, &["c", "e"], LockMode::Read, true).await;
            if release {
                l.unlock(&args(&uid, &["z"])).await.unwrap();
            }
        }
        for i in 0..BEHIND {
            queue(&l, &sink, &format!("y{i}"), &["e"], LockMode::Write, true).await;
        }
        let before = STEPS.with(std::cell::Cell::get);
        assert!(l.unlock(&args("h", &["c"])).await.unwrap());
        let work = STEPS.with(std::cell::Cell::get) - before;
        let expected = BEHIND + if release { 0 } else { 2 * PLACES };
        assert_eq!(l.waiting(), expected, "places left");
        work
    })
}

#[test]
fn a_line_moving_on_past_released_places_of_two_names_does_work_linear_in_the_line() {
    let live = unlock_work(false);
    let released = unlock_work(true);
    // The places in the two lines the release touches: c's and e's.
    let lines = (PLACES + (PLACES + BEHIND)) as u64;
    println!(
        "{PLACES} places on c and e, {BEHIND} behind them on e: places moved or visited with all \
         live {live}, with the {PLACES} released {released}; {lines} places in the two lines"
    );
    // Linear: a few passes over each line. One removal at a time would
    // move the line behind each: PLACES x BEHIND (160 million) places.
    assert!(
        released <= 4 * lines && live <= 4 * lines,
        "a release dropping {PLACES} released uids' places on c, whose requests also wait at the \
         head of e's line of {} places, moved or visited {released} places in lines ({live} when \
         they are live), more than 4 passes over the {lines} places of the two lines: the work \
         is not linear in the lines",
        PLACES + BEHIND
    );
}
