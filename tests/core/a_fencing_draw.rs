//! The scene of the tests of how a fencing draw gives up
//! (`fencing_draw_*`): the client "h" holds "r" and draws a token for it
//! once its lockers are set as the test means, then a plain wait on
//! "third" shows the state it drew in. Paused time.
#![cfg(feature = "testing")]

use std::time::Duration;

use quorum_lock::testing::TestCluster;
use quorum_lock::{Dsync, Error, WriteGuard};
use tokio::time::Instant;

use crate::common;

/// The client "h" of a cluster and its lock on "r".
pub struct Holder {
    pub h: Dsync,
    /// Just before "r" was asked for.
    pub start: Instant,
    pub guard: WriteGuard,
}

impl Holder {
    /// "h" over `cluster` (choices drawn from `seed`), holding "r",
    /// granted within 5 s.
    pub async fn of(cluster: &TestCluster, seed: u64) -> Holder {
        eprintln!("seed {seed}");
        let h = common::seeded(cluster.net_lockers(), "h", seed);
        let start = Instant::now();
        let guard = tokio::time::timeout(Duration::from_secs(5), h.rw_mutex(["r"]).unwrap().lock())
            .await
            .expect("a free lock is granted")
            .unwrap();
        Holder { h, start, guard }
    }

    /// A `try_lock` of "x" (ended within 5 s), printed as made `when`.
    pub async fn try_x(&self, when: &str) -> Result<WriteGuard, Error> {
        let x = tokio::time::timeout(
            Duration::from_secs(5),
            self.h.rw_mutex(["x"]).unwrap().try_lock(),
        )
        .await
        .expect("a try_lock ends");
        eprintln!("try_lock of 'x' {when}: {:?}", x.as_ref().map(|_| ()));
        x
    }

    /// The fencing draw for "r" (ended within 10 s), printed.
    pub async fn draw(&self) -> Result<u64, Error> {
        let drawn = tokio::time::timeout(Duration::from_secs(10), self.guard.fencing_token())
            .await
            .expect("the draw ends");
        eprintln!("fencing draw at {:?}: {drawn:?}", self.start.elapsed());
        drawn
    }

    /// How a plain wait for "third" with `deadline` ends in the lockers'
    /// state as it is now (within 10 s), printed.
    pub async fn a_plain_wait(&self, deadline: Duration) -> Result<(), Error> {
        let waiter = self.h.rw_mutex(["third"]).unwrap();
        let waited = tokio::time::timeout(Duration::from_secs(10), waiter.lock_timeout(deadline))
            .await
            .expect("the wait ends at its deadline")
            .map(|_guard| ());
        eprintln!("a lock wait in the same state gave up with: {waited:?}");
        waited
    }
}
