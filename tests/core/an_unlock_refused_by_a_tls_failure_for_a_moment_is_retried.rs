//! Reproduces a past break: an unlock that failed with `Error::Tls` (the locker's reconnect met a certificate it refused) was given up at once, not queued for retry, so the locker, answering again a moment later, kept the released lock's entry until it expired.
//!
//! docs/guarantees.md, "No leaks from cancellation or failure": "An unlock
//! that fails goes to its locker's retry queue and is retried with backoff
//! until it lands or until the locker must have expired the entry by
//! itself ... So a locker that answers again within the validity is
//! cleaned up". `Error::Tls` (src/error.rs): "Returned by
//! `RemoteLocker::connect_error` and `net::connect_all`; the locker keeps
//! retrying, since a server may be given a new certificate"; a call that
//! reopens the connection fails with it (src/net/client/reopen.rs).
//!
//! The scene (paused time): three lockers. "a" locks "res" on all three.
//! Then node 0's link fails every call with `Error::Tls` (what a
//! `RemoteLocker` returns when its reconnect meets a certificate it
//! refuses: a server address briefly routed to another TLS service, say),
//! and "a" unlocks: nodes 1 and 2 confirm. Two seconds later node 0
//! answers again, still holding the entry, well within the 60 s validity.
//! Ten seconds after that it still holds it: the release gave the unlock
//! up on the spot ("cannot release; the entry stays until the lock server
//! expires it", src/lock/release.rs `release_after`, which takes
//! `Error::is_retryable()`'s `false` for `Tls` as final). The same error
//! makes a lost lock's clean-up (src/lock/refresh.rs `force_release`)
//! skip the retry queue. (The same scene with `Error::LockerUnavailable`
//! in place of `Error::Tls` is cleaned up: checked while writing this.)
#![cfg(feature = "testing")]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use quorum_lock::{Dsync, Error, LocalLocker, LockArgs, LockMode, NetLocker};
use tokio::time::sleep;

const SEED: u64 = 36_431;

/// A locker whose link fails every call with `Error::Tls` while `refused`
/// is set, and forwards it otherwise.
struct TlsHiccup {
    inner: Arc<LocalLocker>,
    refused: Arc<AtomicBool>,
}

impl TlsHiccup {
    fn check(&self) -> Result<(), Error> {
        if self.refused.load(Ordering::SeqCst) {
            return Err(Error::Tls {
                endpoint: self.inner.endpoint(),
                reason: "the server's certificate is not valid for the name node-0".into(),
            });
        }
        Ok(())
    }
}

#[async_trait]
impl NetLocker for TlsHiccup {
    async fn lock(&self, args: &LockArgs) -> Result<bool, Error> {
        self.check()?;
        self.inner.lock(args).await
    }
    async fn rlock(&self, args: &LockArgs) -> Result<bool, Error> {
        self.check()?;
        self.inner.rlock(args).await
    }
    async fn unlock(&self, args: &LockArgs) -> Result<bool, Error> {
        self.check()?;
        self.inner.unlock(args).await
    }
    async fn runlock(&self, args: &LockArgs) -> Result<bool, Error> {
        self.check()?;
        self.inner.runlock(args).await
    }
    async fn refresh(&self, args: &LockArgs) -> Result<bool, Error> {
        self.check()?;
        self.inner.refresh(args).await
    }
    async fn refresh_mode(&self, args: &LockArgs, mode: LockMode) -> Result<bool, Error> {
        self.check()?;
        self.inner.refresh_mode(args, mode).await
    }
    async fn force_unlock(&self, args: &LockArgs) -> Result<bool, Error> {
        self.check()?;
        self.inner.force_unlock(args).await
    }
    fn endpoint(&self) -> String {
        self.inner.endpoint()
    }
    fn is_online(&self) -> bool {
        !self.refused.load(Ordering::SeqCst)
    }
    fn is_local(&self) -> bool {
        false
    }
    fn validity(&self) -> Option<Duration> {
        self.inner.validity()
    }
}

#[tokio::test(start_paused = true)]
async fn an_unlock_refused_by_a_tls_failure_for_a_moment_is_retried_and_lands() {
    eprintln!("seed {SEED}");
    let nodes: Vec<Arc<LocalLocker>> = (0..3).map(|_| Arc::new(LocalLocker::new())).collect();
    let refused = Arc::new(AtomicBool::new(false));
    let mut links: Vec<Arc<dyn NetLocker>> = vec![Arc::new(TlsHiccup {
        inner: nodes[0].clone(),
        refused: refused.clone(),
    })];
    links.extend(nodes[1..].iter().map(|n| n.clone() as Arc<dyn NetLocker>));
    let a = Dsync::builder(links)
        .owner("a")
        .rng_seed(SEED)
        .build()
        .expect("valid coordinator");

    let held = a.rw_mutex(["res"]).unwrap().lock().await.unwrap();
    let uid = held.uid().to_owned();
    let on_node0 = || nodes[0].snapshot().iter().any(|e| e.uid == uid);
    assert!(on_node0(), "node 0 granted");

    refused.store(true, Ordering::SeqCst);
    held.unlock()
        .await
        .expect("nodes 1 and 2 confirm the unlock");
    assert!(on_node0(), "node 0's unlock failed with the TLS error");
    sleep(Duration::from_secs(2)).await;
    refused.store(false, Ordering::SeqCst);
    sleep(Duration::from_secs(10)).await;
    let finished = a.finish_releases(Duration::from_secs(1)).await;
    eprintln!(
        "12 s after the release (node 0 answering again for 10 s): node 0 holds {uid}: {}; \
         finish_releases {finished:?}",
        on_node0()
    );
    assert!(
        !on_node0(),
        "node 0 failed a's unlock with a TLS error for 2 s and has answered every call for \
         10 s since, well within the 60 s validity, yet it still holds the released lock's \
         entry {uid}: the unlock was never retried"
    );
}
