//! What `run`, `lock` and `elect` say while they wait: why the lock is not
//! granted yet when the cluster is the reason (servers in quarantine after
//! a restart, with the time left; servers unreachable, which and why),
//! once the wait has lasted a second, and again when the reason changes or
//! a server joins it (a new restart or outage); so that a silent wait is
//! always a wait for a holder. A server leaving the reason (its quarantine
//! ended on time, it came back) is not news: the next round will tell.

use std::future::Future;
use std::time::Duration;

use quorum_lock::{WaitReason, WaitStatus};
use tokio::time::{interval_at, Instant, MissedTickBehavior};

/// A wait shorter than this says nothing: most grants come sooner.
const FIRST_REPORT: Duration = Duration::from_secs(1);
/// How often the wait's status is read after that.
const POLL: Duration = Duration::from_millis(250);

/// What a report is about: it is printed again only when the reason
/// changes or a locker joins it, not as the time left counts down or as
/// lockers leave it.
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

    /// Whether `self`, read after `before`, is worth saying: the cluster is
    /// the reason, and it is a new reason or names a locker `before` did
    /// not.
    fn is_news_after(&self, before: Option<&Said>) -> bool {
        if matches!(
            self.reason,
            WaitReason::HeldElsewhere | WaitReason::Answering
        ) {
            // Waiting for a holder is what a lock is for: silent, as
            // flock(1) is, and so is waiting a moment for answers. Only a
            // cluster that cannot grant is news.
            return false;
        }
        match before {
            None => true,
            Some(before) => {
                before.reason != self.reason
                    || self.lockers.iter().any(|l| !before.lockers.contains(l))
            }
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
                if now.is_news_after(said.as_ref()) {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn said(reason: WaitReason, lockers: &[&str]) -> Said {
        Said {
            reason,
            lockers: lockers.iter().map(|l| l.to_string()).collect(),
        }
    }

    #[test]
    fn a_wait_for_a_holder_is_never_news() {
        let held = said(WaitReason::HeldElsewhere, &[]);
        assert!(!held.is_news_after(None));
        assert!(!held.is_news_after(Some(&said(WaitReason::Quarantine, &["a"]))));
    }

    #[test]
    fn the_first_reason_and_a_changed_reason_are_news() {
        let quarantine = said(WaitReason::Quarantine, &["a", "b"]);
        assert!(quarantine.is_news_after(None));
        assert!(quarantine.is_news_after(Some(&said(WaitReason::HeldElsewhere, &[]))));
        assert!(quarantine.is_news_after(Some(&said(WaitReason::NoQuorum, &["a", "b"]))));
    }

    #[test]
    fn a_locker_leaving_the_reason_is_not_news_and_one_joining_is() {
        let three = said(WaitReason::Quarantine, &["a", "b", "c"]);
        let two = said(WaitReason::Quarantine, &["a", "c"]);
        // One quarantine ended on time: the operator was told how long.
        assert!(!two.is_news_after(Some(&three)));
        assert!(!three.is_news_after(Some(&three)));
        // Another server restarted, or went down.
        assert!(three.is_news_after(Some(&two)));
        let down = said(WaitReason::NoQuorum, &["a"]);
        assert!(said(WaitReason::NoQuorum, &["a", "b"]).is_news_after(Some(&down)));
    }
}
