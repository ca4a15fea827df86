//! What one server connection keeps about its waiters: the places in line
//! it holds on the lock table, so that their number is bounded and they are
//! given up when the connection closes, and (for version-2 clients) the
//! ticket each polling waiter drew, so that a poller keeps its turn.
//!
//! The connection's own task changes it, through the session; another
//! connection only reads which names a waiter's place there covers (see
//! `ServerState::place_of`).

use std::collections::HashMap;
use std::hash::{BuildHasher, RandomState};
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::recorders::Recorders;
use crate::locker::wait::Ticket;
use crate::{LockArgs, LockMode};

/// The longest a server keeps a place without hearing from its waiter;
/// longer requests are clamped to it.
pub(crate) const MAX_PLACE_TTL: Duration = Duration::from_secs(60);

/// How long a version-2 poller's place is kept after each poll: while it
/// lasts the poller keeps its turn, and a poller that went away blocks the
/// line at most this long. Renewed by each poll.
pub(crate) const POLL_PLACE_TTL: Duration = Duration::from_secs(1);

/// How long a version-2 poller's ticket is remembered after its last poll.
/// Longer than its place: a poller that comes back after a long backoff
/// gets its old turn back instead of going to the end of the line.
pub(crate) const POLL_TICKET_TTL: Duration = Duration::from_secs(10);

/// How often expired places are looked for while requests come in.
const SWEEP_EVERY: Duration = Duration::from_secs(1);

/// What the server's memory holds per waiter of a connection besides what
/// the lock table's account (the ledger) charges: the place's record here,
/// a poller's ticket and the waiter's two entries in the server-wide index
/// of records (`Recorders`), with the maps' slack. An upper estimate
/// (checked by a unit test below).
pub(crate) const WAITER_OVERHEAD: usize = 640;

/// A place this connection holds in the lock table's line.
#[derive(Debug, Clone)]
pub(crate) struct Place {
    pub(crate) args: LockArgs,
    pub(crate) ticket: Ticket,
    /// When the lock table drops it, at the latest.
    pub(crate) expires: Instant,
    /// The number of the wait that asked for it ([`Waits::asking`]),
    /// which its grant is pushed with: a push names the very place it
    /// granted. 0 for a place no push is made for.
    pub(crate) number: u64,
}

/// A version-2 poller: the same owner asking for the same resources in
/// the same mode again and again, with a new uid each round. Kept as a
/// digest of those (keyed per connection, so that a client cannot make two
/// of its requests collide on purpose; a collision would only share a
/// turn): a poller remembered after its request was refused holds a few
/// bytes, not its request's names, which nothing charges.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct PollKey(u64);

#[derive(Debug)]
struct Poller {
    ticket: Ticket,
    seen: Instant,
}

#[derive(Debug)]
pub(crate) struct Waits {
    /// Most live places (and most remembered pollers).
    limit: usize,
    places: HashMap<Arc<str>, Place>,
    /// The uid of each place, by ticket: one waiter has one place.
    by_ticket: HashMap<Ticket, Arc<str>>,
    pollers: HashMap<PollKey, Poller>,
    /// Keys the pollers' digests.
    poll_keys: RandomState,
    next_sweep: Instant,
    /// Waits asked of the lock table and not recorded yet (see
    /// `Session::ask`), by number: the uid, names and ticket of each.
    /// Another connection's clean-up, whose waiter asked again here, keeps
    /// their names as it would a recorded place's; else, in that moment,
    /// it would end the place the table just renewed for this one.
    asking: Vec<AskedWait>,
    next_asking: u64,
    /// This connection's id, and the server-wide index it keeps up to date
    /// with every place it records, asks for or forgets.
    conn: u64,
    recorders: Arc<Recorders>,
}

/// A wait under way: its number, uid, names and ticket.
type AskedWait = (u64, Arc<str>, Arc<[String]>, Ticket);

impl Waits {
    /// The places of a connection known by itself alone (tests).
    #[cfg(test)]
    pub(crate) fn new(limit: usize) -> Waits {
        Waits::of_connection(limit, 0, Arc::default())
    }

    /// Connection `conn`'s places, indexed server-wide in `recorders`.
    pub(crate) fn of_connection(limit: usize, conn: u64, recorders: Arc<Recorders>) -> Waits {
        Waits {
            limit,
            places: HashMap::new(),
            by_ticket: HashMap::new(),
            pollers: HashMap::new(),
            poll_keys: RandomState::new(),
            next_sweep: Instant::now(),
            asking: Vec::new(),
            next_asking: 0,
            conn,
            recorders,
        }
    }

    /// The key of a version-2 poller of `owner` on `resources` in `mode`.
    pub(crate) fn poll_key(&self, owner: &str, resources: &[String], mode: LockMode) -> PollKey {
        PollKey(self.poll_keys.hash_one((owner, resources, mode)))
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.places.is_empty()
    }

    /// Live places, expired ones included until the next sweep.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.places.len()
    }

    /// Removes the places that expired, when a sweep is due or the limit
    /// is reached, and returns them: they ended without a grant this
    /// connection heard of.
    pub(crate) fn sweep(&mut self, now: Instant) -> Vec<Place> {
        if now < self.next_sweep && self.places.len() < self.limit {
            return Vec::new();
        }
        self.next_sweep = now + SWEEP_EVERY;
        let expired: Vec<Arc<str>> = self
            .places
            .iter()
            .filter(|(_, p)| p.expires <= now)
            .map(|(uid, _)| uid.clone())
            .collect();
        let ended = expired.iter().filter_map(|uid| self.end(uid)).collect();
        self.pollers
            .retain(|_, p| now.saturating_duration_since(p.seen) < POLL_TICKET_TTL);
        ended
    }

    /// Whether a wait of `uid` with `ticket` fits: it renews a place (of
    /// the uid, or of the same waiter under an earlier uid), or there is
    /// room for one more.
    pub(crate) fn has_room(&self, uid: &str, ticket: Ticket) -> bool {
        self.places.len() < self.limit
            || self.places.contains_key(uid)
            || self.by_ticket.contains_key(&ticket)
    }

    /// The most live places.
    pub(crate) fn limit(&self) -> usize {
        self.limit
    }

    /// Records that the lock table keeps a place for `place.args.uid`.
    /// Returns the places of the same waiter that it supersedes: see
    /// [`supersede`](Self::supersede).
    pub(crate) fn queued(&mut self, place: Place) -> Vec<Place> {
        let superseded = self.supersede(&place.args, place.ticket);
        self.by_ticket.insert(place.ticket, place.args.uid.clone());
        let (uid, ticket) = (place.args.uid.clone(), place.ticket);
        self.places.insert(uid.clone(), place);
        self.reindex(&uid, ticket);
        superseded
    }

    /// Forgets the places of the waiter that asked with `args` and
    /// `ticket` and was granted or queued: one waiter (a uid, or a ticket)
    /// keeps the places of its newest request only. Returns those whose
    /// request differs from this one (the ticket's under another uid, or
    /// the uid's on other names): the caller ends what is left of them in
    /// the lock table and settles their charge. The uid's own place for
    /// the same names is simply renewed or granted.
    pub(crate) fn supersede(&mut self, args: &LockArgs, ticket: Ticket) -> Vec<Place> {
        let mut superseded = Vec::new();
        let other = self
            .by_ticket
            .get(&ticket)
            .filter(|u| **u != args.uid)
            .cloned();
        if let Some(old) = other.and_then(|uid| self.end(&uid)) {
            superseded.push(old);
        }
        if let Some(old) = self.end(&args.uid)
            && old.args.resources != args.resources
        {
            superseded.push(old);
        }
        superseded
    }

    /// The number of the wait whose place is recorded for `uid`
    /// ([`Place::number`]).
    pub(crate) fn recorded(&self, uid: &str) -> Option<u64> {
        self.places.get(uid).map(|place| place.number)
    }

    /// Forgets the place recorded for `uid`, or under `ticket`, where it
    /// stands on none but `names` (on any names, with `None`), and returns
    /// it: the same waiter asked for them again over another connection,
    /// and the table replaced or granted it on every one of its names (or
    /// was granted the waiter's request, which ends all its places).
    pub(crate) fn end_replaced(
        &mut self,
        uid: &str,
        ticket: Ticket,
        names: Option<&[String]>,
    ) -> Vec<Place> {
        let names: Option<std::collections::HashSet<&str>> =
            names.map(|names| names.iter().map(String::as_str).collect());
        let by_ticket = self.by_ticket.get(&ticket).cloned();
        let mut ended = Vec::new();
        for waiter in std::iter::once(uid).chain(by_ticket.as_deref()) {
            let covered = self.places.get(waiter).is_some_and(|place| {
                names.as_ref().is_none_or(|names| {
                    place
                        .args
                        .resources
                        .iter()
                        .all(|name| names.contains(name.as_str()))
                })
            });
            if covered && let Some(place) = self.end(waiter) {
                ended.push(place);
            }
        }
        ended
    }

    /// The names and ticket of `uid`'s place on this connection, if it
    /// keeps one or is asking the table for one.
    /// A wait under way comes first: it is newer than any place recorded
    /// for the uid, and what the table keeps once it is answered.
    pub(crate) fn place_of(&self, uid: &str) -> Option<(Arc<[String]>, Ticket)> {
        self.asking
            .iter()
            .rev()
            .find(|(_, u, _, _)| **u == *uid)
            .map(|(_, _, names, ticket)| (names.clone(), *ticket))
            .or_else(|| {
                self.places
                    .get(uid)
                    .map(|p| (p.args.resources.clone(), p.ticket))
            })
    }

    /// The names the wait numbered `number` asked for, while it is being
    /// asked or its place is recorded for `uid`: a grant pushed with that
    /// number is of them.
    pub(crate) fn names_of(&self, uid: &str, number: u64) -> Option<Arc<[String]>> {
        self.asking
            .iter()
            .find(|(n, _, _, _)| *n == number)
            .map(|(_, _, names, _)| names.clone())
            .or_else(|| {
                self.places
                    .get(uid)
                    .filter(|p| p.number == number)
                    .map(|p| p.args.resources.clone())
            })
    }

    /// A wait of `args` with `ticket` is being asked of the table; returns
    /// its number, for [`asked`](Self::asked).
    pub(crate) fn asking(&mut self, args: &LockArgs, ticket: Ticket) -> u64 {
        self.next_asking += 1;
        self.asking.push((
            self.next_asking,
            args.uid.clone(),
            args.resources.clone(),
            ticket,
        ));
        self.reindex(&args.uid, ticket);
        self.next_asking
    }

    /// The wait numbered `number` was answered (and its place recorded,
    /// if it has one), or given up.
    pub(crate) fn asked(&mut self, number: u64) {
        let Some(at) = self.asking.iter().position(|(n, ..)| *n == number) else {
            return;
        };
        let (_, uid, _, ticket) = self.asking.remove(at);
        self.reindex(&uid, ticket);
    }

    /// Lists this connection in the server-wide index under `uid` and
    /// under `ticket` while it records or asks for a place of either, and
    /// takes it off once it does neither.
    fn reindex(&self, uid: &Arc<str>, ticket: Ticket) {
        let by_uid = self.places.contains_key(uid) || self.asking.iter().any(|a| a.1 == *uid);
        let by_ticket =
            self.by_ticket.contains_key(&ticket) || self.asking.iter().any(|a| a.3 == ticket);
        self.recorders
            .set(self.conn, uid, by_uid, ticket, by_ticket);
    }

    /// Forgets the place of `uid`, which was granted or released.
    pub(crate) fn end(&mut self, uid: &str) -> Option<Place> {
        let place = self.places.remove(uid)?;
        if self
            .by_ticket
            .get(&place.ticket)
            .is_some_and(|u| u.as_ref() == uid)
        {
            self.by_ticket.remove(&place.ticket);
        }
        self.reindex(&place.args.uid, place.ticket);
        Some(place)
    }

    /// Every place, for when the connection closes.
    pub(crate) fn drain(&mut self) -> impl Iterator<Item = Place> + '_ {
        self.pollers.clear();
        self.by_ticket.clear();
        for (uid, place) in &self.places {
            self.recorders
                .set(self.conn, uid, false, place.ticket, false);
        }
        self.places.drain().map(|(_, p)| p)
    }

    /// The ticket of the poller `key`: the one it drew at first sight,
    /// renewed. `None` when the connection remembers as many pollers as it
    /// may and this is a new one: it then polls without a place.
    pub(crate) fn poller(&mut self, key: PollKey, now: Instant) -> Option<Ticket> {
        if let Some(poller) = self.pollers.get_mut(&key) {
            poller.seen = now;
            return Some(poller.ticket);
        }
        if self.pollers.len() >= self.limit {
            self.pollers
                .retain(|_, p| now.saturating_duration_since(p.seen) < POLL_TICKET_TTL);
            if self.pollers.len() >= self.limit {
                return None;
            }
        }
        let ticket = Ticket::now();
        self.pollers.insert(key, Poller { ticket, seen: now });
        Some(ticket)
    }

    /// The poller `key` was granted: its wait is over, and its next one
    /// draws a new ticket.
    pub(crate) fn poller_done(&mut self, key: &PollKey) {
        self.pollers.remove(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn place(uid: &str, ticket: Ticket, expires: Instant) -> Place {
        Place {
            args: LockArgs {
                uid: uid.into(),
                resources: vec!["r".to_string()].into(),
                owner: "o".into(),
                source: "s".into(),
                quorum: 1,
            },
            ticket,
            expires,
            number: 0,
        }
    }

    #[tokio::test(start_paused = true)]
    async fn places_are_bounded_replaced_by_ticket_and_swept_when_expired() {
        let now = Instant::now();
        let mut waits = Waits::new(2);
        let (t1, t2, t3) = (Ticket::now(), Ticket::now(), Ticket::now());
        assert!(waits
            .queued(place("a", t1, now + Duration::from_secs(5)))
            .is_empty());
        assert!(waits
            .queued(place("b", t2, now + Duration::from_secs(1)))
            .is_empty());
        assert!(!waits.has_room("c", t3), "full");
        assert!(waits.has_room("a", t3), "renewing a uid");
        assert!(waits.has_room("c", t1), "the same waiter under a new uid");
        let replaced = waits.queued(place("c", t1, now + Duration::from_secs(5)));
        let replaced: Vec<_> = replaced.into_iter().map(|p| p.args.uid).collect();
        assert_eq!(replaced, [Arc::<str>::from("a")]);
        assert_eq!(waits.len(), 2);
        tokio::time::advance(Duration::from_secs(2)).await;
        let expired = waits.sweep(Instant::now());
        assert_eq!(expired.len(), 1);
        assert_eq!(&*expired[0].args.uid, "b");
        assert!(waits.has_room("d", t3));
        assert!(waits.end("c").is_some());
        assert!(waits.is_empty());
        assert!(waits.by_ticket.is_empty());
        // A waiter granted under a new uid: its old place goes.
        waits.queued(place("e", t2, now + Duration::from_secs(9)));
        let granted = place("f", t2, now);
        assert_eq!(waits.supersede(&granted.args, t2).len(), 1);
        assert!(waits.supersede(&granted.args, t2).is_empty());
        assert!(waits.is_empty());
        // A uid renewing its place for the same names supersedes nothing;
        // for other names, its place for the old ones.
        assert!(waits.queued(place("g", t3, now)).is_empty());
        assert!(waits.queued(place("g", t3, now)).is_empty());
        let mut moved = place("g", t3, now);
        moved.args.resources = vec!["other".to_string()].into();
        let superseded = waits.queued(moved);
        assert_eq!(superseded.len(), 1);
        assert_eq!(&superseded[0].args.resources[..], ["r".to_string()]);
        assert_eq!(waits.len(), 1);
        assert_eq!(waits.by_ticket.len(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_poller_keeps_its_ticket_until_granted_or_gone() {
        let mut waits = Waits::new(2);
        let keys = Waits::new(2).poll_keys;
        waits.poll_keys = keys.clone();
        let key = |name: &str| {
            PollKey(keys.hash_one(("host:1", &[name.to_string()][..], LockMode::Write)))
        };
        let first = waits.poller(key("x"), Instant::now()).unwrap();
        tokio::time::advance(Duration::from_secs(5)).await;
        assert_eq!(waits.poller(key("x"), Instant::now()), Some(first));
        assert!(waits.poller(key("y"), Instant::now()).is_some());
        assert_eq!(waits.poller(key("z"), Instant::now()), None, "full");
        waits.poller_done(&key("x"));
        let again = waits.poller(key("x"), Instant::now()).unwrap();
        assert!(again > first, "a new wait goes to the end of the line");
        tokio::time::advance(POLL_TICKET_TTL).await;
        assert!(
            waits.poller(key("z"), Instant::now()).is_some(),
            "forgotten pollers make room"
        );
    }
}

#[cfg(test)]
mod overhead_tests {
    use super::*;

    /// [`WAITER_OVERHEAD`] holds what one waiter of a connection keeps
    /// beside the ledger's charge, with every map at its sparsest (half
    /// full, just grown): its place and ticket records here, a poller's
    /// ticket, and its two entries in the server-wide index of records.
    #[test]
    fn the_waiter_overhead_covers_a_waiters_records() {
        let slot = |size: usize| 2 * (size + 1);
        let here = slot(std::mem::size_of::<(Arc<str>, Place)>())
            + slot(std::mem::size_of::<(Ticket, Arc<str>)>())
            + slot(std::mem::size_of::<(PollKey, Poller)>());
        let index = crate::net::recorders::ENTRY_BYTES;
        eprintln!("records {here} bytes, index {index} bytes");
        assert!(here + index <= WAITER_OVERHEAD, "{here} + {index}");
    }
}
