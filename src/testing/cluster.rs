//! `TestCluster`: n in-process lock servers behind fault injectors.

use std::sync::Arc;

use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};

use super::{CallKind, CallStats, DriftClock, FaultyLocker, Latency};
use crate::{Error, LocalLocker, LockerConfig, NetLocker};

/// An in-process cluster of `n` [`LocalLocker`]s named `node-0` …
/// `node-{n-1}`, each behind its own [`FaultyLocker`].
///
/// Node `i`'s fault generator is seeded from the cluster seed, so one seed
/// fixes every node's random faults. The fault methods take a list of node
/// indices and change nothing when one of them is out of range.
///
/// ```
/// use quorum_lock::Dsync;
/// use quorum_lock::testing::TestCluster;
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() -> Result<(), quorum_lock::Error> {
/// let cluster = TestCluster::new(5, 1);
/// let ds = Dsync::new(cluster.net_lockers())?;
/// cluster.crash(&[0, 1])?; // a minority is down: locks are still granted
/// let guard = ds.rw_mutex(["a"])?.lock().await?;
/// assert_eq!(cluster.total_entries(), 3);
/// guard.unlock().await?;
/// assert_eq!(cluster.total_entries(), 0);
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct TestCluster {
    nodes: Vec<Arc<FaultyLocker>>,
    lockers: Vec<Arc<LocalLocker>>,
    /// One per node when built with [`with_clocks`](Self::with_clocks).
    clocks: Vec<DriftClock>,
}

impl TestCluster {
    /// `n` nodes with the default [`LockerConfig`].
    pub fn new(n: usize, seed: u64) -> Self {
        Self::with_config(n, seed, LockerConfig::default())
    }

    /// `n` nodes whose lockers use `config` (expiry and quarantine).
    pub fn with_config(n: usize, seed: u64, config: LockerConfig) -> Self {
        Self::named("node", n, seed, config)
    }

    /// `n` nodes named `{prefix}-0` … `{prefix}-{n-1}`: one of several
    /// clusters in one test, such as the groups of a
    /// [`Groups`](crate::Groups), which refuses two groups whose lockers
    /// share an endpoint.
    ///
    /// ```
    /// use quorum_lock::{Dsync, Groups, LockerConfig};
    /// use quorum_lock::testing::TestCluster;
    ///
    /// let east = TestCluster::named("east", 3, 1, LockerConfig::default());
    /// let west = TestCluster::named("west", 3, 2, LockerConfig::default());
    /// let groups = Groups::new([
    ///     ("east", Dsync::new(east.net_lockers())?),
    ///     ("west", Dsync::new(west.net_lockers())?),
    /// ])?;
    /// assert_eq!(groups.ids().count(), 2);
    /// # Ok::<(), quorum_lock::Error>(())
    /// ```
    pub fn named(prefix: &str, n: usize, seed: u64, config: LockerConfig) -> Self {
        let lockers = (0..n)
            .map(|i| LocalLocker::with_config(format!("{prefix}-{i}"), config))
            .collect();
        Self::of(lockers, Vec::new(), seed)
    }

    /// `n` nodes whose lockers use `config`, each on a [`DriftClock`] of
    /// its own ([`clock`](Self::clock)), so that the test can make any node's
    /// clock run fast or slow, or set its wall clock off, at any time.
    ///
    /// ```
    /// use std::time::Duration;
    /// use quorum_lock::{Dsync, LockerConfig};
    /// use quorum_lock::testing::TestCluster;
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), quorum_lock::Error> {
    /// let cluster = TestCluster::with_clocks(3, 1, LockerConfig::default());
    /// let ds = Dsync::new(cluster.net_lockers())?;
    /// let guard = ds.rw_mutex(["a"])?.lock().await?;
    /// cluster.set_rate(2.0, &[0])?; // node 0's clock runs twice as fast
    /// cluster.partition(ds.owner(), &[0])?; // and the holder cannot refresh there
    /// tokio::time::sleep(Duration::from_secs(31)).await;
    /// // 31 s of the test's time are 62 s on node 0: past its 60 s validity.
    /// assert!(cluster.lockers()[0].snapshot().is_empty());
    /// assert!(!guard.is_lost()); // nodes 1 and 2 still confirm the lock
    /// # Ok(())
    /// # }
    /// ```
    pub fn with_clocks(n: usize, seed: u64, config: LockerConfig) -> Self {
        let clocks: Vec<DriftClock> = (0..n).map(|_| DriftClock::new()).collect();
        let lockers = clocks
            .iter()
            .enumerate()
            .map(|(i, c)| LocalLocker::with_clock(format!("node-{i}"), config, c.clone()))
            .collect();
        Self::of(lockers, clocks, seed)
    }

    fn of(lockers: Vec<LocalLocker>, clocks: Vec<DriftClock>, seed: u64) -> Self {
        let mut seeds = SmallRng::seed_from_u64(seed);
        let lockers: Vec<Arc<LocalLocker>> = lockers.into_iter().map(Arc::new).collect();
        let nodes = lockers
            .iter()
            .map(|l| Arc::new(FaultyLocker::local(l.clone(), seeds.random::<u64>())))
            .collect();
        TestCluster {
            nodes,
            lockers,
            clocks,
        }
    }

    /// The clock of node `index`, when the cluster was built
    /// [`with_clocks`](Self::with_clocks).
    pub fn clock(&self, index: usize) -> Option<&DriftClock> {
        self.clocks.get(index)
    }

    /// Makes the clocks of the nodes at `indices` run at `rate` times the
    /// test's speed ([`DriftClock::set_rate`]). Fails with
    /// [`Error::InvalidArgument`], changing nothing, for a bad rate, a bad
    /// index, or a cluster built without clocks.
    pub fn set_rate(&self, rate: f64, indices: &[usize]) -> Result<(), Error> {
        let clocks = self.select_clocks(indices)?;
        // Checked once, so that a bad rate changes no clock.
        DriftClock::check_rate(rate)?;
        clocks.iter().try_for_each(|c| c.set_rate(rate))
    }

    /// Sets the wall clock offset of the nodes at `indices`
    /// ([`DriftClock::set_offset_nanos`]); fails as
    /// [`set_rate`](Self::set_rate) does for a bad index.
    pub fn set_offset_nanos(&self, offset: i64, indices: &[usize]) -> Result<(), Error> {
        let clocks = self.select_clocks(indices)?;
        clocks.iter().for_each(|c| c.set_offset_nanos(offset));
        Ok(())
    }

    fn select_clocks(&self, indices: &[usize]) -> Result<Vec<&DriftClock>, Error> {
        self.select(indices)?;
        if self.clocks.is_empty() {
            return Err(Error::InvalidArgument(
                "the cluster has no clocks: build it with TestCluster::with_clocks".into(),
            ));
        }
        Ok(indices.iter().map(|&i| &self.clocks[i]).collect())
    }

    /// How many nodes there are.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Whether the cluster has no node at all.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// The fault injectors, one per node.
    pub fn nodes(&self) -> &[Arc<FaultyLocker>] {
        &self.nodes
    }

    /// The lock tables behind the injectors, to inspect with
    /// [`LocalLocker::snapshot`] without going through the faults.
    pub fn lockers(&self) -> &[Arc<LocalLocker>] {
        &self.lockers
    }

    /// The injectors as lockers, to pass to [`Dsync::new`](crate::Dsync::new)
    /// or [`Dsync::builder`](crate::Dsync::builder).
    pub fn net_lockers(&self) -> Vec<Arc<dyn NetLocker>> {
        self.nodes
            .iter()
            .map(|n| n.clone() as Arc<dyn NetLocker>)
            .collect()
    }

    /// The injectors as lockers, as [`net_lockers`](Self::net_lockers)
    /// gives them, each behind a [`Relay`](super::Relay) that routes a
    /// call as `route(locker index, kind, args)` says: for scenes where a
    /// locker answers late, out of order, or applies a call and loses its
    /// reply.
    ///
    /// ```
    /// use std::time::Duration;
    /// use quorum_lock::testing::{CallKind, Route, TestCluster};
    ///
    /// let cluster = TestCluster::new(3, 7);
    /// // Locker 2 applies lock calls at once but answers them 300 ms late.
    /// let lockers = cluster.relayed_lockers(|i, kind, _| match (i, kind) {
    ///     (2, CallKind::Lock) => Route::SlowReply(Duration::from_millis(300)),
    ///     _ => Route::Forward,
    /// });
    /// assert_eq!(lockers.len(), 3);
    /// ```
    pub fn relayed_lockers(
        &self,
        route: impl Fn(usize, CallKind, &crate::LockArgs) -> super::Route + Send + Sync + 'static,
    ) -> Vec<Arc<dyn NetLocker>> {
        let route = Arc::new(route);
        self.net_lockers()
            .into_iter()
            .enumerate()
            .map(|(index, locker)| {
                let route = route.clone();
                Arc::new(super::Relay::new(locker, move |kind, args| {
                    route(index, kind, args)
                })) as Arc<dyn NetLocker>
            })
            .collect()
    }

    /// Live entries summed over every node's table. Zero once every lock
    /// has been released everywhere.
    pub fn total_entries(&self) -> usize {
        self.lockers.iter().map(|l| l.snapshot().len()).sum()
    }

    /// [`FaultyLocker::stats`] summed over every node.
    pub fn stats(&self, kind: CallKind) -> CallStats {
        self.nodes
            .iter()
            .fold(CallStats::default(), |sum, n| sum + n.stats(kind))
    }

    /// The nodes at `indices`, or an error naming the first bad index.
    fn select(&self, indices: &[usize]) -> Result<Vec<&FaultyLocker>, Error> {
        indices
            .iter()
            .map(|&i| {
                self.nodes.get(i).map(|n| &**n).ok_or_else(|| {
                    Error::InvalidArgument(format!(
                        "node index {i} is out of range: the cluster has {} nodes",
                        self.nodes.len()
                    ))
                })
            })
            .collect()
    }

    fn each(&self, indices: &[usize], f: impl Fn(&FaultyLocker)) -> Result<(), Error> {
        self.select(indices)?.into_iter().for_each(f);
        Ok(())
    }

    /// Crashes the nodes at `indices` ([`FaultyLocker::crash`]).
    pub fn crash(&self, indices: &[usize]) -> Result<(), Error> {
        self.each(indices, FaultyLocker::crash)
    }

    /// Restarts the nodes at `indices`, wiping their tables and starting
    /// their quarantine ([`FaultyLocker::restart`]).
    pub fn restart(&self, indices: &[usize]) -> Result<(), Error> {
        self.each(indices, FaultyLocker::restart)
    }

    /// Cuts the nodes at `indices` off from the client `owner`
    /// ([`FaultyLocker::partition`]).
    pub fn partition(&self, owner: &str, indices: &[usize]) -> Result<(), Error> {
        self.each(indices, |n| n.partition(owner))
    }

    /// Heals the partition between `owner` and the nodes at `indices`.
    pub fn heal_partition(&self, owner: &str, indices: &[usize]) -> Result<(), Error> {
        self.each(indices, |n| {
            n.heal_partition(owner);
        })
    }

    /// Sets the latency of the nodes at `indices`.
    pub fn set_latency(&self, latency: Latency, indices: &[usize]) -> Result<(), Error> {
        self.each(indices, |n| n.set_latency(latency))
    }

    /// Makes the nodes at `indices` lose replies
    /// ([`FaultyLocker::drop_replies`]).
    pub fn drop_replies(
        &self,
        probability: f64,
        applied: bool,
        indices: &[usize],
    ) -> Result<(), Error> {
        let nodes = self.select(indices)?;
        nodes
            .iter()
            .try_for_each(|n| n.drop_replies(probability, applied))
    }

    /// Makes the nodes at `indices` refuse every call, or stop refusing.
    pub fn set_refuse(&self, on: bool, indices: &[usize]) -> Result<(), Error> {
        self.each(indices, |n| n.set_refuse(on))
    }

    /// Makes the nodes at `indices` hang on every call, or stop hanging.
    pub fn set_hang(&self, on: bool, indices: &[usize]) -> Result<(), Error> {
        self.each(indices, |n| n.set_hang(on))
    }

    /// Clears every fault of the nodes at `indices`, restarting crashed
    /// ones ([`FaultyLocker::heal`]).
    pub fn heal(&self, indices: &[usize]) -> Result<(), Error> {
        self.each(indices, FaultyLocker::heal)
    }

    /// Clears every fault on every node, restarting crashed ones.
    pub fn heal_all(&self) {
        self.nodes.iter().for_each(|n| n.heal());
    }
}
