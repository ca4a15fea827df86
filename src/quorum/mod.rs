//! The arithmetic the safety argument rests on: quorum sizes for reads and
//! writes and the tally that decides a round (here), fencing tokens and
//! the gate that checks them (`fence`, `fencing`), the clocks that
//! leases are measured with (`clock`), and the one timer a fan-out arms for
//! its calls' deadlines (`deadline`).
//!
//! With `n` lockers a write needs `W = ⌊n/2⌋ + 1` grants and a read needs
//! `R = ⌈n/2⌉`. Safety rests on two inequalities:
//!
//! * `R + W > n`: any read quorum and any write quorum share at least one
//!   locker, and that locker refuses to grant both, so a reader and a writer
//!   can never both win.
//! * `2W > n`: any two write quorums share a locker, so two writers can never
//!   both win.
//!
//! The often-quoted "`n/2` for reads" is unsafe for odd `n`: with `n = 5` a
//! reader granted by 2 lockers and a writer granted by the other 3 would both
//! hold the lock, because `2 + 3` is not greater than `5`. Rounding the read
//! quorum up closes that gap while keeping reads as cheap as they can be.
//!
//! ```
//! use quorum_lock::quorum::{read_quorum, write_quorum};
//!
//! assert_eq!((read_quorum(5), write_quorum(5)), (3, 3));
//! assert_eq!((read_quorum(4), write_quorum(4)), (2, 3));
//! assert!(read_quorum(5) + write_quorum(5) > 5);
//! ```

pub(crate) mod clock;
pub(crate) mod deadline;
pub(crate) mod fence;
pub(crate) mod fencing;

/// Grants a write lock needs from `n` lockers: `⌊n/2⌋ + 1`.
///
/// ```
/// assert_eq!(quorum_lock::quorum::write_quorum(4), 3);
/// ```
pub const fn write_quorum(n: usize) -> usize {
    n / 2 + 1
}

/// Grants a read lock needs from `n` lockers: `⌈n/2⌉` (at least 1).
///
/// ```
/// assert_eq!(quorum_lock::quorum::read_quorum(5), 3);
/// ```
pub const fn read_quorum(n: usize) -> usize {
    let q = n.div_ceil(2);
    if q == 0 {
        1
    } else {
        q
    }
}

/// How one locker answered a lock call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Answer {
    /// The locker granted the lock.
    Granted,
    /// The locker answered and refused: someone else holds it.
    Refused,
    /// The locker errored or did not answer in time; whether it applied the
    /// request is unknown.
    Failed,
    /// The locker refused for now and keeps the waiter's place in line: a
    /// refusal that must still be unlocked to give the place up.
    Queued,
}

/// What a finished tally decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// A quorum granted.
    Granted,
    /// Enough lockers answered, but too many refused: the lock is held.
    Conflict,
    /// Too few lockers answered to decide.
    Unavailable,
}

/// Counts the answers of one fan-out against a quorum.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Tally {
    lockers: usize,
    quorum: usize,
    granted: usize,
    refused: usize,
    failed: usize,
}

impl Tally {
    pub(crate) fn new(lockers: usize, quorum: usize) -> Self {
        Tally {
            lockers,
            quorum,
            granted: 0,
            refused: 0,
            failed: 0,
        }
    }

    pub(crate) fn record(&mut self, answer: Answer) {
        match answer {
            Answer::Granted => self.granted += 1,
            Answer::Refused | Answer::Queued => self.refused += 1,
            Answer::Failed => self.failed += 1,
        }
    }

    pub(crate) fn granted(&self) -> usize {
        self.granted
    }

    pub(crate) fn refused(&self) -> usize {
        self.refused
    }

    /// Lockers that answered, either way.
    pub(crate) fn answered(&self) -> usize {
        self.granted + self.refused
    }

    /// The verdict once it can no longer change, or `None` while the lockers
    /// still pending could tip it either way.
    pub(crate) fn verdict(&self) -> Option<Verdict> {
        if self.granted >= self.quorum {
            return Some(Verdict::Granted);
        }
        let pending = self.lockers - self.granted - self.refused - self.failed;
        if self.granted + pending >= self.quorum {
            return None;
        }
        Some(self.failure())
    }

    /// Why the round failed. It is a conflict when the refusals alone rule
    /// out a quorum, or when enough lockers answered that only refusals can
    /// explain the failure; otherwise too few answered. Lockers still pending
    /// when the round is decided early count as neither.
    pub(crate) fn failure(&self) -> Verdict {
        if self.granted >= self.quorum {
            Verdict::Granted
        } else if self.refused > self.lockers - self.quorum || self.answered() >= self.quorum {
            Verdict::Conflict
        } else {
            Verdict::Unavailable
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Brute force over every pair of subsets: two quorums of sizes `a` and
    /// `b` drawn from `n` lockers must share a locker.
    fn always_intersect(n: usize, a: usize, b: usize) -> bool {
        let all = 1u32 << n;
        let of_size = |k: usize| (0..all).filter(move |s| s.count_ones() as usize == k);
        of_size(a).all(|x| of_size(b).all(|y| x & y != 0))
    }

    #[test]
    fn matches_the_dsync_table() {
        let table = [
            (1, 1, 1),
            (2, 1, 2),
            (3, 2, 2),
            (4, 2, 3),
            (5, 3, 3),
            (6, 3, 4),
            (8, 4, 5),
            (16, 8, 9),
            (32, 16, 17),
        ];
        for (n, r, w) in table {
            assert_eq!((read_quorum(n), write_quorum(n)), (r, w), "n = {n}");
        }
    }

    #[test]
    fn quorums_intersect_for_every_size_up_to_32() {
        for n in 1..=32 {
            let (r, w) = (read_quorum(n), write_quorum(n));
            assert!(
                r + w > n,
                "n = {n}: a read and a write quorum can be disjoint"
            );
            assert!(2 * w > n, "n = {n}: two write quorums can be disjoint");
            assert!(r <= n && w <= n, "n = {n}: quorum larger than the cluster");
        }
        // Exhaustive subset check where it is affordable.
        for n in 1..=12 {
            let (r, w) = (read_quorum(n), write_quorum(n));
            assert!(always_intersect(n, r, w), "n = {n}: read/write");
            assert!(always_intersect(n, w, w), "n = {n}: write/write");
        }
    }

    #[test]
    fn quorums_are_minimal() {
        // One fewer grant for either mode would allow a disjoint pair.
        for n in 2..=32 {
            assert!(read_quorum(n) - 1 + write_quorum(n) <= n, "n = {n}");
            assert!(2 * (write_quorum(n) - 1) <= n, "n = {n}");
        }
    }

    #[test]
    fn half_for_reads_is_unsafe_for_odd_n() {
        let naive_read = 5 / 2;
        assert!(!always_intersect(5, naive_read, write_quorum(5)));
        assert!(always_intersect(5, read_quorum(5), write_quorum(5)));
    }

    #[test]
    fn tally_decides_early_and_classifies_failures() {
        let mut t = Tally::new(5, 3);
        t.record(Answer::Granted);
        t.record(Answer::Granted);
        assert_eq!(t.verdict(), None);
        t.record(Answer::Granted);
        assert_eq!(t.verdict(), Some(Verdict::Granted));

        let mut t = Tally::new(5, 3);
        t.record(Answer::Refused);
        t.record(Answer::Refused);
        assert_eq!(t.verdict(), None);
        t.record(Answer::Refused);
        assert_eq!(t.verdict(), Some(Verdict::Conflict));

        let mut t = Tally::new(5, 3);
        for _ in 0..3 {
            t.record(Answer::Failed);
        }
        assert_eq!(t.verdict(), Some(Verdict::Unavailable));

        let mut t = Tally::new(5, 3);
        t.record(Answer::Granted);
        t.record(Answer::Refused);
        assert_eq!(t.failure(), Verdict::Unavailable);
        t.record(Answer::Refused);
        assert_eq!(t.failure(), Verdict::Conflict);

        // Even n: two refusals out of four already rule out a write quorum of
        // three, whatever the two slow lockers would say.
        let mut t = Tally::new(4, 3);
        t.record(Answer::Refused);
        t.record(Answer::Refused);
        assert_eq!(t.verdict(), Some(Verdict::Conflict));
        let mut t = Tally::new(4, 3);
        t.record(Answer::Refused);
        t.record(Answer::Failed);
        assert_eq!(t.verdict(), Some(Verdict::Unavailable));
    }
}
