//! What `run`, `lock` and `elect` say while they wait: why the lock is not
//! granted yet when the cluster is the reason (servers in quarantine after
//! a restart, with the time left; servers unreachable, which and why),
//! once the wait has lasted a second and again whenever that reason
//! changes; so that a silent wait is always a wait for a holder.

use std::future::Future;
use std::time::Duration;

use quorum_lock::{WaitReason, WaitStatus};
use tokio::time::{interval_at, Instant, MissedTickBehavior};

/// A wait shorter than this says nothing: most grants come sooner.
const FIRST_REPORT: Duration = Duration::from_secs(1);
/// How often the wait's status is read after that.
const POLL: Duration = Duration::from_millis(250);

/// What a report is about: it is printed again only when this changes, not
/// as the time left counts down.
#[derive(PartialEq, Eq)]
struct Said {
    reason: WaitReason,
    lockers: Vec<String>,
}

impl Said {
    fn of(status: &WaitStatus) -> Said {
        let lockers = match status.reason() {
            WaitReason::HeldElsewhere => Vec::new(),
            WaitReason::Quarantine => status
                .quarantined
                .iter()
                .map(|q| q.endpoint.clone())
                .collect(),
            _ => status
                .unreachable
                .iter()
                .map(|u| u.endpoint.clone())
                .collect(),
        };
        Said {
            reason: status.reason(),
            lockers,
        }
    }
}

/// Awaits `acquire`; meanwhile prints `quorum-lock: waiting for WHAT:
/// STATUS` on stderr as described above, reading the status with `status`.
pub async fn reporting<T>(
    what: &str,
    acquire: impl Future<Output = T>,
    status: impl Fn() -> Option<WaitStatus>,
) -> T {
    let mut acquire = std::pin::pin!(acquire);
    let mut ticks = interval_at(Instant::now() + FIRST_REPORT, POLL);
    ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut said: Option<Said> = None;
    loop {
        tokio::select! {
            out = acquire.as_mut() => return out,
            _ = ticks.tick() => {
                let Some(status) = status() else { continue };
                let now = Said::of(&status);
                // Waiting for a holder is what a lock is for: silent, as
                // flock(1) is. Only a cluster that cannot grant is news.
                if now.reason != WaitReason::HeldElsewhere && said.as_ref() != Some(&now) {
                    crate::words::say(&format!("waiting for {what}: {status}"));
                }
                said = Some(now);
            }
        }
    }
}

/// How long to wait for the lock: `--nonblock` (one round), `--timeout`,
/// or for as long as it takes.
#[derive(Debug, Clone, Copy)]
pub enum Patience {
    OneRound,
    Within(Duration),
    Forever,
}

impl Patience {
    pub fn of(nonblock: bool, timeout: Option<Duration>) -> Patience {
        match (nonblock, timeout) {
            (true, _) => Patience::OneRound,
            (false, Some(t)) => Patience::Within(t),
            (false, None) => Patience::Forever,
        }
    }
}
