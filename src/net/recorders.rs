//! Which open connections record each waiter's places, server-wide, by
//! uid and by ticket (the lock table keeps one place per waiter on each
//! name, and a waiter is a uid or a ticket).
//!
//! Each connection keeps the records of the places it asked for (its
//! [`Waits`](super::waits::Waits)); a waiter may ask over several. This
//! index finds them from anywhere: a release of a uid over one connection
//! ends the records the others keep of the places it ended; a waiter that
//! asks again over another connection takes over the places the table
//! replaced; a place's end leaves alone the names a newer place of the
//! same waiter stands on over another connection.
//!
//! Invariant: a connection is listed under a uid (a ticket) exactly while
//! its `Waits` records a place of that uid (under that ticket) or is asking
//! the table for one. Only `Waits` changes it, in the same steps as its
//! own maps. Its mutex is taken last, with no other lock taken under it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use smallvec::SmallVec;

use crate::locker::wait::Ticket;

#[derive(Debug, Default)]
pub(crate) struct Recorders(Mutex<Index>);

/// The connections listed under one key: nearly always one, kept inline.
type Conns = SmallVec<[u64; 1]>;

/// What one waiter's listing under its uid and its ticket takes, with
/// each map at its sparsest (half full, just grown).
#[cfg(test)]
pub(crate) const ENTRY_BYTES: usize = 2 * (std::mem::size_of::<(Arc<str>, Conns)>() + 1)
    + 2 * (std::mem::size_of::<(Ticket, Conns)>() + 1);

#[derive(Debug, Default)]
struct Index {
    uids: HashMap<Arc<str>, Conns>,
    tickets: HashMap<Ticket, Conns>,
}

impl Recorders {
    fn index(&self) -> MutexGuard<'_, Index> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The connections that record a place of `uid`, or ask for one.
    pub(crate) fn of(&self, uid: &str) -> Conns {
        self.index().uids.get(uid).cloned().unwrap_or_default()
    }

    /// The connections that record a place of `uid` or one under
    /// `ticket`, or ask for one: the places a request of that waiter
    /// replaces in the table, on the names it asks for.
    pub(crate) fn of_waiter(&self, uid: &str, ticket: Ticket) -> Conns {
        let index = self.index();
        let mut conns = index.uids.get(uid).cloned().unwrap_or_default();
        for conn in index.tickets.get(&ticket).into_iter().flatten() {
            if !conns.contains(conn) {
                conns.push(*conn);
            }
        }
        conns
    }

    /// Lists connection `conn` under `uid` and under `ticket`, or takes it
    /// off, as it records or asks for a place there or no longer does.
    pub(crate) fn set(
        &self,
        conn: u64,
        uid: &Arc<str>,
        by_uid: bool,
        ticket: Ticket,
        by_ticket: bool,
    ) {
        let mut index = self.index();
        set_in(&mut index.uids, uid.clone(), conn, by_uid);
        set_in(&mut index.tickets, ticket, conn, by_ticket);
    }
}

fn set_in<K: std::hash::Hash + Eq>(map: &mut HashMap<K, Conns>, key: K, conn: u64, listed: bool) {
    if listed {
        let conns = map.entry(key).or_default();
        if !conns.contains(&conn) {
            conns.push(conn);
        }
        return;
    }
    let Some(conns) = map.get_mut(&key) else {
        return;
    };
    conns.retain(|c| *c != conn);
    if conns.is_empty() {
        map.remove(&key);
        if map.capacity() > 64 && map.len() < map.capacity() / 4 {
            map.shrink_to_fit();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connections_are_listed_while_they_record_and_found_by_uid_or_ticket() {
        let recorders = Recorders::default();
        let (uid, t1, t2) = (Arc::<str>::from("u"), Ticket::now(), Ticket::now());
        recorders.set(1, &uid, true, t1, true);
        recorders.set(2, &uid, true, t2, true);
        assert_eq!(recorders.of("u").as_slice(), [1, 2]);
        assert_eq!(recorders.of_waiter("v", t2).as_slice(), [2]);
        recorders.set(1, &uid, false, t1, false);
        assert_eq!(recorders.of("u").as_slice(), [2]);
        assert!(recorders.of_waiter("v", t1).is_empty());
        recorders.set(2, &uid, false, t2, false);
        assert!(recorders.of("u").is_empty());
        assert!(recorders.index().uids.is_empty() && recorders.index().tickets.is_empty());
    }
}
