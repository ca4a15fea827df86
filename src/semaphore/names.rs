//! The resource names a semaphore's locks are taken on, and how the number
//! of permits is written into them so that lockers can tell two counts apart.

use crate::locker::validate_names;
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

/// How many binary digits the permit count is written with: enough for
/// [`MAX_PERMITS`].
pub(super) const COUNT_BITS: usize = (usize::BITS - MAX_PERMITS.leading_zeros()) as usize;

const _: () = assert!(MAX_PERMITS < 1 << COUNT_BITS && MAX_PERMITS >= 1 << (COUNT_BITS - 1));

/// Every name a semaphore takes locks on.
#[derive(Debug, Clone)]
pub(super) struct Names {
    /// The line every acquirer waits in, a write lock held while choosing a
    /// permit.
    pub(super) queue: String,
    /// One write lock per permit: `permit/0` … `permit/k-1`.
    pub(super) permits: Vec<String>,
    /// The count's binary digits, twice: one `count-bit` name per digit
    /// for the digit's value, which checks meet, and one `held` name,
    /// which only holders lock. A holder keeps the read lock on all of them.
    pub(super) count: Vec<String>,
    /// The `count-bit` names with every value flipped. A new holder takes
    /// the write lock on these once (the check), and that fails while
    /// anyone holds a count that differs from its own in any digit, or
    /// while another check, or one left behind, holds them.
    pub(super) other_counts: Vec<String>,
    /// The `held` names with every value flipped, one per digit: to
    /// read out a count that holders hold after a check failed. Checks
    /// never lock these, so only a holder of another count refuses them.
    pub(super) other_held: Vec<String>,
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
        let digits = |kind: &str, flipped: bool| -> Vec<String> {
            (0..COUNT_BITS)
                .map(|bit| {
                    let value = (permits >> bit & 1 == 1) != flipped;
                    format!("{base}/{kind}/{bit}/{}", u8::from(value))
                })
                .collect()
        };
        let mut count = digits("count-bit", false);
        count.extend(digits("held", false));
        let names = Names {
            queue: format!("{base}/queue"),
            permits: (0..permits).map(|i| format!("{base}/permit/{i}")).collect(),
            count,
            other_counts: digits("count-bit", true),
            other_held: digits("held", true),
        };
        // The longest names are the last permit's and the `count-bit`
        // digits' (`held` is shorter).
        validate_names(std::slice::from_ref(&names.queue))?;
        validate_names(&names.permits[permits - 1..])?;
        validate_names(&names.count)?;
        Ok(names)
    }
}

/// The count whose digits differ from `permits`' exactly where `refused`
/// says a flipped digit is held: the count another holder opened the
/// semaphore with.
pub(super) fn count_from(permits: usize, refused: &[bool]) -> usize {
    refused.iter().enumerate().fold(
        permits,
        |count, (bit, &r)| if r { count ^ (1 << bit) } else { count },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_counts_share_no_digit_name_where_they_differ() {
        let two = Names::new("s", 2).unwrap();
        let three = Names::new("s", 3).unwrap();
        // 2 = 0b10 and 3 = 0b11 differ in bit 0: 3's digit is one of 2's
        // flipped digits, which 2 write-locks to check, and one of those it
        // probes to read a count out.
        assert!(three.count.iter().any(|n| two.other_counts.contains(n)));
        assert!(three.count.iter().any(|n| two.other_held.contains(n)));
        assert!(!two.count.iter().any(|n| two.other_counts.contains(n)));
        assert!(!two.count.iter().any(|n| two.other_held.contains(n)));
        // Checks never lock what a read-out probes.
        assert!(!two
            .other_counts
            .iter()
            .any(|n| three.other_held.contains(n)));
        assert_eq!(count_from(2, &[true, false]), 3);
    }

    #[test]
    fn bad_counts_and_names_are_refused() {
        assert!(Names::new("", 1).is_err());
        assert!(Names::new("s", 0).is_err());
        assert!(Names::new("s", MAX_PERMITS + 1).is_err());
        assert!(Names::new(&"x".repeat(2000), 1).is_err());
        assert_eq!(
            Names::new("s", 3).unwrap().permits[2],
            "semaphore/s/permit/2"
        );
    }
}
