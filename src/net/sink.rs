//! The sink through which the lock table pushes grants, wounds and
//! watches' changes to one connection's task, and settles a pushed
//! grant's charge on the way.
//!
//! Invariants: a push never blocks the table (a full or gone queue drops
//! it); a grant settles its set's charge whether or not the connection is
//! still open; once the session ended, the sink keeps nothing of the
//! connection but the server's handle.

use std::sync::{Mutex, PoisonError};

use tokio::sync::mpsc;

use super::state::ServerState;
use super::waits::Waits;
use crate::locker::wait::{PushEvent, PushSink};

/// A push on its way from the lock table to the connection's task: for a
/// uid, with the number of the wait it was made for
/// ([`Place::number`](super::waits::Place::number); 0 for a watch's).
pub(crate) type Pushed = (Box<str>, PushEvent, u64);

/// Hands pushes from the lock table to the connection's task. Never
/// blocks: when the task is gone or too far behind, the push is dropped
/// (the waiter learns of its grant when it asks again).
pub(crate) struct ConnSink {
    /// The connection's push queue and places, until the session ends
    /// ([`cut`](Self::cut)): the lock table keeps this sink in the entries
    /// and watches its pushes granted, as long as they are refreshed, and
    /// must not keep the queue's memory (a channel of [`PUSH_QUEUE`]
    /// slots) alive with it after the connection closed.
    ///
    /// [`PUSH_QUEUE`]: super::config::PUSH_QUEUE
    open: Mutex<Option<Open>>,
    /// The server, for its ledger (weak: the lock table keeps this sink in
    /// its places, and the server keeps the table).
    server: std::sync::Weak<ServerState>,
}

/// What a connection's sink reaches while the connection is open.
struct Open {
    pushes: mpsc::Sender<Pushed>,
    /// The connection's places (weak, as the server is), for the names of
    /// the place a grant was pushed to.
    waits: std::sync::Weak<Mutex<Waits>>,
}

impl PushSink for ConnSink {
    fn push(&self, slot: usize, uid: &str, event: PushEvent) {
        self.deliver(slot, uid, event, None);
    }

    fn push_granted(&self, slot: usize, uid: &str, names: &[String]) {
        self.deliver(slot, uid, PushEvent::Granted, Some(names));
    }
}

impl ConnSink {
    pub(crate) fn new(
        pushes: mpsc::Sender<Pushed>,
        server: std::sync::Weak<ServerState>,
        waits: std::sync::Weak<Mutex<Waits>>,
    ) -> ConnSink {
        ConnSink {
            open: Mutex::new(Some(Open { pushes, waits })),
            server,
        }
    }

    /// The session ended: pushes are dropped from now on, and the queue
    /// and the places' record go with the session, whatever entries still
    /// hold this sink. A grant pushed later still settles its charge (the
    /// table names the set it granted).
    pub(crate) fn cut(&self) {
        let open = self
            .open
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        drop(open);
    }

    /// Hands a push to the connection's task; for a grant, first settles
    /// the place and its charge (`names`: the names the table granted).
    fn deliver(&self, slot: usize, uid: &str, event: PushEvent, names: Option<&[String]>) {
        // A leaf lock: taken inside the table's call, before the places'
        // (`waits`) and the ledger's; `cut` takes nothing else.
        let open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        // The slot is the number of the wait the push is for.
        let number = slot as u64;
        // The grant's entry lives a validity from now, whenever (or
        // whether) the connection's task forwards the push: its charge
        // lives as long, or a connection stuck writing would let the
        // entry outlive what pays for it.
        if event == PushEvent::Granted
            && let Some(server) = self.server.upgrade()
        {
            // The set of the wait granted pays for entries now; the sets
            // of places the uid keeps over other connections do not. The
            // table says which names it granted, so this holds though the
            // connection closed and forgot the wait. The connection stops
            // counting the place now, whether or not the push reaches its
            // client (a full queue drops it); a record of the uid made
            // since, for a newer wait, stays. A wait granted before the
            // connection recorded it is found when the push is forwarded
            // (`Session::end_granted_place`). (Locked inside the table's
            // call, as a place's end looks up places: the table, then a
            // connection's places.)
            let waits = open.as_ref().and_then(|open| open.waits.upgrade());
            let known = waits.and_then(|waits| {
                let mut waits = waits.lock().unwrap_or_else(PoisonError::into_inner);
                let known = waits.names_of(uid, number);
                if waits.recorded(uid) == Some(number) {
                    waits.end(uid);
                }
                known
            });
            let granted = names.or(known.as_deref());
            server.ledger.granted(uid, granted);
        }
        let Some(open) = open.as_ref() else {
            return;
        };
        let push = (uid.into(), event, number);
        if let Err(mpsc::error::TrySendError::Full(_)) = open.pushes.try_send(push) {
            let uid = crate::locker::secrets::mask(uid);
            tracing::debug!(%uid, ?event, "push queue full; dropping the push");
        }
    }
}
