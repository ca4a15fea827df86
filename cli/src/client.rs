//! The library client of `run`, `lock` and `elect`: the `Dsync` with the
//! lease and grace that the flags and the servers decide, and what every
//! one of them does on its way out (wait briefly for background releases,
//! exit 128+N after a signal). The grace always fits in the safety margin,
//! so a command killed at the end of it is gone before the lock can be
//! freed.

use std::time::Duration;

use quorum_lock::{Dsync, Lease, Timeouts};

use crate::fail::Failure;
use crate::nodes::Cluster;
use crate::signals::Stop;

/// The validity when neither `--validity` nor any server says one.
const DEFAULT_VALIDITY: Duration = Duration::from_secs(60);

/// The library client of `run` and `elect`, with the lease and grace their
/// flags and the servers decide.
pub struct Client {
    pub ds: Dsync,
    pub lease: Lease,
    /// Between SIGTERM and SIGKILL when the command must stop.
    pub grace: Duration,
}

impl Client {
    /// The lease is `--validity`, or else the shortest validity the
    /// servers announce, or 60 s; `grace` must fit in it ([`grace_for`]).
    pub fn new(
        cluster: &Cluster,
        validity: Option<Duration>,
        grace: Option<Duration>,
        owner: Option<&str>,
    ) -> Result<Client, Failure> {
        let announced = cluster.lockers.iter().filter_map(|l| l.validity()).min();
        let lease = lease_for(validity.or(announced).unwrap_or(DEFAULT_VALIDITY));
        let grace = grace_for(grace, &lease)?;
        let timeouts = Timeouts {
            // Both must stay well inside the lease for the library to accept it.
            acquire: Timeouts::default().acquire.min(lease.trusted_for() / 2),
            refresh: Timeouts::default().refresh.min(lease.trusted_for() / 2),
            ..Timeouts::default()
        };
        let mut builder = Dsync::builder(cluster.lockers.clone())
            .lease(lease)
            .timeouts(timeouts);
        if let Some(owner) = owner {
            builder = builder.owner(owner);
        }
        let ds = builder
            .build()
            .map_err(|e| Failure::usage(format!("bad settings: {e}")))?;
        Ok(Client { ds, lease, grace })
    }
}

/// How long a process about to exit waits for the releases it handed to
/// the background (an abandoned wait's places and grants, a lost lock's
/// entries): long enough for servers that answer, short enough that a
/// cluster that is down does not hold a cron job up.
const RELEASE_BOUND: Duration = Duration::from_secs(2);

/// Waits, at most [`RELEASE_BOUND`], for this client's background
/// releases; what is left expires on the servers.
pub async fn finish_releases(ds: &Dsync) {
    if let Err(err) = ds.finish_releases(RELEASE_BOUND).await {
        tracing::debug!(%err, "exiting with releases still running");
    }
}

/// The lease for a validity: refresh every sixth of it, and give up a sixth
/// before the servers could expire the entries, the library's default ratio.
pub fn lease_for(validity: Duration) -> Lease {
    Lease {
        validity,
        refresh_interval: validity / 6,
        safety_margin: validity / 6,
    }
}

/// The longest SIGKILL and reaping may take before the lock can be
/// freed: 1 s, or a quarter of the safety margin when that is shorter, so
/// that short test validities still leave room for a grace.
const KILL_ALLOWANCE: Duration = Duration::from_secs(1);

pub fn kill_allowance(lease: &Lease) -> Duration {
    KILL_ALLOWANCE.min(lease.safety_margin / 4)
}

/// The time between SIGTERM and SIGKILL: `--grace` if the command is then
/// still dead before the lock can be freed, or half the safety margin when
/// the flag is not given (5 s at the default `--validity` of 60 s).
pub fn grace_for(grace: Option<Duration>, lease: &Lease) -> Result<Duration, Failure> {
    let margin = lease.safety_margin;
    let allowance = kill_allowance(lease);
    let limit = margin.saturating_sub(allowance);
    let Some(grace) = grace else {
        return Ok(margin / 2);
    };
    if grace < limit {
        return Ok(grace);
    }
    let show = humantime::format_duration;
    Err(Failure::usage(format!(
        "--grace {} must be shorter than --validity/6 - {} = {}: a lost lock can be granted again \
         --validity/6 = {} after the loss, and the command must have been killed by then; \
         lower --grace or raise --validity",
        show(grace),
        show(allowance),
        show(limit),
        show(margin),
    )))
}

/// The exit code after stopping for `stop`: 128+N, as a shell reports it.
pub fn signalled(stop: Stop) -> u8 {
    (128 + stop.number()) as u8
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    #[test]
    fn the_default_grace_leaves_room_before_the_lock_can_be_freed() {
        for validity in [secs(6), secs(12), secs(60), secs(600)] {
            let lease = lease_for(validity);
            let grace = grace_for(None, &lease).expect("the default fits");
            assert!(grace > Duration::ZERO);
            assert!(
                grace + kill_allowance(&lease) < lease.safety_margin,
                "{validity:?}"
            );
        }
        assert_eq!(grace_for(None, &lease_for(secs(60))).ok(), Some(secs(5)));
    }

    #[test]
    fn a_grace_that_outlasts_the_margin_is_refused() {
        let lease = lease_for(secs(12));
        let err = grace_for(Some(secs(10)), &lease).expect_err("10s > 2s");
        assert_eq!(err.code, crate::fail::USAGE);
        assert!(
            err.message
                .starts_with("--grace 10s must be shorter than --validity/6 - 500ms = 1s 500ms"),
            "{}",
            err.message
        );
        // Exactly at the limit leaves no room: refused.
        assert!(grace_for(Some(Duration::from_millis(1500)), &lease).is_err());
        assert_eq!(
            grace_for(Some(Duration::from_millis(1499)), &lease).ok(),
            Some(Duration::from_millis(1499))
        );
        // The old defaults, 10s with --validity 60s, had no room at all.
        assert!(grace_for(Some(secs(10)), &lease_for(secs(60))).is_err());
        assert!(grace_for(Some(secs(8)), &lease_for(secs(60))).is_ok());
    }
}
