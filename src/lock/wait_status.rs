//! Why a wait for a lock is still waiting, or why it ended without the
//! lock: held elsewhere, lockers in quarantine, or too few reachable.
//!
//! A wait reads this from what it already knows: how each locker last
//! answered its current (or, before that answered, its previous) round, and
//! for lockers whose call failed, the latest failure the coordinator noted
//! for that locker. Nothing here sends a call, and answered calls pay
//! nothing for it; a wait pays one lock per round to say which round is
//! current.

use std::fmt;
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use tokio::time::Instant;

use crate::error::{seconds, Unreachable};
use crate::lock::acquisition::Acquisition;
use crate::lock::coordinator::Coordinator;
use crate::quorum::clock::Clock;
use crate::quorum::Answer;
use crate::Error;

/// What a wait for a lock knows about why it has not been granted yet.
///
/// Read it while a wait runs with [`DRWMutex::waiting`](crate::DRWMutex::waiting)
/// (or [`Semaphore::waiting`](crate::Semaphore::waiting)); a wait with a
/// deadline that gives up turns it into its error (see
/// [`reason`](Self::reason)). Its `Display` is one line for an operator:
///
/// ```text
/// 2 of 3 lockers are in quarantine after a restart (10.0.0.1:7070, 10.0.0.2:7070), for 56s more; 2 needed
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct WaitStatus {
    /// Lockers the coordinator talks to.
    pub lockers: usize,
    /// Grants the lock needs.
    pub quorum: usize,
    /// Lockers that granted this wait.
    pub granted: usize,
    /// Lockers that refused it or queued it behind another owner: the lock
    /// is held elsewhere on them.
    pub held_elsewhere: usize,
    /// Lockers that refuse grants because they restarted recently.
    pub quarantined: Vec<Quarantined>,
    /// Lockers that did not answer, each with why.
    pub unreachable: Vec<Unreachable>,
    /// How long the wait has waited.
    pub waited: Duration,
}

/// A locker in quarantine after a restart.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Quarantined {
    /// The locker.
    pub endpoint: String,
    /// How much longer it refuses grants, when it said.
    pub left: Option<Duration>,
}

/// What keeps a wait from being granted, decided from a [`WaitStatus`] the
/// way a round decides: by the quorum.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum WaitReason {
    /// A quorum of lockers answered, and too many of them have the lock
    /// taken by another owner. A wait that gives up for this reason fails
    /// with [`Error::Timeout`].
    HeldElsewhere,
    /// Enough lockers answered for a quorum, but some refuse every grant
    /// while their quarantine after a restart lasts. A wait that gives up
    /// fails with [`Error::Quarantined`].
    Quarantine,
    /// Too few lockers answered. A wait that gives up fails with
    /// [`Error::QuorumUnavailable`], which names each unreachable locker
    /// and why.
    NoQuorum,
}

impl WaitStatus {
    /// Why the wait is not granted.
    pub fn reason(&self) -> WaitReason {
        let answered = self.granted + self.held_elsewhere;
        // Grants alone do not block: a quorum of them only waits to be
        // confirmed, which no holder elsewhere causes.
        let held = self.held_elsewhere > 0
            && (answered >= self.quorum
                || self.held_elsewhere > self.lockers.saturating_sub(self.quorum));
        if held || self.granted >= self.quorum {
            WaitReason::HeldElsewhere
        } else if !self.quarantined.is_empty() && answered + self.quarantined.len() >= self.quorum {
            WaitReason::Quarantine
        } else {
            WaitReason::NoQuorum
        }
    }

    /// How long until enough lockers are out of quarantine for a quorum of
    /// the reachable ones, when they said; `None` when quarantine is not
    /// what the wait waits for.
    pub fn quarantine_left(&self) -> Option<Duration> {
        let answered = self.granted + self.held_elsewhere;
        let needed = self.quorum.checked_sub(answered)?.max(1);
        let mut left: Vec<Option<Duration>> = self.quarantined.iter().map(|q| q.left).collect();
        if left.len() < needed {
            return None;
        }
        // Unknowns last: the quorum needs the `needed` soonest to end.
        left.sort_by_key(|l| l.unwrap_or(Duration::MAX));
        left[needed - 1]
    }

    /// The error a wait that gives up in this state fails with.
    pub(crate) fn into_error(self) -> Error {
        match self.reason() {
            WaitReason::HeldElsewhere => Error::Timeout,
            WaitReason::Quarantine | WaitReason::NoQuorum => self.unavailable(),
        }
    }

    /// The error for a round that too few lockers answered:
    /// [`Error::Quarantined`] when quarantine is why, else
    /// [`Error::QuorumUnavailable`].
    pub(crate) fn unavailable(self) -> Error {
        let answered = self.granted + self.held_elsewhere;
        if self.reason() == WaitReason::Quarantine {
            return Error::Quarantined {
                left: self.quarantine_left(),
                quarantined: self.quarantined.into_iter().map(|q| q.endpoint).collect(),
                quorum: self.quorum,
                lockers: self.lockers,
            };
        }
        Error::QuorumUnavailable {
            answered: answered + self.quarantined.len(),
            quorum: self.quorum,
            lockers: self.lockers,
            unreachable: self.unreachable,
        }
    }

    /// The status of a wait that began at `began`, from how each locker
    /// answered (`None`: not yet).
    pub(crate) fn of(
        coord: &Coordinator,
        quorum: usize,
        answers: &[Option<Answer>],
        began: Instant,
    ) -> WaitStatus {
        let now = coord.clock.now();
        let waited = now.saturating_duration_since(began);
        let mut status = WaitStatus {
            lockers: answers.len(),
            quorum,
            granted: 0,
            held_elsewhere: 0,
            quarantined: Vec::new(),
            unreachable: Vec::new(),
            waited,
        };
        for (index, answer) in answers.iter().enumerate() {
            match answer {
                Some(Answer::Granted) => status.granted += 1,
                Some(Answer::Refused | Answer::Queued) => status.held_elsewhere += 1,
                Some(Answer::Failed) | None => {
                    let endpoint = coord.lockers[index].endpoint();
                    // A failure from before this wait says nothing about a
                    // locker that has not answered it yet.
                    let note = coord
                        .failure(index)
                        .filter(|note| answer.is_some() || note.at >= began);
                    match note {
                        Some(note) if note.error.is_quarantine() => {
                            let since = now.saturating_duration_since(note.at);
                            status.quarantined.push(Quarantined {
                                endpoint,
                                left: quarantine_left(&note.error)
                                    .map(|left| left.saturating_sub(since)),
                            });
                        }
                        Some(note) => status.unreachable.push(Unreachable {
                            endpoint,
                            reason: note.error.locker_reason(),
                        }),
                        None => status.unreachable.push(Unreachable {
                            endpoint,
                            reason: format!("no answer yet after {}", seconds(waited)),
                        }),
                    }
                }
            }
        }
        status
    }
}

impl fmt::Display for WaitStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.lockers;
        match self.reason() {
            WaitReason::HeldElsewhere if self.held_elsewhere == 0 => write!(
                f,
                "granted by {} of {n} lockers, waiting for the grant to be confirmed",
                self.granted
            ),
            WaitReason::HeldElsewhere => write!(
                f,
                "held elsewhere: {} of {n} lockers have it taken by another owner",
                self.held_elsewhere
            ),
            WaitReason::Quarantine => {
                let names: Vec<&str> = self
                    .quarantined
                    .iter()
                    .map(|q| q.endpoint.as_str())
                    .collect();
                write!(
                    f,
                    "{} of {n} lockers are in quarantine after a restart ({})",
                    names.len(),
                    names.join(", ")
                )?;
                if let Some(left) = self.quarantine_left() {
                    write!(f, ", for {} more", seconds(left))?;
                }
                write!(f, "; {} needed", self.quorum)
            }
            WaitReason::NoQuorum => {
                let reachable = n - self.unreachable.len();
                write!(
                    f,
                    "only {reachable} of {n} lockers reachable, {} needed",
                    self.quorum
                )?;
                let parts: Vec<String> = self.unreachable.iter().map(ToString::to_string).collect();
                if !parts.is_empty() {
                    write!(f, "; unreachable: {}", parts.join("; "))?;
                }
                Ok(())
            }
        }
    }
}

tokio::task_local! {
    /// The watch of an operation made of several waits and rounds (a
    /// semaphore's acquire, an election's campaign) run with a deadline:
    /// the locks it takes on the way report to it (see [`outer`]).
    static OPERATION: Arc<Watched>;
}

/// The watch of the operation the current task runs with a deadline, if
/// any; the waits and rounds of its locks report to it too.
pub(crate) fn outer() -> Option<WaitWatch> {
    OPERATION
        .try_with(|watched| WaitWatch {
            watched: watched.clone(),
        })
        .ok()
}

/// Awaits `operation` for at most `timeout`. One that gives up fails with
/// the error that says why, from what its own waits and rounds reported
/// (not another operation's on the same handle): `Error::Timeout` only when
/// the lock was held elsewhere, the last retryable error of a one-round
/// step (a fencing token, a count check) when that is what it retried.
///
/// An operation that has every lock it waits for calls [`calls_only`]: from
/// then on it only makes calls to the lockers (an election's term and
/// proclamation, a semaphore's release of its line), so running out of
/// time there means they did not answer, not that a holder was in the way.
pub(crate) async fn give_up_after<T>(
    clock: &Clock,
    timeout: Duration,
    operation: impl std::future::Future<Output = Result<T, Error>>,
) -> Result<T, Error> {
    let watch = WaitWatch::new(clock);
    let scoped = OPERATION.scope(watch.watched.clone(), operation);
    match clock.timeout(timeout, scoped).await {
        Ok(result) => result,
        Err(_) => Err(match watch.gave_up() {
            Error::Timeout => watch.after_grant().unwrap_or(Error::Timeout),
            err => err,
        }),
    }
}

/// The current task's operation has every lock it waits for: see
/// [`give_up_after`].
pub(crate) fn calls_only() {
    if let Some(watch) = outer() {
        watch.rounds().calls_only = true;
    }
}

/// The time a quarantine refusal says is left: the duration after
/// "for another " in its reason, in Rust's `Debug` form (`55.9s`, `300ms`).
fn quarantine_left(err: &Error) -> Option<Duration> {
    let Error::LockerUnavailable { reason, .. } = err else {
        return None;
    };
    let (_, rest) = reason.split_once("for another ")?;
    let number_len = rest
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(rest.len());
    let number: f64 = rest[..number_len].parse().ok()?;
    let unit: String = rest[number_len..]
        .chars()
        .take_while(|c| c.is_alphabetic())
        .collect();
    let scale = match unit.as_str() {
        "s" => 1.0,
        "ms" => 1e-3,
        "µs" | "us" => 1e-6,
        "ns" => 1e-9,
        _ => return None,
    };
    Duration::try_from_secs_f64(number * scale).ok()
}

/// Where the acquires of one lock handle (and its clones) say which wait
/// is the latest, for [`DRWMutex::waiting`](crate::DRWMutex::waiting).
#[derive(Default)]
pub(crate) struct WaitBoard {
    latest: Mutex<Weak<Watched>>,
}

impl WaitBoard {
    /// A new wait begins: it is the latest until another begins.
    pub(crate) fn begin(&self, clock: &Clock) -> WaitWatch {
        let watch = WaitWatch::new(clock);
        *self.latest.lock().unwrap_or_else(PoisonError::into_inner) =
            Arc::downgrade(&watch.watched);
        watch
    }

    /// The status of the latest wait, while it waits.
    pub(crate) fn status(&self) -> Option<WaitStatus> {
        let latest = self
            .latest
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .upgrade()?;
        latest.status()
    }
}

/// One wait's rounds, as far as its status needs them. Dropped with the
/// wait, which takes it off the board.
pub(crate) struct WaitWatch {
    watched: Arc<Watched>,
}

impl WaitWatch {
    fn new(clock: &Clock) -> WaitWatch {
        WaitWatch {
            watched: Arc::new(Watched {
                began: clock.now(),
                rounds: Mutex::new(Rounds::default()),
            }),
        }
    }

    fn rounds(&self) -> std::sync::MutexGuard<'_, Rounds> {
        self.watched
            .rounds
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// The wait started a round (a new uid) with `state`.
    pub(crate) fn track(&self, state: &Arc<Acquisition>) {
        let mut rounds = self.rounds();
        rounds.previous = rounds.current.replace(state.clone());
        rounds.failed = None;
        rounds.calls_only = false;
    }

    /// A step of the operation failed with `err` and will be tried again:
    /// if the operation gives up before anything else happens, that is why.
    pub(crate) fn note(&self, err: &Error) {
        let mut rounds = self.rounds();
        rounds.current = None;
        rounds.previous = None;
        rounds.failed = Some(err.clone());
    }

    /// A lock of the operation was granted (`state`): what its waits said
    /// no longer holds.
    pub(crate) fn granted(&self, state: &Arc<Acquisition>) {
        *self.rounds() = Rounds {
            granted: Some((state.clone(), state.coord.clock.now())),
            ..Rounds::default()
        };
    }

    /// What the wait knows now; `None` before its first round.
    pub(crate) fn status(&self) -> Option<WaitStatus> {
        self.watched.status()
    }

    /// The error for a wait that gave up now.
    pub(crate) fn gave_up(&self) -> Error {
        let failed = self.rounds().failed.clone();
        match failed {
            // A one-round refusal, given up on: held elsewhere.
            Some(Error::WouldBlock) => Error::Timeout,
            Some(err) => err,
            None => self.status().map_or(Error::Timeout, WaitStatus::into_error),
        }
    }

    /// An operation that got its lock and then ran out of time in the calls
    /// that follow (a term, a proclamation, a count check) waited for no
    /// holder: its lockers did not answer in time. Names those whose calls
    /// failed since, or else every locker, as not having answered.
    fn after_grant(&self) -> Option<Error> {
        let rounds = self.rounds();
        if !rounds.calls_only || rounds.current.is_some() || rounds.failed.is_some() {
            return None;
        }
        let (state, at) = rounds.granted.clone()?;
        drop(rounds);
        let coord = &state.coord;
        let mut unreachable = coord.unreachable_since(at);
        if unreachable.is_empty() {
            let waited = seconds(coord.clock.now().saturating_duration_since(at));
            unreachable = coord
                .lockers
                .iter()
                .map(|l| Unreachable {
                    endpoint: l.endpoint(),
                    reason: format!("no answer from a quorum within {waited} after the grant"),
                })
                .collect();
        }
        Some(Error::QuorumUnavailable {
            answered: coord.lockers.len().saturating_sub(unreachable.len()),
            quorum: state.args.quorum,
            lockers: coord.lockers.len(),
            unreachable,
        })
    }
}

/// Notes `err`, retried by the current task's operation, on its watch.
pub(crate) fn note_retry(err: &Error) {
    if let Some(watch) = outer() {
        watch.note(err);
    }
}

struct Watched {
    began: Instant,
    rounds: Mutex<Rounds>,
}

#[derive(Default)]
struct Rounds {
    current: Option<Arc<Acquisition>>,
    /// The round before: its answers stand in for lockers the current
    /// round has not heard from yet.
    previous: Option<Arc<Acquisition>>,
    /// The error of the latest step that failed and will be retried, when
    /// that came after the latest round.
    failed: Option<Error>,
    /// The latest lock of the operation that was granted, and when, when
    /// nothing happened since.
    granted: Option<(Arc<Acquisition>, Instant)>,
    /// The operation said it has every lock it waits for.
    calls_only: bool,
}

impl Watched {
    fn status(&self) -> Option<WaitStatus> {
        let (current, previous) = {
            let rounds = self.rounds.lock().unwrap_or_else(PoisonError::into_inner);
            (rounds.current.clone()?, rounds.previous.clone())
        };
        let mut answers = current.answers();
        if let Some(previous) = previous {
            for (answer, before) in answers.iter_mut().zip(previous.answers()) {
                if answer.is_none() {
                    *answer = before;
                }
            }
        }
        Some(WaitStatus::of(
            &current.coord,
            current.args.quorum,
            &answers,
            self.began,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn quarantine(reason: &str) -> Error {
        Error::LockerUnavailable {
            endpoint: "a:1".into(),
            reason: reason.into(),
        }
    }

    #[test]
    fn the_time_left_is_read_from_a_quarantine_refusal() {
        let read = |r: &str| quarantine_left(&quarantine(r));
        assert_eq!(
            read("restarted recently; refusing new grants for another 55.9s"),
            Some(Duration::from_millis(55_900))
        );
        assert_eq!(
            read("refusing new grants for another 300ms; retry"),
            Some(Duration::from_millis(300))
        );
        assert_eq!(read("refusing new grants"), None);
        assert_eq!(read("for another -1s"), None);
        assert_eq!(read("for another 1e400s"), None);
        assert_eq!(read("for another 5 fortnights"), None);
    }

    fn status(granted: usize, held: usize, quarantined: &[Option<u64>]) -> WaitStatus {
        WaitStatus {
            lockers: 5,
            quorum: 3,
            granted,
            held_elsewhere: held,
            quarantined: quarantined
                .iter()
                .enumerate()
                .map(|(i, left)| Quarantined {
                    endpoint: format!("q{i}:1"),
                    left: left.map(Duration::from_secs),
                })
                .collect(),
            unreachable: Vec::new(),
            waited: Duration::from_secs(1),
        }
    }

    #[test]
    fn the_reason_follows_the_quorum() {
        assert_eq!(status(1, 2, &[]).reason(), WaitReason::HeldElsewhere);
        assert_eq!(status(0, 3, &[]).reason(), WaitReason::HeldElsewhere);
        assert_eq!(
            status(1, 0, &[Some(5), Some(9)]).reason(),
            WaitReason::Quarantine
        );
        assert_eq!(status(1, 0, &[Some(5)]).reason(), WaitReason::NoQuorum);
        assert!(matches!(status(1, 2, &[]).into_error(), Error::Timeout));
        assert!(matches!(
            status(1, 0, &[]).into_error(),
            Error::QuorumUnavailable { answered: 1, .. }
        ));
    }

    #[test]
    fn the_quarantine_ends_when_enough_lockers_are_out() {
        // One answered; two more are needed: the second soonest to end.
        assert_eq!(
            status(1, 0, &[Some(30), Some(5), Some(50)]).quarantine_left(),
            Some(Duration::from_secs(30))
        );
        assert_eq!(
            status(2, 0, &[Some(30), None]).quarantine_left(),
            Some(Duration::from_secs(30))
        );
        assert_eq!(status(1, 0, &[Some(30), None]).quarantine_left(), None);
        let text = status(1, 0, &[Some(56), Some(56)]).to_string();
        assert!(text.contains("2 of 5 lockers are in quarantine"), "{text}");
        assert!(text.contains("for 56s more"), "{text}");
    }
}
