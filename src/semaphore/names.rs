//! The resource names a semaphore's locks are taken on, and how the number
//! of permits is written into them so that lockers can tell two counts apart.

use crate::locker::args::validate_names;
use crate::Error;

/// The prefix of every resource a semaphore's locks are taken on.
pub const SEMAPHORE_PREFIX: &str = "semaphore/";

/// The most permits a semaphore may have.
///
/// Each permit is a lock of its own (see [`Semaphore`](crate::Semaphore)),
/// and a waiter at the head of the line waits on all of them at once, so a
/// semaphore of `k` permits costs up to `k` calls per locker to wait; a
/// thousand keeps that bounded.
pub const MAX_PERMITS: usize = 1000;

/// How many binary digits the permit count is written with in the count's
/// names: enough for [`MAX_PERMITS`].
pub(super) const COUNT_BITS: usize = (usize::BITS - MAX_PERMITS.leading_zeros()) as usize;

const _: () = assert!(MAX_PERMITS < 1 << COUNT_BITS && MAX_PERMITS >= 1 << (COUNT_BITS - 1));

/// The base a slot's lock spells its holder's count in (`held/I/D/V`):
/// two digits, low then high, so that a slot's lock carries two names
/// besides `permit/I`.
pub(super) const SPELL_BASE: usize = 32;

/// Which digit of the spelled count a `held` name carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Digit {
    /// The count modulo [`SPELL_BASE`]: `held/I/0/V`.
    Low = 0,
    /// The count divided by [`SPELL_BASE`]: `held/I/1/V`.
    High = 1,
}

impl Digit {
    /// Digit `self` of `count`.
    pub(super) fn of(self, count: usize) -> usize {
        match self {
            Digit::Low => count % SPELL_BASE,
            Digit::High => count / SPELL_BASE,
        }
    }
}

const _: () = assert!(SPELL_BASE * SPELL_BASE > MAX_PERMITS);
// A read-out of one value covers every slot in one lock call.
const _: () = assert!(MAX_PERMITS <= crate::locker::args::MAX_RESOURCES);

/// Every name a semaphore takes locks on.
#[derive(Debug, Clone)]
pub(super) struct Names {
    /// `semaphore/` + the semaphore's name: the stem of every other name.
    pub(super) base: String,
    /// The line every acquirer waits in, a write lock held while choosing a
    /// permit.
    pub(super) queue: String,
    /// One write lock per permit, each on `permit/I` and on the holder's
    /// count spelled for that slot, `held/I/D/V` (digit D of the count in
    /// base [`SPELL_BASE`] is V). Only a slot's holder, or a process of the
    /// same count that takes or waits for the slot, locks a slot's `held`
    /// names, so a `held` name of another count, found locked, is a process
    /// of that count.
    pub(super) permits: Vec<Vec<String>>,
    /// The count's binary digits, `count-bit/J/V`, which every holder
    /// keeps the read lock on.
    pub(super) count: Vec<String>,
    /// The `count-bit` names with every value flipped. A new holder takes
    /// the write lock on these once (the check), and that fails while
    /// anyone holds a count that differs from its own in any digit, or
    /// while another check, or one left behind, holds them.
    pub(super) other_counts: Vec<String>,
}

impl Names {
    pub(super) fn new(name: &str, permits: usize) -> Result<Names, Error> {
        if name.is_empty() {
            return Err(Error::invalid("a semaphore needs a name"));
        }
        if permits == 0 || permits > MAX_PERMITS {
            return Err(Error::invalid(format!(
                "a semaphore has 1 to {MAX_PERMITS} permits; {permits} were asked for"
            )));
        }
        let base = format!("{SEMAPHORE_PREFIX}{name}");
        let bits = |flipped: bool| -> Vec<String> {
            (0..COUNT_BITS)
                .map(|bit| {
                    let value = (permits >> bit & 1 == 1) != flipped;
                    format!("{base}/count-bit/{bit}/{}", u8::from(value))
                })
                .collect()
        };
        let slot = |i: usize| -> Vec<String> {
            let mut names = vec![
                permit(&base, i),
                held(&base, i, Digit::Low, Digit::Low.of(permits)),
                held(&base, i, Digit::High, Digit::High.of(permits)),
            ];
            // Lock calls carry sorted names.
            names.sort_unstable();
            names
        };
        let names = Names {
            queue: format!("{base}/queue"),
            permits: (0..permits).map(slot).collect(),
            count: bits(false),
            other_counts: bits(true),
            base,
        };
        // The longest names are the `count-bit` digits' (`held/999/1/31`
        // is shorter than `count-bit/9/1`).
        validate_names(std::slice::from_ref(&names.queue))?;
        validate_names(&names.permits[permits - 1])?;
        validate_names(&names.count)?;
        Ok(names)
    }
}

/// Slot `slot`'s own name.
fn permit(base: &str, slot: usize) -> String {
    format!("{base}/permit/{slot}")
}

/// The names of slots `slots`, sorted.
pub(super) fn permit_names(base: &str, slots: std::ops::Range<usize>) -> Vec<String> {
    let mut names: Vec<String> = slots.map(|i| permit(base, i)).collect();
    names.sort_unstable();
    names
}

/// The name that says, for slot `slot`, that digit `digit` of its holder's
/// count is `value`.
fn held(base: &str, slot: usize, digit: Digit, value: usize) -> String {
    format!("{base}/held/{slot}/{}/{value}", digit as u8)
}

/// The slots a process whose count has `high` as its high digit can hold:
/// `0 .. slots_below(high)`.
pub(super) fn slots_below(high: usize) -> usize {
    (SPELL_BASE * (high + 1)).min(MAX_PERMITS)
}

/// What a read-out of one value reads: the `held` names that say digit
/// `digit` is `value`, for slots `0..slots`, sorted. Only processes whose
/// count has that digit lock these.
pub(super) fn held_names(base: &str, digit: Digit, value: usize, slots: usize) -> Vec<String> {
    let mut names: Vec<String> = (0..slots).map(|i| held(base, i, digit, value)).collect();
    names.sort_unstable();
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_counts_share_no_digit_name_where_they_differ() {
        let two = Names::new("s", 2).unwrap();
        let three = Names::new("s", 3).unwrap();
        // 2 = 0b10 and 3 = 0b11 differ in bit 0: 3's digit is one of 2's
        // flipped digits, which 2 write-locks to check.
        assert!(three.count.iter().any(|n| two.other_counts.contains(n)));
        assert!(!two.count.iter().any(|n| two.other_counts.contains(n)));
    }

    #[test]
    fn a_slot_spells_its_count_where_only_other_counts_read() {
        let base = "semaphore/s";
        let three = Names::new("s", 3).unwrap();
        let thousand = Names::new("s", 1000).unwrap();
        // 3 is (low 3, high 0); 1000 is (low 8, high 31).
        assert_eq!(
            three.permits[2],
            [
                "semaphore/s/held/2/0/3",
                "semaphore/s/held/2/1/0",
                "semaphore/s/permit/2"
            ]
        );
        assert!(thousand.permits[999].contains(&"semaphore/s/held/999/0/8".to_string()));
        assert!(thousand.permits[999].contains(&"semaphore/s/held/999/1/31".to_string()));
        // What a read-out by 2 reads (every value of each digit but 2's own,
        // over the slots of that value) meets 3's and 1000's slots, and no
        // slot of 2's own.
        let two = Names::new("s", 2).unwrap();
        let read_out: Vec<String> = [Digit::Low, Digit::High]
            .into_iter()
            .flat_map(|d| {
                (0..SPELL_BASE)
                    .filter(move |&v| v != d.of(2))
                    .flat_map(move |v| held_names(base, d, v, MAX_PERMITS))
            })
            .collect();
        for slot in three.permits.iter().chain(&thousand.permits) {
            assert!(slot.iter().any(|n| read_out.contains(n)), "{slot:?}");
        }
        for slot in &two.permits {
            assert!(!slot.iter().any(|n| read_out.contains(n)), "{slot:?}");
        }
        // A count with high digit h holds slots below slots_below(h).
        for count in 1..=MAX_PERMITS {
            assert!(count <= slots_below(Digit::High.of(count)), "{count}");
        }
        let names = held_names(base, Digit::Low, 5, 40);
        assert_eq!(names.len(), 40);
        assert!(names.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn bad_counts_and_names_are_refused() {
        assert!(Names::new("", 1).is_err());
        assert!(Names::new("s", 0).is_err());
        assert!(Names::new("s", MAX_PERMITS + 1).is_err());
        assert!(Names::new(&"x".repeat(2000), 1).is_err());
        assert!(
            Names::new("s", 3).unwrap().permits[2].contains(&"semaphore/s/permit/2".to_string())
        );
    }
}
