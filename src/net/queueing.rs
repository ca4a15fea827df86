//! How a session's lock requests wait in line: a version-2 client's polls
//! and a version-3 client's waits, the places they hold in the lock
//! table's queues, and ending those places when the client gives up,
//! releases or goes away. A place is charged to the connection while it is
//! held, and ended exactly once.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

use super::labels::Limit;
use super::ledger::Reserved;
use super::requests::{unavailable, Asked, Refusal, Session};
use super::state::ServerState;
use super::waits::{Place, Waits, MAX_PLACE_TTL, POLL_PLACE_TTL};
use super::wire::{ErrorKind, Reply, WireArgs, WireTicket, WireWaitReply};
use crate::locker::wait::{Ticket, WaitArgs, WaitReply};
use crate::{LockArgs, LockMode, NetLocker};

impl Session {
    /// A version-2 client's plain lock, made fair: it is asked as a wait
    /// with the ticket this poller drew when the connection first saw it
    /// (same owner, resources and mode), and a place that is only a
    /// reservation, kept for [`POLL_PLACE_TTL`] and renewed by each poll.
    /// The poller therefore keeps its turn between polls, and push waiters
    /// that came later cannot overtake it. `None` when the connection
    /// already remembers as many pollers or places as it may: then the
    /// lock is asked plainly.
    pub(super) async fn poll(&self, args: &LockArgs, mode: LockMode) -> Option<Reply> {
        let (key, ticket) = {
            let mut waits = self.waits();
            let key = waits.poll_key(&args.owner, &args.resources, mode);
            (key, waits.poller(key, Instant::now()))
        };
        let ticket = ticket?;
        let asked = Asked {
            mode,
            ticket,
            place_ttl: POLL_PLACE_TTL,
            push: false,
        };
        Some(match self.ask(args, &asked).await {
            Ok(WaitReply::Granted) => {
                self.waits().poller_done(&key);
                Reply::Bool(true)
            }
            Ok(WaitReply::Queued | WaitReply::Refused) => Reply::Bool(false),
            Err(Refusal::Full(_)) => return None,
            Err(Refusal::Reply(reply)) => reply,
        })
    }

    /// A version-3 waiting lock.
    pub(super) async fn wait(
        &self,
        args: WireArgs,
        mode: LockMode,
        ticket: WireTicket,
        place_ttl: Duration,
        push: bool,
    ) -> Reply {
        let args = match self.checked(args) {
            Ok(args) => args,
            Err(reply) => return reply,
        };
        if place_ttl.is_zero() {
            return Reply::Error {
                kind: ErrorKind::InvalidArgument,
                message: format!(
                    "a place_ttl of zero keeps no place; send how long the server should keep the \
                     place without hearing from the waiter (at most {MAX_PLACE_TTL:?})"
                ),
            };
        }
        let asked = Asked {
            mode,
            ticket: ticket.into(),
            place_ttl: place_ttl.min(MAX_PLACE_TTL),
            push,
        };
        match self.ask(&args, &asked).await {
            Ok(reply) => Reply::Wait(WireWaitReply::from(reply)),
            Err(Refusal::Full(limit)) => {
                self.server.metrics.refused_by(Limit::WaitersPerConnection);
                unavailable(format!(
                    "too many queued waiters on this connection ({limit}); wait until some are \
                 granted or give them up, spread the waits over more connections, or raise the \
                 server's limit (--max-waiters-per-connection)"
                ))
            }
            Err(Refusal::Reply(reply)) => reply,
        }
    }

    /// Asks the lock table for `args` as a waiter, guarded against a
    /// racing release of the uid as [`grant`](Self::grant) is, and brings
    /// the ledger and this connection's places up to date with the answer.
    ///
    /// A place stays charged to the ledger as a lock is while this
    /// connection keeps it: a pushed one may become a lock at any moment,
    /// and a reservation stands on its names all the same. The table may
    /// keep a reservation while it answers `Refused` (it cannot push it),
    /// so for a reservation both answers count as a place. A place that
    /// ends without a grant this connection saw (expired, or superseded by
    /// the same waiter's newer request) is settled by
    /// [`ended`](Self::ended), which takes what is left of it out of the
    /// table before its charge goes.
    pub(super) async fn ask(&self, args: &LockArgs, asked: &Asked) -> Result<WaitReply, Refusal> {
        let released = self.server.released();
        if released.contains(&args.uid) {
            return Ok(WaitReply::Refused);
        }
        let (room, expired) = {
            let mut waits = self.waits();
            let expired = waits.sweep(Instant::now());
            let room = waits
                .has_room(&args.uid, asked.ticket)
                .then_some(())
                .ok_or(waits.limit());
            (room, expired)
        };
        self.ended(expired);
        room.map_err(Refusal::Full)?;
        // Known as this connection's before the ledger names it the uid's
        // owner, until the answer is recorded (or the request dropped): see
        // `end_places`.
        let asking = Asking::new(&self.waits, args, asked.ticket);
        let ledger = &self.server.ledger;
        let reserved = ledger
            .reserve_place(self.id, args)
            .map_err(|over| Refusal::Reply(self.over(over)))?;
        let locker = &*self.server.locker;
        // A set already charged may pay for the uid's own entries on these
        // names (a read lock, waiting for the write lock): the place the
        // table keeps beside them is charged apart. A uid that holds them
        // all in the mode asked is re-checking a wait already granted: the
        // table renews the grant and keeps no place (should the entries
        // expire meanwhile, the set's charge pays for the place instead).
        //
        // A set charged for a place alone pays for that place, not for
        // entries: the uid's entries on its names were granted under other
        // sets, which pay for them (on some names or on all, by plain locks
        // or by waits for other names), and asking again renews the place
        // it pays for. Only entries on every name granted to this very
        // wait (its ticket) may be a grant of that place not yet recorded
        // (a wait granted at once is recorded after the table answers):
        // then the set pays for them, and the new place is charged beside
        // them. (Pushed grants are recorded as the table makes them.)
        let beside = match reserved {
            Reserved::Already(..)
                if locker.holds_any(args)
                    && !locker.holds_all(args, asked.mode)
                    && (!ledger.for_place_alone(args)
                        || locker.holds_granted_to(args, asked.ticket)) =>
            {
                match ledger.reserve_beside(self.id, args) {
                    Ok(beside) => Some(beside),
                    Err(over) => {
                        ledger.undo(&args.uid, reserved);
                        return Err(Refusal::Reply(self.over(over)));
                    }
                }
            }
            _ => None,
        };
        // Newest first, so that each puts back the touch it found.
        let undo_beside = || {
            if let Some(beside) = beside {
                ledger.undo(&args.uid, beside);
            }
        };
        let undo_all = || {
            undo_beside();
            ledger.undo(&args.uid, reserved);
        };
        let wait = WaitArgs {
            ticket: asked.ticket,
            place_ttl: asked.place_ttl,
            // Pushed with the wait's number, which names its place.
            wake: asked
                .push
                .then(|| self.wake.with_slot(asking.number as usize)),
        };
        let reply = match locker.lock_wait(args, asked.mode, &wait).await {
            Ok(reply) => reply,
            Err(err) => {
                undo_all();
                // In quarantine the table still refreshed the entries the
                // uid holds on these names (the answer must not count):
                // their charge lives as long as they do.
                if err.is_quarantine() && locker.holds_any(args) {
                    ledger.touch(self.id, &args.uid);
                }
                return Err(Refusal::Reply(Reply::from_error(err)));
            }
        };
        match (reply, asked.push) {
            (WaitReply::Granted, _) => {
                // The set's charge pays for the entries now, not a place.
                ledger.granted_set(args);
                undo_beside();
                // The grant ended every place of the waiter on these names,
                // one kept beside its entries among them (a write place
                // beside the read lock this request re-checks): its charge
                // goes, wherever it was recorded (the uid is charged here
                // now).
                ledger.release_beside_if_charged_to(&args.uid, &args.resources, self.id);
                // The table ended this waiter's places, under any uid,
                // over any connection.
                let superseded = self.waits().supersede(args, asked.ticket);
                self.ended(superseded);
                // A lock granted to the waiter ends its places over every
                // connection (by uid or by ticket), as a plain lock ends
                // the uid's (`Session::grant`).
                let before = self.server.recorders.of_waiter(&args.uid, asked.ticket);
                self.take_over_places(before, args, asked.ticket, true);
                if released.contains(&args.uid) {
                    self.undo_grant(args).await;
                    return Ok(WaitReply::Refused);
                }
                // The table refreshed the uid's entries on these names,
                // whichever sets they were granted as: every set of the uid
                // counts as touched, as after a refresh.
                ledger.touch(self.id, &args.uid);
            }
            // A reservation may be kept although the answer says the table
            // will not push it; count it as kept until it expires.
            (WaitReply::Queued, _) | (WaitReply::Refused, false) => {
                if released.contains(&args.uid) {
                    // The release may have run before the place existed:
                    // give the place up, and a grant pushed meanwhile.
                    let _ = locker.leave_queue(args);
                    self.waits().end(&args.uid);
                    self.undo_grant(args).await;
                    return Ok(WaitReply::Refused);
                }
                // The connections that recorded the waiter's places before
                // (by uid and by ticket), if others: the table replaced
                // those places where this one stands.
                let before = self.server.recorders.of_waiter(&args.uid, asked.ticket);
                let place = Place {
                    args: args.clone(),
                    ticket: asked.ticket,
                    // As the table keeps it: a validity at the most.
                    expires: Instant::now() + asked.place_ttl.min(locker.config().validity),
                    number: asking.number,
                };
                let superseded = self.waits().queued(place);
                self.ended(superseded);
                // A place the waiter kept over another connection on none
                // but these names is this connection's now, one at a time:
                // that connection stops counting it.
                self.take_over_places(before, args, asked.ticket, false);
                // Keeping a place, the table refreshed the uid's entries on
                // these names too (see the grant above).
                ledger.touch(self.id, &args.uid);
            }
            (WaitReply::Refused, true) => {
                undo_all();
                if locker.holds_any(args) {
                    ledger.touch(self.id, &args.uid);
                }
                let place = self.waits().end(&args.uid);
                self.ended(place);
            }
        }
        Ok(reply)
    }

    /// Ends the records that other connections (`before`, named by the
    /// server-wide index for this waiter's uid and ticket) keep of the
    /// waiter's places: for a place kept (`granted` false), those on none
    /// but `args`'s names, which the table replaced with this request's on
    /// every one of their names, since a place is the connection's it was
    /// asked over last (a place standing on other names too stays counted
    /// where it is, as the table keeps it there until it ends); for a
    /// request granted at once, all of them, which the table ended.
    fn take_over_places(
        &self,
        before: impl IntoIterator<Item = u64>,
        args: &LockArgs,
        ticket: Ticket,
        granted: bool,
    ) {
        let names = (!granted).then_some(&args.resources[..]);
        for conn in before {
            if conn == self.id {
                continue;
            }
            let replaced = self
                .server
                .take_places_replaced(conn, &args.uid, ticket, names);
            for place in replaced {
                self.ended_on(conn, place);
            }
        }
    }

    /// Settles the places of this connection that expired; says whether
    /// it keeps any still.
    pub(super) fn settle_expired_places(&self) -> bool {
        let expired = self.waits().sweep(Instant::now());
        self.ended(expired);
        self.keeps_places()
    }

    /// Whether this connection records a place in line.
    pub(super) fn keeps_places(&self) -> bool {
        !self.waits().is_empty()
    }

    /// Whether the connection keeps nothing on the server that needs it
    /// open: no lock, place in line, proclamation or watch charged to it.
    /// Places that expired are settled first.
    pub(super) fn holds_nothing(&self) -> bool {
        let expired = self.waits().sweep(Instant::now());
        self.ended(expired);
        self.waits().is_empty() && !self.server.ledger.holds(self.id)
    }

    /// The uid was granted or released: its place, if it had one, is
    /// over.
    pub(super) fn end_place(&self, uid: &str) -> Option<Place> {
        let mut waits = self.waits();
        if waits.is_empty() {
            return None;
        }
        waits.end(uid)
    }

    /// A grant was pushed for the wait numbered `number` of `uid`: the
    /// place recorded for the uid is over if it is that wait's. The server
    /// answers every request already read before it forwards a push, so
    /// the wait is recorded by then, even when the table granted its place
    /// before the wait's answer came back. A place recorded for another
    /// wait of the uid (a newer one, in the batch that granted the older)
    /// stays: forgotten here, the table would keep it with no connection
    /// counting it or ending it at its close. (A count of records noted
    /// with the push could not tell a place granted as it was being
    /// recorded from a newer one; the table asked whether the uid still
    /// waits found places other connections asked for.)
    pub(super) fn end_granted_place(&self, uid: &str, number: u64) {
        if self.waits().recorded(uid) == Some(number) {
            self.end_place(uid);
        }
    }

    /// Settles places that ended without a grant this connection saw:
    /// expired, superseded by the same waiter's newer request (under
    /// another uid, or for other names), refused, or given up because the
    /// connection closed. What is left of each in the lock table goes (a
    /// superseded place may stand on names the newer request does not
    /// name; an expired one may not be swept yet). Its charge goes unless
    /// the table holds an entry of its uid on those names: a pushed place
    /// may have been granted meanwhile, and the entries keep the charge
    /// until they are released or it lapses. So the ledger never charges
    /// less than the table keeps.
    ///
    /// A waiter may have asked again over another connection since (it
    /// reconnected; the ledger then charges that connection). The table
    /// keeps one place per waiter, so on the names that request covers the
    /// place is the newer request's now, and the table, which keeps each
    /// place with its request's own list of names, leaves it alone; on the
    /// other names nobody else counts it, so it ends here like any other.
    /// Every place the table keeps is thus counted by the open connection
    /// its request came over, whatever names a reconnected waiter asks
    /// for. Its set's charge stays only where a place of the uid for the
    /// very same names (charged as the same set) or an entry it pays for
    /// still stands.
    pub(super) fn ended(&self, places: impl IntoIterator<Item = Place>) {
        end_places(&self.server, self.id, places);
    }

    /// [`ended`](Self::ended) for a place that connection `conn` recorded
    /// (this connection released or was granted its uid, or took the place
    /// over).
    pub(super) fn ended_on(&self, conn: u64, place: Place) {
        end_places(&self.server, conn, [place]);
    }
}

impl Session {
    /// Ends this connection's places before its socket closes, and returns
    /// once they are ended, when they name few names together
    /// ([`ENDED_IN_PLACE`]): a client that reads the end of the stream then
    /// finds them gone (docs: "a lock server drops the places of a
    /// connection as soon as it closes"), and a release right after cannot
    /// hand the lock to a place nobody listens for. They are ended
    /// youngest first: an older place's end frees its names' lines only
    /// once no younger place of this connection is left there to be
    /// granted, for a whole validity, ahead of waiters that listen. Each
    /// end walks the lines of its names, which other clients may have made
    /// long, so after [`WORK_BEFORE_YIELD`] of it this yields to the other
    /// clients this thread serves. (A release of theirs may then grant a
    /// place of this connection not yet ended, as it may the place of any
    /// waiter that stopped listening; that grant lasts its validity.)
    ///
    /// Many places go to the clean-up thread instead, and this returns at
    /// once: waiting for that thread would keep this connection's socket
    /// open beside a slot already given back, and clients closing and
    /// reopening connections would hold more sockets than
    /// `max_connections + admin_reserve` bound. `slot` is given back once
    /// the places are ended or handed over.
    ///
    /// Cancel safety: dropped at a yield, the places not yet ended go to
    /// the clean-up thread.
    pub(super) async fn close(&self, slot: super::state::Slot) {
        let Some(places) = self.take_places() else {
            return;
        };
        let names: usize = places.iter().map(|p| p.args.resources.len()).sum();
        if names > ENDED_IN_PLACE {
            self.hand_over(places);
            return;
        }
        let mut left = Left {
            session: self,
            places,
        };
        // Youngest last in the list, so popped first.
        let mut since_yield = std::time::Instant::now();
        while let Some(place) = left.places.pop() {
            end_places(&self.server, self.id, [place]);
            if since_yield.elapsed() >= WORK_BEFORE_YIELD && !left.places.is_empty() {
                tokio::task::yield_now().await;
                since_yield = std::time::Instant::now();
            }
        }
        drop(slot);
    }

    /// Takes this connection's places, oldest first, making them unknown to
    /// other connections' clean-ups; `None` when it keeps none.
    fn take_places(&self) -> Option<Vec<Place>> {
        self.server.forget_waits(self.id);
        let mut places: Vec<Place> = {
            let mut waits = self.waits();
            if waits.is_empty() {
                return None;
            }
            waits.drain().collect()
        };
        tracing::debug!(
            places = places.len(),
            "connection closed; giving up its places in line"
        );
        places.sort_by_key(|p| p.ticket);
        Some(places)
    }

    /// Ends `places` on the server's clean-up thread. Ending them takes
    /// work in proportion to what they held (a thousand places of a
    /// thousand names each, checked against what their waiters asked again
    /// elsewhere), so no thread serving other clients does it, whatever
    /// becomes of this runtime. Until it ends them they are places nobody
    /// is told of, as a place whose waiter stopped listening is; a waiter
    /// that reconnected and asked again meanwhile is found by the ledger as
    /// ever.
    /// `places` are oldest first, and ended youngest first: see
    /// [`close`](Self::close).
    fn hand_over(&self, places: Vec<Place>) {
        let (server, conn) = (self.server.clone(), self.id);
        self.server.closings.run(move || {
            end_places(&server, conn, places.into_iter().rev());
        });
    }
}

/// The places a closing connection has not ended yet: handed to the
/// clean-up thread if its close is dropped before it ends them.
struct Left<'a> {
    session: &'a Session,
    places: Vec<Place>,
}

impl Drop for Left<'_> {
    fn drop(&mut self) {
        if !self.places.is_empty() {
            self.session.hand_over(std::mem::take(&mut self.places));
        }
    }
}

/// How long a closing connection ends places before it lets the other
/// clients of its thread go first.
const WORK_BEFORE_YIELD: std::time::Duration = std::time::Duration::from_millis(1);

/// The most names a closed connection's places may name together to be
/// ended where it closes rather than on the clean-up thread: one request's
/// worth (a request names at most 1,000).
const ENDED_IN_PLACE: usize = 1_000;

impl Drop for Session {
    /// The connection closed (or its task was aborted): its waiters can no
    /// longer be told of a grant, so their places go, and with them the
    /// turns they would have taken from others. Grants stay; their holders
    /// still release or refresh them. A session that closed normally
    /// already did this in [`Session::close`]; this is for the aborted
    /// (its runtime shut down, or its task dropped): its places end on the
    /// clean-up thread, since a drop can neither wait nor yield to the
    /// clients this thread serves, so its client may read the end of the
    /// stream a moment before they are gone.
    fn drop(&mut self) {
        if let Some(places) = self.take_places() {
            self.hand_over(places);
        }
        // Entries and watches the table keeps may hold this sink for long:
        // they keep no queue alive.
        self.sink.cut();
    }
}

/// A wait under way on a connection, known to other connections'
/// clean-ups as its place would be (see `Waits::asking`), until dropped.
struct Asking {
    waits: Arc<Mutex<Waits>>,
    number: u64,
}

impl Asking {
    fn new(waits: &Arc<Mutex<Waits>>, args: &LockArgs, ticket: Ticket) -> Asking {
        let number = lock_waits(waits).asking(args, ticket);
        Asking {
            waits: waits.clone(),
            number,
        }
    }
}

impl Drop for Asking {
    fn drop(&mut self) {
        lock_waits(&self.waits).asked(self.number);
    }
}

fn lock_waits(waits: &Mutex<Waits>) -> std::sync::MutexGuard<'_, Waits> {
    waits
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// [`Session::ended`] for connection `conn` of `server`, without the
/// session: a closed connection's places end on the blocking pool, after
/// its session is gone.
pub(super) fn end_places(server: &ServerState, conn: u64, places: impl IntoIterator<Item = Place>) {
    let locker = &*server.locker;
    let ledger = &server.ledger;
    for place in places {
        let uid = &place.args.uid;
        // What is left of this very request's place goes from the table:
        // where the same waiter asked again since (over this connection or
        // another, under this ticket or another uid), the table keeps the
        // newer request's place instead, which is that request's to end.
        // The table tells them apart by their lists of names, so no order
        // of this end and a renewal elsewhere ends the newer place.
        let end = locker.end_request_place(&place.args, place.ticket);
        let granted = locker.holds_granted_to(&place.args, place.ticket);
        if granted {
            // Granted after all (a push its connection may not have known
            // of, closed as it was): the set pays for the grant's entries
            // from now, and a later place of the uid for the same names
            // must not take it for a place's charge.
            ledger.granted_set(&place.args);
        }
        // A place of the uid for exactly these names still stands (a newer
        // request of the waiter, or another of the uid's): it is charged as
        // this same set, which stays.
        if end.queued_same {
            continue;
        }
        // A set charged for a place and never granted since pays for no
        // entry: entries of the uid on its names were granted as other
        // sets, charged as those, and a charge kept for them would last as
        // long as the uid refreshes them. (Unless the uid holds every name
        // by a grant of this very wait, by its ticket: pushed to the place
        // an instant before its end, it may not have reached the ledger
        // yet.)
        let entries_charged_apart = || ledger.for_place_alone(&place.args) && !granted;
        // Settled here, where the uid is charged, unless the connection it
        // is charged to now keeps or asks for a place of it on the same
        // names: its waiter asked again there, found this set charged, and
        // its place is renewed with that charge (the table may not have it
        // yet). (Checked against the connection the charge is on, under
        // the ledger's mutex, as it is given back.)
        let settler = || match ledger.owner(uid) {
            Some(owner) if owner != conn => server
                .place_of(owner, uid)
                .is_none_or(|(names, _)| names[..] != place.args.resources[..])
                .then_some(owner),
            _ => Some(conn),
        };
        // The charge stays while the uid holds an entry there; what this
        // place was charged beside the uid's entries goes.
        if (end.held || locker.holds_any(&place.args)) && !entries_charged_apart() {
            if let Some(on) = settler() {
                ledger.release_beside_if_charged_to(uid, &place.args.resources, on);
            }
            continue;
        }
        if let Some(on) = settler() {
            ledger.release_if_charged_to(uid, &place.args.resources, on);
        }
    }
}
