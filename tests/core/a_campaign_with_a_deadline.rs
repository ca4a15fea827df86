//! The scene of the tests of how a `campaign_timeout` gives up
//! (`campaign_timeout_*`): a client's campaign in election "e" for the
//! value "v", as a task of its own, the lockers' calls it has reached, and
//! how it ended. Paused time.
#![cfg(feature = "testing")]

use std::time::Duration;

use quorum_lock::testing::{CallKind, Latency, TestCluster};
use quorum_lock::{Dsync, Error};
use tokio::task::JoinHandle;
use tokio::time::{sleep, Instant};

use crate::common;

/// `h`'s campaign in election "e" for the value "v" with `deadline`, as a
/// task of its own.
pub fn spawn_campaign(h: &Dsync, deadline: Duration) -> JoinHandle<Result<(), Error>> {
    let election = h.election("e").unwrap();
    tokio::spawn(async move {
        election
            .campaign_timeout(b"v".to_vec(), deadline)
            .await
            .map(|_leadership| ())
    })
}

/// How the campaign ended, waited for at most `within`.
pub async fn campaign_ended(
    campaign: JoinHandle<Result<(), Error>>,
    within: Duration,
) -> Result<(), Error> {
    tokio::time::timeout(within, campaign)
        .await
        .expect("the campaign ends at its deadline")
        .unwrap()
}

/// Steps of 1 ms, at most `steps`, until the lockers of `cluster` have
/// seen `n` calls of `kind`; when that was, counted from `start`.
pub async fn until_seen(
    cluster: &TestCluster,
    kind: CallKind,
    n: u64,
    steps: usize,
    start: Instant,
) -> Option<Duration> {
    for _ in 0..steps {
        sleep(Duration::from_millis(1)).await;
        if cluster.stats(kind).seen >= n {
            return Some(start.elapsed());
        }
    }
    None
}

/// Three lockers, nodes 0 and 1 answering late, node 2 at once; the
/// client "h" (choices drawn from `seed`), and `start`, when its campaign
/// began.
pub struct BesideLateLockers {
    pub cluster: TestCluster,
    pub h: Dsync,
    pub start: Instant,
}

impl BesideLateLockers {
    /// The scene with nodes 0 and 1 answering `late` late, and the
    /// client's campaign with `deadline`.
    pub fn new(
        seed: u64,
        late: Duration,
        deadline: Duration,
    ) -> (BesideLateLockers, JoinHandle<Result<(), Error>>) {
        eprintln!("seed {seed}");
        let cluster = TestCluster::new(3, seed);
        let h = common::seeded(cluster.net_lockers(), "h", seed);
        let start = Instant::now();
        cluster.set_latency(Latency::Fixed(late), &[0, 1]).unwrap();
        let campaign = spawn_campaign(&h, deadline);
        (BesideLateLockers { cluster, h, start }, campaign)
    }

    /// Sleeps until `ms` after `start`.
    pub async fn until(&self, ms: u64) {
        sleep(Duration::from_millis(ms).saturating_sub(self.start.elapsed())).await;
    }

    /// How the campaign ended (at most 5 s from now), printed.
    pub async fn gave_up(&self, campaign: JoinHandle<Result<(), Error>>) -> Result<(), Error> {
        let result = campaign_ended(campaign, Duration::from_secs(5)).await;
        eprintln!(
            "campaign gave up at {:?} with: {result:?}",
            self.start.elapsed()
        );
        result
    }
}

/// How a plain wait of `h` for "other" with `deadline` ends, in the
/// lockers' state as it is now; printed.
pub async fn a_plain_wait(h: &Dsync, deadline: Duration) -> Result<(), Error> {
    let waiter = h.rw_mutex(["other"]).unwrap();
    let waited = tokio::time::timeout(Duration::from_secs(5), waiter.lock_timeout(deadline))
        .await
        .expect("the wait ends at its deadline")
        .map(|_guard| ());
    eprintln!("a lock wait in the same state gave up with: {waited:?}");
    waited
}
