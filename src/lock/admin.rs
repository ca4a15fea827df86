//! Operator functions of a `Dsync`: listing the locks held across all
//! lockers ("top locks") and forcing locks open.

use std::collections::BTreeMap;
use std::time::Duration;

use futures::future::join_all;

use crate::lock::fanout::call_locker;
use crate::lock::telemetry::CallKind;
use crate::quorum::clock::after;
use crate::quorum::write_quorum;
use crate::{Dsync, Error, LockArgs, LockMode};

/// One lock as seen across the cluster: the entries of one uid on one
/// resource, merged over the lockers that hold them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterLock {
    /// The locked resource.
    pub resource: String,
    /// The acquisition holding it.
    pub uid: String,
    /// Who holds it.
    pub owner: String,
    /// Where in the holder's code it was taken.
    pub source: String,
    /// Read or write.
    pub mode: LockMode,
    /// How long ago the oldest of its entries was granted.
    pub age: Duration,
    /// How many lockers hold an entry for it. Fewer than the quorum means a
    /// leftover that is waiting to expire, not a held lock.
    pub nodes: usize,
}

/// What [`Dsync::force_unlock_counted`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ForceUnlocked {
    /// How many lockers confirmed the drop.
    pub confirmed: usize,
    /// How many of those had an entry to drop (held or left over). Zero
    /// means nothing was held on the names, on the lockers that answered.
    pub removed_on: usize,
}

impl Dsync {
    /// Lists every lock held on any locker, merged by resource and uid and
    /// sorted by resource, then oldest first.
    ///
    /// Lockers that cannot be reached or cannot list are skipped, so the
    /// result can undercount; it fails with [`Error::QuorumUnavailable`]
    /// when fewer than a write quorum answered, or with the permanent error
    /// (such as [`Error::Unauthorized`] for a non-admin token) that kept
    /// them from answering.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use quorum_lock::{Dsync, LocalLocker, NetLocker};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), quorum_lock::Error> {
    /// # let ds = Dsync::new((0..3).map(|_| Arc::new(LocalLocker::new()) as Arc<dyn NetLocker>).collect())?;
    /// let guard = ds.rw_mutex(["reports"])?.lock().await?;
    /// let locks = ds.locks().await?;
    /// assert_eq!((locks[0].resource.as_str(), locks[0].nodes), ("reports", 3));
    /// # guard.unlock().await?;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn locks(&self) -> Result<Vec<ClusterLock>, Error> {
        let lockers = &self.coord.lockers;
        let clock = &self.coord.clock;
        let began = clock.now();
        let deadline = after(began, self.coord.timeouts.unlock);
        let listings = join_all(
            lockers
                .iter()
                .map(|l| clock.timeout_at(deadline, l.locks())),
        )
        .await;
        let mut answered = 0;
        // Each locker that did not answer, and why: this listing's own
        // calls say it (they are not noted among the lockers' failures).
        let mut unreachable = Vec::new();
        let mut permanent = None;
        let mut merged: BTreeMap<(String, String), ClusterLock> = BTreeMap::new();
        for (index, listing) in listings.into_iter().enumerate() {
            let entries = match listing {
                Ok(Ok(entries)) => entries,
                failed => {
                    let reason = match &failed {
                        Ok(Err(err)) => err.locker_reason(),
                        _ => format!(
                            "no answer within {:?}",
                            deadline.saturating_duration_since(began)
                        ),
                    };
                    unreachable.push(crate::Unreachable {
                        endpoint: lockers[index].endpoint(),
                        reason,
                    });
                    if let Ok(Err(err)) = failed
                        && !err.is_retryable()
                    {
                        permanent.get_or_insert(err);
                    }
                    continue;
                }
            };
            answered += 1;
            for e in entries {
                let age = e.age();
                merged
                    .entry((e.resource.clone(), e.uid.clone()))
                    .and_modify(|m| {
                        m.nodes += 1;
                        m.age = m.age.max(age);
                    })
                    .or_insert(ClusterLock {
                        resource: e.resource,
                        uid: e.uid,
                        owner: e.owner,
                        source: e.source,
                        mode: e.mode,
                        age,
                        nodes: 1,
                    });
            }
        }
        let quorum = write_quorum(lockers.len());
        if answered < quorum {
            // A refused credential explains the failure better than a count.
            if let Some(err) = permanent {
                return Err(err);
            }
            return Err(Error::QuorumUnavailable {
                answered,
                quorum,
                lockers: lockers.len(),
                unreachable,
            });
        }
        let mut out: Vec<ClusterLock> = merged.into_values().collect();
        out.sort_by(|a, b| a.resource.cmp(&b.resource).then(b.age.cmp(&a.age)));
        Ok(out)
    }

    /// Drops every lock on `resources` on every locker, whoever holds it.
    ///
    /// Holders learn at their next refresh that a quorum no longer knows
    /// their lock, and their guards report it lost. Returns how many lockers
    /// confirmed; fails with [`Error::QuorumUnavailable`] when fewer than a
    /// write quorum did, because a holder could then keep its lock.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe in effect: lockers reached before the drop have
    /// already removed their entries. Call it again to finish the job.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use quorum_lock::{Dsync, LocalLocker, NetLocker};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), quorum_lock::Error> {
    /// # let ds = Dsync::new((0..3).map(|_| Arc::new(LocalLocker::new()) as Arc<dyn NetLocker>).collect())?;
    /// let stuck = ds.rw_mutex(["nightly-job"])?.lock().await?;
    /// std::mem::forget(stuck); // a holder that vanished without unlocking
    /// assert_eq!(ds.force_unlock(["nightly-job"]).await?, 3);
    /// assert!(ds.rw_mutex(["nightly-job"])?.try_lock().await.is_ok());
    /// # Ok(())
    /// # }
    /// ```
    pub async fn force_unlock<I, S>(&self, resources: I) -> Result<usize, Error>
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.force_unlock_counted(resources)
            .await
            .map(|done| done.confirmed)
    }

    /// [`force_unlock`](Self::force_unlock), also saying on how many of
    /// the lockers that confirmed there was anything to drop, so that a
    /// caller can tell a lock forced open from a name nobody held.
    ///
    /// # Cancel safety
    ///
    /// As [`force_unlock`](Self::force_unlock).
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use quorum_lock::{Dsync, ForceUnlocked, LocalLocker, NetLocker};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), quorum_lock::Error> {
    /// # let ds = Dsync::new((0..3).map(|_| Arc::new(LocalLocker::new()) as Arc<dyn NetLocker>).collect())?;
    /// let stuck = ds.rw_mutex(["nightly-job"])?.lock().await?;
    /// std::mem::forget(stuck);
    /// let forced = ds.force_unlock_counted(["nightly-job"]).await?;
    /// assert_eq!(forced, ForceUnlocked { confirmed: 3, removed_on: 3 });
    /// // Nothing is held any more: every locker confirms, none removes.
    /// let again = ds.force_unlock_counted(["nightly-job"]).await?;
    /// assert_eq!(again, ForceUnlocked { confirmed: 3, removed_on: 0 });
    /// # Ok(())
    /// # }
    /// ```
    pub async fn force_unlock_counted<I, S>(&self, resources: I) -> Result<ForceUnlocked, Error>
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let mut names: Vec<String> = resources.into_iter().map(Into::into).collect();
        names.sort_unstable();
        names.dedup();
        crate::locker::args::validate_names(&names)?;
        let lockers = &self.coord.lockers;
        let args = LockArgs {
            uid: "".into(),
            resources: names.into(),
            owner: self.coord.owner.clone(),
            source: "Dsync::force_unlock".into(),
            quorum: write_quorum(lockers.len()),
        };
        tracing::info!(resources = ?args.resources, "forcing locks open");
        let began = self.coord.clock.now();
        let deadline = after(began, self.coord.timeouts.force_unlock);
        let coord = &self.coord;
        let results = join_all(lockers.iter().enumerate().map(|(index, l)| {
            call_locker(
                coord,
                index,
                CallKind::ForceUnlock,
                l.force_unlock(&args),
                deadline,
            )
        }))
        .await;
        let answered = results.iter().filter(|r| r.is_ok()).count();
        let answered_by: Vec<bool> = results.iter().map(Result::is_ok).collect();
        if answered < args.quorum {
            if let Some(Err(err)) = results
                .into_iter()
                .find(|r| matches!(r, Err(e) if !e.is_retryable()))
            {
                return Err(err);
            }
            return Err(Error::QuorumUnavailable {
                answered,
                quorum: args.quorum,
                lockers: lockers.len(),
                unreachable: coord.unreachable_since(began, |i| answered_by[i]),
            });
        }
        let removed_on = results.iter().filter(|r| matches!(r, Ok(true))).count();
        Ok(ForceUnlocked {
            confirmed: answered,
            removed_on,
        })
    }
}
