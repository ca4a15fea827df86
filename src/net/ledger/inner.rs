//! The ledger's bookkeeping under its mutex: admission against the
//! limits, the touch times a refused call puts back, moving a uid's charge
//! between connections, and dropping what a release or a lapse ends.
//! Invariants: `total` is the sum of every charge's bytes, and each open
//! connection's usage counts the charges whose `conn` it is.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::{
    beside, fit_list, prune_after, Before, Board, BoardReserved, Charge, Gone, Inner, Limits, Over,
};

use crate::net::labels::Limit;

/// What a reservation of a uid looks at: whether the uid is charged at
/// all, what it is charged over another connection than the one asking,
/// and what the set (or board record) named is charged, when it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Standing {
    pub(super) new_uid: bool,
    pub(super) moving: usize,
    pub(super) set: Option<usize>,
}

impl Inner {
    /// The standing of `uid` for a reservation over `conn` of the set
    /// `hash` (or, with `board`, of that board's record of `hash`).
    fn standing(&self, (conn, uid): (u64, &str), board: Option<Board>, hash: u64) -> Standing {
        let charge = self.charges.get(uid);
        let set = charge.and_then(|charge| match board {
            None => charge
                .sets
                .iter()
                .find(|set| set.hash == hash)
                .map(|set| set.bytes),
            Some(board) => charge
                .boards
                .iter()
                .find(|(b, h, _, _)| *b == board && *h == hash)
                .map(|(_, _, bytes, _)| *bytes),
        });
        Standing {
            new_uid: charge.is_none(),
            moving: self.charged_elsewhere(uid, conn),
            set,
        }
    }

    /// Admits the bytes `need` asks for the standing of `uid` (none when
    /// it says `None`), and returns the standing they were admitted for.
    /// An admission over a limit prunes lapsed charges first, which may
    /// remove this uid's own: its standing is then looked at again and
    /// admitted as it is now (a uid gone counts a lock anew, a set gone is
    /// charged whole). No prune is due again at once, so this settles at
    /// the second look (three at most).
    pub(super) fn admit_as_it_stands(
        &mut self,
        limits: &Limits,
        asking: (u64, &str),
        board: Option<Board>,
        hash: u64,
        need: impl Fn(&Standing) -> Option<usize>,
        now: Instant,
    ) -> Result<Standing, Over> {
        let mut standing = self.standing(asking, board, hash);
        for _ in 0..3 {
            if let Some(bytes) = need(&standing) {
                let (new_uid, moving) = (standing.new_uid, standing.moving);
                self.admit(limits, asking.0, bytes, (new_uid, moving), now)?;
            }
            let after = self.standing(asking, board, hash);
            if after == standing {
                break;
            }
            standing = after;
        }
        Ok(standing)
    }

    /// Whether `bytes` more fit for `conn`, after pruning lapsed charges
    /// when they do not and a prune is due. `moving` is what the uid is
    /// charged over another connection, which the reservation moves to
    /// `conn` (counted there from now, and already in the total); with it,
    /// or a `new_uid`, the connection counts one lock more.
    pub(super) fn admit(
        &mut self,
        limits: &Limits,
        conn: u64,
        bytes: usize,
        (new_uid, moving): (bool, usize),
        now: Instant,
    ) -> Result<(), Over> {
        if let Err(reason) = self.admits(limits, conn, bytes, (new_uid, moving)) {
            let due = self.next_prune.is_none_or(|at| now >= at);
            if !due {
                return Err(reason);
            }
            self.prune(now, limits.lapse);
            self.next_prune = Some(prune_after(now, limits.validity));
            self.admits(limits, conn, bytes, (new_uid, moving))?;
        }
        Ok(())
    }

    /// Puts a board record back as it was before `reserved`.
    /// What `uid` is charged over a connection other than `conn`: what a
    /// reservation over `conn` would move there.
    pub(super) fn charged_elsewhere(&self, uid: &str, conn: u64) -> usize {
        self.charges
            .get(uid)
            .filter(|charge| charge.conn != conn)
            .map_or(0, Charge::bytes)
    }

    /// Puts a board record back as it was before `reserved`.
    pub(super) fn set_board(&mut self, uid: &str, reserved: BoardReserved) {
        let Some(charge) = self.charges.get_mut(uid) else {
            return;
        };
        let BoardReserved {
            board,
            hash,
            before,
            ..
        } = reserved;
        let at = charge
            .boards
            .iter()
            .position(|(b, h, _, _)| *b == board && *h == hash);
        let Some(at) = at else { return };
        if charge.boards[at].3 {
            // Another call found the record charged meanwhile and may keep
            // what it stored: the record stays, and lapses with the uid.
            return;
        }
        let now = charge.boards[at].2;
        let freed = match before {
            Some(bytes) => {
                charge.boards[at].2 = bytes.min(now);
                now - charge.boards[at].2
            }
            None => {
                let freed = charge.boards.swap_remove(at).2;
                fit_list(&mut charge.boards);
                freed
            }
        };
        let (conn, gone) = (charge.conn, charge.is_empty());
        if gone {
            self.charges.remove(uid);
        }
        self.total -= freed;
        if let Some(usage) = self.usage.get_mut(&conn) {
            usage.bytes = usage.bytes.saturating_sub(freed);
            usage.locks = usage.locks.saturating_sub(usize::from(gone));
        }
        self.fit();
    }

    pub(super) fn admits(
        &self,
        limits: &Limits,
        conn: u64,
        bytes: usize,
        (new_uid, moving): (bool, usize),
    ) -> Result<(), Over> {
        let usage = self.usage.get(&conn).copied().unwrap_or_default();
        let over = |limit, message| Err(Over { limit, message });
        if (new_uid || moving > 0) && usage.locks >= limits.locks_per_connection {
            return over(
                Limit::EntriesPerConnection,
                format!(
                    "this connection already holds {} locks; release some first",
                    limits.locks_per_connection
                ),
            );
        }
        let conn_bytes = usage.bytes + moving + bytes;
        if conn_bytes > limits.bytes_per_connection {
            return over(
                Limit::BytesPerConnection,
                format!(
                    "this connection's locks would take {} bytes on the server, over its limit \
                     of {} bytes; release some locks or use fewer or shorter names",
                    conn_bytes, limits.bytes_per_connection
                ),
            );
        }
        if self.total + bytes > limits.total_bytes {
            return over(
                Limit::LockBytes,
                format!(
                    "the server's lock table is full ({} of {} bytes); try again later",
                    self.total, limits.total_bytes
                ),
            );
        }
        Ok(())
    }

    /// Marks `uid` touched now and moves its charge to `conn`. Returns
    /// whether it was charged.
    ///
    /// `conn`'s own limits are not checked: the move comes with a refresh
    /// (a holder that reconnected, say), refusing it would cost the holder
    /// its lock, and the charge was counted in the table's total when the
    /// lock was granted, which the move does not change.
    /// The touch times that an [`adopt`](Self::adopt) of `uid` over
    /// `conn` at `now` is about to replace.
    pub(super) fn touches(&self, uid: &str, conn: u64, set: u64, now: Instant) -> Before {
        Before {
            at: now,
            conn,
            set,
            set_touched: self
                .charges
                .get(uid)
                .and_then(|c| c.sets.iter().find(|s| s.hash == set).map(|s| s.touched)),
            from: self.charges.get(uid).map(|c| c.conn),
            charge: self.charges.get(uid).map(|c| c.touched),
            usage: self.usage.get(&conn).and_then(|u| u.touched),
        }
    }

    /// Puts back the touch times of `before`, and the connection the charge
    /// was moved from, where nothing touched them since.
    pub(super) fn untouch(&mut self, uid: &str, before: Before) {
        if let Some(charge) = self.charges.get(uid)
            && charge.touched == before.at
            && charge.conn == before.conn
            && let Some(from) = before.from
            && from != before.conn
        {
            // Back to a connection that closed since, too: the charge then
            // counts in the total only, as a closed connection's do.
            self.move_charge(uid, from, false);
        }
        if let (Some(charge), Some(at)) = (self.charges.get_mut(uid), before.set_touched)
            && let Some(set) = charge.sets.iter_mut().find(|s| s.hash == before.set)
            && set.touched == before.at
        {
            set.touched = at;
        }
        if let (Some(charge), Some(at)) = (self.charges.get_mut(uid), before.charge)
            && charge.touched == before.at
        {
            charge.touched = at;
        }
        if let Some(usage) = self.usage.get_mut(&before.conn)
            && usage.touched == Some(before.at)
        {
            usage.touched = before.usage;
        }
    }

    pub(super) fn adopt(&mut self, uid: &str, conn: u64, now: Instant) -> bool {
        let Some(charge) = self.charges.get_mut(uid) else {
            return false;
        };
        charge.touched = now;
        self.move_charge(uid, conn, true);
        if let Some(usage) = self.usage.get_mut(&conn) {
            usage.touched = Some(now);
        }
        true
    }

    /// Counts the charge of `uid` against `conn` from now on, and no longer
    /// against the connection it was charged to.
    /// With `counted` false, a connection without a usage (one that closed
    /// since) is not given one: the charge counts in the total only.
    pub(super) fn move_charge(&mut self, uid: &str, conn: u64, counted: bool) {
        let Some(charge) = self.charges.get_mut(uid) else {
            return;
        };
        if charge.conn == conn {
            return;
        }
        let (old, bytes) = (charge.conn, charge.bytes());
        charge.conn = conn;
        if let Some(usage) = self.usage.get_mut(&old) {
            usage.locks = usage.locks.saturating_sub(1);
            usage.bytes = usage.bytes.saturating_sub(bytes);
        }
        if counted || self.usage.contains_key(&conn) {
            let usage = self.usage.entry(conn).or_default();
            usage.locks += 1;
            usage.bytes += bytes;
        }
    }

    /// Touches the set `hash` of `uid`, which a reservation found charged,
    /// and grows its charge by `grow` bytes; says whether a grant (`grant`)
    /// took a set charged for a place alone for its entries.
    pub(super) fn found(
        &mut self,
        uid: &str,
        hash: u64,
        grow: usize,
        grant: bool,
        now: Instant,
    ) -> bool {
        let Some(charge) = self.charges.get_mut(uid) else {
            return false;
        };
        let conn = charge.conn;
        let Some(set) = charge.sets.iter_mut().find(|set| set.hash == hash) else {
            return false;
        };
        let taken = grant && set.for_place;
        set.for_place &= !taken;
        set.touched = now;
        set.shared = true;
        set.bytes += grow;
        self.total += grow;
        if let Some(usage) = self.usage.get_mut(&conn) {
            usage.bytes += grow;
        }
        taken
    }

    /// Takes `grew` bytes back off the set `hash` of `uid`, when nothing
    /// touched the set since the reservation at `at` that grew it.
    pub(super) fn shrink(&mut self, uid: &str, hash: u64, grew: usize, at: Instant) {
        let Some(charge) = self.charges.get_mut(uid) else {
            return;
        };
        let conn = charge.conn;
        let Some(set) = charge.sets.iter_mut().find(|set| set.hash == hash) else {
            return;
        };
        if set.touched != at {
            return;
        }
        let freed = grew.min(set.bytes);
        set.bytes -= freed;
        self.total = self.total.saturating_sub(freed);
        if let Some(usage) = self.usage.get_mut(&conn) {
            usage.bytes = usage.bytes.saturating_sub(freed);
        }
    }

    /// Removes what `gone` says of the charge of `uid`.
    pub(super) fn remove(&mut self, uid: &str, gone: Gone) {
        let Some(charge) = self.charges.get_mut(uid) else {
            return;
        };
        let before = charge.bytes();
        match gone {
            Gone::Reserved(hash) => {
                charge.sets.retain(|set| set.hash != hash);
                fit_list(&mut charge.sets);
            }
            Gone::Set(hash) => {
                charge
                    .sets
                    .retain(|set| set.hash != hash && set.hash != beside(hash));
                fit_list(&mut charge.sets);
            }
            Gone::Proclamation(hash) => {
                charge
                    .boards
                    .retain(|(b, h, _, _)| !(*b == Board::Proclamation && *h == hash));
                fit_list(&mut charge.boards);
            }
            // Every lock of the uid, and with them its proclamations;
            // its watches live on in the locker until they fire or their
            // ttl runs out, and stay charged until the uid lapses.
            Gone::Locks => {
                charge.sets.clear();
                charge.boards.retain(|(b, _, _, _)| *b == Board::Watch);
            }
            Gone::All => {
                charge.sets.clear();
                charge.boards.clear();
            }
        }
        let freed = before - charge.bytes();
        let (conn, gone) = (charge.conn, charge.is_empty());
        if gone {
            self.charges.remove(uid);
        }
        self.total -= freed;
        if let Some(usage) = self.usage.get_mut(&conn) {
            usage.bytes = usage.bytes.saturating_sub(freed);
            usage.locks = usage.locks.saturating_sub(usize::from(gone));
        }
        self.fit();
    }

    /// Gives back the maps' room once they are sparse, as the lock table's
    /// maps do (see [`KEPT`]): O(1) amortised.
    pub(super) fn fit(&mut self) {
        self.charges.tighten();
        self.usage.tighten();
    }

    /// Drops every charge nothing touched for the lapse, and every set of a
    /// uid that nothing naming it touched for as long: the locker has
    /// expired those entries and places.
    /// Drops what of `uid`'s charge has lapsed ([`prune`](Self::prune) for
    /// one uid): a reservation then sees the uid as it stands, a lapsed
    /// uid as a new one and a lapsed set as one never charged, whether or
    /// not an admission would have pruned it (one that needs none, a set
    /// asked again with no longer text, would otherwise adopt a lapsed
    /// charge past the limits of the connection asking).
    pub(super) fn lapse(&mut self, uid: &str, now: Instant, lapse: Duration) {
        let stale = |at: Instant| now.saturating_duration_since(at) >= lapse;
        let Some(charge) = self.charges.get(uid) else {
            return;
        };
        if stale(charge.touched) {
            self.remove(uid, Gone::All);
            return;
        }
        let sets: Vec<u64> = charge
            .sets
            .iter()
            .filter(|set| stale(set.touched))
            .map(|set| set.hash)
            .collect();
        for hash in sets {
            self.remove(uid, Gone::Reserved(hash));
        }
    }

    pub(super) fn prune(&mut self, now: Instant, lapse: Duration) {
        let stale = |at: Instant| now.saturating_duration_since(at) >= lapse;
        let mut lapsed: Vec<(Arc<str>, Option<u64>)> = Vec::new();
        for (uid, charge) in self.charges.iter() {
            if stale(charge.touched) {
                lapsed.push((uid.clone(), None));
                continue;
            }
            let sets = charge.sets.iter().filter(|set| stale(set.touched));
            lapsed.extend(sets.map(|set| (uid.clone(), Some(set.hash))));
        }
        for (uid, set) in lapsed {
            self.remove(&uid, set.map_or(Gone::All, Gone::Reserved));
        }
    }
}
