//! `LocalLocker`: the in-process lock table that a lock server exposes, and
//! that tests use directly as an in-memory cluster node.

mod shards;
mod table;
#[cfg(test)]
mod tests;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use tokio::time::Instant;

use crate::{Error, LockArgs, LockMode, NetLocker};
use shards::Shards;
use table::Holders;

/// One held entry, as reported by [`LocalLocker::snapshot`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockInfo {
    /// The locked resource name.
    pub resource: String,
    /// The acquisition that holds it.
    pub uid: String,
    /// Who holds it (host and pid by default).
    pub owner: String,
    /// Where in the holder's code the lock was created.
    pub source: String,
    /// Read or write.
    pub mode: LockMode,
    /// When the entry was granted, on the monotonic clock.
    pub acquired: Instant,
    /// When the entry was last granted or refreshed, on the monotonic clock.
    pub refreshed: Instant,
}

impl LockInfo {
    /// How long ago the entry was granted.
    pub fn age(&self) -> Duration {
        self.acquired.elapsed()
    }
}

/// An in-memory [`NetLocker`]: the lock table of one node.
///
/// Rules:
/// * a writer excludes everyone, readers share;
/// * a lock covers all of `args.resources` or none of them, for reads and writes;
/// * locking again with the same uid and mode is idempotent;
/// * unlocking with a uid that does not hold the lock is refused (`Ok(false)`);
/// * `force_unlock` drops the entries of `args.uid`, or with an empty uid
///   every entry on `args.resources`.
///
/// State is sharded by resource name, so unrelated resources never contend
/// for the same mutex. No call awaits: every answer is immediate.
///
/// ```
/// use std::sync::Arc;
/// use quorum_lock::{Dsync, LocalLocker, NetLocker};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), quorum_lock::Error> {
/// let nodes: Vec<Arc<LocalLocker>> = (0..3).map(|_| Arc::new(LocalLocker::new())).collect();
/// let ds = Dsync::new(nodes.iter().map(|n| n.clone() as Arc<dyn NetLocker>).collect())?;
///
/// let guard = ds.rw_mutex(["jobs/42"])?.lock().await?;
/// assert_eq!(nodes[0].snapshot()[0].resource, "jobs/42");
/// guard.unlock().await?;
/// assert!(nodes.iter().all(|n| n.snapshot().is_empty()));
/// # Ok(())
/// # }
/// ```
pub struct LocalLocker {
    shards: Shards,
    endpoint: String,
}

impl LocalLocker {
    /// An empty lock table named `local-N`.
    pub fn new() -> Self {
        static NEXT: AtomicUsize = AtomicUsize::new(1);
        Self::named(format!("local-{}", NEXT.fetch_add(1, Ordering::Relaxed)))
    }

    /// An empty lock table that reports `endpoint` in logs and errors.
    pub fn named(endpoint: impl Into<String>) -> Self {
        LocalLocker {
            shards: Shards::new(),
            endpoint: endpoint.into(),
        }
    }

    /// Every entry held right now, sorted by resource and uid.
    ///
    /// ```
    /// assert!(quorum_lock::LocalLocker::new().snapshot().is_empty());
    /// ```
    pub fn snapshot(&self) -> Vec<LockInfo> {
        let mut out = Vec::new();
        self.shards.for_each(|resource, holders| {
            out.extend(holders.entries().iter().map(|e| LockInfo {
                resource: resource.to_owned(),
                uid: e.uid.to_string(),
                owner: e.owner.to_string(),
                source: e.source.to_string(),
                mode: holders.mode(),
                acquired: e.acquired,
                refreshed: e.refreshed,
            }));
        });
        out.sort_by(|a, b| (&a.resource, &a.uid).cmp(&(&b.resource, &b.uid)));
        out
    }

    fn grant(&self, args: &LockArgs, mode: LockMode) -> Result<bool, Error> {
        check_uid(args)?;
        args.validate_resources()?;
        let now = Instant::now();
        let granted = self.shards.with(&args.resources, |set| {
            let admitted = args
                .resources
                .iter()
                .enumerate()
                .all(|(pos, r)| Holders::admits(set.map(pos).get(r.as_str()), &args.uid, mode));
            if admitted {
                for (pos, r) in args.resources.iter().enumerate() {
                    let map = set.map(pos);
                    match map.get_mut(r.as_str()) {
                        Some(h) => h.add(args, now),
                        None => {
                            map.insert(r.clone(), Holders::first(args, mode, now));
                        }
                    }
                }
            }
            admitted
        });
        Ok(granted)
    }

    /// Removes the entries of `uid` (held in `mode`, or in any mode) from
    /// `resources`. Returns whether anything was removed.
    fn release(&self, resources: &[String], uid: &str, mode: Option<LockMode>) -> bool {
        self.shards.with(resources, |set| {
            let mut removed = false;
            for (pos, r) in resources.iter().enumerate() {
                let map = set.map(pos);
                if let Some(h) = map.get_mut(r.as_str()) {
                    let (hit, now_free) = h.remove(uid, mode);
                    removed |= hit;
                    if now_free {
                        map.remove(r.as_str());
                    }
                }
            }
            removed
        })
    }
}

impl Default for LocalLocker {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for LocalLocker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalLocker")
            .field("endpoint", &self.endpoint)
            .finish_non_exhaustive()
    }
}

fn check_uid(args: &LockArgs) -> Result<(), Error> {
    if args.uid.is_empty() {
        return Err(Error::invalid("the lock uid must not be empty"));
    }
    Ok(())
}

#[async_trait]
impl NetLocker for LocalLocker {
    async fn lock(&self, args: &LockArgs) -> Result<bool, Error> {
        self.grant(args, LockMode::Write)
    }

    async fn rlock(&self, args: &LockArgs) -> Result<bool, Error> {
        self.grant(args, LockMode::Read)
    }

    async fn unlock(&self, args: &LockArgs) -> Result<bool, Error> {
        check_uid(args)?;
        args.validate_resources()?;
        Ok(self.release(&args.resources, &args.uid, Some(LockMode::Write)))
    }

    async fn runlock(&self, args: &LockArgs) -> Result<bool, Error> {
        check_uid(args)?;
        args.validate_resources()?;
        Ok(self.release(&args.resources, &args.uid, Some(LockMode::Read)))
    }

    async fn refresh(&self, args: &LockArgs) -> Result<bool, Error> {
        check_uid(args)?;
        args.validate_resources()?;
        let now = Instant::now();
        Ok(self.shards.with(&args.resources, |set| {
            let mut found_all = true;
            for (pos, r) in args.resources.iter().enumerate() {
                match set
                    .map(pos)
                    .get_mut(r.as_str())
                    .and_then(|h| h.find_mut(&args.uid))
                {
                    Some(entry) => entry.refreshed = now,
                    None => found_all = false,
                }
            }
            found_all
        }))
    }

    async fn force_unlock(&self, args: &LockArgs) -> Result<bool, Error> {
        if !args.resources.is_empty() {
            args.validate_resources()?;
        }
        match (args.uid.is_empty(), args.resources.is_empty()) {
            (true, true) => Err(Error::invalid(
                "force_unlock needs a uid, resource names, or both",
            )),
            (true, false) => Ok(self.shards.with(&args.resources, |set| {
                let mut removed = false;
                for (pos, r) in args.resources.iter().enumerate() {
                    removed |= set.map(pos).remove(r.as_str()).is_some();
                }
                removed
            })),
            (false, false) => Ok(self.release(&args.resources, &args.uid, None)),
            (false, true) => Ok(self.shards.retain_all(|holders| {
                let (hit, now_free) = holders.remove(&args.uid, None);
                (hit, !now_free)
            })),
        }
    }

    fn endpoint(&self) -> String {
        self.endpoint.clone()
    }

    fn is_online(&self) -> bool {
        true
    }

    fn is_local(&self) -> bool {
        true
    }
}
