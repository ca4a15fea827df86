//! Fault injection and history checking for tests (feature `testing`).
//!
//! Code that uses distributed locks is only as correct as its behaviour when
//! lock servers are slow, lose packets, refuse connections, are cut off or
//! restart. This module lets a test reproduce those faults in process and
//! check that mutual exclusion held throughout:
//!
//! * [`FaultyLocker`] wraps any [`NetLocker`](crate::NetLocker) and injects
//!   latency, lost replies, refusals, hangs, partitions from chosen clients,
//!   and crashes with restarts. Faults can be changed while the test runs.
//! * [`TestCluster`] builds `n` [`LocalLocker`](crate::LocalLocker)s behind
//!   `FaultyLocker`s, with fault methods over sets of nodes.
//! * [`History`] records when each holder acquired, was told it lost, and
//!   released a lock, and [`History::check`] reports the first time two
//!   conflicting holders both believed they held one ([`Violation`]).
//! * [`check_locker`] runs one conformance suite against any `NetLocker`:
//!   the rules every locker must answer by, as `LocalLocker` does. Run it
//!   against a locker written for another store before trusting it.
//!
//! Enable it for tests only:
//!
//! ```toml
//! [dev-dependencies]
//! quorum-lock = { version = "0.1", features = ["testing"] }
//! ```
//!
//! # Reproducible runs
//!
//! Every random choice (injected latency, lost replies, the coordinator's
//! backoff with [`DsyncBuilder::rng_seed`](crate::DsyncBuilder::rng_seed))
//! comes from a seeded generator. On a current-thread runtime with paused
//! time (`#[tokio::test(start_paused = true)]`) the same seed then replays the
//! same run, and hours of timeouts take milliseconds. Loop over many seeds
//! and print the seed of a failing run to replay it.
//!
//! # Example
//!
//! Two workers take turns on one lock while one node is down, another is
//! cut off from the workers and every node is slow:
//!
//! ```
//! use std::sync::Arc;
//! use std::time::Duration;
//! use quorum_lock::{Dsync, LockMode};
//! use quorum_lock::testing::{History, Latency, TestCluster};
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let seed = 42;
//! let cluster = TestCluster::new(5, seed);
//! let ds = Dsync::builder(cluster.net_lockers()).owner("workers").rng_seed(seed).build()?;
//! cluster.crash(&[0])?;
//! cluster.partition("workers", &[1])?;
//! let slow = Latency::Uniform { min: Duration::ZERO, max: Duration::from_millis(20) };
//! cluster.set_latency(slow, &[2, 3, 4])?;
//!
//! let history = Arc::new(History::new());
//! let mut workers = Vec::new();
//! for _ in 0..2 {
//!     let (ds, history) = (ds.clone(), history.clone());
//!     workers.push(tokio::spawn(async move {
//!         let mutex = ds.rw_mutex(["report"])?;
//!         for _ in 0..3 {
//!             let guard = mutex.lock().await?;
//!             history.acquired(guard.uid(), guard.resources(), LockMode::Write);
//!             tokio::time::sleep(Duration::from_millis(5)).await; // the protected work
//!             history.released(guard.uid()); // before unlocking, not after
//!             guard.unlock().await?;
//!         }
//!         Ok::<(), quorum_lock::Error>(())
//!     }));
//! }
//! for worker in workers {
//!     worker.await??;
//! }
//! history.check()?; // Err(Violation) says who overlapped, on what, and when
//! assert_eq!(history.len(), 12);
//! # Ok(())
//! # }
//! ```

mod cluster;
mod conformance;
mod faults;
mod forward;
mod history;
mod plan;
mod stats;
mod sweep;
mod violation;

#[cfg(test)]
mod cluster_tests;
#[cfg(test)]
mod fault_tests;
#[cfg(test)]
mod history_tests;

pub use cluster::TestCluster;
pub use conformance::{check_locker, ConformanceReport, NonConformance};
pub use faults::FaultyLocker;
pub use history::{Event, EventKind, FencingViolation, History};
pub use plan::Latency;
pub use stats::{CallKind, CallStats};
pub use violation::{Holding, Violation};
