//! The one conformance suite (`quorum_lock::testing::check_locker`) against
//! every locker this crate ships: `LocalLocker` in process, and
//! `RemoteLocker` through a lock server on loopback, as a client and as
//! an admin.
#![cfg(feature = "testing")]

use std::sync::Arc;

use quorum_lock::testing::{check_locker, ConformanceReport};
use quorum_lock::{Error, LocalLocker, LockArgs, NetLocker};

/// Every check ran: a locker of this crate offers every ability.
fn assert_complete(report: &ConformanceReport) {
    assert!(report.skipped.is_empty(), "skipped: {:?}", report.skipped);
    assert_eq!(report.passed.len(), 13, "{:?}", report.passed);
}

#[tokio::test]
async fn local_lockers_conform() {
    let report = check_locker(|| async { Arc::new(LocalLocker::new()) as Arc<dyn NetLocker> })
        .await
        .unwrap_or_else(|broken| panic!("{broken}"));
    assert_complete(&report);
}

#[tokio::test(start_paused = true)]
async fn local_lockers_conform_under_paused_time() {
    let report = check_locker(|| async { Arc::new(LocalLocker::new()) as Arc<dyn NetLocker> })
        .await
        .unwrap_or_else(|broken| panic!("{broken}"));
    assert_complete(&report);
}

/// A `LocalLocker` behind the trait's defaults only: no listing, no
/// waiting in line, no fencing. With `anyone_unlocks`, it also lets a
/// stranger's unlock free a resource, which the suite must catch.
struct Basic {
    inner: LocalLocker,
    anyone_unlocks: bool,
}

impl Basic {
    fn boxed(anyone_unlocks: bool) -> Arc<dyn NetLocker> {
        Arc::new(Basic {
            inner: LocalLocker::new(),
            anyone_unlocks,
        })
    }
}

#[async_trait::async_trait]
impl NetLocker for Basic {
    async fn lock(&self, args: &LockArgs) -> Result<bool, Error> {
        self.inner.lock(args).await
    }
    async fn rlock(&self, args: &LockArgs) -> Result<bool, Error> {
        self.inner.rlock(args).await
    }
    async fn unlock(&self, args: &LockArgs) -> Result<bool, Error> {
        if !self.anyone_unlocks {
            return self.inner.unlock(args).await;
        }
        let forced = LockArgs {
            uid: "".into(),
            ..args.clone()
        };
        self.inner.force_unlock(&forced).await
    }
    async fn runlock(&self, args: &LockArgs) -> Result<bool, Error> {
        self.inner.runlock(args).await
    }
    async fn refresh(&self, args: &LockArgs) -> Result<bool, Error> {
        self.inner.refresh(args).await
    }
    async fn force_unlock(&self, args: &LockArgs) -> Result<bool, Error> {
        self.inner.force_unlock(args).await
    }
    fn endpoint(&self) -> String {
        "basic".into()
    }
    fn is_online(&self) -> bool {
        true
    }
    fn is_local(&self) -> bool {
        true
    }
}

#[tokio::test]
async fn a_locker_that_lets_a_stranger_unlock_is_caught() {
    let broken = check_locker(|| async { Basic::boxed(true) })
        .await
        .expect_err("a stranger's unlock freed the lock");
    assert_eq!(broken.check, "only the holder unlocks, once, in its mode");
    assert!(broken.detail.contains("unlock by a stranger"), "{broken}");
}

#[tokio::test]
async fn a_locker_with_only_the_required_calls_passes_them_and_skips_the_rest() {
    let report = check_locker(|| async { Basic::boxed(false) })
        .await
        .unwrap_or_else(|broken| panic!("{broken}"));
    let skipped: Vec<&str> = report.skipped.iter().map(|(check, _)| *check).collect();
    assert_eq!(
        skipped,
        [
            "the listing shows every entry",
            "waiters queue in ticket order and are pushed their grant",
            "fencing tokens increase",
            "a proclamation lives with its entry and watches are pushed"
        ]
    );
    assert_eq!(report.passed.len(), 9, "{:?}", report.passed);
}

#[cfg(feature = "net")]
mod remote {
    use super::*;

    use quorum_lock::net::{LockServer, RemoteConfig, RemoteLocker, ServerConfig};
    use tokio::sync::oneshot;

    const TOKEN: &str = "client-secret";
    const ADMIN: &str = "admin-secret";

    /// One server for the whole suite, as a shared store would be: the
    /// checks must not see each other's entries.
    async fn server() -> (String, oneshot::Sender<()>) {
        let server = LockServer::new(
            Arc::new(LocalLocker::new()),
            ServerConfig::new(TOKEN).admin_token(ADMIN),
        )
        .expect("valid config");
        let (stop, stopped) = oneshot::channel::<()>();
        let (bound, serve) = server
            .bind("127.0.0.1:0".parse().expect("address"), async {
                let _ = stopped.await;
            })
            .await
            .expect("bind loopback");
        tokio::spawn(serve);
        (bound.to_string(), stop)
    }

    async fn connect(addr: String, token: &str) -> Arc<dyn NetLocker> {
        Arc::new(
            RemoteLocker::connect(addr, RemoteConfig::new(token))
                .await
                .expect("connect to the test server"),
        )
    }

    #[tokio::test]
    async fn remote_lockers_conform_as_admin() {
        let (addr, _stop) = server().await;
        let report = check_locker(|| connect(addr.clone(), ADMIN))
            .await
            .unwrap_or_else(|broken| panic!("{broken}"));
        assert_complete(&report);
    }

    #[tokio::test]
    async fn remote_lockers_conform_as_clients_that_may_not_list() {
        let (addr, _stop) = server().await;
        let report = check_locker(|| connect(addr.clone(), TOKEN))
            .await
            .unwrap_or_else(|broken| panic!("{broken}"));
        // Forcing resources open and listing are for admins; everything
        // else a client may do conforms.
        assert_eq!(report.passed.len(), 11, "{:?}", report.passed);
        let skipped: Vec<&str> = report.skipped.iter().map(|(check, _)| *check).collect();
        assert_eq!(
            skipped,
            [
                "force-unlock by resource drops every holder",
                "the listing shows every entry"
            ]
        );
    }
}
