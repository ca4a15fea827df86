//! Names spread over several clusters ("groups"), each a [`Dsync`] over
//! its own lockers: a name lives in one group, chosen by rendezvous
//! hashing over the groups' ids, and a lock on names of several groups
//! takes its groups in one fixed order.
//!
//! Invariants: the members are sorted by id and each id names one group;
//! a name's group depends on the name and the ids alone (never on the
//! order the groups were given in, nor on their number beyond the ids);
//! while the groups change, a name that moves lives in both its groups,
//! and a lock takes both.

mod mutex;
mod placement;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

pub use mutex::{GroupedMutex, GroupedReadGuard, GroupedWriteGuard};

use crate::{Dsync, Election, Error, Semaphore};

/// Several groups of lockers, each a [`Dsync`] of its own, over which
/// names are spread: each name lives in one group, so that a fleet can
/// hold more locks, and serve more clients, than one cluster does.
///
/// A name's group is chosen by rendezvous hashing over the groups' ids:
/// it depends only on the name and the ids, so every process that is
/// given the same groups (in any order) places each name alike, and
/// adding or removing a group moves only the names that go to it or came
/// from it (about one in G of them). An id is a group's identity: keep it
/// when a group's nodes change one by one as one cluster does, and never
/// give two groups the same id.
///
/// A lock on names of several groups takes one part per group, in the
/// order of the groups' ids, and all of them or none ([`GroupedMutex`]).
/// Elections and semaphores live in the group of their name.
///
/// To change the groups without a moment where two clients hold one
/// name, run every client with [`changing_to`](Self::changing_to) first
/// (a name that moves then lives in both its groups), and switch to the
/// new groups only once no client runs the old ones and their locks are
/// gone: see docs/groups.md.
///
/// ```
/// # use std::sync::Arc;
/// # use quorum_lock::{Dsync, Error, Groups, LocalLocker, NetLocker};
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Error> {
/// // Two clusters of three lockers each (lock servers, in a real fleet).
/// let cluster = || -> Result<Dsync, Error> {
///     let lockers: Vec<Arc<dyn NetLocker>> =
///         (0..3).map(|_| Arc::new(LocalLocker::new()) as Arc<dyn NetLocker>).collect();
///     Dsync::new(lockers)
/// };
/// let groups = Groups::new([("east", cluster()?), ("west", cluster()?)])?;
/// let invoices = groups.group_of("invoices/2026-11");
/// assert!(invoices == "east" || invoices == "west");
///
/// // Names of both groups, locked together.
/// let mutex = groups.rw_mutex(["invoices/2026-11", "invoices/2026-12", "ledger"])?;
/// let guard = mutex.lock().await?;
/// assert_eq!(guard.resources().len(), 3);
/// guard.unlock().await?;
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct Groups {
    inner: Arc<Inner>,
}

struct Inner {
    /// Every group, sorted by id.
    members: Vec<Member>,
    /// The groups names are placed over (positions in `members`).
    current: Vec<usize>,
    /// While the groups change: the groups names are placed over next,
    /// a moving name living in both.
    next: Option<Vec<usize>>,
}

struct Member {
    id: Arc<str>,
    dsync: Dsync,
}

impl Groups {
    /// Groups of the given ids and coordinators, in any order.
    ///
    /// Fails with [`Error::InvalidArgument`] when there is no group, an
    /// id is empty, over 256 bytes, holds a control character, or names
    /// two groups, or two groups share a locker (by its endpoint).
    pub fn new<I, S>(groups: I) -> Result<Groups, Error>
    where
        I: IntoIterator<Item = (S, Dsync)>,
        S: Into<String>,
    {
        let mut members = Vec::new();
        for (id, dsync) in groups {
            let id: String = id.into();
            check_id(&id)?;
            members.push(Member {
                id: id.into(),
                dsync,
            });
        }
        if members.is_empty() {
            return Err(Error::invalid(
                "no group given; give at least one group of lockers",
            ));
        }
        members.sort_by(|a, b| a.id.cmp(&b.id));
        if let Some(pair) = members.windows(2).find(|pair| pair[0].id == pair[1].id) {
            return Err(Error::invalid(format!(
                "the group id {:?} is given twice; give each group an id of its own",
                &*pair[0].id
            )));
        }
        shared_lockers(&members)?;
        let current = (0..members.len()).collect();
        Ok(Groups {
            inner: Arc::new(Inner {
                members,
                current,
                next: None,
            }),
        })
    }

    /// These groups while they change to `next`: a name whose group
    /// differs in `next` lives in both, and a lock takes both (in the
    /// order of their ids). A group in both keeps the coordinator it has
    /// here.
    ///
    /// Fails with [`Error::InvalidArgument`] when `self` is itself
    /// changing, when an id in both names groups of other lockers (the
    /// endpoints of their lockers differ), or when two ids share a locker
    /// (a group renamed: keep its id): one id, one group.
    pub fn changing_to(&self, next: &Groups) -> Result<Groups, Error> {
        if self.inner.next.is_some() || next.inner.next.is_some() {
            return Err(Error::invalid(
                "these groups are already changing; finish one change before the next",
            ));
        }
        let mut members: Vec<Member> = self
            .inner
            .members
            .iter()
            .map(|m| Member {
                id: m.id.clone(),
                dsync: m.dsync.clone(),
            })
            .collect();
        for m in &next.inner.members {
            match members.iter().find(|old| old.id == m.id) {
                Some(old) if endpoints(&old.dsync) != endpoints(&m.dsync) => {
                    return Err(Error::invalid(format!(
                        "the group id {:?} names other lockers in the new groups ({:?}, \
                         was {:?}); a group keeps its id only while it keeps its lockers' \
                         entries: give the new group another id",
                        &*m.id,
                        endpoints(&m.dsync),
                        endpoints(&old.dsync)
                    )));
                }
                Some(_) => {}
                None => members.push(Member {
                    id: m.id.clone(),
                    dsync: m.dsync.clone(),
                }),
            }
        }
        members.sort_by(|a, b| a.id.cmp(&b.id));
        shared_lockers(&members)?;
        let position = |id: &Arc<str>| members.iter().position(|m| m.id == *id);
        let current = self.inner.members.iter().filter_map(|m| position(&m.id));
        let later = next.inner.members.iter().filter_map(|m| position(&m.id));
        let (current, later) = (current.collect(), later.collect());
        Ok(Groups {
            inner: Arc::new(Inner {
                members,
                current,
                next: Some(later),
            }),
        })
    }

    /// Whether these groups are changing ([`changing_to`](Self::changing_to)).
    pub fn is_changing(&self) -> bool {
        self.inner.next.is_some()
    }

    /// The id of the group `name` lives in; while the groups change, the
    /// group it lives in afterwards.
    pub fn group_of(&self, name: &str) -> &str {
        let inner = &*self.inner;
        let over = inner.next.as_ref().unwrap_or(&inner.current);
        &inner.members[self.position_among(over, name)].id
    }

    /// The id among `ids` of the group `name` lives in, by the very rule
    /// [`group_of`](Self::group_of) follows: for a program that must know
    /// a name's group without connecting to every group (a command line
    /// that connects only the group it locks in). `None` when `ids` is
    /// empty. The order of `ids` does not matter; an id given twice
    /// counts once.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use quorum_lock::{Dsync, Error, Groups, LocalLocker, NetLocker};
    /// # fn main() -> Result<(), Error> {
    /// let home = Groups::place(["east", "west"], "invoices/2026-11");
    /// assert!(matches!(home, Some("east" | "west")));
    /// assert_eq!(Groups::place(["west", "east"], "invoices/2026-11"), home);
    /// assert_eq!(Groups::place([], "invoices/2026-11"), None);
    ///
    /// // What a `Groups` of those ids says.
    /// let cluster = || -> Result<Dsync, Error> {
    ///     Dsync::new(vec![Arc::new(LocalLocker::new()) as Arc<dyn NetLocker>])
    /// };
    /// let groups = Groups::new([("east", cluster()?), ("west", cluster()?)])?;
    /// assert_eq!(home, Some(groups.group_of("invoices/2026-11")));
    /// # Ok(())
    /// # }
    /// ```
    pub fn place<'a>(ids: impl IntoIterator<Item = &'a str>, name: &str) -> Option<&'a str> {
        let ids: Vec<&'a str> = ids.into_iter().collect();
        if ids.is_empty() {
            return None;
        }
        // `winner` scores each id alone and breaks ties by id, so neither
        // the order nor a repeated id changes the winner.
        let at = placement::winner(ids.iter().copied().enumerate(), name);
        ids.get(at).copied()
    }

    /// The ids of every group, sorted.
    pub fn ids(&self) -> impl Iterator<Item = &str> {
        self.inner.members.iter().map(|m| &*m.id)
    }

    /// The coordinator of the group `id`.
    pub fn dsync(&self, id: &str) -> Option<&Dsync> {
        self.inner
            .members
            .iter()
            .find(|m| &*m.id == id)
            .map(|m| &m.dsync)
    }

    /// A read/write mutex over names of any groups: one part per group
    /// they live in (two for a name that moves while the groups change),
    /// taken in the order of the groups' ids. See [`GroupedMutex`].
    ///
    /// Fails as [`Dsync::rw_mutex`] does on the names.
    #[track_caller]
    pub fn rw_mutex<I, S>(&self, resources: I) -> Result<GroupedMutex, Error>
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let mut names: Vec<String> = resources.into_iter().map(Into::into).collect();
        names.sort_unstable();
        names.dedup();
        crate::locker::args::validate_names(&names)?;
        let inner = &*self.inner;
        let mut per_group: Vec<Vec<String>> = vec![Vec::new(); inner.members.len()];
        for name in &names {
            for at in self.homes(name) {
                per_group[at].push(name.clone());
            }
        }
        let mut parts = Vec::new();
        for (at, names) in per_group.into_iter().enumerate() {
            if names.is_empty() {
                continue;
            }
            let member = &inner.members[at];
            parts.push((member.id.clone(), member.dsync.rw_mutex(names)?));
        }
        Ok(GroupedMutex {
            resources: names,
            parts,
        })
    }

    /// The election `name`, in the group of its name, `group_of(name)`
    /// ([`Dsync::election`]; its lock's resource there is `election/` +
    /// `name`).
    ///
    /// Fails with [`Error::InvalidArgument`] while the groups change and
    /// the name moves: an election lives in one group, and one that moves
    /// is held in neither for a moment. Resign and campaign again once the
    /// change is over.
    #[track_caller]
    pub fn election(&self, name: &str) -> Result<Election, Error> {
        let homes = self.homes(name);
        let election = self.inner.members[homes[0]].dsync.election(name)?;
        self.single_home("an election", name, &homes)?;
        Ok(election)
    }

    /// The semaphore `name`, in the group of its name, `group_of(name)`
    /// ([`Dsync::semaphore`]).
    ///
    /// Fails with [`Error::InvalidArgument`] while the groups change and
    /// the name moves, as [`election`](Self::election) does.
    #[track_caller]
    pub fn semaphore(&self, name: &str, permits: usize) -> Result<Semaphore, Error> {
        let homes = self.homes(name);
        let semaphore = self.inner.members[homes[0]]
            .dsync
            .semaphore(name, permits)?;
        self.single_home("a semaphore", name, &homes)?;
        Ok(semaphore)
    }

    /// Waits (at most `within`) for every group's releases still on their
    /// way ([`Dsync::finish_releases`]); the first error, in id order.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping it stops the waiting, not the releases.
    pub async fn finish_releases(&self, within: Duration) -> Result<(), Error> {
        let each = self
            .inner
            .members
            .iter()
            .map(|m| m.dsync.finish_releases(within));
        futures::future::join_all(each).await.into_iter().collect()
    }

    /// Why `what` named `name`, which lives in the groups at `homes`,
    /// cannot be made: it moves while the groups change.
    fn single_home(&self, what: &str, name: &str, homes: &[usize]) -> Result<(), Error> {
        let inner = &*self.inner;
        match homes {
            [_] => Ok(()),
            _ => Err(Error::invalid(format!(
                "{what} named {name:?} moves from group {:?} to group {:?} while the groups \
                 change, and it lives in one group: stop using it until every client runs \
                 the new groups",
                &*inner.members[homes[0]].id,
                &*inner.members[homes[homes.len() - 1]].id,
            ))),
        }
    }

    /// The positions of the groups `name` lives in: one, or two while the
    /// groups change and it moves; sorted.
    fn homes(&self, name: &str) -> Vec<usize> {
        let inner = &*self.inner;
        let mut homes = vec![self.position_among(&inner.current, name)];
        if let Some(next) = &inner.next {
            let later = self.position_among(next, name);
            if later != homes[0] {
                homes.push(later);
                homes.sort_unstable();
            }
        }
        homes
    }

    /// The position in `members` of the group among `over` that `name`
    /// lives in.
    fn position_among(&self, over: &[usize], name: &str) -> usize {
        let members = &self.inner.members;
        let ids = over.iter().map(|&at| (at, &*members[at].id));
        placement::winner(ids, name)
    }
}

fn check_id(id: &str) -> Result<(), Error> {
    if id.is_empty() || id.len() > 256 || id.chars().any(char::is_control) {
        return Err(Error::invalid(format!(
            "the group id {} is not usable: give 1 to 256 bytes without control characters",
            crate::locker::args::shown(id)
        )));
    }
    Ok(())
}

/// Refuses two groups that share a locker: a name moving from one to the
/// other would wait for itself there, and a locker's entries belong to one
/// group.
fn shared_lockers(members: &[Member]) -> Result<(), Error> {
    let mut owner: std::collections::HashMap<String, &str> = std::collections::HashMap::new();
    for m in members {
        for endpoint in endpoints(&m.dsync) {
            if let Some(other) = owner.insert(endpoint.clone(), &m.id)
                && other != &*m.id
            {
                return Err(Error::invalid(format!(
                    "the groups {other:?} and {:?} share the locker {endpoint}; each locker \
                     serves one group (to rename a group, keep its id, or change to the new \
                     id through lockers of its own)",
                    &*m.id
                )));
            }
        }
    }
    Ok(())
}

fn endpoints(dsync: &Dsync) -> Vec<String> {
    let mut all: Vec<String> = dsync.lockers().iter().map(|l| l.endpoint()).collect();
    all.sort();
    all
}

impl fmt::Debug for Groups {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let inner = &*self.inner;
        let ids = |over: &[usize]| -> Vec<&str> {
            over.iter().map(|&at| &*inner.members[at].id).collect()
        };
        let mut out = f.debug_struct("Groups");
        out.field("current", &ids(&inner.current));
        if let Some(next) = &inner.next {
            out.field("next", &ids(next));
        }
        out.finish()
    }
}

#[cfg(test)]
mod tests;
