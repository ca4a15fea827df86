//! Listing the table: whole ([`LocalLocker::snapshot`]) or a page at a
//! time, in the order of (resource, uid).
//!
//! Invariants: a page is the longest run of entries after its cursor, in
//! that order, whose [`LockInfo::listed_size`]s add up to at most the budget and
//! that holds at most the most entries asked for (and at least one entry,
//! whatever its size); building it keeps at most that much besides one
//! entry, however large the table.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use super::shards::Busy;
use super::LocalLocker;
use crate::LockInfo;

/// One page of a listing; `more` says entries after the last one did not
/// fit.
#[derive(Debug, Default)]
#[cfg_attr(not(feature = "net"), allow(dead_code))]
pub(crate) struct Page {
    pub entries: Vec<LockInfo>,
    pub more: bool,
}

/// An entry in the heap of a page being built, ordered by its key, so
/// that the top is the last entry of the page.
struct Keyed(LockInfo);

impl Keyed {
    fn key(&self) -> (&str, &str) {
        (&self.0.resource, &self.0.uid)
    }
}

impl PartialEq for Keyed {
    fn eq(&self, other: &Self) -> bool {
        self.key() == other.key()
    }
}

impl Eq for Keyed {}

impl PartialOrd for Keyed {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Keyed {
    fn cmp(&self, other: &Self) -> Ordering {
        self.key().cmp(&other.key())
    }
}

impl LocalLocker {
    /// Every live entry, sorted by resource and uid. Expired entries are
    /// dropped first, so they never show.
    ///
    /// ```
    /// assert!(quorum_lock::LocalLocker::new().snapshot().is_empty());
    /// ```
    pub fn snapshot(&self) -> Vec<LockInfo> {
        let mut out = Vec::new();
        self.each_keyed(|_, _, info| out.push(info()));
        out.sort_by(|a, b| (&a.resource, &a.uid).cmp(&(&b.resource, &b.uid)));
        out
    }

    /// The live entries after `after` (a resource and a uid) in the order
    /// of [`snapshot`](Self::snapshot), as many as fit `budget` bytes by
    /// [`LockInfo::listed_size`], and at most `most` (at least one). A listing paged this way is not one moment's view:
    /// an entry granted or released between two pages shows or not by
    /// where it sorts.
    #[cfg_attr(not(feature = "net"), allow(dead_code))]
    pub(crate) fn snapshot_page(
        &self,
        after: Option<(&str, &str)>,
        budget: usize,
        most: usize,
    ) -> Page {
        let mut kept: BinaryHeap<Keyed> = BinaryHeap::new();
        let mut size = 0usize;
        // The first entry that did not fit: nothing at or after it may
        // join, or the page would skip it.
        let mut cut: Option<(String, String)> = None;
        self.each_keyed(|resource, uid, info| {
            let key = (resource, uid);
            if after.is_some_and(|after| key <= after) {
                return;
            }
            if cut
                .as_ref()
                .is_some_and(|(r, u)| key >= (r.as_str(), u.as_str()))
            {
                return;
            }
            let info = info();
            size += info.listed_size();
            kept.push(Keyed(info));
            while (size > budget || kept.len() > most) && kept.len() > 1 {
                let Some(Keyed(last)) = kept.pop() else { break };
                size -= last.listed_size();
                cut = Some((last.resource, last.uid));
            }
        });
        Page {
            entries: kept.into_sorted_vec().into_iter().map(|k| k.0).collect(),
            more: cut.is_some(),
        }
    }

    /// Calls `f` with each live entry's resource and uid and a maker of
    /// the entry, after dropping expired ones: a caller that skips an
    /// entry does not copy it.
    fn each_keyed(&self, mut f: impl FnMut(&str, &str, &dyn Fn() -> LockInfo)) {
        let now = self.clock.now();
        let mut freed = Vec::new();
        self.shards
            .expire_all(now, self.config.validity, &mut freed, Busy::Wait);
        self.promote(freed, now);
        self.shards.for_each(|resource, holders| {
            for e in holders.entries() {
                let info = || LockInfo {
                    resource: resource.to_owned(),
                    uid: e.uid.to_string(),
                    owner: e.owner.to_string(),
                    source: e.source.to_string(),
                    mode: holders.mode(),
                    acquired: self.clock.to_tokio(e.acquired),
                    refreshed: self.clock.to_tokio(e.refreshed),
                };
                f(resource, &e.uid, &info);
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use futures::executor::block_on;
    use rand::rngs::StdRng;
    use rand::{RngExt, SeedableRng};

    use crate::{LocalLocker, LockArgs, LockInfo, NetLocker};

    /// A table of readers and writers with texts of random lengths, so that
    /// entries differ in size and several uids share names.
    fn table(rng: &mut StdRng) -> LocalLocker {
        let locker = LocalLocker::new();
        for call in 0..rng.random_range(0..60) {
            let text = |rng: &mut StdRng, c: char| c.to_string().repeat(rng.random_range(0..300));
            let resources: Vec<String> = (0..rng.random_range(1..8))
                .map(|_| format!("name/{}", rng.random_range(0..40)))
                .collect::<std::collections::BTreeSet<_>>()
                .into_iter()
                .collect();
            let args = LockArgs {
                uid: format!("uid-{call}").into(),
                resources: resources.into(),
                owner: text(rng, 'o').into(),
                source: text(rng, 's').into(),
                quorum: 1,
            };
            let reader = rng.random::<bool>();
            block_on(async {
                let _ = if reader {
                    locker.rlock(&args).await
                } else {
                    locker.lock(&args).await
                };
            });
        }
        locker
    }

    #[test]
    fn pages_read_in_turn_make_the_whole_snapshot_each_within_its_budget() {
        for seed in 0..200u64 {
            let mut rng = StdRng::seed_from_u64(seed);
            let locker = table(&mut rng);
            let whole = locker.snapshot();
            let budget = rng.random_range(1..4000);
            let most = rng.random_range(1..30);
            let mut paged = Vec::new();
            let mut pages = 0;
            loop {
                let after = paged
                    .last()
                    .map(|l: &LockInfo| (l.resource.clone(), l.uid.clone()));
                let after = after.as_ref().map(|(r, u)| (&**r, &**u));
                let page = locker.snapshot_page(after, budget, most);
                let size: usize = page.entries.iter().map(LockInfo::listed_size).sum();
                let n = page.entries.len();
                assert!(
                    (size <= budget && n <= most) || n == 1,
                    "seed {seed}: a page of {n} entries and {size} bytes over a budget of \
                     {budget} bytes and {most} entries"
                );
                if page.more {
                    let next = whole[paged.len() + n].clone();
                    assert!(
                        size + next.listed_size() > budget || n == most,
                        "seed {seed}: the page stopped before an entry that fits"
                    );
                }
                assert!(n > 0 || !page.more, "seed {seed}: an empty page with more");
                paged.extend(page.entries);
                pages += 1;
                assert!(pages <= whole.len() + 1, "seed {seed}: paging does not end");
                if !page.more {
                    break;
                }
            }
            assert_eq!(paged, whole, "seed {seed}: budget {budget}");
        }
    }
}
