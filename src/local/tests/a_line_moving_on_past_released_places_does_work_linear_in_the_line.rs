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

use futures::executor::block_on;

use super::{args, queue, Granted};
use crate::local::table::STEPS;
use crate::{LocalLocker, LockMode, NetLocker};

const LIVE: usize = 4_000;
const RELEASED: usize = 4_000;

/// The places `h`'s unlock of `c` moves or visits in lines (counted by
/// the lines themselves; a test that timed it could fail on a loaded
/// machine), with `LIVE` readers waiting on `c`
/// and behind them `RELEASED` more, whose uids were released on another
/// name first when `release` (else they are live too).
fn unlock_work(release: bool) -> u64 {
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
        let before = STEPS.with(std::cell::Cell::get);
        assert!(l.unlock(&args("h", &["c"])).await.unwrap());
        let work = STEPS.with(std::cell::Cell::get) - before;
        let granted = sink.0.lock().unwrap().len();
        let expected = LIVE + if release { 0 } else { RELEASED };
        assert_eq!(granted, expected, "readers pushed a grant");
        work
    })
}

#[test]
fn a_line_moving_on_past_released_places_does_work_linear_in_the_line() {
    let live = unlock_work(false);
    let released = unlock_work(true);
    let line = (LIVE + RELEASED) as u64;
    println!(
        "{LIVE} readers then {RELEASED} more: places moved or visited with all live {live}, with \
         the {RELEASED} released {released}"
    );
    // Linear: a few passes over the line, as granting them all takes; a
    // scan restarted after each dropped place visits LIVE x RELEASED.
    assert!(
        released <= 4 * line && live <= 4 * line,
        "a release freeing {LIVE} readers and {RELEASED} released uids' places moved or visited \
         {released} places in lines ({live} for {line} live readers), more than 4 passes over \
         the line: the work is not linear in the line"
    );
}
