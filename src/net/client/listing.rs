//! Listing entries as the client takes them from the wire.

use tokio::time::Instant;

use crate::net::wire;
use crate::LockInfo;

/// Listing entries from the wire: ages become instants.
pub(super) fn lock_infos(entries: Vec<wire::WireLockInfo>) -> Vec<LockInfo> {
    let now = Instant::now();
    entries
        .into_iter()
        .map(|e| LockInfo {
            resource: e.resource,
            uid: e.uid,
            owner: e.owner,
            source: e.source,
            mode: e.mode.into(),
            acquired: now.checked_sub(e.age).unwrap_or(now),
            refreshed: now.checked_sub(e.since_refresh).unwrap_or(now),
        })
        .collect()
}
