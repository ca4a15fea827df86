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
use std::time::{Duration, Instant};

use futures::executor::block_on;

use super::{args, queue, Granted};
use crate::{LocalLocker, LockMode, NetLocker};

const PLACES: usize = 4_000;
/// Live waiters on `e` alone, behind them.
const BEHIND: usize = 40_000;

/// The time `h`'s unlock of `c` takes, with `PLACES` readers waiting on
/// both `c` and `e` (which `g` holds), whose uids were released on another
/// name first when `release` (else they are live), and `BEHIND` writers
/// waiting on `e` behind them.
fn unlock_time(release: bool) -> Duration {
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
        let start = Instant::now();
        assert!(l.unlock(&args("h", &["c"])).await.unwrap());
        let took = start.elapsed();
        let expected = BEHIND + if release { 0 } else { 2 * PLACES };
        assert_eq!(l.waiting(), expected, "places left");
        took
    })
}

#[test]
fn a_line_moving_on_past_released_places_of_two_names_does_work_linear_in_the_line() {
    let live = unlock_time(false);
    let released = unlock_time(true);
    println!(
        "{PLACES} places on c and e, {BEHIND} behind them on e: all live {live:?}, \
         the {PLACES} released {released:?}"
    );
    // Linear: ending a dropped place's other half costs about what trying
    // to grant it across its names does. A wide margin (a factor of 20,
    // and 200 ms) for a loaded machine.
    assert!(
        released < live * 20 + Duration::from_millis(200),
        "a release dropping {PLACES} released uids' places on c, whose requests also wait at the \
         head of e's line of {} places, took {released:?}, against {live:?} when they are live: \
         the work is not linear in the line",
        PLACES + BEHIND
    );
}
