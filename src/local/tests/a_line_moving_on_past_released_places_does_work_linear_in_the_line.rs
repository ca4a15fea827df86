//! A line that moves on drops the places of uids released here (on names
//! their unlock did not cover) instead of granting them. The promotion's
//! invariant (src/local/table/promote.rs, src/local/promotion.rs): "the
//! work is linear in the line and the holders, however many are granted
//! together". Dropping a released place must keep it so: a release that
//! frees a line of N waiting readers followed by M readers whose uids were
//! released elsewhere costs about what freeing N + M live readers costs,
//! not N × M (a scan of the line restarted from its head, and a look-up of
//! every place in the record of released uids, after each dropped place).

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::executor::block_on;

use super::{args, queue, Granted};
use crate::{LocalLocker, LockMode, NetLocker};

const LIVE: usize = 4_000;
const RELEASED: usize = 4_000;

/// The time `h`'s unlock of `c` takes, with `LIVE` readers waiting on `c`
/// and behind them `RELEASED` more, whose uids were released on another
/// name first when `release` (else they are live too).
fn unlock_time(release: bool) -> Duration {
    let l = LocalLocker::new();
    let sink = Arc::new(Granted::default());
    block_on(async {
        assert!(l.lock(&args("h", &["c"])).await.unwrap());
        for i in 0..LIVE {
            queue(&l, &sink, &format!("r{i}"), &["c"], LockMode::Read, true).await;
        }
        for i in 0..RELEASED {
            let uid = format!("x{i}");
            queue(&l, &sink, &uid, &["c"], LockMode::Read, true).await;
            if release {
                // A confirmed release of x's uid on another name (held or
                // not, it is remembered): its place on c can never be
                // granted now.
                l.unlock(&args(&uid, &["z"])).await.unwrap();
            }
        }
        let start = Instant::now();
        assert!(l.unlock(&args("h", &["c"])).await.unwrap());
        let took = start.elapsed();
        let granted = sink.0.lock().unwrap().len();
        let expected = LIVE + if release { 0 } else { RELEASED };
        assert_eq!(granted, expected, "readers pushed a grant");
        took
    })
}

#[test]
fn a_line_moving_on_past_released_places_does_work_linear_in_the_line() {
    let live = unlock_time(false);
    let released = unlock_time(true);
    println!(
        "{LIVE} readers then {RELEASED} more: all live {live:?}, the {RELEASED} released {released:?}"
    );
    // Linear: dropping a place costs no more than granting one. Allow a
    // wide margin (a factor of 20, and 200 ms) for a loaded machine; the
    // restarted scan costs hundreds of times more at these sizes.
    assert!(
        released < live * 20 + Duration::from_millis(200),
        "a release freeing {LIVE} readers and {RELEASED} released uids' places took {released:?}, \
         against {live:?} for {} live readers: the work is not linear in the line",
        LIVE + RELEASED
    );
}
