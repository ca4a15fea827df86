//! The calls of a `RedisLocker` on its server, each one script run
//! atomically by Redis: granting (at once or in line), releasing,
//! refreshing, listing, and the keys, arguments and stored values they
//! share. While the server is in quarantine after a restart, the calls
//! whose answer would count are refused with a quarantine error.

use std::sync::atomic::Ordering;
use std::time::Duration;

use ::redis::{Script, ToRedisArgs};
use tokio::time::Instant;

use super::link::Live;
use super::waits::Waiter;
use super::{scripts, Shared, LONGEST_VALIDITY};
use crate::error::QUARANTINE_REASON;
use crate::locker::proclamation::{Proclamation, MAX_VALUE_LEN};
use crate::locker::wait::WaitArgs;
use crate::quorum::fencing::FENCE_QUARANTINE;
use crate::{Error, LockArgs, LockInfo, LockMode};

/// Which quarantine end a script is given, if any.
#[derive(Clone, Copy)]
pub(super) enum Quarantine {
    /// The script does not look at the quarantine.
    None,
    /// When grants and refreshes count again: [`RedisConfig::quarantine`].
    Grants,
    /// When tokens may be drawn again: see [`FENCE_QUARANTINE`].
    Fencing,
}

/// How a script answered: granted, refused, queued, or in quarantine.
pub(super) fn answer(endpoint: &str, code: i64) -> Result<i64, Error> {
    if code < 0 {
        let left = Duration::from_millis(code.unsigned_abs());
        return Err(Error::LockerUnavailable {
            endpoint: endpoint.to_owned(),
            reason: format!(
                "Redis started recently and may have lost locks it granted; {QUARANTINE_REASON} for another {left:?}"
            ),
        });
    }
    Ok(code)
}

impl Shared {
    pub(super) fn keys(&self, args: &LockArgs) -> Vec<String> {
        args.resources
            .iter()
            .map(|r| format!("{}{r}", self.config.prefix))
            .collect()
    }

    pub(super) fn ms(duration: Duration) -> String {
        let duration = duration.min(LONGEST_VALIDITY);
        u64::try_from(duration.as_millis())
            .unwrap_or(u64::MAX)
            .max(1)
            .to_string()
    }

    pub(super) fn validity_ms(&self) -> String {
        Self::ms(self.config.validity)
    }

    /// The key of this node's fencing high-water mark: the prefix alone.
    /// Resource names are never empty, so no resource's key is this one.
    pub(super) fn mark_key(&self) -> &str {
        &self.config.prefix
    }

    /// When the quarantine `which` of the server behind `live` ends, in ms
    /// on its clock, counted from its start (`Epoch::boot_ms`, taken at or
    /// after the true start, so the quarantine never ends early).
    pub(super) fn quarantine_end(&self, live: &Live, which: Quarantine) -> Option<String> {
        self.quarantine_end_ms(live, which)
            .map(|end| end.to_string())
    }

    /// [`quarantine_end`](Self::quarantine_end) as a number.
    pub(super) fn quarantine_end_ms(&self, live: &Live, which: Quarantine) -> Option<u64> {
        // A quarantine shorter than the validity cannot be safe (a lock
        // granted before the restart is trusted for up to a validity), so
        // it is raised to it; zero stays "none".
        let configured = match self.config.quarantine {
            zero if zero.is_zero() => zero,
            quarantine => quarantine.max(self.config.validity),
        }
        .min(LONGEST_VALIDITY);
        let quarantine = match which {
            Quarantine::None => return None,
            Quarantine::Grants => configured,
            Quarantine::Fencing if configured.is_zero() => configured,
            Quarantine::Fencing => configured.max(FENCE_QUARANTINE),
        };
        if quarantine.is_zero() {
            // No quarantine at all, not even the second `boot_ms` may lie
            // ahead of the server's clock.
            return Some(0);
        }
        // At most ten years: fits u64 ms, and a Lua double exactly.
        let quarantine = u64::try_from(quarantine.as_millis()).unwrap_or(u64::MAX);
        Some(live.epoch.boot_ms.saturating_add(quarantine))
    }

    /// Checks `args` as every locker must: resources within the limits,
    /// unless `any_uid` a uid, and text a listing can show.
    pub(super) fn checked(args: &LockArgs, any_uid: bool) -> Result<(), Error> {
        args.validate_resources()?;
        if !any_uid && args.uid.is_empty() {
            return Err(Error::InvalidArgument("empty lock uid".into()));
        }
        args.validate_text()
    }

    /// Runs `script` on `keys` with `head`, then the end of the quarantine
    /// `which` of the server behind the connection it runs on (unless
    /// `Quarantine::None`), then `tail`, then the leader channel (every
    /// script's last argument: see `scripts.rs`).
    ///
    /// `EVALSHA` is built as one command, rather than through
    /// `ScriptInvocation`, which copies every argument twice. Scripts are
    /// loaded when a connection is made; on `NOSCRIPT` (a flushed script
    /// cache) they are loaded again and the call runs once more.
    pub(super) async fn run<T: ::redis::FromRedisValue, H: ToRedisArgs + Sync>(
        &self,
        script: &Script,
        keys: &[String],
        head: &[H],
        which: Quarantine,
        tail: &[&str],
    ) -> Result<T, Error> {
        let live = self.link.live().await?;
        self.run_on(live, script, keys, head, which, tail).await
    }

    /// [`run`](Self::run) on the connection `live`.
    pub(super) async fn run_on<T: ::redis::FromRedisValue, H: ToRedisArgs + Sync>(
        &self,
        mut live: Live,
        script: &Script,
        keys: &[String],
        head: &[H],
        which: Quarantine,
        tail: &[&str],
    ) -> Result<T, Error> {
        let mut cmd = ::redis::cmd("EVALSHA");
        cmd.arg(script.get_hash())
            .arg(keys.len())
            .arg(keys)
            .arg(head);
        if let Some(end) = self.quarantine_end(&live, which) {
            cmd.arg(end);
        }
        cmd.arg(tail).arg(&self.watches.feed.channel);
        match cmd.query_async(&mut live.conn).await {
            Err(err)
                if err.kind() == ::redis::ErrorKind::Server(::redis::ServerErrorKind::NoScript) =>
            {
                self.link.reload_scripts(&live).await?;
                cmd.query_async(&mut live.conn).await
            }
            other => other,
        }
        .map_err(|e| self.link.failed(&live, &e))
    }

    /// The fast path of a grant: one resource whose key is absent, so
    /// nobody holds or waits for it, on a server past its quarantine.
    /// One plain `SET key value NX PX validity`, no script and no clock:
    /// the value names the holder (see `scripts.rs`) and the key's expiry
    /// is its deadline. Whether it granted; when not (more than one
    /// resource, the key is there, no grant script on this connection has
    /// answered outside the quarantine yet, or the fast path is off) the
    /// caller runs the full script.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn grant_fast(
        &self,
        live: &Live,
        keys: &[String],
        args: &LockArgs,
        mode: LockMode,
        validity: &str,
        ticket: &str,
        channel: &str,
    ) -> Result<bool, Error> {
        let [key] = keys else { return Ok(false) };
        // Past the quarantine, as a script on this connection has seen.
        if !self.fast.load(Ordering::Relaxed) || !live.granting.load(Ordering::Relaxed) {
            return Ok(false);
        }
        let value = fast_value(args, mode, validity, ticket, channel);
        let mut conn = live.conn.clone();
        let set: Result<::redis::Value, _> = ::redis::cmd("SET")
            .arg(key)
            .arg(value)
            .arg("NX")
            .arg("PX")
            .arg(validity)
            .query_async(&mut conn)
            .await;
        match set {
            Ok(::redis::Value::Nil) => {
                self.paths.fast_misses.fetch_add(1, Ordering::Relaxed);
                Ok(false)
            }
            Ok(::redis::Value::Okay) => {
                self.paths.fast_grants.fetch_add(1, Ordering::Relaxed);
                Ok(true)
            }
            Ok(other) => Err(Error::LockerUnavailable {
                endpoint: self.endpoint.clone(),
                // What kind of answer, not what it holds: a bulk string of
                // bytes is shown by the driver as numbers, which no
                // masking of a secret quoted in it would catch.
                reason: format!(
                    "Redis answered SET NX with {}, where OK or nil was expected",
                    answer_kind(&other)
                ),
            }),
            // An ACL without SET: the scripts still work, so they do it all.
            Err(err)
                if err.kind() == ::redis::ErrorKind::Server(::redis::ServerErrorKind::NoPerm) =>
            {
                self.fast.store(false, Ordering::Relaxed);
                tracing::warn!(
                    locker = %self.endpoint,
                    "Redis refuses SET to this user; every grant runs the lock script instead of the fast path"
                );
                Ok(false)
            }
            Err(err) => Err(self.link.failed(live, &err)),
        }
    }

    pub(super) async fn grant(&self, args: &LockArgs, mode: LockMode) -> Result<bool, Error> {
        Self::checked(args, false)?;
        let validity = self.validity_ms();
        let keys = self.keys(args);
        let live = self.link.live().await?;
        if self
            .grant_fast(&live, &keys, args, mode, &validity, "", "")
            .await?
        {
            return Ok(true);
        }
        self.paths.script_grants.fetch_add(1, Ordering::Relaxed);
        let argv = grant_argv(args, mode, &validity);
        let granting = live.granting.clone();
        let code = self
            .run_on(
                live,
                &self.scripts.lock,
                &keys,
                &argv,
                Quarantine::Grants,
                &[],
            )
            .await?;
        let code = answer(&self.endpoint, code)?;
        // Any answer but the quarantine's: the server's clock is past it.
        granting.store(true, Ordering::Relaxed);
        Ok(code == 1)
    }

    /// A waiting lock call, or (`turn`) a turn taken for a waiter after a
    /// push.
    pub(super) async fn wait(
        &self,
        args: &LockArgs,
        mode: LockMode,
        ticket: &str,
        place_ttl: Duration,
        channel: &str,
        turn: bool,
    ) -> Result<i64, Error> {
        let validity = self.validity_ms();
        let keys = self.keys(args);
        let live = self.link.live().await?;
        // A turn needs the waiter's place, which lives in the key: never
        // the fast path.
        if !turn
            && self
                .grant_fast(&live, &keys, args, mode, &validity, ticket, channel)
                .await?
        {
            return Ok(1);
        }
        self.paths.script_grants.fetch_add(1, Ordering::Relaxed);
        let place_ttl = Self::ms(place_ttl);
        let argv = grant_argv(args, mode, &validity);
        let tail = [ticket, &place_ttl, channel, if turn { "1" } else { "0" }];
        let granting = live.granting.clone();
        let code = self
            .run_on(
                live,
                &self.scripts.wait,
                &keys,
                &argv,
                Quarantine::Grants,
                &tail,
            )
            .await?;
        let code = answer(&self.endpoint, code)?;
        // A turn may answer 0 before the script looks at the clock; any
        // other answer but the quarantine's says the clock is past it.
        if !turn {
            granting.store(true, Ordering::Relaxed);
        }
        Ok(code)
    }

    /// Asks again for `waiter` after a push said its turn may have come;
    /// whether it was granted.
    pub(super) async fn take_turn(&self, waiter: &Waiter) -> Result<bool, Error> {
        let code = self
            .wait(
                &waiter.args,
                waiter.mode,
                &waiter.ticket,
                waiter.place_ttl,
                &self.waits.feed.channel,
                true,
            )
            .await?;
        Ok(code == 1)
    }

    pub(super) async fn release(&self, args: &LockArgs, mode: LockMode) -> Result<bool, Error> {
        Self::checked(args, false)?;
        self.waits.forget(&args.uid);
        let code: i64 = self
            .run(
                &self.scripts.unlock,
                &self.keys(args),
                &[fast_head(&args.uid, mode)],
                Quarantine::None,
                &[],
            )
            .await?;
        let path = match code {
            2 => &self.paths.fast_unlocks,
            _ => &self.paths.script_unlocks,
        };
        path.fetch_add(1, Ordering::Relaxed);
        Ok(code >= 1)
    }

    pub(super) async fn refresh(
        &self,
        args: &LockArgs,
        mode: Option<LockMode>,
    ) -> Result<bool, Error> {
        Self::checked(args, false)?;
        let validity = self.validity_ms();
        let mode = mode.map_or("", mode_arg);
        let argv = [&*args.uid, &validity, mode, &*args.owner, &*args.source];
        let code: i64 = self
            .run(
                &self.scripts.refresh,
                &self.keys(args),
                &argv,
                Quarantine::Grants,
                &[],
            )
            .await?;
        Ok(answer(&self.endpoint, code)? == 1)
    }

    /// Every key under the prefix, in batches of `SCAN`.
    pub(super) async fn scan(&self) -> Result<Vec<String>, Error> {
        let mut live = self.link.live().await?;
        let pattern = format!("{}*", escape_glob(&self.config.prefix));
        let mut cursor = 0u64;
        let mut keys = Vec::new();
        loop {
            let (next, batch): (u64, Vec<String>) = ::redis::cmd("SCAN")
                .arg(cursor)
                .arg("MATCH")
                .arg(&pattern)
                .arg("COUNT")
                .arg(500)
                .query_async(&mut live.conn)
                .await
                .map_err(|e| self.link.failed(&live, &e))?;
            // The fencing high-water mark is under the prefix too, and is
            // no resource.
            keys.extend(batch.into_iter().filter(|k| k != self.mark_key()));
            if next == 0 {
                return Ok(keys);
            }
            cursor = next;
        }
    }

    pub(super) async fn list(&self) -> Result<Vec<LockInfo>, Error> {
        let mut infos = Vec::new();
        let validity = u64::try_from(self.config.validity.as_millis()).unwrap_or(u64::MAX);
        for batch in self.scan().await?.chunks(100) {
            let out: Vec<String> = self
                .run(
                    &self.scripts.list,
                    batch,
                    &[] as &[&str],
                    Quarantine::None,
                    &[],
                )
                .await?;
            let Some((server_now, rows)) = out.split_first() else {
                continue;
            };
            let server_now: u64 = server_now.parse().unwrap_or(0);
            let here = Instant::now();
            // A time on the server's clock, as an instant on ours.
            let at = |ms: u64| {
                let ago = server_now.saturating_sub(ms);
                here.checked_sub(Duration::from_millis(ago)).unwrap_or(here)
            };
            for row in rows.chunks_exact(7) {
                let deadline: u64 = row[6].parse().unwrap_or(0);
                infos.push(LockInfo {
                    resource: row[0]
                        .strip_prefix(&self.config.prefix)
                        .unwrap_or(&row[0])
                        .to_owned(),
                    uid: row[1].clone(),
                    mode: if row[2] == "w" {
                        LockMode::Write
                    } else {
                        LockMode::Read
                    },
                    owner: row[3].clone(),
                    source: row[4].clone(),
                    acquired: at(row[5].parse().unwrap_or(server_now)),
                    refreshed: at(deadline.saturating_sub(validity)),
                });
            }
        }
        infos.sort_by(|a, b| (&a.resource, &a.uid).cmp(&(&b.resource, &b.uid)));
        Ok(infos)
    }
}

/// `prefix` with the glob characters of `SCAN MATCH` escaped.
pub(super) fn escape_glob(prefix: &str) -> String {
    let mut out = String::with_capacity(prefix.len());
    for c in prefix.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// The arguments every granting script starts with: uid, mode, validity
/// in ms, owner, source.
pub(super) fn grant_argv<'a>(
    args: &'a LockArgs,
    mode: LockMode,
    validity: &'a str,
) -> [&'a str; 5] {
    [
        &args.uid,
        mode_arg(mode),
        validity,
        &args.owner,
        &args.source,
    ]
}

pub(super) fn mode_arg(mode: LockMode) -> &'static str {
    match mode {
        LockMode::Write => "w",
        LockMode::Read => "r",
    }
}

/// A proclamation's term and seq as 40 digits, so that Lua compares them
/// as strings in the order of the numbers.
pub(super) fn stamp(p: &Proclamation) -> String {
    format!("{:020}{:020}", p.term, p.seq)
}

/// A stored proclamation: its stamp, then its value. `None` when it is not
/// one that [`stamp`] and the `PROCLAIM` script wrote.
pub(super) fn unstamp(stored: &[u8]) -> Option<Proclamation> {
    let (stamp, value) = (stored.get(..40)?, stored.get(40..)?);
    let number = |digits: &[u8]| -> Option<u64> {
        if !digits.iter().all(u8::is_ascii_digit) {
            return None;
        }
        std::str::from_utf8(digits).ok()?.parse().ok()
    };
    if value.len() > MAX_VALUE_LEN {
        return None;
    }
    Proclamation::new(number(&stamp[..20])?, number(&stamp[20..])?, value).ok()
}

/// The value of a fast-path key: the tag, the mode, then uid, validity,
/// owner, source, ticket and channel, each as its length in bytes, `:` and
/// its bytes (the layout `scripts.rs` describes and the scripts read).
/// The uid comes first, so the unlock script recognises its holder by a
/// prefix it builds from the uid and mode alone.
pub(super) fn fast_value(
    args: &LockArgs,
    mode: LockMode,
    validity: &str,
    ticket: &str,
    channel: &str,
) -> String {
    let mut value = fast_head(&args.uid, mode);
    value.reserve(32 + args.owner.len() + args.source.len() + ticket.len() + channel.len());
    for field in [validity, &*args.owner, &*args.source, ticket, channel] {
        use std::fmt::Write as _;
        // Writing to a String cannot fail.
        let _ = write!(value, "{}:{field}", field.len());
    }
    value
}

/// The first bytes of the fast-path value of `uid` in `mode`: what the
/// unlock script compares (and reads the uid and mode from).
pub(super) fn fast_head(uid: &str, mode: LockMode) -> String {
    format!("{}{}{}:{uid}", scripts::FAST_TAG, mode_arg(mode), uid.len())
}

/// A ticket as 40 digits, so that Lua compares tickets as strings in the
/// order of the numbers.
pub(super) fn ticket_arg(wait: &WaitArgs) -> String {
    format!("{:020}{:020}", wait.ticket.at, wait.ticket.tiebreak)
}

/// What kind of answer `value` is, for an error that must not show what
/// it holds (a server may quote a password in it).
fn answer_kind(value: &::redis::Value) -> String {
    use ::redis::Value;
    match value {
        Value::Nil => "nil".to_owned(),
        Value::Int(_) => "an integer".to_owned(),
        Value::BulkString(bytes) => format!("a bulk string of {} bytes", bytes.len()),
        Value::Array(items) => format!("an array of {} items", items.len()),
        Value::SimpleString(text) => format!("a simple string of {} bytes", text.len()),
        Value::Okay => "OK".to_owned(),
        _ => "another kind of answer".to_owned(),
    }
}
