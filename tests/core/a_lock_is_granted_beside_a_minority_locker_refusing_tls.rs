//! Reproduces a past break: one locker of three whose calls fail with `Error::Tls` (a lock server whose certificate the client refuses, met when the connection is opened again) made every `lock()` fail at once with that error, though the other two lockers granted.
//!
//! docs/guarantees.md, "Progress with a minority down": "A lock is
//! granted while a minority of lockers fail, hang or refuse".
//! docs/lock-servers.md, what `connect_all` does when servers misbehave:
//! "TLS refused over a certificate (`Error::Tls`) is treated as a server
//! that is down, unless the servers that refuse leave too few for a write
//! quorum even once every unreachable server is back". `Error::Tls`
//! (src/error.rs): "the locker keeps retrying, since a server may be given
//! a new certificate". A `RemoteLocker`'s call that opens the connection
//! again (after the server closed it for idleness, say) and meets the
//! refusal fails with `Error::Tls` itself (src/net/client/reopen.rs,
//! `attempt`; src/net/client.rs, `connection`).
//!
//! The scene (paused time): three lockers; node 0's link fails every call
//! with `Error::Tls` (its certificate expired, say), nodes 1 and 2 answer.
//! `lock()` (and `lock_timeout`) of a free name fail at once with
//! `Error::Tls`: the wait takes any locker's error that
//! `Error::is_retryable()` calls permanent as the end of the whole wait,
//! before it looks at the grants (src/lock/wait_round.rs, "if let Some(err)
//! = permanent { return Poll::Ready(Err(WaitEnd::Failed(err))) }" ahead of
//! `try_win`). With `Error::LockerUnavailable` in its place the same
//! scene is granted by nodes 1 and 2 (checked while writing this test).
#![cfg(feature = "testing")]

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use quorum_lock::{Dsync, Error, LocalLocker, LockArgs, NetLocker};

const SEED: u64 = 36_441;

/// A locker whose link fails every call with `Error::Tls`.
struct TlsRefused {
    endpoint: String,
}

impl TlsRefused {
    fn refused(&self) -> Error {
        Error::Tls {
            endpoint: self.endpoint.clone(),
            reason: "the server's certificate has expired".into(),
        }
    }
}

#[async_trait]
impl NetLocker for TlsRefused {
    async fn lock(&self, _: &LockArgs) -> Result<bool, Error> {
        Err(self.refused())
    }
    async fn rlock(&self, _: &LockArgs) -> Result<bool, Error> {
        Err(self.refused())
    }
    async fn unlock(&self, _: &LockArgs) -> Result<bool, Error> {
        Err(self.refused())
    }
    async fn runlock(&self, _: &LockArgs) -> Result<bool, Error> {
        Err(self.refused())
    }
    async fn refresh(&self, _: &LockArgs) -> Result<bool, Error> {
        Err(self.refused())
    }
    async fn force_unlock(&self, _: &LockArgs) -> Result<bool, Error> {
        Err(self.refused())
    }
    fn endpoint(&self) -> String {
        self.endpoint.clone()
    }
    fn is_online(&self) -> bool {
        false
    }
    fn is_local(&self) -> bool {
        false
    }
}

fn client() -> (Dsync, Vec<Arc<LocalLocker>>) {
    let nodes: Vec<Arc<LocalLocker>> = (0..2).map(|_| Arc::new(LocalLocker::new())).collect();
    let mut links: Vec<Arc<dyn NetLocker>> = vec![Arc::new(TlsRefused {
        endpoint: "node-0:7070".into(),
    })];
    links.extend(nodes.iter().map(|n| n.clone() as Arc<dyn NetLocker>));
    let ds = Dsync::builder(links)
        .owner("a")
        .rng_seed(SEED)
        .build()
        .expect("valid coordinator");
    (ds, nodes)
}

#[tokio::test(start_paused = true)]
async fn a_lock_is_granted_beside_a_minority_locker_refusing_tls() {
    eprintln!("seed {SEED}");
    let (ds, _nodes) = client();
    let got = tokio::time::timeout(Duration::from_secs(30), ds.rw_mutex(["res"]).unwrap().lock())
        .await
        .expect("bounded");
    eprintln!("lock() with node 0 refusing TLS: {:?}", got.as_ref().map(|g| g.granted_by()));
    assert!(
        got.is_ok(),
        "nodes 1 and 2 of 3 answer and the name is free, yet lock() failed: {:?}",
        got.err()
    );
}

#[tokio::test(start_paused = true)]
async fn a_lock_timeout_is_granted_beside_a_minority_locker_refusing_tls() {
    eprintln!("seed {SEED}");
    let (ds, _nodes) = client();
    let got = ds
        .rw_mutex(["res"])
        .unwrap()
        .lock_timeout(Duration::from_secs(5))
        .await;
    eprintln!("lock_timeout with node 0 refusing TLS: {:?}", got.as_ref().map(|g| g.granted_by()));
    assert!(
        got.is_ok(),
        "nodes 1 and 2 of 3 answer and the name is free, yet lock_timeout failed: {:?}",
        got.err()
    );
}
