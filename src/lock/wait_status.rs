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
use std::time::Duration;

use tokio::time::Instant;

use crate::error::{seconds, Unreachable};
use crate::lock::coordinator::Coordinator;
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
    /// Lockers asked a moment ago that have not answered yet: less time
    /// has passed than twice what their latest answer took, so they count
    /// neither as answering nor as out of reach.
    pub answering: Vec<String>,
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
    /// Lockers that can make a quorum were asked a moment ago and have not
    /// all answered: nothing is known against the wait yet. A wait that
    /// gives up now (a deadline of a few round trips) fails with
    /// [`Error::Timeout`]: it ran out of time, not out of lockers.
    Answering,
}

impl WaitStatus {
    /// Why the wait is not granted.
    pub fn reason(&self) -> WaitReason {
        // Those still answering may yet answer either way: they count as
        // reachable, never as granting or refusing.
        // Saturating: the fields are public, and a caller may set any.
        let reachable = self
            .granted
            .saturating_add(self.held_elsewhere)
            .saturating_add(self.answering.len());
        // Grants alone do not block: a quorum of them only waits to be
        // confirmed, which no holder elsewhere causes.
        let held = self.held_elsewhere > 0
            && (reachable >= self.quorum
                || self.held_elsewhere > self.lockers.saturating_sub(self.quorum));
        if held || self.granted >= self.quorum {
            WaitReason::HeldElsewhere
        } else if reachable >= self.quorum {
            // A quorum may yet come without the lockers in quarantine.
            WaitReason::Answering
        } else if !self.quarantined.is_empty()
            && reachable.saturating_add(self.quarantined.len()) >= self.quorum
        {
            WaitReason::Quarantine
        } else {
            WaitReason::NoQuorum
        }
    }

    /// How long until enough lockers are out of quarantine for a quorum of
    /// the reachable ones (those that granted, refused or are still
    /// answering), when they said; `None` when quarantine is not what the
    /// wait waits for.
    pub fn quarantine_left(&self) -> Option<Duration> {
        if self.reason() != WaitReason::Quarantine {
            return None;
        }
        // Reachable as `reason` counts them: those still answering too.
        let answered = self
            .granted
            .saturating_add(self.held_elsewhere)
            .saturating_add(self.answering.len());
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
            WaitReason::HeldElsewhere | WaitReason::Answering => Error::Timeout,
            WaitReason::Quarantine | WaitReason::NoQuorum => self.unavailable(),
        }
    }

    /// The error for a round that too few lockers answered:
    /// [`Error::Quarantined`] when quarantine is why, else
    /// [`Error::QuorumUnavailable`].
    pub(crate) fn unavailable(self) -> Error {
        let answered = self.granted.saturating_add(self.held_elsewhere);
        if self.reason() == WaitReason::Quarantine {
            return Error::Quarantined {
                left: self.quarantine_left(),
                quarantined: self.quarantined.into_iter().map(|q| q.endpoint).collect(),
                quorum: self.quorum,
                lockers: self.lockers,
            };
        }
        let waited = seconds(self.waited);
        let mut unreachable = self.unreachable;
        unreachable.extend(self.answering.into_iter().map(|endpoint| Unreachable {
            endpoint,
            reason: format!("no answer yet after {waited}"),
        }));
        Error::QuorumUnavailable {
            answered: answered.saturating_add(self.quarantined.len()),
            quorum: self.quorum,
            lockers: self.lockers,
            unreachable,
        }
    }

    /// The status of a wait that began at `began`, from how each locker
    /// answered (`None`: not yet) the round sent at `asked`, with the send
    /// time of the request each answered. `ended` holds, for a round that
    /// has ended (a `try_lock`'s), why each of its failed calls failed:
    /// those are judged as [`of_round`](Self::of_round) judges them.
    pub(crate) fn of(
        coord: &Coordinator,
        quorum: usize,
        (answers, since): (&[Option<Answer>], &[Instant]),
        (began, asked): (Instant, Instant),
        ended: &[(usize, Error)],
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
            answering: Vec::new(),
            waited,
        };
        for (index, answer) in answers.iter().enumerate() {
            // A locker that no longer honours the lease is not counted on,
            // whatever it said: out of reach, saying why.
            if let Err(err) = coord.honours_lease(index) {
                status.unreachable.push(Unreachable {
                    endpoint: coord.lockers[index].endpoint(),
                    reason: err.locker_reason(),
                });
                continue;
            }
            // A locker that refused or queued this round and has since been
            // found failing, or left a call asked since (the re-check that
            // renews the place, say) unanswered too long, is out of reach,
            // not holding the lock elsewhere: what it said is no news of it
            // any more.
            let answer = match answer {
                Some(Answer::Refused | Answer::Queued)
                    if coord.gone_since(index, since.get(index).copied().unwrap_or(asked), now) =>
                {
                    &None
                }
                answer => answer,
            };
            match answer {
                Some(Answer::Granted) => status.granted += 1,
                Some(Answer::Refused | Answer::Queued) => status.held_elsewhere += 1,
                Some(Answer::Failed) => match ended.iter().find(|(i, _)| *i == index) {
                    Some((_, err)) => status.failed_round(coord, index, err, (began, asked, now)),
                    None => status.not_answered(coord, index, true, (began, asked, now)),
                },
                None => status.not_answered(coord, index, false, (began, asked, now)),
            }
        }
        status
    }

    /// The status of a one-round operation (a fencing draw, a
    /// proclamation) that began at `began` and stopped short of its quorum,
    /// from how each locker ended it: judged as a wait judges its lockers,
    /// so that both say the same of the same lockers.
    pub(crate) fn of_round(
        coord: &Coordinator,
        quorum: usize,
        ends: &[RoundEnd],
        began: Instant,
    ) -> WaitStatus {
        let now = coord.clock.now();
        let mut status = WaitStatus {
            lockers: ends.len(),
            quorum,
            granted: 0,
            held_elsewhere: 0,
            quarantined: Vec::new(),
            unreachable: Vec::new(),
            answering: Vec::new(),
            waited: now.saturating_duration_since(began),
        };
        for (index, end) in ends.iter().enumerate() {
            match end {
                RoundEnd::Counted => status.granted += 1,
                RoundEnd::Declined => {}
                RoundEnd::Pending => status.not_answered(coord, index, false, (began, began, now)),
                RoundEnd::Failed(err) => {
                    status.failed_round(coord, index, err, (began, began, now));
                }
            }
        }
        status
    }

    /// Files locker `index`, whose call of a round that has ended failed
    /// with `err`, as [`not_answered`](Self::not_answered) does, except
    /// when that failure is over already: the round still ended without
    /// it. A refusal for quarantine whose time ran out was an answer that
    /// holds nothing up any more, as a declined call: counted neither way,
    /// and not named. Any other failure is why the round ended without it,
    /// whatever it answered since.
    fn failed_round(
        &mut self,
        coord: &Coordinator,
        index: usize,
        err: &Error,
        times: (Instant, Instant, Instant),
    ) {
        let answering = self.answering.len();
        self.not_answered(coord, index, true, times);
        if self.answering.len() > answering {
            self.answering.pop();
            if !err.is_quarantine() {
                self.unreachable.push(Unreachable {
                    endpoint: coord.lockers[index].endpoint(),
                    reason: err.locker_reason(),
                });
            }
        }
    }

    /// Files locker `index`, which has not answered the current round
    /// (`failed`: its call failed; else it is still on its way), as in
    /// quarantine, out of reach, or still answering, by what the
    /// coordinator knows of it: for a wait that began at `began` and a
    /// round asked at `asked`, at `now`.
    fn not_answered(
        &mut self,
        coord: &Coordinator,
        index: usize,
        failed: bool,
        (began, asked, now): (Instant, Instant, Instant),
    ) {
        let status = self;
        let endpoint = coord.lockers[index].endpoint();
        let times = coord.call_times(index);
        // The latest failure says why only while it is not
        // over (a refusal of this round is over once the
        // locker answered another call; one for quarantine,
        // once its time is up), and, for a
        // locker that has not answered this wait yet, when it
        // had answered before it or the wait had begun: a
        // failure of a locker never heard from, older than
        // the wait, may be over unseen.
        // (A refusal for quarantine is the locker's own word,
        // with its own end: never "unseen".)
        let note = coord.current_failure(index).filter(|note| {
            failed
                || note.at >= began
                || note.error.is_quarantine()
                || coord.answered_before(index, note)
        });
        // Silent since the earliest call it left unanswered,
        // not since this round's: a poll that asks again does
        // not restart it.
        let silent = now.saturating_duration_since(times.silent_since.unwrap_or(asked));
        // A locker that refused for quarantine and has since
        // left a call unanswered too long is out of reach, not
        // in quarantine: it went down or away meanwhile.
        // Only calls asked since the refusal count: one asked
        // before it (lost in a restart, say) is no news of the
        // locker, which answered since.
        let gone_silent = note
            .as_ref()
            .filter(|note| note.error.is_quarantine())
            .and_then(|note| coord.open_since(index, note.at))
            .map(|since| now.saturating_duration_since(since))
            .filter(|quiet| coord.too_long(index, *quiet));
        match note {
            Some(_) if gone_silent.is_some() => status.unreachable.push(Unreachable {
                endpoint,
                reason: format!(
                    "no answer yet after {}",
                    seconds(gone_silent.unwrap_or(silent))
                ),
            }),
            Some(note) if note.error.is_quarantine() => {
                let since = now.saturating_duration_since(note.at);
                status.quarantined.push(Quarantined {
                    endpoint,
                    left: note
                        .error
                        .quarantine_time_left()
                        .map(|left| left.saturating_sub(since)),
                });
            }
            Some(note) => status.unreachable.push(Unreachable {
                endpoint,
                reason: note.error.locker_reason(),
            }),
            // Its refusal of this round is over (an answer since, or,
            // for quarantine, its time ran out) and nothing is asked of
            // it now: it answers, and is asked again at the next
            // attempt.
            None if failed && times.silent_since.is_none() => status.answering.push(endpoint),
            // Asked less than twice as long ago as its latest
            // answer took (and a moment): slow for now, not
            // out of reach.
            None if !coord.too_long(index, silent) => status.answering.push(endpoint),
            None => status.unreachable.push(Unreachable {
                endpoint,
                reason: format!("no answer yet after {}", seconds(silent)),
            }),
        }
    }
}

/// How a locker ended a one-round operation, for the error of one that
/// stopped short of its quorum ([`WaitStatus::of_round`]).
#[derive(Debug, Clone)]
pub(crate) enum RoundEnd {
    /// It answered in a way that counts towards the quorum.
    Counted,
    /// It answered in a way that does not count (it does not hold the
    /// lock): neither towards the quorum nor out of reach.
    Declined,
    /// Its call failed, with this error.
    Failed(Error),
    /// Its call was still on its way when the operation stopped.
    Pending,
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
            WaitReason::Answering => write!(
                f,
                "asked a moment ago, waiting for {} of {n} lockers to answer ({})",
                self.answering.len(),
                self.answering.join(", ")
            ),
            WaitReason::NoQuorum => {
                let reachable = n.saturating_sub(self.unreachable.len());
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
        let read = |r: &str| quarantine(r).quarantine_time_left();
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
            answering: Vec::new(),
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
    fn lockers_still_answering_count_as_reachable_for_no_side() {
        let answering = |granted, held, n: usize| WaitStatus {
            answering: (0..n).map(|i| format!("a{i}:1")).collect(),
            ..status(granted, held, &[])
        };
        // One granted, two still answering: the quorum may yet come.
        let coming = answering(1, 0, 2);
        assert_eq!(coming.reason(), WaitReason::Answering);
        assert!(matches!(coming.clone().into_error(), Error::Timeout));
        assert!(coming
            .to_string()
            .contains("waiting for 2 of 5 lockers to answer"));
        // One held elsewhere among them: a holder is known.
        assert_eq!(answering(1, 1, 1).reason(), WaitReason::HeldElsewhere);
        // Too few even if they all answer.
        assert_eq!(answering(1, 0, 1).reason(), WaitReason::NoQuorum);
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
