//! The quorum-lock load: clients looping acquire, hold, unlock on a cluster
//! built for the scenario's transport.

use std::sync::Arc;
use std::time::Duration;

use quorum_lock::{DRWMutex, Dsync, Error, LocalLocker, NetLocker, ReadGuard, WriteGuard};

use crate::context::Context;
use crate::counting::{Calls, CountingLocker};
use crate::counts::Probe;
use crate::scenario::{Mix, Scenario, Transport, Wait};
use crate::servers::Kind;
use crate::stats::{counted, Bounds, ClientTally, Locking, Snapshot, Summary};

pub struct Cluster {
    pub ds: Dsync,
    /// One per locker when calls are counted, else empty.
    pub calls: Vec<Arc<Calls>>,
    /// The server processes of `--transport tcp`, stopped on drop.
    servers: Option<crate::servers::Servers>,
}

impl Cluster {
    /// A `Dsync` over `bare`, waiting as `wait` says, each locker wrapped
    /// in a counting one when `count_rpcs`.
    pub fn build(
        bare: Vec<Arc<dyn NetLocker>>,
        count_rpcs: bool,
        wait: Wait,
        servers: Option<crate::servers::Servers>,
    ) -> Result<Cluster, String> {
        let (lockers, calls) = if count_rpcs {
            bare.into_iter()
                .map(|inner| {
                    let (locker, calls) = CountingLocker::new(inner);
                    (Arc::new(locker) as Arc<dyn NetLocker>, calls)
                })
                .unzip()
        } else {
            (bare, Vec::new())
        };
        let ds = Dsync::builder(lockers)
            .waiting(wait.waiting())
            .build()
            .context("cannot build the cluster")?;
        Ok(Cluster { ds, calls, servers })
    }

    pub fn server_cpu(&self) -> Option<Duration> {
        self.servers.as_ref().and_then(|s| s.cpu())
    }

    /// The load run of `scenario` on this cluster: every client on its
    /// mutex (`prefix` and its name), through [`Window::client`]; `mark`
    /// runs beside each snapshot, `server_cpu` reads the servers' CPU.
    pub async fn load(
        &self,
        scenario: Scenario,
        bounds: Bounds,
        prefix: &str,
        mark: impl Fn(),
        server_cpu: impl Fn() -> Option<Duration>,
    ) -> Result<Summary, String> {
        let mutexes = (0..scenario.clients)
            .map(|c| self.ds.rw_mutex([scenario.names.of(prefix, c)]))
            .collect::<Result<Vec<_>, _>>()
            .context("cannot make a mutex")?;
        let snapshot = || {
            mark();
            Snapshot::now(counted(&self.calls), server_cpu())
        };
        let mut mutexes = mutexes.into_iter();
        let load = bounds.load(scenario.clients, scenario.hold, snapshot, |c| {
            let mutex = mutexes.next().expect("one mutex per client");
            Client::new(mutex, scenario.mix, c)
        });
        load.await
    }
}

/// Builds the lockers a scenario asks for: in-process tables, or lock
/// servers of `kind` in their own processes and clients for them.
pub async fn cluster(scenario: &Scenario, count_rpcs: bool, kind: Kind) -> Result<Cluster, String> {
    let mut servers = None;
    let bare: Vec<Arc<dyn NetLocker>> = match scenario.transport {
        Transport::InProcess => (0..scenario.nodes)
            .map(|_| Arc::new(LocalLocker::new()) as Arc<dyn NetLocker>)
            .collect(),
        Transport::Tcp => {
            let (started, lockers) =
                crate::servers::Servers::start_kind(scenario.nodes, None, kind).await?;
            servers = Some(started);
            lockers
        }
        Transport::Redis => {
            return Err("redis nodes are measured by redis_nodes, not here".into());
        }
    };
    Cluster::build(bare, count_rpcs, scenario.wait, servers)
}

pub enum Held {
    Write(WriteGuard),
    Read(ReadGuard),
}

impl Held {
    async fn unlock(self) -> Result<(), Error> {
        match self {
            Held::Write(g) => g.unlock().await,
            Held::Read(g) => g.unlock().await,
        }
    }
}

/// Acquires in the mode the cycle drew. How it waits was fixed when the
/// cluster was built (`DsyncBuilder::waiting`).
async fn acquire(mutex: &DRWMutex, write: bool) -> Result<Held, Error> {
    if write {
        mutex.lock().await.map(Held::Write)
    } else {
        mutex.read().await.map(Held::Read)
    }
}

/// xorshift64*: a few instructions per draw, so that picking reads or
/// writes does not show up in the profile.
struct Coin(u64);

impl Coin {
    fn heads(&mut self, percent: u64) -> bool {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 32) % 100 < percent
    }
}

/// A client of ours: one mutex, read or write as the mix draws.
pub struct Client {
    mutex: DRWMutex,
    mix: Mix,
    coin: Coin,
}

impl Client {
    /// Client `c`'s mutex, with a seed of its own for the mix.
    pub fn new(mutex: DRWMutex, mix: Mix, c: usize) -> Client {
        let seed = 0x9e37_79b9_7f4a_7c15_u64.wrapping_mul(c as u64 + 1);
        Client {
            mutex,
            mix,
            coin: Coin(seed | 1),
        }
    }
}

impl Locking for Client {
    type Held = Held;

    async fn acquire(&mut self) -> Result<Held, String> {
        let write = match self.mix {
            Mix::Write => true,
            Mix::Read90 => !self.coin.heads(90),
        };
        // Cancel safe: the library releases whatever a cut-off round got.
        acquire(&self.mutex, write).await.context("lock failed")
    }

    async fn release(&mut self, held: Held, _: &mut ClientTally, _: bool) -> Result<(), String> {
        held.unlock().await.context("unlock failed")?;
        // An in-process acquire and unlock complete without ever returning
        // Pending, so without this the loop would never give its worker
        // back: the other clients would starve and no timer would fire.
        // It yields only once the task's budget (128 units) is spent.
        tokio::task::coop::consume_budget().await;
        Ok(())
    }
}

pub async fn run(scenario: Scenario, bounds: Bounds) -> Result<Summary, String> {
    run_on(scenario, bounds, Kind::Ours, false).await
}

/// [`run`], over TCP with servers of `kind`, counting system calls, frames
/// and context switches in the window with `counts` (TCP only).
pub async fn run_on(
    scenario: Scenario,
    bounds: Bounds,
    kind: Kind,
    counts: bool,
) -> Result<Summary, String> {
    let cluster = cluster(&scenario, bounds.count_rpcs, kind).await?;
    let counted = cluster.servers.as_ref().filter(|_| counts);
    let probe = counted.map(|s| Probe::start(s.pids())).transpose()?;
    let mark = || probe.iter().for_each(Probe::mark);
    let mut summary =
        (cluster.load(scenario, bounds, "bench/", mark, || cluster.server_cpu())).await?;
    if let Some(probe) = probe {
        // Every call is one request frame and one reply frame; pushes
        // (none on distinct names) are not counted.
        let frames = summary.calls.map_or(0, |c| c.total());
        summary.counts = Some(probe.finish(frames, frames)?);
    }
    Ok(summary)
}
