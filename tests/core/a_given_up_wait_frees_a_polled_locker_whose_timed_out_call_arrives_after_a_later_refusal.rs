//! Reproduces a past break: a wait gave up (a polled locker refused) and its release counted that locker as "never held this uid" by the retry's refusal, although the first call to it had timed out on its way and reached it later, granting an entry nobody unlocked.
//!
//! docs/guarantees.md, "No leaks from cancellation or failure": "A lock
//! call that failed may have been applied (its reply was lost), so it is
//! unlocked like a grant"; "A call the client stopped waiting for can
//! still reach its locker later (..., a request that a reconnect
//! overtook), after the release of the same uid. A `LocalLocker` ...
//! refuses a lock ... for a uid it released within the last validity ...
//! So such a call grants nothing there".
//!
//! What happens instead: three lockers (write quorum 2). Locker 2 keeps
//! no queues (it is polled) and "x" holds "res" there; locker 1 loses
//! every call of w; locker 0 grants. w's `lock()` sends uid U: locker 0
//! grants, locker 1 fails at once, and the call to locker 2 is held up on
//! the wire for 3 s, so it times out at 1 s (`Timeouts::acquire`): a
//! failure, which may hide a grant. The wait asks lockers 1 and 2 again
//! after a backoff, with the same uid: locker 2 now answers at once, a
//! refusal (x holds it), which overwrites the failure in
//! `Acquisition::record_reply`. With nothing in flight and a refusal, the
//! wait gives up (`WaitEnd::Refused`) and `Acquisition::begin_release`
//! counts locker 2 among "lockers that refused: they never held this
//! uid": no unlock goes there, so it has no record of U as released. x
//! lets go at 2 s; at 3 s the first call reaches locker 2, which grants U.
//! Nobody undoes it: locker 2 answers every call, yet U's entry stays
//! until it expires (60 s), blocking every writer that needs locker 2.
#![cfg(feature = "testing")]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::common::hooked::{Hooked, Optional};
use crate::common::{args, holding};
use quorum_lock::testing::{CallKind, Relay, Route, TestCluster};
use quorum_lock::{Dsync, ImmediateLocker, LockMode, NetLocker};

const SEED: u64 = 36_331;

#[tokio::test(start_paused = true)]
async fn a_given_up_wait_frees_a_polled_locker_whose_timed_out_call_arrives_after_a_later_refusal()
{
    eprintln!("seed {SEED}");
    let cluster = TestCluster::new(3, SEED);
    let x = args("x", &["res"]);
    let local2 = cluster.lockers()[2].clone();
    assert!(
        local2
            .lock_now(&x, LockMode::Write)
            .expect("locker 2 answers"),
        "x holds res on locker 2"
    );
    let calls_to_2 = Arc::new(AtomicUsize::new(0));
    let unlocks_to_2 = Arc::new(AtomicUsize::new(0));
    let first_uid: Arc<Mutex<Option<String>>> = Arc::default();
    let lockers: Vec<Arc<dyn NetLocker>> = cluster
        .net_lockers()
        .into_iter()
        .enumerate()
        .map(|(i, l)| {
            let inner = if i == 2 {
                Hooked::new(l)
                    .lacking(&[Optional::LockWait, Optional::Queues])
                    .shared()
            } else {
                l
            };
            let (calls_to_2, first_uid) = (calls_to_2.clone(), first_uid.clone());
            let unlocks_to_2 = unlocks_to_2.clone();
            Arc::new(Relay::new(inner, move |kind, a| {
                if i == 2 && kind == CallKind::Unlock && &*a.owner == "w" {
                    unlocks_to_2.fetch_add(1, Ordering::SeqCst);
                }
                if kind != CallKind::Lock || &*a.owner != "w" {
                    return Route::Forward;
                }
                match i {
                    1 => Route::Lost("w's link to locker 1 is down".into()),
                    2 if calls_to_2.fetch_add(1, Ordering::SeqCst) == 0 => {
                        *first_uid.lock().unwrap() = Some(a.uid.to_string());
                        Route::Late(Duration::from_secs(3))
                    }
                    _ => Route::Forward,
                }
            })) as Arc<dyn NetLocker>
        })
        .collect();
    let w = Dsync::builder(lockers)
        .owner("w")
        .rng_seed(SEED)
        .build()
        .expect("valid coordinator");

    let mutex = w.rw_mutex(["res"]).unwrap();
    let wait = tokio::spawn(async move { mutex.lock().await });
    // The first call to locker 2 times out at 1 s; its retry is refused
    // and the wait gives U up.
    tokio::time::sleep(Duration::from_secs(2)).await;
    wait.abort();
    let _ = wait.await;
    let uid = first_uid
        .lock()
        .unwrap()
        .clone()
        .expect("locker 2 was asked");
    let asked = calls_to_2.load(Ordering::SeqCst);
    assert!(asked >= 2, "locker 2 was asked again: {asked} calls");
    let before = holding(cluster.lockers(), &uid);
    assert_eq!(before, [false, false, false], "U was given up everywhere");
    // x lets go; U's first call reaches locker 2 at 3 s.
    assert!(local2.unlock_now(&x, LockMode::Write).expect("answers"));
    tokio::time::sleep(Duration::from_secs(2)).await;
    let arrived = holding(cluster.lockers(), &uid);
    // Long past every release and retry of U (it was given up at ~1 s).
    tokio::time::sleep(Duration::from_secs(30)).await;
    let left = holding(cluster.lockers(), &uid);
    let unlocks = unlocks_to_2.load(Ordering::SeqCst);
    eprintln!(
        "U {uid}: after x let go {arrived:?}; 30 s later {left:?}; unlocks of w sent to \
         locker 2: {unlocks}"
    );
    assert!(
        !left.iter().any(|h| *h),
        "w gave U up at ~1 s and every locker answers, yet 30 s later locker 2 holds U's entry \
         (granted by U's first call, which timed out on its way and arrived after the release \
         counted locker 2 by its retry's refusal): {left:?}"
    );
}
