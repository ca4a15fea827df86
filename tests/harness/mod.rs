//! Helpers shared by the fault-tolerance tests: clients of a `TestCluster`,
//! one guard type for both modes, and a holder that races its work against
//! the loss signal while recording what it believes in a `History`.

// Every test file uses a different subset of these helpers.
#![allow(dead_code)]

pub mod real_node_clients;
pub mod real_node_safety;

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use quorum_lock::quorum::{read_quorum, write_quorum};
use quorum_lock::testing::{History, TestCluster};
use quorum_lock::{DRWMutex, Dsync, Error, Lease, LockMode, ReadGuard, WriteGuard};
use tokio::task::JoinHandle;
use tokio::time::{sleep, Instant};
use tokio_util::sync::CancellationToken;

/// The lease every client in these tests uses: the library defaults
/// (refresh every 10 s, validity 60 s, safety margin 10 s).
pub fn lease() -> Lease {
    Lease::default()
}

/// A client of `cluster` whose calls carry `owner`, which is what
/// `TestCluster::partition` cuts off.
pub fn client(cluster: &TestCluster, owner: &str, seed: u64) -> Dsync {
    Dsync::builder(cluster.net_lockers())
        .owner(owner)
        .rng_seed(seed)
        .lease(lease())
        .build()
        .expect("valid client settings")
}

/// Grants `mode` needs on `n` lockers.
pub fn quorum(n: usize, mode: LockMode) -> usize {
    match mode {
        LockMode::Write => write_quorum(n),
        LockMode::Read => read_quorum(n),
    }
}

/// The nodes whose table holds `uid` on every one of `resources`.
pub fn nodes_holding(cluster: &TestCluster, uid: &str, resources: &[String]) -> Vec<usize> {
    (0..cluster.len())
        .filter(|&i| {
            let entries = cluster.lockers()[i].snapshot();
            resources
                .iter()
                .all(|r| entries.iter().any(|e| e.uid == uid && &e.resource == r))
        })
        .collect()
}

/// Resolves to the virtual instant at which `signal` fired. It runs as its
/// own task, so the test can go on waiting for other things meanwhile.
pub fn instant_of(signal: impl Future<Output = ()> + Send + 'static) -> JoinHandle<Instant> {
    tokio::spawn(async move {
        signal.await;
        Instant::now()
    })
}

/// A held lock of either mode.
#[derive(Debug)]
pub enum Held {
    Write(WriteGuard),
    Read(ReadGuard),
}

macro_rules! both {
    ($held:expr, $g:ident => $body:expr) => {
        match $held {
            Held::Write($g) => $body,
            Held::Read($g) => $body,
        }
    };
}

impl Held {
    /// Waits up to `patience` for `mode` on `mutex`.
    pub async fn acquire(
        mutex: &DRWMutex,
        mode: LockMode,
        patience: Duration,
    ) -> Result<Held, Error> {
        Ok(match mode {
            LockMode::Write => Held::Write(mutex.lock_timeout(patience).await?),
            LockMode::Read => Held::Read(mutex.read_timeout(patience).await?),
        })
    }

    pub fn mode(&self) -> LockMode {
        match self {
            Held::Write(_) => LockMode::Write,
            Held::Read(_) => LockMode::Read,
        }
    }

    pub fn uid(&self) -> &str {
        both!(self, g => g.uid())
    }

    pub fn resources(&self) -> &[String] {
        both!(self, g => g.resources())
    }

    pub fn is_lost(&self) -> bool {
        both!(self, g => g.is_lost())
    }

    pub fn lost(&self) -> impl Future<Output = ()> + Send + 'static + use<> {
        // Two arms of different opaque types: box to one.
        let fut: std::pin::Pin<Box<dyn Future<Output = ()> + Send>> =
            both!(self, g => Box::pin(g.lost()));
        fut
    }

    pub fn loss_token(&self) -> CancellationToken {
        both!(self, g => g.loss_token())
    }

    pub async fn fencing_token(&self) -> Result<u64, quorum_lock::Error> {
        match self {
            Held::Write(g) => g.fencing_token().await,
            Held::Read(g) => g.fencing_token().await,
        }
    }

    pub async fn unlock(self) -> Result<(), Error> {
        both!(self, g => g.unlock().await)
    }
}

/// What a holder believes it holds, as far as a test can watch it.
#[derive(Debug, Clone)]
pub struct Belief {
    pub owner: String,
    pub resources: Vec<String>,
    pub mode: LockMode,
    pub since: Instant,
    /// Cancelled when the library signals the loss.
    pub token: CancellationToken,
}

/// A `History` plus the set of holders that currently believe they hold,
/// so that a watcher can compare beliefs with the lock tables at any time.
#[derive(Debug, Default)]
pub struct Tracker {
    pub history: History,
    believers: Mutex<BTreeMap<String, Belief>>,
}

impl Tracker {
    fn believers(&self) -> MutexGuard<'_, BTreeMap<String, Belief>> {
        self.believers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    pub fn begin(&self, owner: &str, held: &Held) {
        self.history
            .acquired(held.uid(), held.resources(), held.mode());
        let belief = Belief {
            owner: owner.to_owned(),
            resources: held.resources().to_vec(),
            mode: held.mode(),
            since: Instant::now(),
            token: held.loss_token(),
        };
        self.believers().insert(held.uid().to_owned(), belief);
    }

    /// The owners of the holders that believe they hold now, oldest first.
    pub fn holders(&self) -> Vec<String> {
        let mut held: Vec<(Instant, String)> = self
            .believers()
            .values()
            .map(|b| (b.since, b.owner.clone()))
            .collect();
        // Sorted by time, not uid: uids are random, and the order must replay.
        held.sort();
        held.into_iter().map(|(_, owner)| owner).collect()
    }

    pub fn end(&self, uid: &str, lost: bool) {
        self.believers().remove(uid);
        if lost {
            self.history.lost_signalled(uid);
        } else {
            self.history.released(uid);
        }
    }

    /// Holders that still believe they hold (their loss was not signalled)
    /// although fewer than a quorum of nodes either hold their entry or are
    /// in restart quarantine. The other nodes are free to grant a conflicting
    /// lock, so such a holder has lost its lock without being told.
    ///
    /// The lease argument says this never happens: every node of the last
    /// quorum that confirmed a refresh sent at `s` keeps the entry, or sits
    /// in quarantine after a wipe, until at least `s + validity`, while the
    /// holder gives up at `s + validity - safety_margin`.
    pub fn silent_losses(&self, cluster: &TestCluster) -> Vec<String> {
        let tables: Vec<_> = cluster.lockers().iter().map(|l| l.snapshot()).collect();
        let quarantined: Vec<bool> = cluster
            .lockers()
            .iter()
            .map(|l| l.is_quarantined())
            .collect();
        let now = Instant::now();
        let mut out = Vec::new();
        for (uid, b) in self.believers().iter() {
            if b.token.is_cancelled() {
                continue;
            }
            let safe = (0..tables.len())
                .filter(|&i| {
                    quarantined[i]
                        || b.resources.iter().all(|r| {
                            tables[i]
                                .iter()
                                .any(|e| &e.uid == uid && &e.resource == r && e.mode == b.mode)
                        })
                })
                .count();
            let needed = quorum(tables.len(), b.mode);
            if safe < needed {
                out.push(format!(
                    "{} ({:?} {:?} by {}, held for {:?}) believes it holds, but only {safe} nodes \
                     hold it or are quarantined, {needed} needed",
                    uid,
                    b.mode,
                    b.resources,
                    b.owner,
                    now - b.since
                ));
            }
        }
        out
    }
}

/// How a holder lets go of its lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LetGo {
    Unlock,
    /// Drop the guard, which releases in the background.
    Drop,
    /// Give up waiting for `unlock()` after this long, dropping its future.
    CancelUnlock(Duration),
}

/// How one hold ended.
#[derive(Debug)]
pub struct Outcome {
    /// `lost()` fired before the work was done.
    pub signalled: bool,
    /// `is_lost()` right before letting go.
    pub lost_before_unlock: bool,
    /// The loss token after letting go.
    pub token_cancelled: bool,
    /// What `unlock()` returned; `None` when the guard was dropped or the
    /// unlock cancelled.
    pub unlock: Option<Result<(), Error>>,
    /// What `fencing_token()` returned, when it was asked.
    pub fenced: Option<Result<u64, Error>>,
}

impl Outcome {
    /// Why this outcome contradicts the loss signalling contract, if it does:
    /// a lock reported lost by `unlock()` must have been signalled, and a
    /// signalled loss must be reported by `unlock()`.
    pub fn contract_breach(&self) -> Option<String> {
        let reported = match &self.unlock {
            Some(unlock) => *unlock == Err(Error::LockLost),
            None => self.signalled,
        };
        let consistent = reported == self.signalled
            && reported == self.lost_before_unlock
            && reported == self.token_cancelled;
        (!consistent).then(|| format!("loss signalling is inconsistent: {self:?}"))
    }
}

/// Holds `held` for `work`, stopping early if the loss is signalled, and
/// records the holder's beliefs in `tracker`: acquired now, then lost when
/// `lost()` fired or released right before letting go.
pub async fn hold(tracker: &Tracker, owner: &str, held: Held, work: Duration) -> Outcome {
    hold_then(tracker, owner, held, work, LetGo::Unlock).await
}

/// [`hold`], letting go of the lock as `let_go` says.
pub async fn hold_then(
    tracker: &Tracker,
    owner: &str,
    held: Held,
    work: Duration,
    let_go: LetGo,
) -> Outcome {
    hold_fenced_then(tracker, owner, held, work, let_go, false).await
}

/// [`hold_then`], first drawing the lock's fencing token when `fence` is
/// set and recording it in the history.
pub async fn hold_fenced_then(
    tracker: &Tracker,
    owner: &str,
    held: Held,
    work: Duration,
    let_go: LetGo,
    fence: bool,
) -> Outcome {
    let uid = held.uid().to_owned();
    tracker.begin(owner, &held);
    let fenced = if fence {
        let drawn = held.fencing_token().await;
        if let Ok(token) = drawn {
            tracker.history.fenced(&uid, token);
        }
        Some(drawn)
    } else {
        None
    };
    // Biased, so that a loss and the end of the work at the same instant
    // resolve the same way on every run, in favour of the loss.
    let signalled = tokio::select! {
        biased;
        () = held.lost() => true,
        () = sleep(work) => false,
    };
    tracker.end(&uid, signalled);
    let token = held.loss_token();
    let lost_before_unlock = held.is_lost();
    let unlock = match let_go {
        LetGo::Unlock => Some(held.unlock().await),
        LetGo::Drop => {
            drop(held);
            None
        }
        LetGo::CancelUnlock(after) => tokio::time::timeout(after, held.unlock()).await.ok(),
    };
    Outcome {
        signalled,
        lost_before_unlock,
        token_cancelled: token.is_cancelled(),
        unlock,
        fenced,
    }
}

/// `Result::expect` that names the seed of the run, for replaying it.
pub trait Seeded<T> {
    fn seeded(self, seed: u64, what: &str) -> T;
}

impl<T, E: std::fmt::Debug> Seeded<T> for Result<T, E> {
    fn seeded(self, seed: u64, what: &str) -> T {
        self.unwrap_or_else(|e| panic!("seed {seed}: {what}: {e:?}"))
    }
}
