//! The connection a client's calls use, and why its latest attempt to
//! connect failed.
//!
//! Invariant: a live connection is never replaced; a connection opened
//! late (a reopen or a reconnect that ended after another) is closed
//! instead.

use std::sync::atomic::Ordering;
use std::sync::{Arc, PoisonError};
use std::time::Duration;

use super::Shared;
use crate::net::conn::Connection;
use crate::Error;

impl Shared {
    /// Makes `conn` the connection calls use, unless another one is live
    /// already: a reopen or reconnect that ends late must not close a
    /// connection calls wait on, so `conn` is closed instead. Returns the
    /// connection in use.
    /// A connection that died before it was installed changes nothing and
    /// is returned as it is: its end (`reconnect::on_close`) decided what
    /// comes next, and must not be undone.
    pub(super) fn install(&self, conn: Arc<Connection>) -> Arc<Connection> {
        if !conn.is_alive() {
            return conn;
        }
        self.note_connect_error(None);
        self.reconnecting
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .connected();
        let mut slot = self.conn.lock().unwrap_or_else(PoisonError::into_inner);
        let live = slot
            .as_ref()
            .filter(|current| current.is_alive() && !Arc::ptr_eq(current, &conn))
            .cloned();
        if let Some(live) = live {
            drop(slot);
            self.reopen_next.store(false, Ordering::Release);
            conn.close();
            return live;
        }
        let old = slot.replace(conn.clone());
        drop(slot);
        // Cleared only once the connection is in the slot, so that
        // `is_online()` never finds neither (see there).
        self.reopen_next.store(false, Ordering::Release);
        // Attempts still in their handshake (parked on a runtime nobody
        // drives, or racing this one) would only open a connection to be
        // closed as late: their sockets go now, and their slots on the
        // server with them.
        self.dialing.shut_down_all();
        if let Some(old) = old {
            old.close();
        }
        conn
    }

    /// The connection calls use, if it is alive.
    pub(super) fn live(&self) -> Option<Arc<Connection>> {
        self.conn
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
            .filter(|conn| conn.is_alive())
    }
}

impl Shared {
    pub(super) fn connect_error(&self) -> Option<Error> {
        self.connect_error
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    pub(super) fn note_connect_error(&self, err: Option<Error>) {
        *self
            .connect_error
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = err;
    }
}

impl Shared {
    /// Waits while the connection in use is down with its end not yet
    /// judged (its close runs at once, so a moment; at most the connect
    /// timeout): what follows, a reopen by this call after an idle close,
    /// is decided first, as `is_online()` already reads it.
    pub(super) async fn until_its_end_is_judged(&self) {
        let current = self
            .conn
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        if let Some(conn) = current {
            self.until_judged(&conn).await;
        }
    }

    /// Waits while `conn` is down with its end not yet judged (a moment; at
    /// most the connect timeout): a call it cut off says what follows
    /// only once that is decided.
    pub(super) async fn until_judged(&self, conn: &Connection) {
        let deadline = crate::net::conn::instant_after(
            tokio::time::Instant::now(),
            self.config.connect_timeout,
        );
        while conn.is_ending() && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }

    /// What follows a call's failure for want of a connection, in words.
    pub(super) fn what_follows(&self) -> &'static str {
        if self.reopen_next.load(Ordering::Acquire) {
            "a later call connects again, after the reconnect backoff if the server closed \
             connections before they served a call"
        } else {
            "reconnecting in the background"
        }
    }
}
