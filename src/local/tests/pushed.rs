//! What the scenes of pushed waits share: a sink that records the grants
//! pushed, a pushed wait, and a locker whose places and entries outlive
//! every scene.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::{LocalLocker, LockerConfig, PushEvent, PushSink, Ticket, WaitArgs, Wake};

/// The uids granted by push, in order.
#[derive(Default)]
pub(super) struct Grants(pub(super) Mutex<Vec<String>>);

impl PushSink for Grants {
    fn push(&self, _slot: usize, uid: &str, event: PushEvent) {
        if event == PushEvent::Granted {
            self.0.lock().unwrap().push(uid.to_owned());
        }
    }
}

impl Grants {
    /// The grants pushed since the last call.
    pub(super) fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.0.lock().unwrap())
    }
}

/// A pushed wait with a ticket drawn at `at` (smaller is older), whose
/// place outlives every scene.
pub(super) fn pushed(at: u64, grants: &Arc<Grants>) -> WaitArgs {
    WaitArgs {
        ticket: Ticket { at, tiebreak: 0 },
        place_ttl: Duration::from_secs(600),
        wake: Some(Wake::new(grants.clone(), 0)),
    }
}

/// A locker with a validity of ten minutes and no quarantine.
pub(super) fn long_lived() -> LocalLocker {
    LocalLocker::with_config(
        "pushed-waits",
        LockerConfig {
            validity: Duration::from_secs(600),
            quarantine: Duration::ZERO,
        },
    )
}
