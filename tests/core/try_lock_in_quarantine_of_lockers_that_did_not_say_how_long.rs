//! Reproduces a past break: a `try_lock` refused by every locker for quarantine, with no time left stated in the refusals, said `QuorumUnavailable` naming each locker as having given "no answer yet", not `Quarantined` with no time left.
//!
//! `Error::Quarantined`: "`left` says how long until enough of them are
//! out of quarantine, when the lockers said"; `Quarantined::left` is "how
//! much longer it refuses grants, when it said". docs/guarantees.md ("Why a
//! wait waits"): a refusal for quarantine "stands until the time it said
//! was left has passed, or until it answers a call a locker in quarantine
//! refuses"; `Error::QuorumUnavailable`'s `unreachable` names "the lockers
//! that did not answer". A refusal that says no time has no time to pass.
//!
//! Three lockers of a `NetLocker` that refuses every grant with the
//! quarantine wording and no "for another …" (as a locker of another
//! implementation may). Every one refuses the round at once; the error
//! reads all three as still answering, and names them as not having
//! answered.
#![cfg(feature = "testing")]

use std::time::Duration;

use async_trait::async_trait;
use quorum_lock::{Dsync, Error, LockArgs, NetLocker};
use std::sync::Arc;

const SEED: u64 = 18_003;

struct Restarted(usize);

impl Restarted {
    fn refusal(&self) -> Error {
        Error::LockerUnavailable {
            endpoint: self.endpoint(),
            reason: "restarted recently; refusing new grants until its quarantine ends".into(),
        }
    }
}

#[async_trait]
impl NetLocker for Restarted {
    async fn lock(&self, _args: &LockArgs) -> Result<bool, Error> {
        Err(self.refusal())
    }
    async fn rlock(&self, _args: &LockArgs) -> Result<bool, Error> {
        Err(self.refusal())
    }
    async fn unlock(&self, _args: &LockArgs) -> Result<bool, Error> {
        Ok(false)
    }
    async fn runlock(&self, _args: &LockArgs) -> Result<bool, Error> {
        Ok(false)
    }
    async fn refresh(&self, _args: &LockArgs) -> Result<bool, Error> {
        Err(self.refusal())
    }
    async fn force_unlock(&self, _args: &LockArgs) -> Result<bool, Error> {
        Ok(false)
    }
    fn endpoint(&self) -> String {
        format!("restarted-{}", self.0)
    }
    fn is_online(&self) -> bool {
        true
    }
    fn is_local(&self) -> bool {
        true
    }
}

#[tokio::test(start_paused = true)]
async fn try_lock_in_quarantine_of_lockers_that_did_not_say_how_long() {
    eprintln!("seed {SEED}");
    let lockers: Vec<Arc<dyn NetLocker>> = (0..3)
        .map(|i| Arc::new(Restarted(i)) as Arc<dyn NetLocker>)
        .collect();
    let h = Dsync::builder(lockers)
        .owner("h")
        .rng_seed(SEED)
        .build()
        .unwrap();
    let mutex = h.rw_mutex(["r"]).unwrap();
    let tried = tokio::time::timeout(Duration::from_secs(30), mutex.try_lock())
        .await
        .expect("one round")
        .map(|_guard| ());
    eprintln!("try_lock: {tried:?}");
    assert!(
        matches!(&tried, Err(Error::Quarantined { quarantined, left: None, .. }) if quarantined.len() == 3),
        "every locker refused the round at once for quarantine, without saying for how \
         long: {tried:?}"
    );
}
