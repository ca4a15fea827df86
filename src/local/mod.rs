//! `LocalLocker`: the in-process lock table that a lock server exposes, and
//! that tests use directly as an in-memory cluster node.

mod boards;
mod config;
mod contract;
mod ended;
mod expiry;
mod forcing;
mod listing;
mod promotion;
pub(crate) mod released;
#[cfg(feature = "net")]
mod server_queries;
mod shards;
mod table;
#[cfg(test)]
mod tests;
mod waiting;

pub use config::LockerConfig;

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::error::QUARANTINE_REASON;
use crate::locker::proclamation::{election_resource, Proclamation, WatchArgs};
use crate::quorum::clock::{anchored_wall, nanos_of, Clock};
use crate::quorum::fencing::{FENCE_CLOCK_TOLERANCE, FENCE_QUARANTINE};
use crate::{Error, LockArgs, LockMode};
use boards::Boards;
#[cfg(feature = "net")]
pub(crate) use boards::{BOARDS_KEPT, PROCLAMATION_OVERHEAD, WATCH_OVERHEAD};
use ended::Ended;
use released::Released;
#[cfg(feature = "net")]
pub(crate) use shards::TABLE_KEPT;
use shards::{ShardSet, Shards};
use table::{admits, Name, Notice};
#[cfg(feature = "net")]
pub(crate) use table::{block, BucketMap, NAME_OVERHEAD};

/// What [`LocalLocker::counts`] counts.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(not(feature = "net"), allow(dead_code))]
pub(crate) struct TableCounts {
    /// Grants: one per resource per holder.
    pub(crate) entries: usize,
    /// Resource names kept: held, or waited for.
    pub(crate) resources: usize,
}

/// How often a full expiry pass runs, at most; touched shards are expired
/// on every call regardless.
const SWEEP_EVERY: Duration = Duration::from_secs(1);

/// How often a full expiry pass runs while a lock server serves the
/// locker, calls or none: [`SWEEP_EVERY`], or every validity when that is
/// shorter (its expiry timer, [`LocalLocker::pass_every`]). Places in line
/// are dropped only by that pass, so an expired place (or entry) may take
/// memory about that long; a lock server keeps their charges longer.
#[cfg(feature = "net")]
fn swept_within(validity: Duration) -> Duration {
    SWEEP_EVERY.min(validity)
}

/// How long a lock server keeps the charge of what a uid's entries and
/// places took once nothing touched the uid: the validity, after which
/// they have expired, and two expiry passes, by when the pass after their
/// expiry has given back their memory, with room for that pass's own time.
#[cfg(feature = "net")]
pub(crate) fn charge_lapse(validity: Duration) -> Duration {
    validity.saturating_add(2 * swept_within(validity))
}

/// The most a `LocalLocker` keeps of the uids it released (see
/// `released.rs`), counted as the lock server counts its own. Past it the
/// oldest are forgotten first: at 150,000 releases a second (a busy
/// in-process cluster) that is the last tenth of a second or so, which
/// still covers a call overtaken across one scheduler's turn. A lock
/// server serving the locker sets the record's limits to its own
/// (`ServerConfig::remember_released`, `max_released_bytes`).
pub(crate) const MAX_RELEASED_BYTES: usize = 8 << 20;

/// An in-memory [`NetLocker`](crate::NetLocker): the lock table of one node.
///
/// Rules:
/// * a writer excludes everyone, readers share;
/// * a lock covers all of `args.resources` or none of them, for reads and writes;
/// * locking again with the same uid and mode is idempotent;
/// * unlocking with a uid that does not hold the lock is refused (`Ok(false)`);
/// * `force_unlock` drops the entries of `args.uid`, or with an empty uid
///   every entry on `args.resources`;
/// * an entry not refreshed within [`LockerConfig::validity`] expires;
/// * a waiter (one ticket, or one uid) keeps the places in line of its
///   newest [`lock_wait`](crate::NetLocker::lock_wait) only: a newer request
///   replaces them on the names it names, and ends them on the older
///   request's other names when the two share a name;
/// * after [`restart`](Self::restart), for [`LockerConfig::quarantine`],
///   every call that grants, refreshes or draws a token answers the
///   quarantine error (nothing it says then may count), but a holder's
///   refresh re-creates its entry when the resource is free here;
/// * a fencing token is above every token drawn before on its resources
///   and never below the locker's wall clock.
///
/// State is sharded by resource name, so unrelated resources never contend
/// for the same mutex. No call awaits: every answer is immediate.
///
/// ```
/// use std::sync::Arc;
/// use quorum_lock::{Dsync, LocalLocker, NetLocker};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), quorum_lock::Error> {
/// let nodes: Vec<Arc<LocalLocker>> = (0..3).map(|_| Arc::new(LocalLocker::new())).collect();
/// let ds = Dsync::new(nodes.iter().map(|n| n.clone() as Arc<dyn NetLocker>).collect())?;
///
/// let guard = ds.rw_mutex(["jobs/42"])?.lock().await?;
/// assert_eq!(nodes[0].snapshot()[0].resource, "jobs/42");
/// guard.unlock().await?;
/// assert!(nodes.iter().all(|n| n.snapshot().is_empty()));
/// # Ok(())
/// # }
/// ```
pub struct LocalLocker {
    shards: Shards,
    /// Leader election: proclamations and observers' watches.
    boards: Boards,
    endpoint: String,
    config: LockerConfig,
    /// Origin of the nanosecond counters below.
    epoch: Instant,
    /// The wall clock at `epoch`, in nanoseconds since the Unix epoch: the
    /// clock fencing tokens are drawn against is this plus the monotonic
    /// time since, so it never steps back while the process lives (and
    /// follows tokio's paused clock in tests).
    epoch_wall: u64,
    /// End of the quarantine, in nanoseconds after `epoch`; 0 when none.
    quarantine_end: AtomicU64,
    /// What was released during the quarantine, which a late refresh must
    /// not re-create (see `ended.rs`).
    ended: Ended,
    /// The uids released here for the last validity (at most
    /// [`MAX_RELEASED_BYTES`] of them): a lock, a wait in line or a
    /// refresh for one of them was overtaken by its own release, and is
    /// refused (see `released.rs`).
    released: Released,
    /// When fencing tokens may be drawn again after a restart, in
    /// nanoseconds after `epoch`; 0 when never restarted.
    fence_ready: AtomicU64,
    /// When the next full expiry pass is due, in nanoseconds after `epoch`.
    next_sweep: AtomicU64,
    /// The clock every instant above and in the table is on: tokio's,
    /// unless a test gave it a [`DriftClock`](crate::testing::DriftClock).
    clock: Clock,
}

impl LocalLocker {
    /// An empty lock table named `local-N`, with default settings and no
    /// quarantine: an in-process cluster starts all at once.
    pub fn new() -> Self {
        Self::with_config(default_name(), LockerConfig::default())
    }

    /// An empty lock table that reports `endpoint` in logs and errors.
    pub fn named(endpoint: impl Into<String>) -> Self {
        Self::with_config(endpoint, LockerConfig::default())
    }

    /// An empty lock table with custom expiry and quarantine, not in
    /// quarantine. Call [`restart`](Self::restart) to start one in quarantine.
    pub fn with_config(endpoint: impl Into<String>, config: LockerConfig) -> Self {
        Self::on_clock(endpoint, config, Clock::Tokio)
    }

    /// An empty lock table like [`with_config`](Self::with_config) whose
    /// clock is `clock`: it measures expiry, quarantine, waiting places and
    /// watches on it, and draws fencing tokens against its wall clock, so
    /// that a test can make it run fast, slow, or with its wall clock off
    /// (feature `testing`). The instants it reports
    /// ([`snapshot`](Self::snapshot)) are mapped back to tokio's clock at
    /// the clock's current rate.
    #[cfg(feature = "testing")]
    pub fn with_clock(
        endpoint: impl Into<String>,
        config: LockerConfig,
        clock: crate::testing::DriftClock,
    ) -> Self {
        Self::on_clock(endpoint, config, Clock::Drift(clock))
    }

    fn on_clock(endpoint: impl Into<String>, config: LockerConfig, clock: Clock) -> Self {
        let epoch = clock.now();
        LocalLocker {
            shards: Shards::new(),
            boards: Boards::default(),
            endpoint: endpoint.into(),
            config,
            epoch,
            epoch_wall: anchored_wall(epoch),
            quarantine_end: AtomicU64::new(0),
            ended: Ended::default(),
            released: Released::on_clock(config.validity, MAX_RELEASED_BYTES, clock.clone()),
            fence_ready: AtomicU64::new(0),
            next_sweep: AtomicU64::new(0),
            clock,
        }
    }

    /// The expiry and quarantine settings.
    pub fn config(&self) -> LockerConfig {
        self.config
    }

    /// Simulates a process restart: forgets every entry and refuses new
    /// grants for [`LockerConfig::quarantine`], as a freshly started lock
    /// server does.
    ///
    /// ```
    /// # use quorum_lock::LocalLocker;
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let node = LocalLocker::new();
    /// node.restart();
    /// assert!(node.is_quarantined());
    /// # }
    /// ```
    pub fn restart(&self) {
        let now = self.clock.now();
        let end_of = |after: Duration| {
            now.checked_add(after)
                .map_or(u64::MAX, |end| self.nanos(end))
                .max(1)
        };
        // Set before the wipe: a grant checks the quarantine while holding
        // its shard locks, so it either sees the quarantine or is wiped.
        let quarantine = self.quarantine();
        let end = if quarantine.is_zero() {
            0
        } else {
            end_of(quarantine)
        };
        self.quarantine_end.store(end, Ordering::SeqCst);
        self.ended.clear();
        self.released.clear();
        self.fence_ready
            .store(end_of(quarantine.max(FENCE_QUARANTINE)), Ordering::SeqCst);
        // A crashed server forgets its counters as well; no token is drawn
        // in quarantine, and after it tokens start from the clock (`fence`).
        self.shards.any_shard(|shard| {
            shard.wipe();
            false
        });
        self.boards.wipe();
        tracing::info!(locker = %self.endpoint, ?quarantine, "lock table restarted");
    }

    /// Whether new grants are refused because of a recent restart.
    pub fn is_quarantined(&self) -> bool {
        self.quarantine_left_at(self.clock.now()).is_some()
    }

    /// How long new grants are still refused because of a recent restart;
    /// `None` when they are not.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use quorum_lock::LocalLocker;
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let node = LocalLocker::new();
    /// assert_eq!(node.quarantine_left(), None);
    /// node.restart();
    /// tokio::time::advance(Duration::from_secs(20)).await;
    /// assert_eq!(node.quarantine_left(), Some(Duration::from_secs(40)));
    /// # }
    /// ```
    pub fn quarantine_left(&self) -> Option<Duration> {
        self.quarantine_left_at(self.clock.now())
    }

    /// How many entries and resource names the table holds, without
    /// copying it as [`snapshot`](Self::snapshot) does: one short lock of
    /// each shard. Entries past their validity are counted until the next
    /// expiry pass, which this runs when it is due.
    #[cfg_attr(not(feature = "net"), allow(dead_code))]
    pub(crate) fn counts(&self) -> TableCounts {
        self.maybe_sweep(self.clock.now());
        let mut counts = TableCounts::default();
        self.shards.any_shard(|shard| {
            counts.entries += shard.entries();
            counts.resources += shard.names();
            false
        });
        counts
    }

    /// How many proclamations and watches the election boards keep.
    #[cfg(all(test, feature = "net"))]
    pub(crate) fn board_sizes(&self) -> (usize, usize) {
        self.boards.sizes()
    }

    /// How long the quarantine after a [`restart`](Self::restart) still
    /// refuses grants; zero when not in quarantine.
    #[cfg_attr(not(all(feature = "net", feature = "metrics")), allow(dead_code))]
    pub(crate) fn quarantine_remaining(&self) -> Duration {
        self.quarantine_left().unwrap_or_default()
    }

    /// Nanoseconds from `epoch` to `at`, saturating. In u64 arithmetic,
    /// cheaper than `Duration::as_nanos`'s u128 on this per-call path; u64
    /// nanoseconds last 584 years.
    fn nanos(&self, at: Instant) -> u64 {
        let since = at.saturating_duration_since(self.epoch);
        since
            .as_secs()
            .saturating_mul(1_000_000_000)
            .saturating_add(u64::from(since.subsec_nanos()))
    }

    fn quarantine_left_at(&self, now: Instant) -> Option<Duration> {
        let end = self.quarantine_end.load(Ordering::SeqCst);
        if end == 0 {
            // Never restarted, or the quarantine is off: skip the clock math.
            return None;
        }
        let now = self.nanos(now);
        (end > now).then(|| Duration::from_nanos(end - now))
    }

    /// Locks the shards of `args.resources`, after checking the input and
    /// expiring what is due, and runs `f` on them.
    /// Names whose line may have moved are collected in the `Vec` passed to
    /// `f` and promoted once the shards are unlocked.
    fn with_shards<R>(
        &self,
        args: &LockArgs,
        f: impl FnOnce(&mut ShardSet<'_>, Instant, &mut Vec<Name>) -> R,
    ) -> Result<R, Error> {
        let mut freed = Vec::new();
        let (out, now) = self.with_shards_deferred(args, &mut freed, f)?;
        self.promote(freed, now);
        Ok(out)
    }

    /// [`with_shards`](Self::with_shards), leaving the names to promote
    /// in `freed` for the caller (with the call's clock reading): the
    /// promotion's own loop, which must not call into itself.
    fn with_shards_deferred<R>(
        &self,
        args: &LockArgs,
        freed: &mut Vec<Name>,
        f: impl FnOnce(&mut ShardSet<'_>, Instant, &mut Vec<Name>) -> R,
    ) -> Result<(R, Instant), Error> {
        if args.uid.is_empty() {
            return Err(Error::invalid("the lock uid must not be empty"));
        }
        args.validate_once()?;
        let now = self.clock.now();
        self.maybe_sweep(now);
        self.shards
            .expire_each(&args.resources, now, self.config.validity, freed);
        let out = self.shards.with(&args.resources, |set| {
            set.expire(now, self.config.validity, freed);
            f(set, now, freed)
        });
        Ok((out, now))
    }

    /// Drops the proclamations on `resources` (all when `None`) whose
    /// entries are gone, and pushes their observers the news.
    fn revalidate_boards(&self, resources: Option<&[String]>, now: Instant, prune: bool) {
        let stale: Vec<_> = self
            .boards
            .proclaimers(resources)
            .into_iter()
            .filter(|(resource, uid)| {
                !self.shards.with_one(resource, |shard| {
                    shard.holds(resource, uid, LockMode::Write)
                })
            })
            .collect();
        if !stale.is_empty() || prune {
            self.boards.drop_stale(stale, now, prune).deliver();
        }
    }

    /// See [`NetLocker::proclaim`].
    fn store_proclamation(&self, args: &LockArgs, p: &Proclamation) -> Result<bool, Error> {
        let resource = election_resource(args)?;
        p.validate()?;
        let changes = self.with_shards(args, |set, now, _| {
            let holds = set.shard(0).holds(resource, &args.uid, LockMode::Write);
            let changes = holds.then(|| self.boards.proclaim(resource, &args.uid, p));
            // Stored even in quarantine, on an entry a holder's refresh
            // re-created, so that it is there when the quarantine ends; but
            // the answer must not count (rule Q).
            match self.quarantine_error(now) {
                Some(err) => (Err(err), changes),
                None => (Ok(holds), changes),
            }
        })?;
        if let Some(changes) = changes.1 {
            changes.deliver();
        }
        changes.0
    }

    /// See [`NetLocker::leader`].
    fn read_leader(
        &self,
        args: &LockArgs,
        watch: Option<&WatchArgs>,
    ) -> Result<Option<Proclamation>, Error> {
        let resource = election_resource(args)?;
        let (found, changes) = self.with_shards(args, |set, now, _| {
            let shard = set.shard(0);
            let read = self.boards.read(resource, &args.uid, watch, now, |uid| {
                shard.holds(resource, uid, LockMode::Write)
            })?;
            if let Some(err) = self.quarantine_error(now) {
                return Ok((Err(err), read.1));
            }
            Ok::<_, Error>((Ok(read.0), read.1))
        })??;
        changes.deliver();
        found
    }

    fn quarantine_error(&self, now: Instant) -> Option<Error> {
        let left = self.quarantine_left_at(now)?;
        Some(Error::LockerUnavailable {
            endpoint: self.endpoint.clone(),
            reason: format!("restarted recently; {QUARANTINE_REASON} for another {left:?}"),
        })
    }

    /// A plain lock call: granted when the resources are free for `mode`
    /// and nobody conflicting waits in line for them.
    fn grant(&self, args: &LockArgs, mode: LockMode) -> Result<bool, Error> {
        self.with_shards(args, |set, now, freed| {
            if let Some(err) = self.quarantine_error(now) {
                return Err(err);
            }
            // Overtaken by its own release: granting it would leave an
            // entry its holder no longer knows of.
            if self.was_released(&args.uid, now) {
                return Ok(false);
            }
            let admitted = args.resources.iter().enumerate().all(|(pos, r)| {
                set.shard(pos)
                    .in_line(r, &args.uid, mode, None, now, &|uid| {
                        self.was_released(uid, now)
                    })
            });
            if admitted {
                for pos in 0..args.resources.len() {
                    set.shard(pos).grant(
                        Name::new(&args.resources, pos),
                        args,
                        mode,
                        now,
                        None,
                        None,
                        freed,
                    );
                }
            }
            Ok(admitted)
        })?
    }

    /// See [`NetLocker::fence`].
    fn draw_fence(
        &self,
        args: &LockArgs,
        mode: LockMode,
        floor: u64,
    ) -> Result<Option<u64>, Error> {
        self.with_shards(args, |set, now, _| {
            // A restarted locker does not vouch for its entries yet, nor
            // for counters it may have forgotten: see `refresh_entries`.
            if let Some(err) = self.quarantine_error(now) {
                return Err(err);
            }
            let ready = self.fence_ready.load(Ordering::SeqCst);
            let at = self.nanos(now);
            if ready > at {
                return Err(Error::LockerUnavailable {
                    endpoint: self.endpoint.clone(),
                    reason: format!(
                        "restarted recently; {QUARANTINE_REASON} of fencing tokens for another {:?}",
                        Duration::from_nanos(ready - at)
                    ),
                });
            }
            let wall = self.wall_nanos(now);
            let most = wall.saturating_add(nanos_of(FENCE_CLOCK_TOLERANCE));
            if floor > most {
                return Err(Error::invalid(format!(
                    "fencing floor {floor} is {:?} ahead of the clock of {}, more than the \
                     tolerance of {FENCE_CLOCK_TOLERANCE:?}: the lock servers' wall clocks \
                     disagree, or a client sent a bogus floor",
                    Duration::from_nanos(floor - wall),
                    self.endpoint
                )));
            }
            let resources = args.resources.iter().enumerate();
            if !resources
                .clone()
                .all(|(pos, r)| set.shard(pos).holds(r, &args.uid, mode))
            {
                return Ok(None);
            }
            let mut token = floor.max(wall);
            for (pos, r) in resources.clone() {
                let next = set.shard(pos).next_fence(r).ok_or_else(|| {
                    Error::invalid(format!(
                        "the fencing counter of {r:?} on {} is at its maximum",
                        self.endpoint
                    ))
                })?;
                token = token.max(next);
            }
            for (pos, r) in resources {
                set.shard(pos).set_fence(r, token);
            }
            Ok(Some(token))
        })?
    }

    /// The wall clock fencing tokens are drawn against, in nanoseconds
    /// since the Unix epoch.
    fn wall_nanos(&self, now: Instant) -> u64 {
        self.clock
            .shift_wall(self.epoch_wall.saturating_add(self.nanos(now)))
    }

    /// The quarantine in force after a restart: [`LockerConfig::quarantine`],
    /// raised to the validity when it is shorter but not zero (a lock
    /// granted before the restart is trusted for up to a validity, so a
    /// shorter quarantine cannot be safe).
    pub fn quarantine(&self) -> Duration {
        match self.config.quarantine {
            zero if zero.is_zero() => zero,
            quarantine => quarantine.max(self.config.validity),
        }
    }

    /// Removes the entries of `args.uid` held in `mode` (any mode when
    /// `None`), and its places in line. Returns whether an entry was removed.
    fn release(&self, args: &LockArgs, mode: Option<LockMode>) -> Result<bool, Error> {
        // Without a mode, forced open by uid and names.
        self.release_as(args, mode, mode.is_none())
    }

    /// As [`release`](Self::release), the uid noted as forced open only
    /// when `forced` (see [`note_ended`](Self::note_ended)).
    fn release_as(
        &self,
        args: &LockArgs,
        mode: Option<LockMode>,
        forced: bool,
    ) -> Result<bool, Error> {
        self.release_counted(args, mode, forced)
            .map(|removed| removed > 0)
    }

    /// [`release_as`](Self::release_as), saying how many entries it
    /// removed: a lock server gives back a lock's charge only when its
    /// release removed an entry on every one of its names.
    pub(crate) fn release_counted(
        &self,
        args: &LockArgs,
        mode: Option<LockMode>,
        forced: bool,
    ) -> Result<usize, Error> {
        let removed = self.with_shards(args, |set, now, freed| {
            // The arguments are valid here, and the shards locked.
            self.note_ended(&args.uid, forced, now);
            let mut removed = 0;
            for pos in 0..args.resources.len() {
                let name = Name::new(&args.resources, pos);
                removed += usize::from(set.shard(pos).release(name, &args.uid, mode, freed));
            }
            removed
        })?;
        if removed > 0 && self.boards.in_use() {
            self.revalidate_boards(Some(&args.resources), self.clock.now(), false);
        }
        Ok(removed)
    }

    /// Notes that `uid` is being released, or forced open when `forced`,
    /// before its entries are removed and under the same shard locks: a
    /// late lock or wait of it is refused
    /// ([`was_released`](Self::was_released)), and in quarantine a late
    /// refresh must not re-create them (see `ended.rs`, which keeps the
    /// quarantine's releases in place of `released.rs`). A forced uid, by
    /// uid or by name, in quarantine or not, is kept where releases cannot
    /// push it out: among the forced uids of `released.rs` always, and in
    /// quarantine among those of `ended.rs` too. `now` is the call's own
    /// clock reading, which the table uses for everything else the call
    /// does.
    pub(crate) fn note_ended(&self, uid: &Arc<str>, forced: bool, now: Instant) {
        let end = self.quarantine_end.load(Ordering::SeqCst);
        if end != 0 && !uid.is_empty() && self.quarantine_left_at(now).is_some() {
            self.ended.note(end, uid, forced);
            if forced {
                self.released.remember_forced_at(uid, now);
            }
        } else if forced {
            self.released.remember_forced_at(uid, now);
        } else {
            self.released.remember_shared_at(uid, now);
        }
    }

    /// The record of the uids released here, which a lock server serving
    /// this locker uses for its own, with its own limits.
    #[cfg(feature = "net")]
    pub(crate) fn released(&self) -> &Released {
        &self.released
    }

    /// Whether `uid` was released here recently: within the validity
    /// before `now` (the call's clock reading), or during a quarantine
    /// whose record is still kept (a validity after it ended). A lock or a
    /// wait for it was overtaken by its release.
    pub(super) fn was_released(&self, uid: &str, now: Instant) -> bool {
        self.released.contains_at(uid, now) || self.ended.holds(uid)
    }

    /// Refreshes every entry of `args.uid`.
    ///
    /// In quarantine the answer is the quarantine error, whatever the table
    /// holds: an entry here may be one the restart made this locker forget
    /// and then re-create for somebody else, so nothing it says may count
    /// towards a quorum. It still refreshes the entries
    /// it has, and when `mode` is given re-creates the missing ones if the
    /// resources are free, so that a holder finds its entries here once the
    /// quarantine is over, when every grant forgotten in the restart has
    /// expired and its answers count again. A uid released here, or forced
    /// open here, during the quarantine is not re-created: the refresh may
    /// have been sent before that release (see `ended.rs`).
    fn refresh_entries(&self, args: &LockArgs, mode: Option<LockMode>) -> Result<bool, Error> {
        self.with_shards(args, |set, now, freed| {
            let mut missing = Vec::new();
            for (pos, r) in args.resources.iter().enumerate() {
                if !set.shard(pos).refresh(r, &args.uid, now) {
                    missing.push(pos);
                }
            }
            let Some(err) = self.quarantine_error(now) else {
                return Ok(missing.is_empty());
            };
            let Some(mode) = mode else {
                return Err(err);
            };
            let free = missing
                .iter()
                .all(|&pos| admits(set.shard(pos).get(&args.resources[pos]), &args.uid, mode));
            let end = self.quarantine_end.load(Ordering::SeqCst);
            // Neither released nor forced open during the quarantine
            // (`ended.rs`), nor remembered as released or forced in
            // `released.rs` (where a lock server serving this locker
            // records its releases too).
            if free
                && !missing.is_empty()
                && self.ended.may_recreate(end, &args.uid)
                && !self.released.contains_at(&args.uid, now)
            {
                for &pos in &missing {
                    set.shard(pos).grant(
                        Name::new(&args.resources, pos),
                        args,
                        mode,
                        now,
                        None,
                        None,
                        freed,
                    );
                }
                let uid = crate::locker::secrets::mask(&args.uid);
                tracing::debug!(locker = %self.endpoint, %uid, "re-created entries on refresh in quarantine");
            }
            Err(err)
        })?
    }
}

/// Delivers pushes collected under the shard locks.
fn deliver(notices: Vec<Notice>) {
    if notices.is_empty() {
        // The common case: skip the iterator and its drop.
        return;
    }
    for notice in notices {
        notice.deliver();
    }
}

fn default_name() -> String {
    static NEXT: AtomicUsize = AtomicUsize::new(1);
    format!("local-{}", NEXT.fetch_add(1, Ordering::Relaxed))
}

impl Default for LocalLocker {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for LocalLocker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalLocker")
            .field("endpoint", &self.endpoint)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}
