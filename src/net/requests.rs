//! A session's requests: the `Session` of one authenticated connection,
//! and how it checks, answers and charges each request (locks, releases,
//! refreshes, fences, elections, listings). A request is checked whole
//! before anything is kept for it, and every reply says what was refused
//! and why.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

use super::labels::Limit;
use super::ledger::{proclamation_bytes, watch_bytes, Board, Over};
use super::state::{Role, ServerState};
use super::waits::{Place, Waits, MAX_PLACE_TTL};
use super::wire::{
    self, ErrorKind, Op, Reply, Request, Response, WireArgs, WireLockInfo, WireMode,
    WireProclamation,
};
use crate::locker::proclamation::WatchArgs;
use crate::locker::wait::{Ticket, Wake};
use crate::{Error, LocalLocker, LockArgs, LockMode, NetLocker};

pub(super) use super::sink::{ConnSink, Pushed};

pub(super) struct Session {
    pub(super) server: Arc<ServerState>,
    pub(super) role: Role,
    /// Names this connection in the server's ledger.
    pub(super) id: u64,
    /// The protocol version the client speaks.
    pub(super) version: u16,
    /// Where the lock table pushes this connection's grants and wounds,
    /// and the `Changed` of its watches.
    pub(super) wake: Wake,
    /// The places this connection holds in line. This connection's task
    /// changes it; another one reads it only when a waiter of it asked
    /// again over that connection, so it is hardly ever contended.
    pub(super) waits: Arc<Mutex<Waits>>,
    /// The sink `wake` pushes to, cut when the session ends.
    pub(super) sink: Arc<ConnSink>,
}

/// How a version-2 poll or a version-3 wait asks the lock table.
pub(super) struct Asked {
    pub(super) mode: LockMode,
    pub(super) ticket: Ticket,
    pub(super) place_ttl: Duration,
    pub(super) push: bool,
}

impl Session {
    /// The lock arguments of a request, or the reply refusing them when a
    /// field is beyond the protocol's limits, holds text a listing could
    /// not show, or names a resource twice (refused before anything is
    /// kept for the request: a place, a charge, a tombstone; the session's
    /// own questions to the table must not meet a refusal, which they
    /// would take for an entry). An empty list of names is left to each
    /// call: a force by uid names none.
    pub(super) fn checked(&self, args: WireArgs) -> Result<LockArgs, Reply> {
        match args.oversize {
            Some(reason) => {
                self.server.metrics.refused_by(Limit::FieldLength);
                Err(Reply::Error {
                    kind: ErrorKind::InvalidArgument,
                    message: format!("{reason}; see the limits in PROTOCOL.md"),
                })
            }
            None => {
                let args = LockArgs::from(args);
                args.validate_text().map_err(Reply::from_error)?;
                if !args.resources.is_empty() {
                    args.validate_resources().map_err(Reply::from_error)?;
                }
                Ok(args)
            }
        }
    }

    /// A reply refusing a lock over a limit of the lock table.
    pub(super) fn over(&self, over: Over) -> Reply {
        self.server.metrics.refused_by(over.limit);
        unavailable(over.message)
    }

    /// The response to one frame, or why the connection must close.
    pub(super) async fn handle(&self, frame: &[u8]) -> Result<Response, String> {
        let request: Request = wire::decode(frame).map_err(|e| e.to_string())?;
        let started = self.server.metrics.started(&request.op);
        let reply = self.dispatch(request.op).await;
        self.server.metrics.answered(started, &reply);
        Ok(Response {
            id: request.id,
            reply,
        })
    }

    pub(super) async fn dispatch(&self, op: Op) -> Reply {
        let locker = &*self.server.locker;
        if op.since() > self.version {
            return Reply::Error {
                kind: ErrorKind::InvalidArgument,
                message: format!(
                    "this request needs protocol version {}, but the connection speaks {}; \
                     reconnect with a newer Hello",
                    op.since(),
                    self.version
                ),
            };
        }
        match op {
            Op::LockWait {
                args,
                mode,
                ticket,
                place_ttl,
                push,
            } => self.wait(args, mode.into(), ticket, place_ttl, push).await,
            Op::Fence { args, mode, floor } => self.fence(args, mode.into(), floor).await,
            Op::Lock(args) => self.grant(args, LockMode::Write).await,
            Op::RLock(args) => self.grant(args, LockMode::Read).await,
            Op::Unlock(args) => self.release(args, Kind::Write).await,
            Op::RUnlock(args) => self.release(args, Kind::Read).await,
            Op::ForceUnlock(args) if args.uid.is_empty() && self.role != Role::Admin => {
                forbidden("forcing resources open")
            }
            Op::ForceUnlock(args) => self.release(args, Kind::Force).await,
            Op::Refresh(args, mode) => self.refresh(args, mode.map(LockMode::from)).await,
            Op::List if self.role != Role::Admin => forbidden("listing locks"),
            Op::List => list_whole(locker),
            Op::ListPage { .. } if self.role != Role::Admin => forbidden("listing locks"),
            Op::ListPage { after } => list_page(locker, after),
            Op::Health => Reply::Health {
                quarantined: locker.is_quarantined(),
                entries: self.entries(),
            },
            Op::Status => Reply::Status {
                quarantine_left: locker.quarantine_left(),
                entries: self.entries(),
            },
            Op::Proclaim { args, proclamation } => self.proclaim(args, proclamation).await,
            Op::Leader { args, watch } => self.leader(args, watch).await,
        }
    }

    /// The arguments of an election call: within the protocol's limits,
    /// and naming exactly one resource (the election's name).
    pub(super) fn election_args(&self, args: WireArgs) -> Result<LockArgs, Reply> {
        let args = self.checked(args)?;
        if args.resources.len() != 1 {
            return Err(invalid(format!(
                "an election call names exactly one resource (the election's name), not {}",
                args.resources.len()
            )));
        }
        Ok(args)
    }

    /// Stores a leader's proclamation with its entry (version 5).
    ///
    /// The value is charged to the leader's uid as its lock is, before the
    /// locker is asked, and stays charged while the proclamation may be
    /// kept: until the lock on the resource is released or the uid's
    /// charge lapses. In quarantine the locker stores it on an entry the
    /// uid holds but answers with its quarantine error; the charge then
    /// stays when the uid holds the entry.
    pub(super) async fn proclaim(&self, args: WireArgs, proclamation: WireProclamation) -> Reply {
        let args = match self.election_args(args) {
            Ok(args) => args,
            Err(reply) => return reply,
        };
        if let Some(reason) = proclamation.oversize() {
            self.server.metrics.refused_by(Limit::FieldLength);
            return invalid(format!("{reason}; see the limits in PROTOCOL.md"));
        }
        let proclamation = match proclamation.into_proclamation() {
            Ok(p) => p,
            Err(err) => return Reply::from_error(err),
        };
        let ledger = &self.server.ledger;
        let bytes = proclamation_bytes(&args, proclamation.value.len());
        let reserved = match ledger.reserve_board(self.id, &args, Board::Proclamation, bytes) {
            Ok(reserved) => reserved,
            Err(over) => return self.over(over),
        };
        let locker = &*self.server.locker;
        let result = locker.proclaim(&args, &proclamation).await;
        let kept = match &result {
            Ok(stored) => *stored,
            Err(err) if err.is_quarantine() => locker.holds_all(&args, LockMode::Write),
            Err(_) => false,
        };
        if !kept {
            ledger.undo_board(&args.uid, reserved);
        }
        Reply::from_result(result)
    }

    /// Reads the leader of one resource (version 5); with `watch`, also
    /// keeps a watch for `args.uid` that pushes `Changed` on this
    /// connection.
    ///
    /// The watch lives at most [`MAX_PLACE_TTL`] and the server's validity,
    /// so that its charge in the ledger (which lapses once the uid went
    /// untouched for the validity) never ends before it. A watch whose
    /// connection closed lapses by its ttl; its push, if it fires first,
    /// finds the connection's queue closed and is dropped.
    pub(super) async fn leader(&self, args: WireArgs, watch: Option<Duration>) -> Reply {
        let args = match self.election_args(args) {
            Ok(args) => args,
            Err(reply) => return reply,
        };
        let locker = &*self.server.locker;
        let answer = |result: Result<Option<crate::Proclamation>, Error>| match result {
            Ok(found) => Reply::Leader(found.as_ref().map(WireProclamation::from)),
            Err(err) => Reply::from_error(err),
        };
        let Some(ttl) = watch else {
            return answer(locker.leader(&args, None).await);
        };
        if ttl.is_zero() {
            return invalid(format!(
                "a watch ttl of zero keeps no watch; send how long the server should keep the \
                 watch without hearing from the observer (at most {MAX_PLACE_TTL:?})"
            ));
        }
        let ttl = ttl.min(MAX_PLACE_TTL).min(locker.config().validity);
        let ledger = &self.server.ledger;
        let reserved = match ledger.reserve_board(self.id, &args, Board::Watch, watch_bytes(&args))
        {
            Ok(reserved) => reserved,
            Err(over) => return self.over(over),
        };
        let watch = WatchArgs {
            ttl,
            wake: self.wake.clone(),
        };
        let result = locker.leader(&args, Some(&watch)).await;
        // Refused arguments (or too many watches) keep no watch; in
        // quarantine the watch is kept although the answer is an error.
        if matches!(result, Err(Error::InvalidArgument(_))) {
            ledger.undo_board(&args.uid, reserved);
        }
        answer(result)
    }

    /// How many entries the table holds: counted shard by shard, without
    /// copying the table (a copy once took a full server far over its
    /// memory budget and held a runtime worker for seconds).
    pub(super) fn entries(&self) -> u64 {
        self.server.locker.counts().entries as u64
    }

    /// Grants a lock, atomically with respect to a release of its uid.
    ///
    /// Why no entry can outlive a release of the same uid, whatever the
    /// interleaving with another connection: a release records the
    /// tombstone *before* it unlocks ([`release`](Self::release)), and a
    /// grant looks for the tombstone again *after* the locker granted. If
    /// that look finds none, the tombstone was recorded after the grant,
    /// so the release's unlock also runs after it and removes the entry;
    /// if it finds one, the grant is undone here. (The tombstone lock
    /// orders the two looks.) The look before the grant only saves work.
    /// The one gap: a tombstone forgotten between the two (it is kept for
    /// the validity, or less under a flood of releases past
    /// `max_released_bytes`); the entry then expires after the validity.
    ///
    /// A version-2 client's lock takes a place in line first ([`poll`]).
    ///
    /// [`poll`]: Self::poll
    pub(super) async fn grant(&self, args: WireArgs, mode: LockMode) -> Reply {
        let args = match self.checked(args) {
            Ok(args) => args,
            Err(reply) => return reply,
        };
        if self.version < wire::V3
            && let Some(reply) = self.poll(&args, mode).await
        {
            return reply;
        }
        let released = self.server.released();
        if released.contains(&args.uid) {
            // Overtaken by its own release: granting would leave an entry
            // that nobody unlocks.
            return Reply::Bool(false);
        }
        let ledger = &self.server.ledger;
        let reserved = match ledger.reserve(self.id, &args) {
            Ok(reserved) => reserved,
            Err(over) => return self.over(over),
        };
        let locker = &*self.server.locker;
        let result = match mode {
            LockMode::Read => locker.rlock(&args).await,
            LockMode::Write => locker.lock(&args).await,
        };
        if !matches!(result, Ok(true)) {
            ledger.undo(&args.uid, reserved);
            return Reply::from_result(result);
        }
        // The grant ended the uid's place on the names it granted; a place
        // it kept on other names ends too, as when the waiter asks again
        // for other names, so that the connection's limit on places keeps
        // counting every place the table keeps. So do its places over
        // other connections (the server-wide index names them).
        if let Some(place) = self.end_place(&args.uid) {
            self.ended(std::iter::once(place));
        }
        for (conn, place) in self.places_elsewhere(&args.uid) {
            self.ended_on(conn, place);
        }
        if released.contains(&args.uid) {
            self.undo_grant(&args).await;
            return Reply::Bool(false);
        }
        ledger.touch_set(self.id, &args);
        Reply::Bool(true)
    }

    /// Takes the records that other connections keep of `uid`'s places
    /// (the server-wide index names them): a call over this one ended
    /// those places in the table.
    pub(super) fn places_elsewhere(&self, uid: &str) -> Vec<(u64, Place)> {
        let mut taken = Vec::new();
        for conn in self.server.recorders.of(uid) {
            if conn != self.id
                && let Some(place) = self.server.take_place_of(conn, uid)
            {
                taken.push((conn, place));
            }
        }
        taken
    }

    /// Draws a fencing token.
    pub(super) async fn fence(&self, args: WireArgs, mode: LockMode, floor: u64) -> Reply {
        let args = match self.checked(args) {
            Ok(args) => args,
            Err(reply) => return reply,
        };
        match self.server.locker.fence(&args, mode, floor).await {
            Ok(token) => Reply::Fence(token),
            Err(err) => Reply::from_error(err),
        }
    }

    pub(super) fn waits(&self) -> MutexGuard<'_, Waits> {
        self.waits.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Removes what a grant for a uid released meanwhile created.
    pub(super) async fn undo_grant(&self, args: &LockArgs) {
        let uid = crate::locker::secrets::mask(&args.uid);
        tracing::debug!(%uid, "grant raced its own release; undone");
        // By uid and resources, whatever the mode. Afterwards none of these
        // entries exists, whoever removed them, so the charge goes too.
        // Noted as released, not forced: it is the uid's own release that
        // this undoes the grant for, and no admin forced anything.
        let _ = self.server.locker.force_unlock_as(args, false);
        self.server.ledger.release(&args.uid, Some(&args.resources));
        self.release_proclamations(args);
    }

    /// Gives back the charge of `args.uid`'s proclamations on the names of
    /// `args` it no longer holds, after a call that may have removed its
    /// entries there (the locker drops a proclamation with its entry).
    fn release_proclamations(&self, args: &LockArgs) {
        let ledger = &self.server.ledger;
        if !args.uid.is_empty() && ledger.proclaims(&args.uid) {
            let left = self.server.locker.names_not_held(args);
            ledger.release_proclamations(&args.uid, &left);
        }
    }

    /// Releases by uid. The tombstone is recorded before the unlock, which
    /// is what makes [`grant`](Self::grant) safe against this release.
    pub(super) async fn release(&self, args: WireArgs, kind: Kind) -> Reply {
        let args = match self.checked(args) {
            Ok(args) => args,
            Err(reply) => return reply,
        };
        // Only the admin's forces are kept apart from the releases, where no
        // flood of releases reaches them. A client may force open a uid it
        // names, but that is no more than a release of that uid: recorded
        // as forced, a flood of them would push the admin's forced uids out.
        let admin = self.role == Role::Admin;
        match kind {
            Kind::Force if admin => self.server.released().remember_forced(&args.uid),
            Kind::Force | Kind::Read | Kind::Write => self.server.released().remember(&args.uid),
        }
        let locker = &*self.server.locker;
        // Forced open by name: whoever held these names loses them, and
        // with them what they are charged for (read as the force removes
        // them: a lock taken while the force waited its turn is among them).
        let mut forced_holders = Vec::new();
        // A release by uid and names says how many entries it removed: one
        // that left some of its names held (in the other mode, say) keeps
        // the charge of the set, which pays for what is left.
        let counted = |mode, forced| {
            let removed = locker.release_counted(&args, mode, forced);
            let whole = matches!(removed, Ok(n) if n == args.resources.len());
            (removed.map(|n| n > 0), whole)
        };
        let (result, whole) = match kind {
            Kind::Write => counted(Some(LockMode::Write), false),
            Kind::Read => counted(Some(LockMode::Read), false),
            Kind::Force if args.uid.is_empty() => {
                let (removed, cleared) = self.force_names(&args).await;
                forced_holders = cleared;
                (removed, true)
            }
            Kind::Force if args.resources.is_empty() => {
                (self.force_everywhere(&args, admin).await, true)
            }
            Kind::Force => counted(None, admin),
        };
        // A release also ends the uid's place in line, in any mode.
        let place = if args.uid.is_empty() {
            None
        } else {
            self.end_place(&args.uid)
        };
        // Its places may be recorded by other connections, which would
        // then count them against their limits until they would have
        // expired: those records end too, wherever the uid's charge went
        // since.
        let elsewhere = if args.uid.is_empty() {
            Vec::new()
        } else {
            self.places_elsewhere(&args.uid)
        };
        // Only a release that removed an entry on every one of its names
        // frees the charge of its set: one in the wrong mode removes
        // nothing, and one that removed some leaves entries that charge
        // pays for (it lapses with them: a released uid is refused its
        // refreshes). Neither makes entries free of charge, even when it
        // ends a place of the uid (whose charge `ended` below settles, by
        // the place's own names, kept while the uid holds entries or
        // another place there).
        let removed = matches!(result, Ok(true));
        if removed && !args.uid.is_empty() {
            if whole {
                let everywhere = matches!(kind, Kind::Force) && args.resources.is_empty();
                let resources = (!everywhere).then_some(&args.resources[..]);
                self.server.ledger.release(&args.uid, resources);
            }
            self.release_proclamations(&args);
        }
        // Forced open by name: the charges of the uids that held these
        // names go with their entries, so that an admin who forces a
        // table-filling client's locks open gives the room back at once.
        // A uid that held more names than were forced keeps its entries on
        // the others uncharged until they expire, within the validity: a
        // lock the admin broke, whose holder is told it lost it at its next
        // refresh.
        // Its places in line went from the table with the force (every
        // one, on any name), so the connections that recorded them stop
        // counting them, here and elsewhere, and nothing more is asked of
        // the table: the uid's charges all go at once. (Ending each record
        // through the table again walked a long line once per forced
        // holder, on a thread that serves clients.)
        for uid in &forced_holders {
            let _ = self.end_place(uid);
            let _ = self.places_elsewhere(uid);
            self.server.ledger.release(uid, None);
        }
        // The place ended here may stand on names this release did not
        // name: what is left of it in the table goes too, so that the
        // connection's limit on places counts every place the table keeps.
        if let Some(place) = place {
            self.ended(std::iter::once(place));
        }
        for (conn, place) in elsewhere {
            self.ended_on(conn, place);
        }
        Reply::from_result(result)
    }

    /// A force of `args.uid` alone, which walks the whole table to find
    /// its entries and places: see [`walk`](Self::walk).
    async fn force_everywhere(&self, args: &LockArgs, admin: bool) -> Result<bool, Error> {
        let args = args.clone();
        self.walk(move |locker| locker.force_unlock_as(&args, admin))
            .await
            .and_then(|removed| removed)
    }

    /// The admin's force of names alone, which walks the whole table to
    /// end the places of the uids it forces open (see [`walk`](Self::walk)).
    /// Answers whether it removed an entry, and the uids it removed
    /// entries of.
    async fn force_names(&self, args: &LockArgs) -> (Result<bool, Error>, Vec<Arc<str>>) {
        let args = args.clone();
        match self.walk(move |locker| locker.force_names(&args)).await {
            Ok(Ok(cleared)) => (Ok(!cleared.is_empty()), cleared),
            Ok(Err(err)) | Err(err) => (Err(err), Vec::new()),
        }
    }

    /// Runs `f`, a walk of the whole table, one such walk at a time for
    /// the whole server, on a thread of the blocking pool, so that a flood
    /// of them (a request of a few dozen bytes each, pipelined over many
    /// connections) keeps no thread that serves other clients busy.
    async fn walk<R: Send + 'static>(
        &self,
        f: impl FnOnce(&LocalLocker) -> R + Send + 'static,
    ) -> Result<R, Error> {
        let _one_at_a_time = self.server.walking.lock().await;
        let locker = self.server.locker.clone();
        match tokio::task::spawn_blocking(move || f(&locker)).await {
            Ok(result) => Ok(result),
            Err(err) if err.is_panic() => std::panic::resume_unwind(err.into_panic()),
            Err(_) => Err(Error::LockerUnavailable {
                endpoint: self.server.locker.endpoint().to_owned(),
                reason: "the server is shutting down".into(),
            }),
        }
    }

    /// Refreshes a lock; in quarantine, with a mode, the locker may re-create
    /// its entries.
    ///
    /// Such a re-grant creates entries as a lock does, so it is charged and
    /// limited as a lock is (it once was not counted at all). A uid
    /// this server does not know is still re-granted: after a restart the
    /// server cannot tell a lock it granted before from a new one, and
    /// refusing would cost a live holder its lock, which is what the
    /// quarantine exists to prevent. A uid released here is refused as
    /// for a lock, and a re-grant racing its release is undone as in
    /// [`grant`](Self::grant).
    ///
    /// A refresh that reaches entries nothing here charges for its names
    /// (what a force by name left of a larger lock, or names other than
    /// the lock's) is charged for them before the locker refreshes
    /// anything, within the limits as a lock is; over them it is refused
    /// with the limit's error, having refreshed and charged nothing, and
    /// those entries expire within the validity. (Charging them without a
    /// check once let a client whose lock an admin forced open keep it
    /// charged over its cap for as long as it refreshed.)
    pub(super) async fn refresh(&self, args: WireArgs, mode: Option<LockMode>) -> Reply {
        let args = match self.checked(args) {
            Ok(args) => args,
            Err(reply) => return reply,
        };
        let released = self.server.released();
        if released.contains(&args.uid) {
            return Reply::Bool(false);
        }
        let (locker, ledger) = (&*self.server.locker, &self.server.ledger);
        let may_create = mode.is_some() && locker.is_quarantined();
        let uncharged = !may_create && !ledger.covers(&args) && locker.holds_any(&args);
        let reserved = if may_create || uncharged {
            match ledger.reserve(self.id, &args) {
                Ok(reserved) => Some(reserved),
                Err(over) => return self.refused_refresh(over),
            }
        } else {
            None
        };
        let result = match mode {
            Some(mode) => locker.refresh_mode(&args, mode).await,
            None => locker.refresh(&args).await,
        };
        // Whether entries of the uid are left on these names: also after
        // a partial refresh, which still refreshed the entries it found;
        // none when it found none of its names held (forced open, expired,
        // or other names than the lock's).
        let refreshed = matches!(result, Ok(true)) || locker.holds_any(&args);
        // In quarantine the locker answers with its quarantine error even
        // when it re-created the entries (the answer must not count), so
        // that answer may have created them as `Ok(true)` may: ask.
        let kept = match (&result, mode) {
            (Ok(held), _) => *held,
            (Err(err), Some(mode)) if may_create && err.is_quarantine() => {
                locker.holds_all(&args, mode)
            }
            (Err(_), _) => false,
        };
        if kept && released.contains(&args.uid) {
            if may_create {
                self.undo_grant(&args).await;
            } else if let Some(reserved) = reserved {
                ledger.undo(&args.uid, reserved);
            }
            return Reply::Bool(false);
        }
        match reserved {
            // Charged before: touched again after the locker's refresh, so
            // the charge never lapses before the entries it pays for.
            Some(_) if kept || refreshed => {
                ledger.touch(self.id, &args.uid);
            }
            // Nothing of the uid left on these names: the charge taken for
            // them pays for nothing.
            Some(reserved) => ledger.undo(&args.uid, reserved),
            // Charged for these names (`reserve` finds the set and touches
            // it), or entries that appeared since the look before the
            // refresh (a grant of the same uid racing it): charged within
            // the limits too. Over them the refresh is refused, and the
            // entries it refreshed, uncharged, are refused their next
            // refresh as well and expire within the validity.
            None if kept || refreshed => {
                if let Err(over) = ledger.reserve_refresh(self.id, &args) {
                    return self.refused_refresh(over);
                }
                // Every set of the uid counts as refreshed: the entries
                // this reached may have been granted as other sets, which
                // pay for their owner and source (a client refreshing them
                // under a set of short texts must not let those lapse).
                ledger.touch(self.id, &args.uid);
            }
            // Nothing of the uid left on these names (forced open by name,
            // expired): its charge for them pays for nothing, and a client
            // refreshing it must not keep it from lapsing; unless the uid
            // waits there, since its place shares that charge (a refresh
            // refreshes no place: it neither touches nor drops it).
            None if matches!(result, Ok(false)) && !locker.queued_any(&args) => {
                ledger.release(&args.uid, Some(&args.resources));
                self.release_proclamations(&args);
            }
            None => {}
        }
        Reply::from_result(result)
    }

    /// The answer to a refresh the limits refuse: what was refused, and the
    /// limit's own words.
    fn refused_refresh(&self, over: Over) -> Reply {
        let message = format!(
            "refresh refused: this server holds entries of the lock on these names that \
             nothing charges for (what is left of a lock whose other names were forced open, \
             or names other than the lock's), and charging them breaks a limit: {}",
            over.message
        );
        self.over(Over { message, ..over })
    }
}

/// Why a wait was not asked.
pub(super) enum Refusal {
    /// The connection holds as many places as it may (the limit).
    Full(usize),
    /// Refused with this reply.
    Reply(Reply),
}

pub(super) fn invalid(message: String) -> Reply {
    Reply::Error {
        kind: ErrorKind::InvalidArgument,
        message,
    }
}

pub(super) fn unavailable(message: String) -> Reply {
    Reply::Error {
        kind: ErrorKind::Unavailable,
        message,
    }
}

#[derive(Clone, Copy)]
pub(super) enum Kind {
    Read,
    Write,
    Force,
}

pub(super) fn forbidden(what: &str) -> Reply {
    Reply::Error {
        kind: ErrorKind::Forbidden,
        message: format!("{what} needs the admin token"),
    }
}

/// What one page of a listing may take, by
/// [`LockInfo::listed_size`](crate::LockInfo) (at least what an entry
/// takes on the wire): [`wire::LISTING_PAGE`].
const PAGE_BUDGET: usize = wire::LISTING_PAGE;

/// What a whole listing may take for a client before version 6: a frame,
/// less room for the reply's own few bytes.
const WHOLE_BUDGET: usize = wire::MAX_FRAME - 4096;

/// The answer to `List`, from clients before version 6: the whole listing
/// in one reply when it fits a frame and
/// [`LISTING_ENTRIES`](wire::LISTING_ENTRIES), else a refusal that says
/// how to get it. Only a page's worth is copied either way.
fn list_whole(locker: &crate::LocalLocker) -> Reply {
    let page = locker.snapshot_page(None, WHOLE_BUDGET, wire::LISTING_ENTRIES);
    if page.more {
        return Reply::Error {
            kind: ErrorKind::InvalidArgument,
            message: format!(
                "the listing is over one reply ({} KiB or {} entries) and this connection's \
                 protocol version cannot page it; list with a client of protocol version 6 \
                 or later",
                WHOLE_BUDGET / 1024,
                wire::LISTING_ENTRIES
            ),
        };
    }
    Reply::Locks(wire_entries(page.entries))
}

/// The answer to `ListPage`.
fn list_page(locker: &crate::LocalLocker, after: Option<(String, String)>) -> Reply {
    let after = after.as_ref().map(|(r, u)| (r.as_str(), u.as_str()));
    let page = locker.snapshot_page(after, PAGE_BUDGET, wire::LISTING_ENTRIES);
    Reply::LocksPage {
        entries: wire_entries(page.entries),
        more: page.more,
    }
}

/// Entries for the wire: instants become ages.
fn wire_entries(entries: Vec<crate::LockInfo>) -> Vec<WireLockInfo> {
    let now = Instant::now();
    entries
        .into_iter()
        .map(|info| WireLockInfo {
            resource: info.resource,
            uid: info.uid,
            owner: info.owner,
            source: info.source,
            mode: WireMode::from(info.mode),
            age: now.saturating_duration_since(info.acquired),
            since_refresh: now.saturating_duration_since(info.refreshed),
        })
        .collect()
}
