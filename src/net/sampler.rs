//! The sampler of a lock server's table gauges (feature `metrics`):
//! a task that reads the table once a second and sets the gauges, until
//! its guard is dropped or the server is gone. It holds the server only
//! weakly, so it never keeps a stopped server alive.

use std::sync::Arc;
#[cfg(feature = "metrics")]
use std::sync::Weak;
#[cfg(feature = "metrics")]
use std::time::Duration;

#[cfg(feature = "metrics")]
use super::metrics::Gauges;
use super::state::ServerState;

/// How often the sampler sets the gauges of the table.
#[cfg(feature = "metrics")]
const SAMPLE_EVERY: Duration = Duration::from_secs(1);

/// Samples the gauges of the table once a second until dropped; from
/// [`sampler`].
pub(crate) struct Sampler {
    #[cfg(feature = "metrics")]
    task: tokio::task::AbortHandle,
}

impl Drop for Sampler {
    fn drop(&mut self) {
        #[cfg(feature = "metrics")]
        self.task.abort();
    }
}

/// Starts sampling the gauges of `state`'s table on the current runtime,
/// at once and then every second, until the returned guard is dropped (or
/// the server is gone).
#[cfg(feature = "metrics")]
pub(crate) fn sampler(state: &Arc<ServerState>) -> Sampler {
    let state: Weak<ServerState> = Arc::downgrade(state);
    let task = tokio::spawn(async move {
        let mut tick = tokio::time::interval(SAMPLE_EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let Some(state) = state.upgrade() else {
                return;
            };
            let table = state.locker.counts();
            let (tombstones, tombstone_bytes) = state.released().usage();
            state.metrics.sample(&Gauges {
                entries: table.entries,
                resources: table.resources,
                lock_bytes: state.ledger.total(),
                tombstones,
                tombstone_bytes,
                quarantine: state.locker.quarantine_remaining(),
            });
        }
    });
    Sampler {
        task: task.abort_handle(),
    }
}

/// Starts nothing: the feature `metrics` is off.
#[cfg(not(feature = "metrics"))]
pub(crate) fn sampler(state: &Arc<ServerState>) -> Sampler {
    let _ = state;
    Sampler {}
}
