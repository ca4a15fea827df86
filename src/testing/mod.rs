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
//! * [`Relay`] forwards every call to a locker along a route the test
//!   writes call by call: one call lost, delivered late (even after its
//!   caller gave up), or answered slowly, for the fault a test needs at one
//!   exact point.
//! * [`DriftClock`] is a host's clock that runs at its own rate and wall
//!   clock offset, for lockers ([`TestCluster::with_clocks`],
//!   [`LocalLocker::with_clock`](crate::LocalLocker::with_clock)) and
//!   clients ([`DsyncBuilder::clock`](crate::DsyncBuilder::clock)); see
//!   [Clocks that drift](#clocks-that-drift).
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
//! # Clocks that drift
//!
//! The lease argument assumes that a locker's clock runs less than
//! `validity / (validity − safety_margin)` times as fast as a holder's (1.2
//! with the defaults; see docs/guarantees.md). A [`DriftClock`] lets a test
//! go up to that bound and past it: each locker and each client gets a
//! clock of its own, whose rate (relative to tokio's clock, which the test
//! and [`History`] use) and wall clock offset the test sets and changes at
//! any time.
//!
//! What it models: a host whose monotonic clock runs at that rate. A
//! [`LocalLocker`](crate::LocalLocker) on one measures on it everything it
//! measures itself: entry expiry, the restart quarantine and the fencing
//! quarantine, places in line and observers' watches (their TTLs come with
//! each call, in the client's units, and are counted on the locker's
//! clock), and its expiry sweeps; it draws fencing tokens against its wall
//! clock, which is the library's (the wall clock read at start plus
//! monotonic time since), so it runs at the same rate, plus the offset. A
//! client on one measures on it its leases (the trust deadline, the
//! refresh interval, the safety margin before a lost lock's entries are
//! freed), every call deadline and timeout, waits, re-checks and backoffs,
//! the unlock retries, the fencing rounds (their floors come from its wall
//! clock), and the timeouts of `lock_timeout` and the `_timeout` forms of
//! semaphores and elections. A rate change applies from the instant it is
//! made, to entries already granted and to timers already set: a timer
//! fires when its own clock shows its deadline, whatever the rates did
//! meanwhile. Network delays ([`Latency`]) are the test's real time.
//!
//! Why a clock and not scaled settings: a locker's validity and quarantine
//! are its configuration, not sent with each call, and an entry granted at
//! one rate ages at the rates that follow; a client's timeouts could be
//! divided by its rate, but not changed while it holds a lock, and its
//! places' TTLs are sent to the lockers, which count them on their own
//! clocks. Scaling would model neither.
//!
//! What it does not model: a clock that steps or stops (a monotonic
//! clock never steps; a stall is a paused runtime or a hung node);
//! fairness tickets ([`Ticket`](crate::Ticket), drawn from the system
//! clock; they order waiters and do not affect safety); the recipes' own
//! pacing on tokio's clock (an election leader's re-proclamation, an
//! observer's re-check, the backoff between an election's or a semaphore's
//! steps, the reentrant lock's local timeout, `Dsync::finish_releases`),
//! whose locks still run on the client's clock; the metrics' latencies;
//! and lock servers and Redis or SQL lockers, whose clocks are their
//! hosts'. Only `LocalLocker`s take a clock.
//!
//! Without a `DriftClock`, lockers and clients read tokio's clock directly:
//! the layer is one branch on an enum, and nothing at all without the
//! `testing` feature.
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
mod drift;
mod event;
mod faults;
mod forward;
mod history;
mod plan;
mod relay;
mod stats;
mod sweep;
mod violation;

#[cfg(test)]
mod cluster_tests;
#[cfg(test)]
mod drift_tests;
#[cfg(test)]
mod fault_tests;
#[cfg(test)]
mod history_tests;

pub use cluster::TestCluster;
pub use conformance::{check_locker, ConformanceReport, NonConformance};
pub use drift::DriftClock;
pub use event::{Event, EventKind};
pub use faults::FaultyLocker;
pub use history::{FencingViolation, History};
pub use plan::Latency;
pub use relay::{Relay, Route};
pub use stats::{CallKind, CallStats};
pub use violation::{Holding, Violation};
