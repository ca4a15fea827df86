//! A confirmed resign against messages the network delivers late: a
//! refresh and a re-sent proclamation that the leader sent before it
//! resigned, and that reach a restarted locker (in quarantine) after the
//! resign's unlock did.
#![cfg(feature = "testing")]

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use quorum_lock::testing::TestCluster;
use quorum_lock::{
    Dsync, Error, LockArgs, LockMode, NetLocker, Proclamation, WaitArgs, WaitReply, WatchArgs,
};
use tokio::time::sleep;

/// Forwards every call at once, except that while `late` is set, a
/// refresh or a proclamation is delivered `delay` later (plus a little
/// more for a proclamation, which the leader sends after its refresh): the
/// message is on the wire, so it arrives even if the sender stops waiting
/// for the answer.
struct LateLink {
    inner: Arc<dyn NetLocker>,
    late: Arc<AtomicBool>,
    delay: Duration,
    delayed: Arc<AtomicUsize>,
    /// How many late messages reached the locker.
    delivered: Arc<AtomicUsize>,
}

impl LateLink {
    async fn deliver<T: Send + 'static>(
        &self,
        extra: Duration,
        call: impl std::future::Future<Output = Result<T, Error>> + Send + 'static,
    ) -> Result<T, Error> {
        if !self.late.load(Ordering::SeqCst) {
            return call.await;
        }
        self.delayed.fetch_add(1, Ordering::SeqCst);
        let delay = self.delay + extra;
        let delivered = self.delivered.clone();
        tokio::spawn(async move {
            sleep(delay).await;
            let answer = call.await;
            delivered.fetch_add(1, Ordering::SeqCst);
            answer
        })
        .await
        .expect("the delivery task ends")
    }
}

#[async_trait::async_trait]
impl NetLocker for LateLink {
    async fn lock(&self, args: &LockArgs) -> Result<bool, Error> {
        self.inner.lock(args).await
    }
    async fn rlock(&self, args: &LockArgs) -> Result<bool, Error> {
        self.inner.rlock(args).await
    }
    async fn unlock(&self, args: &LockArgs) -> Result<bool, Error> {
        self.inner.unlock(args).await
    }
    async fn runlock(&self, args: &LockArgs) -> Result<bool, Error> {
        self.inner.runlock(args).await
    }
    async fn refresh(&self, args: &LockArgs) -> Result<bool, Error> {
        let (inner, args) = (self.inner.clone(), args.clone());
        self.deliver(Duration::ZERO, async move { inner.refresh(&args).await })
            .await
    }
    async fn refresh_mode(&self, args: &LockArgs, mode: LockMode) -> Result<bool, Error> {
        let (inner, args) = (self.inner.clone(), args.clone());
        self.deliver(Duration::ZERO, async move {
            inner.refresh_mode(&args, mode).await
        })
        .await
    }
    async fn lock_wait(
        &self,
        args: &LockArgs,
        mode: LockMode,
        wait: &WaitArgs,
    ) -> Result<WaitReply, Error> {
        self.inner.lock_wait(args, mode, wait).await
    }
    async fn fence(
        &self,
        args: &LockArgs,
        mode: LockMode,
        floor: u64,
    ) -> Result<Option<u64>, Error> {
        self.inner.fence(args, mode, floor).await
    }
    async fn proclaim(&self, args: &LockArgs, p: &Proclamation) -> Result<bool, Error> {
        let (inner, args, p) = (self.inner.clone(), args.clone(), p.clone());
        self.deliver(Duration::from_millis(500), async move {
            inner.proclaim(&args, &p).await
        })
        .await
    }
    async fn leader(
        &self,
        args: &LockArgs,
        watch: Option<&WatchArgs>,
    ) -> Result<Option<Proclamation>, Error> {
        self.inner.leader(args, watch).await
    }
    async fn force_unlock(&self, args: &LockArgs) -> Result<bool, Error> {
        self.inner.force_unlock(args).await
    }
    fn endpoint(&self) -> String {
        self.inner.endpoint()
    }
    fn is_online(&self) -> bool {
        self.inner.is_online()
    }
    fn is_local(&self) -> bool {
        self.inner.is_local()
    }
    fn validity(&self) -> Option<Duration> {
        self.inner.validity()
    }
    fn queues(&self) -> bool {
        self.inner.queues()
    }
}

/// Three lockers. Node 2 restarted (60 s of quarantine) and the leader's
/// refresh re-created its entry there. The leader's link to node 1 is then
/// cut, and its refresh and re-sent value to node 2 are slow; it resigns,
/// confirmed by nodes 0 and 2, while that refresh and value are still on
/// their way. They reach node 2 after the unlock. docs/election.md: "After
/// a `resign()` that returned `Ok`, `leader()` returns `None` or a newer
/// leader: the resigned term is on fewer lockers than a write quorum from
/// then on." Node 1 still has the leader's copy (its unlock was lost); if
/// the late messages re-created the entry and value on node 2, the two make
/// a write quorum once node 2's quarantine is over.
#[tokio::test(start_paused = true)]
async fn a_confirmed_resign_is_not_undone_by_a_refresh_that_arrives_after_it() {
    let cluster = Arc::new(TestCluster::new(3, 36));
    let late = Arc::new(AtomicBool::new(false));
    let delayed = Arc::new(AtomicUsize::new(0));
    let delivered = Arc::new(AtomicUsize::new(0));
    let lockers: Vec<Arc<dyn NetLocker>> = cluster
        .net_lockers()
        .into_iter()
        .enumerate()
        .map(|(i, l)| match i {
            2 => Arc::new(LateLink {
                inner: l,
                late: late.clone(),
                delay: Duration::from_secs(3),
                delayed: delayed.clone(),
                delivered: delivered.clone(),
            }) as Arc<dyn NetLocker>,
            _ => l,
        })
        .collect();
    let a = Dsync::builder(lockers)
        .owner("a")
        .rng_seed(7)
        .build()
        .unwrap();
    let w = Dsync::builder(cluster.net_lockers())
        .owner("watcher")
        .rng_seed(8)
        .build()
        .unwrap();
    let watch = w.election("jobs").unwrap();
    let mut leading = a
        .election("jobs")
        .unwrap()
        .campaign(&b"a"[..])
        .await
        .unwrap();
    let term = leading.term();

    cluster.restart(&[2]).unwrap();
    let restarted = tokio::time::Instant::now();
    // A refresh and a re-send re-create the entry and value on node 2.
    sleep(Duration::from_secs(12)).await;
    cluster.partition("a", &[1]).unwrap();
    late.store(true, Ordering::SeqCst);
    // Wait until a refresh and a re-sent value to node 2 are on their way.
    let mut waited = 0;
    while delayed.load(Ordering::SeqCst) < 2 && waited < 400 {
        sleep(Duration::from_millis(50)).await;
        waited += 1;
    }
    assert!(delayed.load(Ordering::SeqCst) >= 2, "no refresh was sent");
    leading
        .resign()
        .await
        .expect("nodes 0 and 2 confirm the resign");
    late.store(false, Ordering::SeqCst);
    // An observer that starts now must never report the resigned term.
    let mut observer = watch.observe().unwrap();
    let uid = leading.uid().to_owned();
    let holds = |i: usize| {
        let locker = cluster.lockers()[i].clone();
        let uid = uid.clone();
        async move {
            NetLocker::locks(&*locker)
                .await
                .expect("a local listing")
                .iter()
                .any(|l| l.uid == uid)
        }
    };
    assert!(
        !holds(0).await && !holds(2).await,
        "the resign freed nodes 0 and 2"
    );
    assert!(holds(1).await, "node 1 missed the unlock");
    sleep(Duration::from_secs(5)).await;
    assert!(
        delivered.load(Ordering::SeqCst) >= 2,
        "the late refresh and value reached node 2"
    );
    assert!(
        !holds(2).await,
        "the late refresh re-created the entry on node 2 after its unlock"
    );

    // Node 2's quarantine ends 60 s after its restart; node 1's copy lives
    // until a validity after its last refresh.
    let after_quarantine = restarted + Duration::from_secs(61);
    tokio::time::sleep_until(after_quarantine).await;
    let mut reported = Vec::new();
    for _ in 0..4 {
        match watch.leader().await {
            Ok(Some(l)) => reported.push((l.term, l.seq)),
            Ok(None) | Err(Error::LeaderUnsettled { .. }) => {}
            Err(err) => panic!("unexpected error {err}"),
        }
        sleep(Duration::from_secs(1)).await;
    }
    let mut observed = Vec::new();
    while let Ok(Some(item)) = tokio::time::timeout(Duration::ZERO, observer.recv()).await {
        observed.extend(item.map(|l| (l.term, l.seq)));
    }
    assert!(
        reported.is_empty() && observed.is_empty(),
        "after the resign of term {term} was confirmed, leader() reported {reported:?} and an \
         observer started after it reported {observed:?}"
    );
}
