//! The calls of a `SqlLocker`, each one short transaction at read
//! committed that locks its resources' rows first, in sorted order, then
//! reads, decides, writes and commits: granting, waiting, releasing,
//! refreshing, fencing, proclaiming and listing. While the locker is in
//! quarantine, the calls whose answer would count are refused with a
//! quarantine error; no call holds a connection after it returns.

use std::time::Duration;

use tokio::time::Instant;

use super::config::{LONGEST, MAX_LABEL_LEN};
use super::store::Epoch;
use super::waits::Waiter;
use super::{cut, ms, stamp, state, Shared};
use crate::error::{FLOOR_AHEAD_REASON, QUARANTINE_REASON};
use crate::locker::proclamation::{Proclamation, MAX_VALUE_LEN};
use crate::locker::wait::PushEvent;
use crate::quorum::fencing::{FENCE_CLOCK_TOLERANCE, FENCE_QUARANTINE};
use crate::{Error, LockArgs, LockInfo, LockMode};

/// The waiters a release's transaction granted ([`Shared::hand_on`]),
/// until the release heard its commit made. Dropped before that (the call
/// failed, timed out in its commit, or was dropped), it leaves each to the
/// locker's own notices as `H<uid>`, whose handling
/// ([`Shared::confirm_handed`]) tells the waiter of a grant that was
/// committed after all, or takes the turn that was not.
struct Handing<'a> {
    shared: &'a Shared,
    waiters: Vec<Waiter>,
}

impl Drop for Handing<'_> {
    fn drop(&mut self) {
        if !self.waiters.is_empty() {
            let payloads = self
                .waiters
                .iter()
                .map(|w| format!("H{}", w.args.uid))
                .collect();
            self.shared.store.tell_own(payloads);
        }
    }
}

/// How a waiting call ended.
pub(super) enum Waited {
    Granted,
    Queued,
    Refused,
    /// Queued, and the uid holds a grant an older waiter is queued behind.
    Wounded,
}

impl Shared {
    pub(super) fn endpoint(&self) -> &str {
        &self.store.endpoint
    }

    /// Checks `args` as every locker must: resources within the limits,
    /// a uid unless `any_uid`, and text a listing can show.
    pub(super) fn checked(args: &LockArgs, any_uid: bool) -> Result<Vec<String>, Error> {
        args.validate_resources()?;
        if !any_uid && args.uid.is_empty() {
            return Err(Error::InvalidArgument("empty lock uid".into()));
        }
        // Uids of at most MAX_UID_LEN bytes (128) fit the tables' 255.
        args.validate_text()?;
        let mut names = args.resources.to_vec();
        names.sort();
        names.dedup();
        Ok(names)
    }

    pub(super) fn who(args: &LockArgs) -> (&str, &str) {
        (
            cut(&args.owner, MAX_LABEL_LEN),
            cut(&args.source, MAX_LABEL_LEN),
        )
    }

    pub(super) fn validity_ms(&self) -> i64 {
        ms(self.config.validity)
    }

    /// How long the quarantine `fencing` (or that of grants) has left at
    /// `epoch`, if any: from the later of the table's epoch and the
    /// server's start.
    pub(super) fn quarantine(&self, epoch: &Epoch, fencing: bool) -> Option<Duration> {
        let configured = match self.config.quarantine {
            zero if zero.is_zero() => return None,
            q => q.max(self.config.validity).min(LONGEST),
        };
        let quarantine = if fencing {
            configured.max(FENCE_QUARANTINE)
        } else {
            configured
        };
        let end = epoch
            .since_ms
            .max(epoch.started_ms)
            .saturating_add(ms(quarantine));
        let now = epoch.now_ms();
        (now < end).then(|| Duration::from_millis(u64::try_from(end - now).unwrap_or(u64::MAX)))
    }

    /// The quarantine of grants in ms, as the fast path checks it: 0 for
    /// none.
    pub(super) fn quarantine_ms(&self) -> i64 {
        match self.config.quarantine {
            zero if zero.is_zero() => 0,
            q => ms(q.max(self.config.validity)),
        }
    }

    /// The fast path of a grant of one free resource; whether it granted.
    pub(super) async fn fast_grant(
        &self,
        names: &[String],
        args: &LockArgs,
        mode: LockMode,
        wait: (&str, &str),
    ) -> Result<bool, Error> {
        let [name] = names else {
            return Ok(false);
        };
        self.store
            .fast_grant(
                name,
                &args.uid,
                state::mode_char(mode),
                self.validity_ms(),
                self.quarantine_ms(),
                wait,
                Self::who(args),
            )
            .await
    }

    pub(super) fn quarantined(&self, left: Duration) -> Error {
        Error::LockerUnavailable {
            endpoint: self.endpoint().to_owned(),
            reason: format!(
                "the database's lock table began a new epoch or the server started recently, \
                 and it may have lost locks it granted; {QUARANTINE_REASON} for another {left:?}"
            ),
        }
    }

    pub(super) async fn grant(&self, args: &LockArgs, mode: LockMode) -> Result<bool, Error> {
        let names = Self::checked(args, false)?;
        if self.fast_grant(&names, args, mode, ("", "")).await? {
            return Ok(true);
        }
        let validity = self.validity_ms();
        let uid = &*args.uid;
        self.store
            .call(&names, Self::who(args), false, |t, epoch| {
                let deadline = t.now + validity;
                let answer = if let Some(left) = self.quarantine(epoch, false) {
                    t.refresh_held(uid, deadline);
                    Err(self.quarantined(left))
                } else if (0..t.resources.len()).any(|i| {
                    t.resources[i].blocked(uid, mode)
                        || t.resources[i].queued_before(uid, mode, None)
                }) {
                    Ok(false)
                } else {
                    for i in 0..t.resources.len() {
                        t.grant(i, uid, mode, deadline, "", "");
                    }
                    Ok(true)
                };
                t.finish();
                Ok(answer)
            })
            .await?
    }

    /// A waiting lock call, or (`turn`) a turn taken for a waiter after a
    /// notice said it may have come.
    pub(super) async fn wait(
        &self,
        args: &LockArgs,
        mode: LockMode,
        ticket: &str,
        place_ttl: Duration,
        channel: &str,
        turn: bool,
    ) -> Result<Waited, Error> {
        let names = Self::checked(args, false)?;
        if !turn
            && !self.waits.others_wait_on(&names, &args.uid)
            && self
                .fast_grant(&names, args, mode, (ticket, channel))
                .await?
        {
            return Ok(Waited::Granted);
        }
        let validity = self.validity_ms();
        let ttl = ms(place_ttl);
        let uid = &*args.uid;
        self.store
            .call(&names, Self::who(args), false, |t, epoch| {
                let n = t.resources.len();
                // The same waiter asking again under a new uid: its old place goes.
                for i in 0..n {
                    let stale: Vec<String> = t.resources[i]
                        .places
                        .iter()
                        .filter(|(other, p)| other.as_str() != uid && p.ticket == ticket)
                        .map(|(other, _)| other.clone())
                        .collect();
                    for other in stale {
                        t.unplace(i, &other);
                    }
                }
                let placed = t.resources.iter().all(|r| r.places.contains_key(uid));
                let admitted = t
                    .resources
                    .iter()
                    .all(|r| !r.blocked(uid, mode) && !r.queued_before(uid, mode, Some(ticket)));
                let holds = t.holds_all(uid, Some(mode));
                let deadline = t.now + validity;
                let answer = if turn && (holds || !placed) {
                    Ok(Waited::Refused)
                } else if let Some(left) = self.quarantine(epoch, false) {
                    t.refresh_held(uid, deadline);
                    Err(self.quarantined(left))
                } else if admitted {
                    for i in 0..n {
                        t.grant(i, uid, mode, deadline, ticket, channel);
                        t.unplace(i, uid);
                    }
                    Ok(Waited::Granted)
                } else if turn {
                    Ok(Waited::Queued)
                } else {
                    let place_deadline = t.now + ttl.min(validity);
                    let mut wounded = false;
                    for i in 0..n {
                        // What the uid holds already is renewed: the answer
                        // counts as one. A grant that an older waiter is
                        // queued behind is a wound, told in the answer
                        // whether or not a notice reached the waiter.
                        if t.resources[i].holders.contains_key(uid) {
                            let held = t.resources[i].holders[uid].mode;
                            t.grant(i, uid, held, deadline, "", "");
                            if t.resources[i].queued_before(uid, mode, Some(ticket)) {
                                wounded = true;
                            }
                        }
                        t.place(i, uid, mode, place_deadline, ticket, channel);
                        t.wound(i, mode, ticket);
                    }
                    Ok(if wounded {
                        Waited::Wounded
                    } else if channel.is_empty() {
                        Waited::Refused
                    } else {
                        Waited::Queued
                    })
                };
                t.finish();
                Ok(answer)
            })
            .await?
    }

    /// Asks again for `waiter` after a notice said its turn may have come;
    /// whether it was granted.
    pub(super) async fn take_turn(&self, waiter: &Waiter) -> Result<bool, Error> {
        let waited = self
            .wait(
                &waiter.args,
                waiter.mode,
                &waiter.ticket,
                waiter.place_ttl,
                &self.channel,
                true,
            )
            .await?;
        Ok(matches!(waited, Waited::Granted))
    }

    pub(super) async fn release(&self, args: &LockArgs, mode: LockMode) -> Result<bool, Error> {
        let names = Self::checked(args, false)?;
        self.waits.forget(&args.uid);
        // Where this locker's own waiters wait, the routine would find
        // their places and leave the call to the transaction.
        if let ([name], false) = (
            names.as_slice(),
            self.waits.others_wait_on(&names, &args.uid),
        ) {
            let fast = self
                .store
                .fast_release(name, &args.uid, state::mode_char(mode));
            if let Some(released) = fast.await? {
                return Ok(released);
            }
        }
        let uid = &*args.uid;
        let mut handing = Handing {
            shared: self,
            waiters: Vec::new(),
        };
        let removed = self
            .store
            .call(&names, ("", ""), false, |t, epoch| {
                let mut removed = false;
                for i in 0..t.resources.len() {
                    if t.resources[i].mode() == Some(mode) && t.release(i, uid) {
                        removed = true;
                    }
                    t.unplace(i, uid);
                }
                // An attempt the database rolled back granted nothing.
                handing.waiters = self.hand_on(t, epoch);
                t.finish();
                Ok(removed)
            })
            .await?;
        // Told only once the grants committed: a waiter told of a grant
        // rolled back would count a lock it does not hold.
        for waiter in std::mem::take(&mut handing.waiters) {
            waiter.wake.notify(&waiter.args.uid, PushEvent::Granted);
        }
        Ok(removed)
    }

    /// After a release that handed `waiter` its turn failed, or was
    /// dropped, past its decision: whether the waiter holds, by that
    /// release's commit (its grant, in its mode and under its ticket) or by
    /// the turn it then takes as a notice would have had it take it. Its
    /// call waits for the release's row locks, as a turn does, and so
    /// reads what that release committed, if anything.
    pub(super) async fn confirm_handed(&self, waiter: &Waiter) -> Result<bool, Error> {
        let names = Self::checked(&waiter.args, false)?;
        let uid = &*waiter.args.uid;
        let held = self
            .store
            .call(&names, ("", ""), false, |t, epoch| {
                // In quarantine no answer counts, a holder's row included.
                let held = self.quarantine(epoch, false).is_none()
                    && t.resources.iter().all(|r| {
                        r.holders
                            .get(uid)
                            .is_some_and(|h| h.mode == waiter.mode && h.ticket == waiter.ticket)
                    });
                t.finish();
                Ok(held)
            })
            .await?;
        if held {
            return Ok(true);
        }
        self.take_turn(waiter).await
    }

    /// Grants, in a release's own transaction, this locker's waiters whose
    /// turn it brought, as each one's turn-taking call
    /// ([`take_turn`](Self::take_turn)) would a moment later: the same
    /// checks on the same rows, under the same row locks, where the turn
    /// would have waited for this transaction to commit and read what it
    /// wrote. It saves a hand-off the second transaction.
    ///
    /// Only a waiter that asked for one name, the name of a line this
    /// release moved, whose place is its newest request (its ticket and
    /// mode, no other place under that ticket) and who holds nothing there
    /// yet; no grant in quarantine. Any other turn is told by
    /// [`Table::finish`](super::state::Table::finish) as before.
    /// Returns the waiters granted, to be told after the commit (see
    /// [`Handing`] for a commit not heard of).
    fn hand_on(&self, t: &mut state::Table, epoch: &Epoch) -> Vec<Waiter> {
        let mut handed = Vec::new();
        if self.quarantine(epoch, false).is_some() {
            return handed;
        }
        let deadline = t.now + self.validity_ms();
        for i in 0..t.resources.len() {
            if !t.resources[i].moved {
                continue;
            }
            for (channel, uid) in t.resources[i].turns() {
                if channel != self.channel {
                    continue;
                }
                let Some(waiter) = self.waits.waiter(&uid) else {
                    continue;
                };
                let r = &t.resources[i];
                let Some(place) = r.places.get(&uid) else {
                    continue;
                };
                let one_name = !waiter.args.resources.is_empty()
                    && waiter.args.resources.iter().all(|n| *n == r.name);
                let newest = place.ticket == waiter.ticket
                    && place.mode == waiter.mode
                    && !r
                        .places
                        .iter()
                        .any(|(other, p)| *other != uid && p.ticket == place.ticket);
                if !one_name
                    || !newest
                    || r.holders.contains_key(&uid)
                    || r.blocked(&uid, waiter.mode)
                    || r.queued_before(&uid, waiter.mode, Some(&waiter.ticket))
                {
                    continue;
                }
                let (owner, source) = Self::who(&waiter.args);
                let who = Some((owner.to_owned(), source.to_owned()));
                let (ticket, channel) = (waiter.ticket.as_str(), self.channel.as_str());
                t.grant_as(i, &uid, waiter.mode, deadline, ticket, channel, who);
                t.unplace(i, &uid);
                handed.push(waiter);
            }
        }
        handed
    }

    pub(super) async fn refresh(
        &self,
        args: &LockArgs,
        mode: Option<LockMode>,
    ) -> Result<bool, Error> {
        let names = Self::checked(args, false)?;
        let validity = self.validity_ms();
        let uid = &*args.uid;
        self.store
            .call(&names, Self::who(args), false, |t, epoch| {
                let deadline = t.now + validity;
                let missing = !t.holds_all(uid, None);
                t.refresh_held(uid, deadline);
                let answer = match self.quarantine(epoch, false) {
                    None => Ok(!missing),
                    Some(left) => {
                        // Re-creates the missing entries where the
                        // resources are free for them (all or none), so
                        // the holder has them back when the quarantine
                        // ends; the answer counts for nothing meanwhile.
                        if let (true, Some(mode)) = (missing, mode) {
                            let free = t
                                .resources
                                .iter()
                                .all(|r| r.holders.contains_key(uid) || !r.blocked(uid, mode));
                            if free {
                                for i in 0..t.resources.len() {
                                    if !t.resources[i].holders.contains_key(uid) {
                                        t.grant(i, uid, mode, deadline, "", "");
                                    }
                                }
                            }
                        }
                        Err(self.quarantined(left))
                    }
                };
                t.finish();
                Ok(answer)
            })
            .await?
    }

    pub(super) async fn force(&self, names: &[String], uid: &str) -> Result<bool, Error> {
        self.store
            .call(names, ("", ""), false, |t, _| {
                let mut removed = false;
                for i in 0..t.resources.len() {
                    if uid.is_empty() {
                        let holders: Vec<String> = t.resources[i].holders.keys().cloned().collect();
                        for holder in holders {
                            removed |= t.release(i, &holder);
                        }
                    } else {
                        removed |= t.release(i, uid);
                        t.unplace(i, uid);
                    }
                }
                t.finish();
                Ok(removed)
            })
            .await
    }

    pub(super) async fn fence(
        &self,
        args: &LockArgs,
        mode: LockMode,
        floor: u64,
    ) -> Result<Option<u64>, Error> {
        let names = Self::checked(args, false)?;
        let uid = &*args.uid;
        let endpoint = self.endpoint();
        self.store
            .call(&names, ("", ""), true, |t, epoch| {
                let answer = if let Some(left) = self.quarantine(epoch, true) {
                    Err(self.quarantined(left))
                } else if !t.holds_all(uid, Some(mode)) {
                    Ok(None)
                } else {
                    let now_ns = u64::try_from(epoch.now_us)
                        .unwrap_or(0)
                        .saturating_mul(1000);
                    let limit = now_ns.saturating_add(
                        u64::try_from(FENCE_CLOCK_TOLERANCE.as_nanos()).unwrap_or(u64::MAX),
                    );
                    let mark = epoch.mark.map(|m| u64::try_from(m).unwrap_or(0));
                    if floor > limit {
                        Err(Error::InvalidArgument(format!(
                            "fencing floor {floor} is {FLOOR_AHEAD_REASON} database {endpoint} by \
                             more than {FENCE_CLOCK_TOLERANCE:?} (its clock plus that is {limit} \
                             ns): clocks out of sync, or a client sent a bogus floor"
                        )))
                    } else {
                        // No mark row (the fence table emptied or restored
                        // without it; a new table has one): any token
                        // drawn before was at most its clock plus the
                        // tolerance (a floor beyond is refused), so one
                        // from the clock plus the tolerance goes on above.
                        let least = match mark {
                            Some(mark) => mark.saturating_add(1),
                            None => limit,
                        };
                        let token = now_ns.max(floor).max(least);
                        match i64::try_from(token) {
                            Ok(stored) => {
                                t.ops.push(state::Op::Mark { token: stored });
                                Ok(Some(token))
                            }
                            Err(_) => Err(Error::InvalidArgument(format!(
                                "the fencing counter of database {endpoint} would pass \
                                 i64::MAX, the most its column holds"
                            ))),
                        }
                    }
                };
                t.finish();
                Ok(answer)
            })
            .await?
    }

    pub(super) async fn proclaim(&self, args: &LockArgs, p: &Proclamation) -> Result<bool, Error> {
        let names = Self::checked(args, false)?;
        let uid = &*args.uid;
        let new = stamp(p);
        self.store
            .call(&names, ("", ""), false, |t, epoch| {
                let r = &t.resources[0];
                let mut stored = false;
                if r.mode() == Some(LockMode::Write)
                    && let Some(holder) = r.holders.get(uid)
                {
                    stored = true;
                    if holder.stamp.is_empty() || holder.stamp < new {
                        let op = state::Op::Proclaim {
                            name: r.name.clone(),
                            uid: uid.to_owned(),
                            stamp: new.clone(),
                            value: p.value.to_vec(),
                        };
                        t.ops.push(op);
                    }
                }
                t.finish();
                Ok(match self.quarantine(epoch, false) {
                    Some(left) => Err(self.quarantined(left)),
                    None => Ok(stored),
                })
            })
            .await?
    }

    /// The leader of `names[0]`: its uid and proclamation.
    pub(super) async fn read_leader(
        &self,
        names: &[String],
    ) -> Result<Option<(String, Proclamation)>, Error> {
        let endpoint = self.endpoint();
        self.store
            .call(names, ("", ""), false, |t, epoch| {
                let found = t.resources[0].leader().map(|(uid, h)| {
                    (
                        uid.to_owned(),
                        h.stamp.clone(),
                        h.value.clone().unwrap_or_default(),
                    )
                });
                t.finish();
                if let Some(left) = self.quarantine(epoch, false) {
                    return Ok(Err(self.quarantined(left)));
                }
                let Some((uid, stamp, value)) = found else {
                    return Ok(Ok(None));
                };
                Ok(unstamp(&stamp, &value)
                    .map(|p| Some((uid, p)))
                    .ok_or_else(|| Error::LockerUnavailable {
                        endpoint: endpoint.to_owned(),
                        reason: "the table holds a proclamation this library cannot read; was \
                                 the row written by hand?"
                            .into(),
                    }))
            })
            .await?
    }

    pub(super) async fn list(&self) -> Result<Vec<LockInfo>, Error> {
        let store = &self.store;
        let validity = self.config.validity.min(LONGEST);
        store
            .bounded(async {
                let rows = store
                    .fetch_all(sqlx::query(&store.dialect.list()))
                    .await
                    .map_err(|e| store.error(e))?;
                let here = Instant::now();
                let mut infos = Vec::with_capacity(rows.len());
                for row in &rows {
                    use sqlx::Row as _;
                    let get = |column: &str| store.text(row, column).map_err(|e| store.error(e));
                    let number = |column: &str| -> Result<i64, Error> {
                        row.try_get::<i64, _>(column).map_err(|e| store.error(e))
                    };
                    let (now_ms, deadline) =
                        (number("now_us")?.div_euclid(1000), number("deadline")?);
                    if deadline <= now_ms {
                        continue;
                    }
                    let at = |ms: i64| {
                        let ago = u64::try_from(now_ms.saturating_sub(ms)).unwrap_or(0);
                        here.checked_sub(Duration::from_millis(ago)).unwrap_or(here)
                    };
                    let mode: String = row.try_get("mode").map_err(|e| store.error(e))?;
                    let refreshed = deadline.saturating_sub(ms(validity));
                    infos.push(LockInfo {
                        resource: get("name")?,
                        uid: get("uid")?,
                        mode: if mode == "w" {
                            LockMode::Write
                        } else {
                            LockMode::Read
                        },
                        owner: get("owner")?,
                        source: get("source")?,
                        acquired: at(number("granted")?),
                        refreshed: at(refreshed),
                    });
                }
                infos.sort_by(|a, b| (&a.resource, &a.uid).cmp(&(&b.resource, &b.uid)));
                Ok(infos)
            })
            .await
    }

    /// The names `uid` holds or waits on.
    pub(super) async fn names_of(&self, uid: &str) -> Result<Vec<String>, Error> {
        let store = &self.store;
        store
            .bounded(async {
                let rows = store
                    .fetch_all(sqlx::query(&store.dialect.names_of_uid()).bind(uid))
                    .await
                    .map_err(|e| store.error(e))?;
                rows.iter()
                    .map(|row| store.text(row, "name").map_err(|e| store.error(e)))
                    .collect()
            })
            .await
    }
}

/// A stored proclamation, or `None` when it is not one [`stamp`] wrote.
pub(super) fn unstamp(stamp: &str, value: &[u8]) -> Option<Proclamation> {
    if stamp.len() != 40
        || !stamp.bytes().all(|b| b.is_ascii_digit())
        || value.len() > MAX_VALUE_LEN
    {
        return None;
    }
    let term = stamp[..20].parse().ok()?;
    let seq = stamp[20..].parse().ok()?;
    Proclamation::new(term, seq, value).ok()
}
