//! The local locker behind a test's lock server when the test sets how
//! long a lock lives.
#![cfg(feature = "net")]

use std::sync::Arc;
use std::time::Duration;

use quorum_lock::{LocalLocker, LockerConfig};

/// A local locker named `name` whose locks live `validity`, with no
/// quarantine, so that a released or expired name is free again at once
/// and only the validity the test chose times what it checks.
pub fn without_quarantine(name: &str, validity: Duration) -> Arc<LocalLocker> {
    Arc::new(LocalLocker::with_config(
        name,
        config_without_quarantine(validity),
    ))
}

/// The configuration of such a locker, for `node::start_over`: locks live
/// `validity`, no quarantine.
pub fn config_without_quarantine(validity: Duration) -> LockerConfig {
    LockerConfig {
        validity,
        quarantine: Duration::ZERO,
    }
}
