//! Reproduces a past break: a fencing draw (and a campaign's term) refused by two restarted lockers that grant locks (no lock quarantine) but draw no token for `FENCE_QUARANTINE` after a restart failed with `QuorumUnavailable`, naming both lockers that had just answered as unreachable, and a campaign said the same after they granted another lock of the same client.
//!
//! `Error::QuorumUnavailable`: "Fewer lockers answered than the quorum
//! needs ... while too few lockers were reachable. `unreachable` names each
//! locker that did not answer"; its message: "check that enough lock
//! servers are up and reachable". `Error::Quarantined`: "Enough lockers are
//! reachable, but too few of them grant because some restarted recently".
//! docs/guarantees.md ("Why a wait waits"): `Quarantined` "when lockers in
//! quarantine after a restart are what keeps a quorum from granting"; a
//! failure "is over once the locker answered a call after it".
//! `LockerConfig::quarantine`: "Zero means none ... Fencing tokens are not
//! drawn for at least `FENCE_QUARANTINE` after any restart."
//!
//! Three lockers with no quarantine, quorum two, a retry backoff of 1 s.
//! Nodes 1 and 2 restarted 1.5 s ago: they grant locks, and draw no token
//! for 2.5 s more. A lock of "y" is granted by all three; its fencing draw
//! is refused by nodes 1 and 2 at once. A campaign is granted by all three,
//! its term refused the same way; 100 ms in, a lock of "x" through the same
//! client is granted by all three; the campaign gives up at 500 ms.
#![cfg(feature = "testing")]

use std::time::Duration;

use quorum_lock::testing::{Latency, TestCluster};
use quorum_lock::{Dsync, Error, LockerConfig, RetryPolicy};
use tokio::time::{sleep, Instant};

const SEED: u64 = 38_003;

#[tokio::test(start_paused = true)]
async fn fencing_draw_quarantined_while_restarted_lockers_draw_no_token_yet() {
    eprintln!("seed {SEED}");
    let config = LockerConfig {
        quarantine: Duration::ZERO,
        ..LockerConfig::default()
    };
    let cluster = TestCluster::with_config(3, SEED, config);
    let h = Dsync::builder(cluster.net_lockers())
        .owner("h")
        .rng_seed(SEED)
        .retry(RetryPolicy {
            initial: Duration::from_secs(1),
            max: Duration::from_secs(1),
        })
        .build()
        .unwrap();
    cluster.restart(&[1, 2]).unwrap();
    sleep(Duration::from_millis(1_500)).await;
    cluster
        .set_latency(Latency::Fixed(Duration::from_millis(10)), &[0, 1, 2])
        .unwrap();

    let y = h.rw_mutex(["y"]).unwrap();
    let gy = y.lock_timeout(Duration::from_millis(100)).await.unwrap();
    let drawn = gy.fencing_token().await;
    eprintln!("fencing draw of a lock all three granted: {drawn:?}");
    gy.unlock().await.unwrap();

    let election = h.election("e").unwrap();
    let began = Instant::now();
    let campaign = tokio::spawn(async move {
        election
            .campaign_timeout(b"v".to_vec(), Duration::from_millis(500))
            .await
            .map(|_leadership| ())
    });
    sleep(Duration::from_millis(100)).await;
    let x = h.rw_mutex(["x"]).unwrap();
    let g = x.lock_timeout(Duration::from_millis(100)).await;
    eprintln!(
        "lock of 'x' at {:?}: {:?}",
        began.elapsed(),
        g.as_ref().map(|_| ())
    );
    g.unwrap().unlock().await.unwrap();
    let result = tokio::time::timeout(Duration::from_secs(10), campaign)
        .await
        .expect("gives up")
        .unwrap();
    eprintln!("campaign gave up at {:?} with {result:?}", began.elapsed());

    for (what, err) in [
        ("the fencing draw", &drawn.map(|_| ())),
        ("the campaign", &result),
    ] {
        if let Err(Error::QuorumUnavailable { unreachable, .. }) = err {
            let named: Vec<&str> = unreachable.iter().map(|u| u.endpoint.as_str()).collect();
            panic!(
                "every locker is up and answers (nodes 1 and 2 granted the lock and refused the \
                 token at once, as restarted lockers do for FENCE_QUARANTINE); yet {what} says \
                 {err:?}, naming {named:?} as lockers that did not answer"
            );
        }
    }
}
