//! `RemoteLocker` as a `NetLocker`: each call a request on the connection,
//! its reply read back into the locker's answer.

use std::sync::atomic::Ordering;
use std::sync::PoisonError;
use std::time::Duration;

use async_trait::async_trait;

use super::super::wire::{self, Op, Reply, WireArgs, WireProclamation};
use super::{lock_infos, RemoteLocker};
use crate::locker::proclamation::{Proclamation, WatchArgs};
use crate::locker::wait::{WaitArgs, WaitReply};
use crate::{Error, LockArgs, LockInfo, LockMode, NetLocker};

#[async_trait]
impl NetLocker for RemoteLocker {
    async fn lock(&self, args: &LockArgs) -> Result<bool, Error> {
        self.call_bool(Op::Lock(WireArgs::from(args))).await
    }

    async fn rlock(&self, args: &LockArgs) -> Result<bool, Error> {
        self.call_bool(Op::RLock(WireArgs::from(args))).await
    }

    async fn unlock(&self, args: &LockArgs) -> Result<bool, Error> {
        self.release(Op::Unlock(WireArgs::from(args)), &args.uid)
            .await
    }

    async fn runlock(&self, args: &LockArgs) -> Result<bool, Error> {
        self.release(Op::RUnlock(WireArgs::from(args)), &args.uid)
            .await
    }

    async fn refresh(&self, args: &LockArgs) -> Result<bool, Error> {
        self.call_bool(Op::Refresh(WireArgs::from(args), None))
            .await
    }

    async fn refresh_mode(&self, args: &LockArgs, mode: LockMode) -> Result<bool, Error> {
        self.call_bool(Op::Refresh(WireArgs::from(args), Some(mode.into())))
            .await
    }

    /// Against a server of version 3 or later, waits in line there: the
    /// server pushes the grant on this locker's connection, and the wake-up goes
    /// to `wait.wake`, registered before the request is sent and kept until
    /// an unlock, runlock or force-unlock of the uid is sent (a `Wounded`
    /// may follow a `Granted`) or the server answers `Refused`. The
    /// registration survives reconnects. Against a version-2 server, sends
    /// a plain lock and answers `Granted` or `Refused`, as the trait's
    /// default does.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe in the trait's sense: a dropped call may or may not
    /// have been applied, and its registration stays until the uid is
    /// released.
    async fn lock_wait(
        &self,
        args: &LockArgs,
        mode: LockMode,
        wait: &WaitArgs,
    ) -> Result<WaitReply, Error> {
        let conn = self.connection().await?;
        if conn.version() < wire::V3 {
            let op = match mode {
                LockMode::Write => Op::Lock(WireArgs::from(args)),
                LockMode::Read => Op::RLock(WireArgs::from(args)),
            };
            let granted = self
                .call_on(&conn, op)
                .await?
                .into_result(&self.shared.endpoint)?;
            return Ok(if granted {
                WaitReply::Granted
            } else {
                WaitReply::Refused
            });
        }
        if let Some(wake) = &wait.wake {
            self.shared.pushes.register(&args.uid, wake);
        }
        let op = Op::LockWait {
            args: WireArgs::from(args),
            mode: mode.into(),
            ticket: wait.ticket.into(),
            place_ttl: wait.place_ttl,
            push: wait.wake.is_some(),
        };
        match self.call_on(&conn, op).await? {
            Reply::Wait(reply) => {
                let reply = WaitReply::from(reply);
                if reply == WaitReply::Refused && wait.wake.is_some() {
                    // No place, no grant: nothing will be pushed.
                    self.shared.pushes.forget(&args.uid);
                }
                Ok(reply)
            }
            other => Err(other.into_error(&self.shared.endpoint)),
        }
    }

    /// Draws a fencing token from the server. `Err(Error::Unsupported)`
    /// from a version-2 server.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a dropped call may still draw a token on the server,
    /// which only raises the next token.
    async fn fence(
        &self,
        args: &LockArgs,
        mode: LockMode,
        floor: u64,
    ) -> Result<Option<u64>, Error> {
        let conn = self.connection().await?;
        if conn.version() < wire::V3 {
            return Err(Error::Unsupported {
                endpoint: self.shared.endpoint.clone(),
                what: "fencing tokens".into(),
            });
        }
        let op = Op::Fence {
            args: WireArgs::from(args),
            mode: mode.into(),
            floor,
        };
        match self.call_on(&conn, op).await? {
            Reply::Fence(token) => Ok(token),
            other => Err(other.into_error(&self.shared.endpoint)),
        }
    }

    /// Stores the proclamation on the server. The value is checked here
    /// first: longer than [`MAX_VALUE_LEN`](crate::MAX_VALUE_LEN), it is
    /// refused with [`Error::InvalidArgument`] without a request.
    /// `Err(Error::Unsupported)` at once from a server older than protocol
    /// version 5.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe in the trait's sense: a dropped call may or may not
    /// have been stored.
    async fn proclaim(&self, args: &LockArgs, proclamation: &Proclamation) -> Result<bool, Error> {
        proclamation.validate()?;
        let conn = self.election_connection().await?;
        let op = Op::Proclaim {
            args: WireArgs::from(args),
            proclamation: WireProclamation::from(proclamation),
        };
        self.call_on(&conn, op)
            .await?
            .into_result(&self.shared.endpoint)
    }

    /// Reads the leader from the server. With `watch`, the server keeps a
    /// watch for `args.uid` and pushes `Changed` on this locker's
    /// connection; the push goes to `watch.wake`, registered before the
    /// request is sent and kept for `watch.ttl` (at most 60 s, as on the
    /// server) or until the next watch of the uid replaces it. A watch on
    /// a connection that broke is gone with it: the observer's next read
    /// registers it again. `Err(Error::Unsupported)` at once from a server
    /// older than protocol version 5.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a dropped call may leave a watch, which lapses by its
    /// ttl.
    async fn leader(
        &self,
        args: &LockArgs,
        watch: Option<&WatchArgs>,
    ) -> Result<Option<Proclamation>, Error> {
        let conn = self.election_connection().await?;
        if let Some(watch) = watch {
            self.shared.pushes.watch(&args.uid, &watch.wake, watch.ttl);
        }
        let op = Op::Leader {
            args: WireArgs::from(args),
            watch: watch.map(|w| w.ttl),
        };
        match self.call_on(&conn, op).await? {
            Reply::Leader(found) => found
                .map(WireProclamation::into_proclamation)
                .transpose()
                .map_err(|err| Error::LockerUnavailable {
                    endpoint: self.shared.endpoint.clone(),
                    reason: format!("the server answered a malformed leader: {err}"),
                }),
            other => Err(other.into_error(&self.shared.endpoint)),
        }
    }

    async fn force_unlock(&self, args: &LockArgs) -> Result<bool, Error> {
        if !args.uid.is_empty() {
            self.shared.pushes.forget(&args.uid);
        }
        self.call_bool(Op::ForceUnlock(WireArgs::from(args))).await
    }

    /// From protocol version 6 the listing comes a page at a time, each
    /// asked for after the last entry of the one before; before that, in
    /// one reply, which a server refuses when it would not fit a frame.
    /// Pages are not one moment's view: a lock granted or released while
    /// they are read shows or not by where its name sorts.
    async fn locks(&self) -> Result<Vec<LockInfo>, Error> {
        // The version of the connection the listing goes on, opened again
        // first if the server closed it for idleness.
        let conn = self.connection().await?;
        if conn.version() < wire::V6 {
            return match self.call_on(&conn, Op::List).await? {
                Reply::Locks(entries) => Ok(lock_infos(entries)),
                other => Err(other.into_error(&self.shared.endpoint)),
            };
        }
        let mut out: Vec<LockInfo> = Vec::new();
        let mut listed: u64 = 0;
        loop {
            let after = out.last().map(|l| (l.resource.clone(), l.uid.clone()));
            let (entries, more) = match self.call(Op::ListPage { after }).await? {
                Reply::LocksPage { entries, more } => (entries, more),
                other => return Err(other.into_error(&self.shared.endpoint)),
            };
            let start = out.len();
            out.extend(lock_infos(entries));
            let page: usize = out[start..].iter().map(LockInfo::listed_size).sum();
            listed = listed.saturating_add(page as u64);
            // Each page must start after the one before and be in order,
            // and one that says more follow must be nearly full, or a
            // server could keep the listing going (and growing) for ever;
            // the whole is bounded too.
            let ordered = out[start.saturating_sub(1)..]
                .windows(2)
                .all(|w| (&w[0].resource, &w[0].uid) < (&w[1].resource, &w[1].uid));
            let refused = if !ordered {
                Some("a listing page out of order".to_owned())
            } else if more
                && page < wire::LISTING_PAGE_FULL
                && out.len() - start < wire::LISTING_ENTRIES
            {
                Some(format!(
                    "a listing page of {page} bytes that says more follow (a server fills \
                     each page to {} KiB)",
                    wire::LISTING_PAGE / 1024
                ))
            } else if more && listed >= wire::MAX_LISTING {
                Some(format!(
                    "a listing of more than {} GiB, the most a client takes",
                    wire::MAX_LISTING >> 30
                ))
            } else {
                None
            };
            if let Some(what) = refused {
                return Err(Error::LockerUnavailable {
                    endpoint: self.shared.endpoint.clone(),
                    reason: format!("the server answered {what}; no listing was taken"),
                });
            }
            if !more {
                return Ok(out);
            }
        }
    }

    fn endpoint(&self) -> String {
        self.shared.endpoint.clone()
    }

    /// Also true after the server closed a connection that stayed silent
    /// and held nothing, or the runtime the connection ran on shut down:
    /// the next call connects again.
    fn is_online(&self) -> bool {
        // A connection whose end is being judged counts as it was until its
        // close decided what follows. Read slot, flag, slot: a close sets
        // the flag before its judgement ends, and an install clears it only
        // after its connection is in the slot, so a locker that stays
        // reachable never reads offline between the two.
        let connected = || {
            self.shared
                .conn
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .as_ref()
                .is_some_and(|conn| conn.is_alive() || conn.is_ending())
        };
        connected() || self.shared.reopen_next.load(Ordering::Acquire) || connected()
    }

    fn is_local(&self) -> bool {
        false
    }

    /// Whether the current connection speaks version 3 or later, whose
    /// server keeps places in line and pushes grants.
    fn queues(&self) -> bool {
        self.protocol_version().is_some_and(|v| v >= 3)
    }

    /// The validity the server announced in its last handshake; `None`
    /// before the first one succeeded.
    fn validity(&self) -> Option<Duration> {
        self.shared
            .validity
            .load(Ordering::Acquire)
            .checked_sub(1)
            .map(Duration::from_nanos)
    }
}
