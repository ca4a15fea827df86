//! Deciding who leads from the lockers' answers to a read.
//!
//! A leader holds the election's lock, and has its proclamation stored, on
//! a write quorum of lockers. An old value can linger on fewer lockers: a
//! resign or a cancelled campaign whose unlock missed a locker leaves its
//! copy there until the entry expires. So one copy proves nothing; what a
//! read reports must be *confirmed* by a write quorum of answers.
//!
//! Invariants of [`Tally::verdict`]:
//! * a term is reported only when a write quorum of answers carries it,
//!   with its value only when a write quorum of answers carries that very
//!   value (term and sequence): proclaims overwrite, so a value on fewer
//!   lockers (a proclaim that failed, or is on its way) proves nothing,
//!   and at most one value can be on a write quorum;
//! * when the term is on a write quorum but no value of it can be (the
//!   answers still missing could not make one), the verdict is
//!   [`Verdict::ValueSplit`]: the leader leads, its value is unsettled;
//! * a term is passed over only when so many answers lack it that it cannot
//!   be on a write quorum of lockers;
//! * "no leader" is reported only when a write quorum answered and every
//!   term seen was passed over.
//!
//! Anything else waits for more answers. Two write quorums meet, so once a
//! resign is confirmed by a write quorum, no later read confirms its term.

use crate::locker::proclamation::Proclamation;

/// The answers to one read, as they arrive.
#[derive(Debug, Default)]
pub(crate) struct Tally {
    answered: usize,
    /// Per term seen, newest first: the answers that carry it, newest
    /// value first.
    terms: Vec<(u64, Vec<Proclamation>)>,
}

/// What the answers so far settle.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// The leader (or `None`), confirmed by a write quorum of answers.
    Decided(Option<Proclamation>),
    /// The leader of `term` leads (a write quorum carries the term), but
    /// no value of it is on a write quorum, nor can be with the answers
    /// still missing.
    ValueSplit { term: u64 },
    /// Not settled yet: `term` (the newest term still in question) is held
    /// by `holding` answers, too few to confirm it and too many to rule it
    /// out. `None` when fewer than a quorum answered at all.
    Open { term: Option<u64>, holding: usize },
}

impl Tally {
    /// Counts one locker's answer.
    pub(crate) fn add(&mut self, found: Option<Proclamation>) {
        self.answered += 1;
        let Some(p) = found else { return };
        match self.terms.iter_mut().find(|(term, _)| *term == p.term) {
            Some((_, carried)) => {
                let at = carried
                    .iter()
                    .position(|q| p.is_newer_than(q))
                    .unwrap_or(carried.len());
                carried.insert(at, p);
            }
            None => {
                self.terms.push((p.term, vec![p]));
                self.terms.sort_by_key(|entry| std::cmp::Reverse(entry.0));
            }
        }
    }

    /// Lockers that answered.
    pub(crate) fn answered(&self) -> usize {
        self.answered
    }

    /// What the answers so far settle, among `lockers` lockers with write
    /// quorum `quorum`.
    pub(crate) fn verdict(&self, lockers: usize, quorum: usize) -> Verdict {
        // More than this many lockers lacking a term keep it off every
        // write quorum.
        let may_lack = lockers.saturating_sub(quorum);
        for (term, carried) in &self.terms {
            let count = carried.len();
            if count >= quorum {
                // `carried` is sorted newest first, so equal values are
                // adjacent. At most one value can be on a write quorum.
                let missing = lockers.saturating_sub(self.answered);
                let mut could_settle = false;
                for run in carried.chunk_by(|a, b| a.seq == b.seq) {
                    if run.len() >= quorum {
                        return Verdict::Decided(Some(run[0].clone()));
                    }
                    could_settle |= run.len() + missing >= quorum;
                }
                return if could_settle || missing >= quorum {
                    Verdict::Open {
                        term: Some(*term),
                        holding: count,
                    }
                } else {
                    Verdict::ValueSplit { term: *term }
                };
            }
            if self.answered - count <= may_lack {
                return Verdict::Open {
                    term: Some(*term),
                    holding: count,
                };
            }
            // Ruled out: a leftover copy, not a leader. Look at older terms.
        }
        if self.answered >= quorum {
            // Every term seen is ruled out, and so is any unseen one: a
            // quorum of answers lacks it, and a quorum is more than
            // `may_lack`.
            Verdict::Decided(None)
        } else {
            Verdict::Open {
                term: None,
                holding: 0,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn p(term: u64, seq: u64) -> Option<Proclamation> {
        Some(Proclamation {
            term,
            seq,
            value: Arc::from(&b"v"[..]),
        })
    }

    fn tally(answers: &[Option<Proclamation>]) -> Tally {
        let mut t = Tally::default();
        for a in answers {
            t.add(a.clone());
        }
        t
    }

    #[test]
    fn a_leader_is_reported_with_the_value_a_write_quorum_carries() {
        let t = tally(&[p(4, 2), p(4, 2), p(4, 1), p(4, 2)]);
        assert_eq!(t.verdict(5, 3), Verdict::Decided(p(4, 2)));
        // Three values on five lockers: the two missing answers could
        // still put seq 0, 1 or 2 on a quorum.
        let t = tally(&[p(4, 0), p(4, 2), p(4, 1)]);
        assert_eq!(
            t.verdict(5, 3),
            Verdict::Open {
                term: Some(4),
                holding: 3
            }
        );
    }

    #[test]
    fn a_value_whose_proclaim_reached_one_locker_is_not_reported() {
        // The leader's proclaim of seq 1 reached one locker of three and
        // failed: the value on a write quorum is seq 0, in any order.
        for answers in [
            [p(5, 1), p(5, 0), p(5, 0)],
            [p(5, 0), p(5, 1), p(5, 0)],
            [p(5, 0), p(5, 0), p(5, 1)],
        ] {
            let mut t = Tally::default();
            let mut verdict = None;
            for a in answers {
                t.add(a);
                if let Verdict::Decided(found) = t.verdict(3, 2) {
                    verdict = Some(found);
                    break;
                }
            }
            assert_eq!(verdict, Some(p(5, 0)));
        }
    }

    #[test]
    fn a_value_a_write_quorum_stored_is_reported_when_the_old_value_answers_first() {
        let mut t = tally(&[p(5, 0), p(5, 1)]);
        assert!(matches!(t.verdict(3, 2), Verdict::Open { .. }));
        t.add(p(5, 1));
        assert_eq!(t.verdict(3, 2), Verdict::Decided(p(5, 1)));
    }

    #[test]
    fn values_spread_over_the_lockers_leave_the_leaders_value_unsettled() {
        // Two failed proclaims: "one" on one locker, "two" on two, the
        // campaign's value on the other two. No value is on three of five.
        let t = tally(&[p(6, 2), p(6, 2), p(6, 1), p(6, 0), p(6, 0)]);
        assert_eq!(t.verdict(5, 3), Verdict::ValueSplit { term: 6 });
    }

    #[test]
    fn a_leftover_copy_on_one_locker_is_not_reported() {
        // The resigned leader's unlock missed one of three lockers.
        let t = tally(&[p(7, 0), None, None]);
        assert_eq!(t.verdict(3, 2), Verdict::Decided(None));
    }

    #[test]
    fn a_leftover_copy_waits_for_the_answer_that_settles_it() {
        let t = tally(&[p(7, 0), None]);
        assert_eq!(
            t.verdict(3, 2),
            Verdict::Open {
                term: Some(7),
                holding: 1
            }
        );
        let t = tally(&[p(7, 0), None, p(7, 0)]);
        assert_eq!(t.verdict(3, 2), Verdict::Decided(p(7, 0)));
    }

    #[test]
    fn a_ruled_out_newer_term_leaves_the_older_leader_to_be_confirmed() {
        // A cancelled campaign's value reached one locker of five.
        let t = tally(&[p(9, 0), p(8, 3), p(8, 3), p(8, 3), p(8, 2)]);
        assert_eq!(t.verdict(5, 3), Verdict::Decided(p(8, 3)));
    }

    #[test]
    fn nobody_leads_once_a_quorum_answered_with_nothing() {
        assert_eq!(tally(&[None, None]).verdict(3, 2), Verdict::Decided(None));
        assert_eq!(
            tally(&[None]).verdict(3, 2),
            Verdict::Open {
                term: None,
                holding: 0
            }
        );
    }

    #[test]
    fn one_locker_decides_alone() {
        assert_eq!(tally(&[p(1, 0)]).verdict(1, 1), Verdict::Decided(p(1, 0)));
        assert_eq!(tally(&[None]).verdict(1, 1), Verdict::Decided(None));
    }

    #[test]
    fn every_answer_set_is_settled_once_all_lockers_answered() {
        // Exhaustive over small clusters: with every answer in, the verdict
        // is never open, and a reported term is on a write quorum.
        for n in 1..=5usize {
            let quorum = n / 2 + 1;
            let options = [None, p(1, 0), p(2, 0), p(2, 1), p(3, 0)];
            let mut idx = vec![0usize; n];
            loop {
                let answers: Vec<_> = idx.iter().map(|&i| options[i].clone()).collect();
                match tally(&answers).verdict(n, quorum) {
                    Verdict::Decided(Some(leader)) => {
                        let on = answers
                            .iter()
                            .filter(|a| a.as_ref() == Some(&leader))
                            .count();
                        assert!(on >= quorum, "{answers:?}");
                    }
                    Verdict::ValueSplit { term } => {
                        let on = answers
                            .iter()
                            .filter(|a| a.as_ref().is_some_and(|a| a.term == term))
                            .count();
                        assert!(on >= quorum, "{answers:?}");
                    }
                    Verdict::Decided(None) => {}
                    open => panic!("{answers:?} left {open:?}"),
                }
                let mut k = 0;
                while k < n {
                    idx[k] += 1;
                    if idx[k] < options.len() {
                        break;
                    }
                    idx[k] = 0;
                    k += 1;
                }
                if k == n {
                    break;
                }
            }
        }
    }
}
