//! An exhaustive model check of the locker protocol for small cases
//!.
//!
//! The model is a transition system written after the code, rule by rule,
//! and searched with a set of visited states (128-bit fingerprints), so
//! every state reachable within the bounds is checked. Nothing here runs
//! the library: it models it. RELIABILITY.md says what it covers and what
//! it abstracts away.
//!
//! # What is modelled
//!
//! * n = 3 lockers and one resource. A locker (after `src/local`) keeps the
//!   holders (one writer or readers, each entry with its uid, last refresh,
//!   the ticket of the wait that got it and whether it can be pushed to),
//!   the line of places ordered by ticket (each with its expiry), the
//!   resource's latest fencing token and the shard's fencing floor (the
//!   token is folded into the floor when the name is freed), and the end of
//!   its quarantine. `lock_wait` grants when `in_line` allows (holders admit,
//!   no older live conflicting place), re-grants and refreshes an entry the
//!   uid holds (and repeats a wound), or refreshes what the uid holds and
//!   queues it, wounding younger conflicting holders. Entries expire
//!   `validity` after their last refresh, places after the place TTL; a
//!   freed line is promoted (the head granted and pushed `Granted`).
//!   `refresh_mode` refreshes, and in quarantine re-creates a missing entry
//!   when the resource is free. `fence` draws from the resource's counter
//!   and the floor. `unlock` removes the uid's entry and place.
//! * A restart forgets every entry, place and fencing counter and starts a
//!   quarantine, at any moment between two requests the locker handles (a
//!   locker may also start the run in quarantine, as a freshly started lock
//!   server does).
//! * Clients (after `src/lock/wait_round.rs`, `src/lock/acquisition.rs`): each waits
//!   in line with one ticket (ordered by when the wait began) and a fresh
//!   uid per wait; the first requests go to every locker at once, and every
//!   locker is asked again each tick (the renew, or the retry after a
//!   failure); replies are recorded as `record_reply` does (`alive_since`,
//!   the stamp check that ignores a reply sent before a pushed grant, a
//!   failure that keeps a granted slot); pushes set a slot granted or the
//!   wound flag; after every event the wait tries to win: the quorum-th
//!   latest `alive_since` of the granted slots is where the holder's trust
//!   starts, `Stale` when that trust is already over; a wounded or stale wait
//!   gives everything back (its calls still out unlock after they finish) and
//!   waits again with a new uid and the same ticket.
//! * Holders (after `src/lock/keeper.rs`, `src/lock/refresh.rs`, `src/lock/loss.rs`): trust
//!   until `trust_from + validity - margin`; each tick a refresh round sends
//!   `refresh_mode` to every locker and, once a quorum confirmed, moves the
//!   deadline to `sent + validity - margin` unless it already passed; enough
//!   "not found" or a passed deadline lose the lock (every locker is then
//!   unlocked); a holder may release at any tick. A holder may draw its
//!   fencing token (after `src/quorum/fence.rs`): one round with floor 0, and a
//!   second with the largest of the first quorum of answers as the floor
//!   when they differ; the token counts only if the holder still trusts its
//!   lock when the draw ends (`fencing_token` checks).
//! * Time: discrete ticks up to a horizon. Lockers share one monotonic
//!   clock; each locker has a wall clock with a fixed offset (`skew`) for
//!   its fencing counters, `TOKEN_UNITS_PER_TICK` units a tick, so that a
//!   few draws within a tick (one "nanosecond" each) never reach the next.
//! * The network. Every request, reply, unlock and push is a message. A
//!   call's deadline is the end of the tick it was sent in. Within a tick,
//!   messages arrive process by process ("stages": locker 0, 1, 2, then
//!   each client), in every order; what a locker does with its messages
//!   changes nobody else until a later stage, and clients send nothing
//!   before the next tick, so this loses no interleaving that matters. A
//!   message arrives in its tick unless a fault says otherwise, within
//!   budgets: `losses` (a message, or a refresh's reply, is lost), `delays`
//!   (a message arrives in the next tick instead), `cuts` (a link between a
//!   client and a locker goes down for good), `restarts`. Requests of calls
//!   nobody waits for any more (the rest of a round, an abandoned wait's)
//!   still arrive.
//!
//! # What is checked, in every reachable state
//!
//! 1. Mutual exclusion: no two clients both hold and trust (now < their
//!    deadline) conflicting locks.
//! 2. Fencing order: for two conflicting acquisitions, the one that won
//!    later drew a strictly greater token (of the tokens handed out, that
//!    is drawn while the holder still trusted its lock).
//!
//! # The two switches
//!
//! `old_quarantine` restores the behaviour before rule Q (DESIGN-21): a
//! quarantined locker's refresh re-creates and answers "held", a
//! `lock_wait` by a uid holding (re-created) entries answers `Granted`, a
//! fence is answered in quarantine, and a waiter keeps a granted slot when
//! its renew fails with the quarantine error. `old_fencing` restores the
//! fencing before rule F: a restarted locker starts its counters at its wall
//! clock plus its own quarantine, answers fences in quarantine, and takes
//! any floor. With both off, the model follows rules Q and F: nothing a
//! quarantined locker answers counts (it still refreshes and re-creates),
//! a waiter forgets a grant whose renew meets the quarantine error, and a
//! draw is `max(counter + 1, floor, wall)` with floors above `wall + eps`
//! (eps = quarantine / 4) refused.
//!
//! `cargo test --release --test safety model_check -- --nocapture` runs the
//! default bounds (about 3 s; a debug build, which took 25-30 s of every
//! `cargo test`, marks them ignored) and prints the state counts and traces;
//! `MODEL_FULL=1 cargo test --release --test safety model_check::full --
//! --nocapture` adds the larger ones (about 5 minutes); the ignored test
//! `custom` takes every bound from `M_*` variables.

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::hash::{Hash, Hasher};
use std::time::Instant;

/// Lockers.
const N: usize = 3;
/// Write and read quorum of 3 lockers (`write_quorum(3)`, `read_quorum(3)`).
const QUORUM: usize = 2;
/// Fencing token units per tick of wall clock.
const TOKEN_UNITS_PER_TICK: u32 = 64;

// ---------------------------------------------------------------------------
// Configuration

#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug)]
enum Mode {
    Read,
    Write,
}

fn conflicts(a: Mode, b: Mode) -> bool {
    a == Mode::Write || b == Mode::Write
}

#[derive(Clone, Debug)]
struct Config {
    name: &'static str,
    /// The lease's validity (ticks); every locker keeps entries at least
    /// this long.
    lease_validity: u8,
    /// The lease's safety margin (ticks).
    margin: u8,
    /// Per locker: how long it keeps an entry without a refresh.
    validity: [u8; N],
    /// Per locker: the quarantine after a restart.
    quarantine: [u8; N],
    /// Per locker: its wall clock minus the shared monotonic clock (ticks).
    skew: [i8; N],
    /// Per locker: whether it starts the run freshly started, in quarantine.
    starts_quarantined: [bool; N],
    /// How long a locker keeps a place without a renew (ticks).
    place_ttl: u8,
    /// Per client: the mode it locks in.
    modes: Vec<Mode>,
    /// Acquisitions per client, one after the other.
    acquisitions: u8,
    /// Waits (uids) per acquisition; a client whose waits are used up
    /// gives up that acquisition, as a caller's timeout would.
    waits: u8,
    /// Fencing token draws each holder may start.
    draws: u8,
    /// Ticks explored.
    horizon: u8,
    /// Locker restarts, at any moment.
    restarts: u8,
    /// Messages that may be lost.
    losses: u8,
    /// Messages that may arrive in the tick after the one they were sent in
    /// (every other message arrives within its tick, unless lost or cut).
    delays: u8,
    /// Links between a client and a locker that may go down (for good,
    /// from a tick on, both ways).
    cuts: u8,
    old_quarantine: bool,
    old_fencing: bool,
    /// Search depth first (finds a violation sooner, with a longer trace)
    /// rather than breadth first (a trace shortest in stages).
    depth_first: bool,
    /// Stop (and fail) past this many states.
    max_states: usize,
}

impl Config {
    fn trusted_for(&self) -> u8 {
        self.lease_validity - self.margin
    }

    /// The locker's wall clock, in token units.
    fn wall(&self, locker: usize, now: u8) -> u32 {
        let ticks = (i32::from(now) + i32::from(self.skew[locker])).max(0);
        ticks as u32 * TOKEN_UNITS_PER_TICK
    }

    /// Rule F's clock tolerance: a quarter of the locker's quarantine.
    fn eps(&self, locker: usize) -> u32 {
        u32::from(self.quarantine[locker]) * TOKEN_UNITS_PER_TICK / 4
    }

    fn answers_in_quarantine(&self) -> bool {
        self.old_quarantine || self.old_fencing
    }
}

// ---------------------------------------------------------------------------
// State

#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
struct Uid {
    client: u8,
    wait: u8,
}

impl fmt::Debug for Uid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}#{}", client_name(self.client), self.wait)
    }
}

fn client_name(client: u8) -> char {
    (b'X' + client) as char
}

#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
struct Entry {
    uid: Uid,
    refreshed: u8,
    /// The ticket of the wait it was granted to; `None` when re-created by
    /// a refresh.
    ticket: Option<u8>,
    /// Whether pushes reach its waiter.
    wake: bool,
}

#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
struct Place {
    ticket: u8,
    uid: Uid,
    mode: Mode,
    expires: u8,
}

#[derive(Clone, PartialEq, Eq, Hash, Debug, Default)]
struct Locker {
    mode: Option<Mode>,
    /// Sorted by uid.
    holders: Vec<Entry>,
    /// Sorted by ticket, oldest first.
    queue: Vec<Place>,
    /// The latest token drawn on the resource (0 once folded).
    fence: u32,
    /// Every token drawn from now on is above this.
    floor: u32,
    /// The first tick out of quarantine (0: never restarted).
    quarantine_end: u8,
}

#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug)]
enum Req {
    Wait { ticket: u8 },
    Refresh,
    Fence { floor: u32 },
}

#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug)]
enum WaitRep {
    Granted,
    Queued,
    /// The quarantine error.
    Quarantine,
}

#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug)]
enum Rep {
    Wait(WaitRep),
    /// `None`: an error (the quarantine error).
    Refresh(Option<bool>),
    /// `Err(())`: an error (quarantine, or a floor refused).
    Fence(Result<Option<u32>, ()>),
}

#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug)]
enum Msg {
    /// A request to locker `to`. `orphan`: nobody waits for the reply any
    /// more (it is not sent). `then_unlock`: the call belongs to a released
    /// acquisition, so an unlock follows when it is done.
    Req {
        to: u8,
        uid: Uid,
        req: Req,
        orphan: bool,
        then_unlock: bool,
    },
    Rep {
        from: u8,
        uid: Uid,
        rep: Rep,
    },
    Unlock {
        to: u8,
        uid: Uid,
    },
    Push {
        from: u8,
        uid: Uid,
        granted: bool,
    },
}

#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
enum Ans {
    None,
    Granted,
    Queued,
    Failed,
}

#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
struct Slot {
    ans: Ans,
    alive_since: u8,
}

/// A running wait call.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
struct Call {
    sent: u8,
    /// A grant was recorded after this call was stamped.
    stale: bool,
}

#[derive(Clone, PartialEq, Eq, Hash, Debug)]
struct Wait {
    slots: [Slot; N],
    calls: [Option<Call>; N],
    wounded: bool,
}

#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
enum Pending<T> {
    Waiting,
    Got(T),
    Failed,
}

#[derive(Clone, PartialEq, Eq, Hash, Debug)]
struct Round {
    sent: u8,
    answers: [Pending<bool>; N],
}

#[derive(Clone, PartialEq, Eq, Hash, Debug)]
enum Fence {
    Idle,
    /// Round 1 (`first == None`) or round 2 with the token of round 1.
    Asking {
        first: Option<u32>,
        answers: [Pending<Option<u32>>; N],
    },
    /// Round 2 with this floor, sent at the next tick.
    Round2(u32),
    Drawn,
}

#[derive(Clone, PartialEq, Eq, Hash, Debug)]
struct Hold {
    /// Order of the win among all wins.
    win: u8,
    /// Trusted while now < deadline.
    deadline: u8,
    refresh: Option<Round>,
    fence: Fence,
    draws_left: u8,
}

#[derive(Clone, PartialEq, Eq, Hash, Debug)]
enum Phase {
    Idle,
    Waiting(Wait),
    Holding(Hold),
    /// A wound or a stale win ended the wait; the next one (same ticket,
    /// new uid) is sent at the next tick.
    Rewait,
    Done,
}

#[derive(Clone, PartialEq, Eq, Hash, Debug)]
struct Client {
    acquisitions_left: u8,
    /// The current uid's wait number (uids are never reused).
    wait: u8,
    waits_left: u8,
    ticket: u8,
    phase: Phase,
}

/// A fencing token handed out.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug)]
struct Draw {
    win: u8,
    client: u8,
    mode: Mode,
    token: u32,
}

#[derive(Clone, PartialEq, Eq, Hash, Debug)]
struct State {
    now: u8,
    /// Within a tick, messages arrive process by process: stage `i < N`
    /// delivers to locker `i`, stage `N + c` to client `c`.
    stage: u8,
    lockers: [Locker; N],
    clients: Vec<Client>,
    /// Messages in flight, sorted, without duplicates.
    net: Vec<Msg>,
    restarts_left: u8,
    losses_left: u8,
    delays_left: u8,
    cuts_left: u8,
    /// Per client, a bit per locker it is cut off from.
    cut: Vec<u8>,
    next_ticket: u8,
    wins: u8,
    /// Sorted.
    draws: Vec<Draw>,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Action {
    /// A message to the process of the current stage arrives.
    Deliver(Msg),
    /// The locker of the current stage restarts.
    Restart(u8),
    /// A message to the process of the current stage is lost.
    Lose(Msg),
    /// A refresh arrives, but its reply is lost (other replies are
    /// messages of their own).
    LoseReply(Msg),
    /// Ends the current stage, once every message to its process arrived
    /// or was lost, but `carried`, which is delayed into the next tick.
    /// Ending the last stage begins the next tick, where two bits per
    /// client (`choices`) choose what it does: `START` (idle: begin an
    /// acquisition; holding: release) or `DRAW` (holding: draw its fencing
    /// token); and where the link `cut` (client, locker) may go down.
    Next {
        choices: u8,
        carried: Option<Msg>,
        cut: Option<(u8, u8)>,
    },
}

const START: u8 = 1;
const DRAW: u8 = 2;

// ---------------------------------------------------------------------------
// Lockers

impl Locker {
    fn in_quarantine(&self, now: u8) -> bool {
        now < self.quarantine_end
    }

    fn has_entry(&self, uid: Uid) -> bool {
        self.holders.iter().any(|e| e.uid == uid)
    }

    fn holds(&self, uid: Uid, mode: Mode) -> bool {
        self.mode == Some(mode) && self.has_entry(uid)
    }

    /// `table::admits`.
    fn admits(&self, uid: Uid, mode: Mode) -> bool {
        match (self.mode, mode) {
            (None, _) => true,
            (Some(Mode::Write), Mode::Write) => self.holders[0].uid == uid,
            (Some(Mode::Read), Mode::Read) => true,
            _ => false,
        }
    }

    /// `Shard::in_line`.
    fn in_line(&self, uid: Uid, mode: Mode, ticket: Option<u8>, now: u8) -> bool {
        if self.holds(uid, mode) {
            return true;
        }
        self.admits(uid, mode)
            && !self.queue.iter().any(|p| {
                ticket.is_none_or(|t| p.ticket < t)
                    && conflicts(p.mode, mode)
                    && p.expires > now
                    && !(Some(p.ticket) == ticket || p.uid == uid)
            })
    }

    /// `Shard::grant`: returns whether the uid held it already.
    fn grant(&mut self, uid: Uid, mode: Mode, now: u8, ticket: Option<u8>, wake: bool) -> bool {
        self.queue
            .retain(|p| !(Some(p.ticket) == ticket || p.uid == uid));
        if let Some(e) = self.holders.iter_mut().find(|e| e.uid == uid) {
            if wake {
                e.wake = true;
            }
            return true;
        }
        if self.mode == Some(Mode::Write) {
            return false;
        }
        self.holders.push(Entry {
            uid,
            refreshed: now,
            ticket,
            wake,
        });
        self.holders.sort_by_key(|e| e.uid);
        self.mode = Some(mode);
        false
    }

    fn refresh(&mut self, uid: Uid, now: u8) -> bool {
        match self.holders.iter_mut().find(|e| e.uid == uid) {
            Some(e) => {
                e.refreshed = now;
                true
            }
            None => false,
        }
    }

    /// `Shard::enqueue`, with `wound_younger`.
    fn enqueue(&mut self, place: Place, pushes: &mut Vec<(Uid, bool)>) {
        self.queue
            .retain(|p| !(p.ticket == place.ticket || p.uid == place.uid));
        let at = self.queue.partition_point(|p| p.ticket < place.ticket);
        self.queue.insert(at, place);
        if let Some(mode) = self.mode
            && conflicts(mode, place.mode)
        {
            for e in &self.holders {
                if e.wake && e.ticket.is_some_and(|t| t > place.ticket) {
                    pushes.push((e.uid, false));
                }
            }
        }
    }

    /// `Shard::wound_if_blocking`.
    fn wound_if_blocking(&self, uid: Uid, now: u8, pushes: &mut Vec<(Uid, bool)>) {
        let Some(mode) = self.mode else { return };
        let Some(e) = self.holders.iter().find(|e| e.uid == uid) else {
            return;
        };
        let (Some(ticket), true) = (e.ticket, e.wake) else {
            return;
        };
        if self
            .queue
            .iter()
            .any(|p| p.expires > now && p.ticket < ticket && conflicts(p.mode, mode))
        {
            pushes.push((uid, false));
        }
    }

    /// `Shard::release` by uid, any mode (`unlock` and `force_unlock`).
    fn release(&mut self, uid: Uid) {
        self.queue.retain(|p| p.uid != uid);
        self.holders.retain(|e| e.uid != uid);
        if self.holders.is_empty() {
            self.mode = None;
        }
    }

    /// Expiry, `settle` and promotion, as the code does on every call
    /// that touches the resource and on its sweeps.
    fn normalize(&mut self, now: u8, validity: u8, pushes: &mut Vec<(Uid, bool)>) {
        self.holders
            .retain(|e| u16::from(e.refreshed) + u16::from(validity) > u16::from(now));
        if self.holders.is_empty() {
            self.mode = None;
        }
        self.queue.retain(|p| p.expires > now);
        // Promotion: the head of the line, with every reader before the
        // first writer when it reads.
        let mut mode = self.mode;
        let mut grants = Vec::new();
        for place in &self.queue {
            let allowed = matches!(
                (mode, place.mode),
                (None, _) | (Some(Mode::Read), Mode::Read)
            );
            if !allowed {
                break;
            }
            mode = Some(place.mode);
            grants.push(*place);
            if place.mode == Mode::Write {
                break;
            }
        }
        for place in grants {
            self.grant(place.uid, place.mode, now, Some(place.ticket), true);
            pushes.push((place.uid, true));
        }
        if self.holders.is_empty() && self.queue.is_empty() {
            self.floor = self.floor.max(self.fence);
            self.fence = 0;
        }
    }
}

// ---------------------------------------------------------------------------
// Transitions

struct Model {
    cfg: Config,
}

impl State {
    fn send(&mut self, msg: Msg) {
        let (client, locker) = match msg {
            Msg::Req { to, uid, .. } | Msg::Unlock { to, uid } => (uid.client, to),
            Msg::Rep { from, uid, .. } | Msg::Push { from, uid, .. } => (uid.client, from),
        };
        if self.cut[usize::from(client)] & (1 << locker) != 0 {
            return;
        }
        if let Err(at) = self.net.binary_search(&msg) {
            self.net.insert(at, msg);
        }
    }

    fn remove(&mut self, msg: &Msg) {
        if let Ok(at) = self.net.binary_search(msg) {
            self.net.remove(at);
        }
    }

    fn current_uid(&self, client: u8) -> Uid {
        Uid {
            client,
            wait: self.clients[usize::from(client)].wait,
        }
    }
}

impl Model {
    fn initial(&self) -> State {
        let cfg = &self.cfg;
        let lockers = std::array::from_fn(|i| {
            let mut l = Locker {
                floor: cfg.wall(i, 0),
                ..Locker::default()
            };
            if cfg.starts_quarantined[i] {
                l.quarantine_end = cfg.quarantine[i];
                if cfg.old_fencing {
                    l.floor += u32::from(cfg.quarantine[i]) * TOKEN_UNITS_PER_TICK;
                }
            }
            l
        });
        State {
            now: 0,
            stage: 0,
            lockers,
            clients: cfg
                .modes
                .iter()
                .map(|_| Client {
                    acquisitions_left: cfg.acquisitions,
                    wait: 0,
                    waits_left: 0,
                    ticket: 0,
                    phase: Phase::Idle,
                })
                .collect(),
            net: Vec::new(),
            restarts_left: cfg.restarts,
            losses_left: cfg.losses,
            delays_left: cfg.delays,
            cuts_left: cfg.cuts,
            cut: vec![0; cfg.modes.len()],
            next_ticket: 1,
            wins: 0,
            draws: Vec::new(),
        }
    }

    fn actions(&self, s: &State) -> Vec<Action> {
        let mut out = self.inner_actions(s);
        out.extend(self.next_actions(s));
        out
    }

    /// Deliveries, losses and restarts within the current stage.
    fn inner_actions(&self, s: &State) -> Vec<Action> {
        let mut out = Vec::new();
        let stage = s.stage;
        let here = s.net.iter().copied().filter(|m| target(m) == stage);
        out.extend(here.clone().map(Action::Deliver));
        if usize::from(stage) < N && s.restarts_left > 0 {
            out.push(Action::Restart(stage));
        }
        if s.losses_left > 0 {
            out.extend(here.clone().map(Action::Lose));
            out.extend(
                here.filter(|m| {
                    matches!(
                        m,
                        Msg::Req {
                            req: Req::Refresh,
                            orphan: false,
                            then_unlock: false,
                            ..
                        }
                    )
                })
                .map(Action::LoseReply),
            );
        }
        out
    }

    /// The ends of the current stage (none while messages are left that
    /// can be neither delivered later nor lost).
    fn next_actions(&self, s: &State) -> Vec<Action> {
        let mut out = Vec::new();
        let stage = s.stage;
        let last = usize::from(stage) == N + s.clients.len() - 1;
        if last && s.now >= self.cfg.horizon {
            return out;
        }
        let here: Vec<Msg> = s
            .net
            .iter()
            .copied()
            .filter(|m| target(m) == stage)
            .collect();
        let carried = match here[..] {
            [] => None,
            // A reply after its tick is past the call's deadline: useless.
            [m] if s.delays_left > 0 && !matches!(m, Msg::Rep { .. }) => Some(m),
            _ => return out,
        };
        let mut masks = vec![0u8];
        let mut cuts = vec![None];
        if last {
            for (c, client) in s.clients.iter().enumerate() {
                let options: &[u8] = match &client.phase {
                    Phase::Idle if client.acquisitions_left > 0 => &[0, START],
                    Phase::Holding(h) if h.fence == Fence::Idle && h.draws_left > 0 => {
                        &[0, START, DRAW]
                    }
                    Phase::Holding(_) => &[0, START],
                    _ => &[0],
                };
                masks = masks
                    .iter()
                    .flat_map(|m| options.iter().map(move |o| m | (o << (2 * c))))
                    .collect();
                if s.cuts_left > 0 {
                    for i in 0..N as u8 {
                        if s.cut[c] & (1 << i) == 0 {
                            cuts.push(Some((c as u8, i)));
                        }
                    }
                }
            }
        }
        for choices in masks {
            for &cut in &cuts {
                out.push(Action::Next {
                    choices,
                    carried,
                    cut,
                });
            }
        }
        out
    }

    fn apply(&self, s: &State, action: Action) -> State {
        let mut s = s.clone();
        match action {
            Action::Next {
                choices,
                carried,
                cut,
            } => {
                let stage = s.stage;
                if carried.is_some() {
                    s.delays_left -= 1;
                }
                if let Some((c, i)) = cut {
                    s.cuts_left -= 1;
                    s.cut[usize::from(c)] |= 1 << i;
                }
                if usize::from(stage) == N + s.clients.len() - 1 {
                    s.stage = 0;
                    self.tick(&mut s, choices);
                } else {
                    s.stage += 1;
                }
            }
            Action::Lose(m) => {
                s.losses_left -= 1;
                s.remove(&m);
            }
            Action::LoseReply(m) => {
                s.losses_left -= 1;
                s.remove(&m);
                if let Msg::Req {
                    to,
                    uid,
                    req,
                    orphan,
                    then_unlock,
                } = m
                {
                    self.at_locker(&mut s, to, uid, req, orphan, then_unlock, true);
                }
            }
            Action::Deliver(m) => {
                s.remove(&m);
                match m {
                    Msg::Req {
                        to,
                        uid,
                        req,
                        orphan,
                        then_unlock,
                    } => self.at_locker(&mut s, to, uid, req, orphan, then_unlock, false),
                    Msg::Unlock { to, uid } => {
                        s.lockers[usize::from(to)].release(uid);
                        self.normalize(&mut s, to);
                    }
                    Msg::Rep { from, uid, rep } => {
                        self.at_client(&mut s, from, uid, rep_kind(rep), Some(rep))
                    }
                    Msg::Push { from, uid, granted } => self.push(&mut s, from, uid, granted),
                }
            }
            Action::Restart(i) => {
                s.restarts_left -= 1;
                let iu = usize::from(i);
                let cfg = &self.cfg;
                let mut floor = cfg.wall(iu, s.now);
                if cfg.old_fencing {
                    floor += u32::from(cfg.quarantine[iu]) * TOKEN_UNITS_PER_TICK;
                }
                s.lockers[iu] = Locker {
                    floor,
                    quarantine_end: s.now + cfg.quarantine[iu],
                    ..Locker::default()
                };
            }
        }
        self.collect_garbage(&mut s);
        s
    }

    /// The next tick: entries and places expire and lines move; calls
    /// sent at the last tick that got no answer time out (a call's deadline
    /// is the end of the tick it was sent in); holders past their deadline
    /// lose the lock, the others send a refresh round; waiters ask every
    /// locker again (the renew, or the retry after a failure); what a client
    /// decided during the last tick (a new wait after a wound, the second
    /// fencing round) is sent; then each client does what `choices` says.
    fn tick(&self, s: &mut State, choices: u8) {
        s.now += 1;
        let now = s.now;
        for i in 0..N as u8 {
            self.normalize(s, i);
        }
        for c in 0..s.clients.len() as u8 {
            let choice = (choices >> (2 * c)) & 3;
            let uid = s.current_uid(c);
            match &s.clients[usize::from(c)].phase {
                Phase::Idle => {
                    if choice == START {
                        let ticket = s.next_ticket;
                        s.next_ticket += 1;
                        let client = &mut s.clients[usize::from(c)];
                        client.acquisitions_left -= 1;
                        client.ticket = ticket;
                        client.waits_left = self.cfg.waits;
                        self.begin_wait(s, c);
                    }
                }
                Phase::Rewait => self.begin_wait(s, c),
                Phase::Waiting(w) => {
                    let running: Vec<u8> = (0..N as u8)
                        .filter(|&i| w.calls[usize::from(i)].is_some())
                        .collect();
                    self.drop_stragglers(s, c, Kind::Wait);
                    for i in running {
                        self.at_client(s, i, uid, Kind::Wait, None);
                    }
                    let ticket = s.clients[usize::from(c)].ticket;
                    let mut renew = Vec::new();
                    if let Phase::Waiting(w) = &mut s.clients[usize::from(c)].phase {
                        for i in 0..N as u8 {
                            if w.calls[usize::from(i)].is_none() {
                                w.calls[usize::from(i)] = Some(Call {
                                    sent: now,
                                    stale: false,
                                });
                                renew.push(i);
                            }
                        }
                    }
                    for i in renew {
                        s.send(Msg::Req {
                            to: i,
                            uid,
                            req: Req::Wait { ticket },
                            orphan: false,
                            then_unlock: false,
                        });
                    }
                }
                Phase::Holding(h) => {
                    if now >= h.deadline {
                        // The keeper declares the loss; the lockers are
                        // unlocked (force_unlock after the margin: any
                        // delay is the network's).
                        self.end_hold(s, c);
                        continue;
                    }
                    self.drop_stragglers(s, c, Kind::Refresh);
                    self.drop_stragglers(s, c, Kind::Fence);
                    if choice == START {
                        self.end_hold(s, c);
                        continue;
                    }
                    let Phase::Holding(h) = &mut s.clients[usize::from(c)].phase else {
                        unreachable!()
                    };
                    let round2 = match h.fence {
                        Fence::Asking { .. } => {
                            // Not answered by a quorum in time: the draw
                            // fails (the caller may ask again).
                            h.fence = Fence::Idle;
                            None
                        }
                        Fence::Round2(floor) => Some(floor),
                        _ => None,
                    };
                    let draw = choice == DRAW && h.fence == Fence::Idle && h.draws_left > 0;
                    if draw {
                        h.draws_left -= 1;
                    }
                    h.refresh = Some(Round {
                        sent: now,
                        answers: [Pending::Waiting; N],
                    });
                    for i in 0..N as u8 {
                        s.send(Msg::Req {
                            to: i,
                            uid,
                            req: Req::Refresh,
                            orphan: false,
                            then_unlock: false,
                        });
                    }
                    if let Some(floor) = round2 {
                        self.ask_fence(s, c, Some(floor));
                    } else if draw {
                        self.ask_fence(s, c, None);
                    }
                }
                Phase::Done => {}
            }
        }
    }

    /// Drops messages whose delivery could no longer change anything: an
    /// unlock for a uid that has no entry or place at that locker and no
    /// request to it in flight (uids are never reused).
    fn collect_garbage(&self, s: &mut State) {
        let net = &s.net;
        let dead = |m: &Msg| match *m {
            Msg::Unlock { to, uid } => {
                let l = &s.lockers[usize::from(to)];
                !l.has_entry(uid)
                    && !l.queue.iter().any(|p| p.uid == uid)
                    && !net.iter().any(
                        |o| matches!(*o, Msg::Req { to: t, uid: u, .. } if t == to && u == uid),
                    )
            }
            _ => false,
        };
        if s.net.iter().any(dead) {
            let keep: Vec<Msg> = s.net.iter().copied().filter(|m| !dead(m)).collect();
            s.net = keep;
        }
    }

    fn normalize(&self, s: &mut State, i: u8) {
        let mut pushes = Vec::new();
        let now = s.now;
        s.lockers[usize::from(i)].normalize(now, self.cfg.validity[usize::from(i)], &mut pushes);
        self.deliver_pushes(s, i, pushes);
    }

    fn deliver_pushes(&self, s: &mut State, from: u8, pushes: Vec<(Uid, bool)>) {
        for (uid, granted) in pushes {
            // Pushes to a wait that is over are ignored (uid mismatch).
            if uid == s.current_uid(uid.client)
                && matches!(s.clients[usize::from(uid.client)].phase, Phase::Waiting(_))
            {
                s.send(Msg::Push { from, uid, granted });
            }
        }
    }

    fn mode(&self, uid: Uid) -> Mode {
        self.cfg.modes[usize::from(uid.client)]
    }

    /// A request arrives at locker `i`.
    #[allow(clippy::too_many_arguments)]
    fn at_locker(
        &self,
        s: &mut State,
        i: u8,
        uid: Uid,
        req: Req,
        orphan: bool,
        then_unlock: bool,
        reply_lost: bool,
    ) {
        let cfg = &self.cfg;
        let iu = usize::from(i);
        let now = s.now;
        let mode = self.mode(uid);
        let mut pushes = Vec::new();
        let l = &mut s.lockers[iu];
        let quarantined = l.in_quarantine(now);
        let rep = match req {
            Req::Wait { ticket } => {
                let holds = l.holds(uid, mode);
                if quarantined && !holds {
                    Rep::Wait(WaitRep::Quarantine)
                } else if quarantined && !cfg.old_quarantine {
                    // Rule Q: a holder's entries are refreshed, the answer
                    // does not count.
                    l.refresh(uid, now);
                    Rep::Wait(WaitRep::Quarantine)
                } else if l.in_line(uid, mode, Some(ticket), now) {
                    if l.grant(uid, mode, now, Some(ticket), true) {
                        l.refresh(uid, now);
                        l.wound_if_blocking(uid, now, &mut pushes);
                    }
                    Rep::Wait(WaitRep::Granted)
                } else {
                    l.refresh(uid, now);
                    let ttl = cfg.place_ttl.min(cfg.validity[iu]);
                    l.enqueue(
                        Place {
                            ticket,
                            uid,
                            mode,
                            expires: now + ttl,
                        },
                        &mut pushes,
                    );
                    Rep::Wait(WaitRep::Queued)
                }
            }
            Req::Refresh => {
                let had = l.refresh(uid, now);
                if !quarantined {
                    Rep::Refresh(Some(had))
                } else {
                    let free = had || l.admits(uid, mode);
                    if !had && free {
                        l.grant(uid, mode, now, None, false);
                    }
                    if cfg.old_quarantine {
                        Rep::Refresh(Some(free))
                    } else {
                        Rep::Refresh(None)
                    }
                }
            }
            Req::Fence { floor } => {
                if quarantined && !cfg.answers_in_quarantine() {
                    Rep::Fence(Err(()))
                } else if !l.holds(uid, mode) {
                    Rep::Fence(Ok(None))
                } else if !cfg.old_fencing && floor > cfg.wall(iu, now) + cfg.eps(iu) {
                    Rep::Fence(Err(()))
                } else {
                    let mut token = (l.fence.max(l.floor) + 1).max(floor);
                    if !cfg.old_fencing {
                        token = token.max(cfg.wall(iu, now));
                    }
                    l.fence = l.fence.max(token);
                    Rep::Fence(Ok(Some(token)))
                }
            }
        };
        self.deliver_pushes(s, i, pushes);
        self.normalize(s, i);
        if then_unlock {
            s.send(Msg::Unlock { to: i, uid });
        } else if orphan || reply_lost {
        } else if req == Req::Refresh {
            // The holder takes a refresh reply as it comes: a round's outcome
            // does not depend on the order of its replies (two "held" confirm,
            // two "not found" lose, and both cannot happen), so it is counted
            // at once rather than in the client's stage.
            if s.cut[usize::from(uid.client)] & (1 << i) == 0 {
                self.at_client(s, i, uid, Kind::Refresh, Some(rep));
            }
        } else {
            s.send(Msg::Rep { from: i, uid, rep });
        }
    }

    /// A reply (or, `None`, the call's failure) of a `kind` call reaches
    /// the client.
    fn at_client(&self, s: &mut State, i: u8, uid: Uid, kind: Kind, rep: Option<Rep>) {
        let cfg = &self.cfg;
        let iu = usize::from(i);
        let c = uid.client;
        if uid != s.current_uid(c) {
            return;
        }
        let client = &mut s.clients[usize::from(c)];
        match (&mut client.phase, kind) {
            (Phase::Waiting(w), Kind::Wait) => {
                let Some(call) = w.calls[iu].take() else {
                    return;
                };
                // `Acquisition::record_reply`.
                let (answer, quarantine) = match rep {
                    Some(Rep::Wait(WaitRep::Granted)) => (Ans::Granted, false),
                    Some(Rep::Wait(WaitRep::Queued)) => (Ans::Queued, false),
                    Some(Rep::Wait(WaitRep::Quarantine)) => (Ans::Failed, true),
                    _ => (Ans::Failed, false),
                };
                let slot = &mut w.slots[iu];
                let granted = slot.ans == Ans::Granted;
                let stale = granted && call.stale;
                if answer != Ans::Failed && !stale {
                    slot.alive_since = slot.alive_since.max(call.sent);
                }
                if quarantine && granted && !stale && !cfg.old_quarantine {
                    // The coordinator's side of rule Q: the locker
                    // restarted, so the grant is gone.
                    slot.ans = Ans::Failed;
                } else if !(stale || granted && answer == Ans::Failed) {
                    slot.ans = answer;
                }
                self.evaluate_wait(s, c);
            }
            (Phase::Holding(h), Kind::Refresh) => {
                let Some(round) = &mut h.refresh else { return };
                if round.answers[iu] != Pending::Waiting {
                    return;
                }
                round.answers[iu] = match rep {
                    Some(Rep::Refresh(Some(held))) => Pending::Got(held),
                    _ => Pending::Failed,
                };
                self.settle_refresh(s, c);
            }
            (Phase::Holding(h), Kind::Fence) => {
                let Fence::Asking { answers, .. } = &mut h.fence else {
                    return;
                };
                if answers[iu] != Pending::Waiting {
                    return;
                }
                answers[iu] = match rep {
                    Some(Rep::Fence(Ok(t))) => Pending::Got(t),
                    _ => Pending::Failed,
                };
                self.settle_fence(s, c);
            }
            // Replies of wait calls still running after the win: only the
            // release plan would use them, and every locker is unlocked at
            // the release anyway.
            _ => {}
        }
    }

    /// A refresh round got an answer: `refresh_calls` and `settle`.
    fn settle_refresh(&self, s: &mut State, c: u8) {
        let now = s.now;
        let trusted_for = self.cfg.trusted_for();
        let Phase::Holding(h) = &mut s.clients[usize::from(c)].phase else {
            return;
        };
        let Some(round) = &h.refresh else { return };
        let granted = round
            .answers
            .iter()
            .filter(|a| **a == Pending::Got(true))
            .count();
        let refused = round
            .answers
            .iter()
            .filter(|a| **a == Pending::Got(false))
            .count();
        let running = round
            .answers
            .iter()
            .filter(|a| **a == Pending::Waiting)
            .count();
        let sent = round.sent;
        if granted >= QUORUM {
            h.refresh = None;
            if now >= h.deadline {
                // Confirmed too late: `extend` refuses, the lock is lost.
                self.end_hold(s, c);
                return;
            }
            h.deadline = h.deadline.max(sent + trusted_for);
            self.drop_stragglers(s, c, Kind::Refresh);
        } else if refused > N - QUORUM {
            h.refresh = None;
            self.end_hold(s, c);
        } else if running == 0 {
            h.refresh = None;
        }
    }

    /// Sends one fencing round; `first` is round 1's token for round 2.
    fn ask_fence(&self, s: &mut State, c: u8, first: Option<u32>) {
        let uid = s.current_uid(c);
        let Phase::Holding(h) = &mut s.clients[usize::from(c)].phase else {
            return;
        };
        h.fence = Fence::Asking {
            first,
            answers: [Pending::Waiting; N],
        };
        for i in 0..N as u8 {
            s.send(Msg::Req {
                to: i,
                uid,
                req: Req::Fence {
                    floor: first.unwrap_or(0),
                },
                orphan: false,
                then_unlock: false,
            });
        }
    }

    /// `fence::ask` and `draw_token` after an answer.
    fn settle_fence(&self, s: &mut State, c: u8) {
        let now = s.now;
        let mode = self.cfg.modes[usize::from(c)];
        let Phase::Holding(h) = &mut s.clients[usize::from(c)].phase else {
            return;
        };
        let Fence::Asking { first, answers } = &h.fence else {
            return;
        };
        let first = *first;
        let tokens: Vec<u32> = answers
            .iter()
            .filter_map(|a| match a {
                Pending::Got(Some(t)) => Some(*t),
                _ => None,
            })
            .collect();
        let running = answers.iter().filter(|a| **a == Pending::Waiting).count();
        let floor = first.unwrap_or(0);
        if tokens.len() >= QUORUM {
            let token = tokens.iter().copied().max().unwrap_or(floor);
            let agreed = tokens.iter().all(|t| *t == token);
            match first {
                None if !agreed => {
                    h.fence = Fence::Round2(token);
                    self.drop_stragglers(s, c, Kind::Fence);
                }
                _ => {
                    let token = first.unwrap_or(token);
                    h.fence = Fence::Drawn;
                    if now < h.deadline {
                        let draw = Draw {
                            win: h.win,
                            client: c,
                            mode,
                            token,
                        };
                        if let Err(at) = s.draws.binary_search(&draw) {
                            s.draws.insert(at, draw);
                        }
                    }
                    self.drop_stragglers(s, c, Kind::Fence);
                }
            }
        } else if tokens.len() + running < QUORUM {
            h.fence = Fence::Idle;
            self.drop_stragglers(s, c, Kind::Fence);
        }
    }

    /// The calls of a finished round that are still out: their requests
    /// may still arrive, their replies are not waited for.
    fn drop_stragglers(&self, s: &mut State, c: u8, kind: Kind) {
        let uid = s.current_uid(c);
        let mut net = Vec::with_capacity(s.net.len());
        for m in s.net.drain(..) {
            match m {
                Msg::Req {
                    to,
                    uid: u,
                    req,
                    orphan: false,
                    then_unlock,
                } if u == uid && req_kind(req) == kind => net.push(Msg::Req {
                    to,
                    uid,
                    req,
                    orphan: true,
                    then_unlock,
                }),
                Msg::Rep { uid: u, rep, .. } if u == uid && rep_kind(rep) == kind => {}
                m => net.push(m),
            }
        }
        net.sort();
        net.dedup();
        s.net = net;
    }

    /// A push reaches the client.
    fn push(&self, s: &mut State, i: u8, uid: Uid, granted: bool) {
        let c = uid.client;
        if uid != s.current_uid(c) {
            return;
        }
        let Phase::Waiting(w) = &mut s.clients[usize::from(c)].phase else {
            return;
        };
        if granted {
            let iu = usize::from(i);
            w.slots[iu].ans = Ans::Granted;
            if let Some(call) = &mut w.calls[iu] {
                call.stale = true;
            }
        } else {
            w.wounded = true;
        }
        self.evaluate_wait(s, c);
    }

    /// `WaitRound::wait` after an event: `try_win`, then the wound.
    fn evaluate_wait(&self, s: &mut State, c: u8) {
        let now = s.now;
        let trusted_for = self.cfg.trusted_for();
        let Phase::Waiting(w) = &s.clients[usize::from(c)].phase else {
            return;
        };
        let mut alive: Vec<u8> = w
            .slots
            .iter()
            .filter(|slot| slot.ans == Ans::Granted)
            .map(|slot| slot.alive_since)
            .collect();
        if alive.len() >= QUORUM {
            alive.sort_unstable_by(|a, b| b.cmp(a));
            let trust_from = alive[QUORUM - 1];
            if trust_from + trusted_for <= now {
                // Stale: give the grants back, wait again.
                self.next_wait(s, c);
            } else {
                let win = s.wins;
                if self.cfg.draws > 0 {
                    s.wins += 1;
                }
                let draws = self.cfg.draws;
                s.clients[usize::from(c)].phase = Phase::Holding(Hold {
                    win,
                    deadline: trust_from + trusted_for,
                    refresh: None,
                    fence: Fence::Idle,
                    draws_left: draws,
                });
            }
        } else if w.wounded {
            self.next_wait(s, c);
        }
    }

    /// Gives the current wait up and starts the next one with the same
    /// ticket, or gives the acquisition up when its waits are used up.
    fn next_wait(&self, s: &mut State, c: u8) {
        self.release_uid(s, c);
        let client = &mut s.clients[usize::from(c)];
        client.phase = if client.waits_left > 0 {
            Phase::Rewait
        } else if client.acquisitions_left > 0 {
            Phase::Idle
        } else {
            Phase::Done
        };
    }

    /// A new uid, sent to every locker.
    fn begin_wait(&self, s: &mut State, c: u8) {
        let now = s.now;
        let client = &mut s.clients[usize::from(c)];
        client.waits_left -= 1;
        client.wait += 1;
        let ticket = client.ticket;
        client.phase = Phase::Waiting(Wait {
            slots: [Slot {
                ans: Ans::None,
                alive_since: now,
            }; N],
            calls: [Some(Call {
                sent: now,
                stale: false,
            }); N],
            wounded: false,
        });
        let uid = s.current_uid(c);
        for i in 0..N as u8 {
            s.send(Msg::Req {
                to: i,
                uid,
                req: Req::Wait { ticket },
                orphan: false,
                then_unlock: false,
            });
        }
    }

    /// Ends a hold (released or lost).
    fn end_hold(&self, s: &mut State, c: u8) {
        self.release_uid(s, c);
        let client = &mut s.clients[usize::from(c)];
        client.phase = if client.acquisitions_left > 0 {
            Phase::Idle
        } else {
            Phase::Done
        };
    }

    /// Releases the current uid of client `c`: unlocks every locker; a
    /// wait call still out unlocks after it is done; refresh and fence
    /// calls still out are dropped (their requests may still arrive).
    fn release_uid(&self, s: &mut State, c: u8) {
        let uid = s.current_uid(c);
        let mut net = Vec::with_capacity(s.net.len() + N);
        for m in s.net.drain(..) {
            match m {
                Msg::Req {
                    to,
                    uid: u,
                    req,
                    orphan: false,
                    ..
                } if u == uid => net.push(Msg::Req {
                    to,
                    uid,
                    req,
                    orphan: true,
                    then_unlock: matches!(req, Req::Wait { .. }),
                }),
                Msg::Rep {
                    from,
                    uid: u,
                    rep: Rep::Wait(_),
                } if u == uid => net.push(Msg::Unlock { to: from, uid }),
                Msg::Rep { uid: u, .. } | Msg::Push { uid: u, .. } if u == uid => {}
                m => net.push(m),
            }
        }
        for i in 0..N as u8 {
            net.push(Msg::Unlock { to: i, uid });
        }
        net.sort();
        net.dedup();
        s.net = net;
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    Wait,
    Refresh,
    Fence,
}

/// The stage in which a message can arrive.
fn target(m: &Msg) -> u8 {
    match *m {
        Msg::Req { to, .. } | Msg::Unlock { to, .. } => to,
        Msg::Rep { uid, .. } | Msg::Push { uid, .. } => N as u8 + uid.client,
    }
}

fn req_kind(req: Req) -> Kind {
    match req {
        Req::Wait { .. } => Kind::Wait,
        Req::Refresh => Kind::Refresh,
        Req::Fence { .. } => Kind::Fence,
    }
}

fn rep_kind(rep: Rep) -> Kind {
    match rep {
        Rep::Wait(_) => Kind::Wait,
        Rep::Refresh(_) => Kind::Refresh,
        Rep::Fence(_) => Kind::Fence,
    }
}

// ---------------------------------------------------------------------------
// The properties

impl Model {
    /// The violated property in `s`, if any.
    fn violation(&self, s: &State) -> Option<String> {
        let modes = &self.cfg.modes;
        for a in 0..s.clients.len() {
            for b in a + 1..s.clients.len() {
                let (Phase::Holding(ha), Phase::Holding(hb)) =
                    (&s.clients[a].phase, &s.clients[b].phase)
                else {
                    continue;
                };
                if s.now < ha.deadline && s.now < hb.deadline && conflicts(modes[a], modes[b]) {
                    return Some(format!(
                        "mutual exclusion: {:?} ({:?}, trusted until t={}) and {:?} ({:?}, trusted until t={}) both hold at t={}",
                        s.current_uid(a as u8),
                        modes[a],
                        ha.deadline,
                        s.current_uid(b as u8),
                        modes[b],
                        hb.deadline,
                        s.now
                    ));
                }
            }
        }
        for d1 in &s.draws {
            for d2 in &s.draws {
                if d1.win < d2.win && conflicts(d1.mode, d2.mode) && d2.token <= d1.token {
                    return Some(format!(
                        "fencing order: {} won after {} but drew token {} <= {}",
                        client_name(d2.client),
                        client_name(d1.client),
                        show_token(d2.token),
                        show_token(d1.token)
                    ));
                }
            }
        }
        None
    }
}

fn show_token(token: u32) -> String {
    format!(
        "{}t+{}",
        token / TOKEN_UNITS_PER_TICK,
        token % TOKEN_UNITS_PER_TICK
    )
}

// ---------------------------------------------------------------------------
// The search

/// Two independent 64-bit lanes of a multiply-xorshift hash: a 128-bit
/// fingerprint per state, so that the visited set stores 16 bytes a state.
/// A collision (two states with one fingerprint) would hide a state; at
/// the state counts here its probability is below 1e-20.
struct Fingerprint {
    a: u64,
    b: u64,
}

fn mix(mut x: u64) -> u64 {
    x ^= x >> 30;
    x = x.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x ^= x >> 27;
    x = x.wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

impl Hasher for Fingerprint {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }
    fn write_u8(&mut self, i: u8) {
        self.write_u64(u64::from(i));
    }
    fn write_u16(&mut self, i: u16) {
        self.write_u64(u64::from(i));
    }
    fn write_u32(&mut self, i: u32) {
        self.write_u64(u64::from(i));
    }
    fn write_usize(&mut self, i: usize) {
        self.write_u64(i as u64);
    }
    fn write_isize(&mut self, i: isize) {
        self.write_u64(i as u64);
    }
    fn write_i8(&mut self, i: i8) {
        self.write_u64(i as u64);
    }
    fn write_u64(&mut self, i: u64) {
        // Cheap per word (this is most of the search's time in a debug
        // build); `fingerprint` mixes both lanes thoroughly at the end.
        self.a = (self.a ^ i)
            .wrapping_mul(0x9e37_79b9_7f4a_7c15)
            .rotate_left(29);
        self.b = (self.b.rotate_left(17) ^ i).wrapping_mul(0xff51_afd7_ed55_8ccd);
    }
    fn finish(&self) -> u64 {
        self.a
    }
}

fn fingerprint(s: &State) -> u128 {
    let mut h = Fingerprint {
        a: 0x243f_6a88_85a3_08d3,
        b: 0x1319_8a2e_0370_7344,
    };
    s.hash(&mut h);
    (u128::from(mix(h.a)) << 64) | u128::from(mix(h.b ^ h.a.rotate_left(32)))
}

/// Hashes a fingerprint for the visited sets: it is random already.
#[derive(Default)]
struct Passthrough(u64);

impl Hasher for Passthrough {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }
    fn write_u128(&mut self, i: u128) {
        self.0 = i as u64;
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

type Visited<V> = HashMap<u128, V, std::hash::BuildHasherDefault<Passthrough>>;

struct Report {
    name: &'static str,
    /// Distinct states at stage boundaries (the visited set).
    states: usize,
    /// States visited within stages (deliveries in every order), counted
    /// once per stage they were reached in.
    inner: usize,
    /// Ticks reached.
    ticks: u8,
    seconds: f64,
    violation: Option<(String, Vec<String>)>,
}

/// Within one stage, a state reached from the stage's first state, with
/// the index of the state it came from and the action that led to it.
struct Inner {
    state: State,
    parent: usize,
    action: Action,
}

impl Model {
    /// Every state reachable from `s` by deliveries (in any order, any
    /// subset) and restarts within its stage, `s` first, each once.
    fn within_stage(&self, s: &State) -> Vec<Inner> {
        let mut seen: Visited<()> = Visited::default();
        seen.insert(fingerprint(s), ());
        let mut out = vec![Inner {
            state: s.clone(),
            parent: usize::MAX,
            action: Action::Restart(0),
        }];
        let mut at = 0;
        while at < out.len() {
            for action in self.inner_actions(&out[at].state) {
                let next = self.apply(&out[at].state, action);
                if seen.insert(fingerprint(&next), ()).is_none() {
                    out.push(Inner {
                        state: next,
                        parent: at,
                        action,
                    });
                }
            }
            at += 1;
        }
        out
    }

    /// The actions from the stage's first state to `inner[at]`.
    fn inner_path(inner: &[Inner], mut at: usize) -> Vec<Action> {
        let mut path = Vec::new();
        while at != 0 {
            path.push(inner[at].action);
            at = inner[at].parent;
        }
        path.reverse();
        path
    }

    /// Breadth-first search of every state reachable within the bounds, a
    /// stage at a time; stops at the first violation, with a trace to it
    /// (shortest in stages).
    ///
    /// Within a stage only one process receives messages, and what it does
    /// with them changes no other process until a later stage, so the
    /// states between two stage boundaries are explored per stage (each
    /// checked) and only the boundary states enter the visited set.
    fn explore(&self) -> Report {
        let started = Instant::now();
        let init = self.initial();
        let mut seen: Visited<u32> = Visited::default();
        // Per boundary state: its parent and the `Next` that led to it.
        let mut parents: Vec<(u32, Action, u128)> =
            vec![(u32::MAX, Action::Restart(0), fingerprint(&init))];
        seen.insert(fingerprint(&init), 0);
        let mut queue = VecDeque::from([(init, 0u32)]);
        let depth_first = self.cfg.depth_first;
        let mut inner_count = 0;
        let mut ticks = 0;
        while let Some((s, id)) = if depth_first {
            queue.pop_back()
        } else {
            queue.pop_front()
        } {
            ticks = ticks.max(s.now);
            let inner = self.within_stage(&s);
            inner_count += inner.len();
            for (at, t) in inner.iter().enumerate() {
                if let Some(what) = self.violation(&t.state) {
                    let mut path = self.boundary_path(&parents, id);
                    path.extend(Self::inner_path(&inner, at));
                    return Report {
                        name: self.cfg.name,
                        states: seen.len(),
                        inner: inner_count,
                        ticks,
                        seconds: started.elapsed().as_secs_f64(),
                        violation: Some((what, self.trace(&path))),
                    };
                }
                for action in self.next_actions(&t.state) {
                    let next = self.apply(&t.state, action);
                    let fp = fingerprint(&next);
                    if seen.contains_key(&fp) {
                        continue;
                    }
                    let next_id = u32::try_from(parents.len()).expect("too many states");
                    parents.push((id, action, fp));
                    seen.insert(fp, next_id);
                    assert!(
                        seen.len() <= self.cfg.max_states,
                        "{}: more than {} states; lower the bounds",
                        self.cfg.name,
                        self.cfg.max_states
                    );
                    if std::env::var_os("MODEL_PROGRESS").is_some()
                        && seen.len().is_multiple_of(100_000)
                    {
                        eprintln!(
                            "{}: {} states, queue {}, t={}",
                            self.cfg.name,
                            seen.len(),
                            queue.len(),
                            next.now
                        );
                    }
                    queue.push_back((next, next_id));
                }
            }
        }
        Report {
            name: self.cfg.name,
            states: seen.len(),
            inner: inner_count,
            ticks,
            seconds: started.elapsed().as_secs_f64(),
            violation: None,
        }
    }

    /// The actions from the initial state to boundary state `id`: each
    /// `Next` with the deliveries before it, found again by searching the
    /// stage it ended.
    fn boundary_path(&self, parents: &[(u32, Action, u128)], id: u32) -> Vec<Action> {
        let mut chain = Vec::new();
        let mut at = id;
        while at != 0 {
            let (parent, action, fp) = parents[at as usize];
            chain.push((action, fp));
            at = parent;
        }
        chain.reverse();
        let mut s = self.initial();
        let mut path = Vec::new();
        for (next, fp) in chain {
            let inner = self.within_stage(&s);
            let (at, u) = inner
                .iter()
                .enumerate()
                .filter(|(_, t)| self.actions(&t.state).contains(&next))
                .map(|(at, t)| (at, self.apply(&t.state, next)))
                .find(|(_, u)| fingerprint(u) == fp)
                .expect("the recorded step is reachable");
            path.extend(Self::inner_path(&inner, at));
            path.push(next);
            s = u;
        }
        path
    }

    /// Replays `path` from the initial state, describing each step.
    fn trace(&self, path: &[Action]) -> Vec<String> {
        let mut s = self.initial();
        let mut out = Vec::new();
        for &action in path {
            let quiet = matches!(
                action,
                Action::Next {
                    choices: 0,
                    carried: None,
                    cut: None,
                }
            ) && usize::from(s.stage) + 1 < N + s.clients.len();
            let what = self.describe(&s, action);
            s = self.apply(&s, action);
            if !quiet {
                out.push(format!("t={} {what:<44} {}", s.now, self.summary(&s)));
            }
        }
        out
    }

    fn describe(&self, s: &State, action: Action) -> String {
        match action {
            Action::Next {
                choices,
                carried,
                cut,
            } => {
                let last = usize::from(s.stage) == N + s.clients.len() - 1;
                let mut what = if last {
                    format!("---- tick {}", s.now + 1)
                } else {
                    "next".to_owned()
                };
                if let Some(m) = carried {
                    what.push_str(&format!(" ({} delayed)", show_msg(m)));
                }
                if let Some((c, i)) = cut {
                    what.push_str(&format!(", {} cut off from L{i}", client_name(c)));
                }
                for (c, client) in s.clients.iter().enumerate() {
                    let name = client_name(c as u8);
                    match ((choices >> (2 * c)) & 3, &client.phase) {
                        (START, Phase::Idle) => what.push_str(&format!(", {name} starts waiting")),
                        (START, _) => what.push_str(&format!(", {name} releases")),
                        (DRAW, _) => what.push_str(&format!(", {name} draws a token")),
                        _ => {}
                    }
                }
                what
            }
            Action::Deliver(m) => format!("deliver {}", show_msg(m)),
            Action::Restart(i) => format!("L{i} restarts"),
            Action::Lose(m) => format!("lose {}", show_msg(m)),
            Action::LoseReply(m) => format!("deliver {}, lose its reply", show_msg(m)),
        }
    }

    /// The lockers' tables and the clients' phases.
    fn summary(&self, s: &State) -> String {
        let mut out = String::new();
        for (i, l) in s.lockers.iter().enumerate() {
            let holders: Vec<String> = l
                .holders
                .iter()
                .map(|e| format!("{:?}@{}", e.uid, e.refreshed))
                .collect();
            let queue: Vec<String> = l.queue.iter().map(|p| format!("{:?}", p.uid)).collect();
            out.push_str(&format!("L{i}[{}", holders.join(",")));
            if !queue.is_empty() {
                out.push_str(&format!(" q:{}", queue.join(",")));
            }
            if l.in_quarantine(s.now) {
                out.push_str(" Q");
            }
            out.push_str("] ");
        }
        for (c, client) in s.clients.iter().enumerate() {
            let name = client_name(c as u8);
            match &client.phase {
                Phase::Idle => out.push_str(&format!("{name}:idle ")),
                Phase::Done => out.push_str(&format!("{name}:done ")),
                Phase::Rewait => out.push_str(&format!("{name}:rewait ")),
                Phase::Waiting(w) => {
                    let slots: String = w
                        .slots
                        .iter()
                        .map(|slot| match slot.ans {
                            Ans::None => '-',
                            Ans::Granted => 'G',
                            Ans::Queued => 'q',
                            Ans::Failed => 'F',
                        })
                        .collect();
                    out.push_str(&format!("{name}:wait {slots} "));
                }
                Phase::Holding(h) => out.push_str(&format!("{name}:HOLDS<{} ", h.deadline)),
            }
        }
        out.trim_end().to_owned()
    }
}

fn show_msg(m: Msg) -> String {
    match m {
        Msg::Req { to, uid, req, .. } => match req {
            Req::Wait { .. } => format!("lock_wait({uid:?})->L{to}"),
            Req::Refresh => format!("refresh({uid:?})->L{to}"),
            Req::Fence { floor } => format!("fence({uid:?}, floor {})->L{to}", show_token(floor)),
        },
        Msg::Rep { from, uid, rep } => {
            let what = match rep {
                Rep::Wait(w) => format!("{w:?}"),
                Rep::Refresh(Some(held)) => format!("refreshed {held}"),
                Rep::Refresh(None) => "quarantine error".to_owned(),
                Rep::Fence(Ok(Some(t))) => format!("token {}", show_token(t)),
                Rep::Fence(Ok(None)) => "not held".to_owned(),
                Rep::Fence(Err(())) => "error".to_owned(),
            };
            format!("L{from}->{uid:?}: {what}")
        }
        Msg::Unlock { to, uid } => format!("unlock({uid:?})->L{to}"),
        Msg::Push { from, uid, granted } => format!(
            "push L{from}->{uid:?}: {}",
            if granted { "Granted" } else { "Wounded" }
        ),
    }
}

// ---------------------------------------------------------------------------
// The configurations and tests

fn base(name: &'static str) -> Config {
    Config {
        name,
        lease_validity: 4,
        margin: 1,
        validity: [4; N],
        quarantine: [4; N],
        skew: [0; N],
        starts_quarantined: [false; N],
        place_ttl: 3,
        modes: vec![Mode::Write, Mode::Write],
        acquisitions: 1,
        waits: 1,
        draws: 0,
        horizon: 5,
        restarts: 1,
        losses: 0,
        delays: 0,
        cuts: 1,
        old_quarantine: false,
        old_fencing: false,
        depth_first: false,
        max_states: 30_000_000,
    }
}

fn run(cfg: Config) -> Report {
    let report = Model { cfg: cfg.clone() }.explore();
    println!(
        "{}: {} states at stage boundaries, {} within stages, {} ticks, {:.1} s{}",
        report.name,
        report.states,
        report.inner,
        report.ticks,
        report.seconds,
        match &report.violation {
            Some((what, _)) => format!(": VIOLATION {what}"),
            None => ": no violation".to_owned(),
        }
    );
    if let Some((_, trace)) = &report.violation {
        for line in trace {
            println!("  {line}");
        }
    }
    report
}

fn env_u8(name: &str) -> Option<u8> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

/// Exploration with every bound from the environment (`M_*`), for
/// trying configurations: `cargo test --release --test safety model_check::custom --
/// --ignored custom --nocapture`.
#[test]
#[ignore]
fn custom() {
    let mut cfg = base("custom");
    cfg.horizon = env_u8("M_HORIZON").unwrap_or(5);
    cfg.delays = env_u8("M_DELAYS").unwrap_or(0);
    cfg.losses = env_u8("M_LOSSES").unwrap_or(0);
    cfg.cuts = env_u8("M_CUTS").unwrap_or(1);
    cfg.restarts = env_u8("M_RESTARTS").unwrap_or(1);
    cfg.draws = env_u8("M_DRAWS").unwrap_or(0);
    cfg.waits = env_u8("M_WAITS").unwrap_or(1);
    cfg.acquisitions = env_u8("M_ACQ").unwrap_or(1);
    if let Some(v) = env_u8("M_VALIDITY") {
        cfg.lease_validity = v;
        cfg.validity = [v; N];
        cfg.quarantine = [v; N];
        cfg.place_ttl = v.min(3);
    }
    if let Some(q) = env_u8("M_Q0") {
        cfg.quarantine[0] = q;
    }
    if let Some(k) = env_u8("M_SKEW0") {
        cfg.skew[0] = k as i8;
    }
    cfg.starts_quarantined[0] = std::env::var_os("M_START_Q0").is_some();
    if std::env::var_os("M_READER").is_some() {
        cfg.modes[1] = Mode::Read;
    }
    if std::env::var_os("M_THREE").is_some() {
        cfg.modes.push(Mode::Read);
    }
    cfg.old_quarantine = std::env::var_os("M_OLDQ").is_some();
    cfg.old_fencing = std::env::var_os("M_OLDF").is_some();
    cfg.depth_first = std::env::var_os("M_DFS").is_some();
    cfg.max_states = 50_000_000;
    run(cfg);
}

/// Two writers, one locker restart and one link cut, 5 ticks: the bounds
/// under which the old quarantine breaks mutual exclusion.
fn restart_and_cut(name: &'static str) -> Config {
    base(name)
}

/// Fencing with one locker's clock 7 ticks ahead of the others (more
/// than the others' quarantine of 4), one restart, each holder drawing its
/// token once: the bounds under which the old fencing draws a smaller
/// token for a later holder.
fn skewed_clock(name: &'static str, horizon: u8) -> Config {
    Config {
        skew: [7, 0, 0],
        draws: 1,
        cuts: 0,
        horizon,
        ..base(name)
    }
}

/// Fencing with different quarantines: locker 0 was just started with a
/// quarantine of 7 ticks, the others have 3 (validity 3 everywhere, so the
/// lease trusts 2), with one restart and one lost message, 9 ticks.
fn different_quarantines(name: &'static str) -> Config {
    Config {
        lease_validity: 3,
        validity: [3; N],
        quarantine: [7, 3, 3],
        starts_quarantined: [true, false, false],
        draws: 1,
        cuts: 0,
        losses: 1,
        horizon: 9,
        ..base(name)
    }
}

fn assert_clean(report: &Report, at_least: usize) {
    assert!(
        report.violation.is_none(),
        "{}: {:?}",
        report.name,
        report.violation
    );
    assert!(
        report.states >= at_least,
        "{}: only {} states explored",
        report.name,
        report.states
    );
}

fn assert_breaks(report: &Report, property: &str) {
    let (what, _) = report
        .violation
        .as_ref()
        .unwrap_or_else(|| panic!("{}: no violation found", report.name));
    assert!(what.starts_with(property), "{}: {what}", report.name);
}

/// A test of the default bounds. CPU-bound: a debug build marks it
/// ignored (25-30 s there for the four, about 3 s optimized).
macro_rules! optimized_test {
    ($(#[doc = $doc:literal])* fn $name:ident() $body:block) => {
        $(#[doc = $doc])*
        #[test]
        #[cfg_attr(
            debug_assertions,
            ignore = "CPU-bound: run optimized, `cargo test --release --test safety model_check` (3 s; 25-30 s in a debug build)"
        )]
        fn $name() $body
    };
}

optimized_test! {
    /// With rules Q and F, every state within the break-1 bounds keeps
    /// mutual exclusion.
    fn fixed_protocol_keeps_mutual_exclusion() {
        let report = run(restart_and_cut(
            "fixed, two writers, restart + cut, 5 ticks",
        ));
        assert_clean(&report, 200_000);
    }
}

optimized_test! {
    /// With rules Q and F, every state within the break-3 (skewed clock)
    /// bounds but two ticks shorter keeps fencing order (the full 7 ticks are
    /// in `MODEL_FULL`).
    fn fixed_protocol_keeps_token_order() {
        let report = run(skewed_clock(
            "fixed, fencing, clock 7 ticks ahead, 5 ticks",
            5,
        ));
        assert_clean(&report, 50_000);
    }
}

optimized_test! {
    /// Quarantine, once broken: with the old quarantine, a waiter wins with a grant a
    /// restarted locker forgot while the holder keeps a quorum (one of them
    /// through the entry the restarted locker re-created for it).
    fn old_quarantine_breaks_mutual_exclusion() {
        let report = run(Config {
            old_quarantine: true,
            depth_first: true,
            ..restart_and_cut("old quarantine, two writers, restart + cut, 5 ticks")
        });
        assert_breaks(&report, "mutual exclusion");
    }
}

optimized_test! {
    /// Fencing, once broken: with the old fencing, a restarted locker's counter restarts
    /// below a token it recorded from a locker whose clock is ahead.
    fn old_fencing_breaks_token_order() {
        let report = run(Config {
            old_fencing: true,
            depth_first: true,
            ..skewed_clock("old fencing, clock 7 ticks ahead, 7 ticks", 7)
        });
        assert_breaks(&report, "fencing order");
    }
}

/// The larger configurations, when `MODEL_FULL` is set (minutes in a
/// debug build; run them with `--release`):
/// `MODEL_FULL=1 cargo test --release --test safety model_check::full -- --nocapture`.
#[test]
fn full() {
    if std::env::var_os("MODEL_FULL").is_none() {
        println!("MODEL_FULL not set: the larger configurations are skipped");
        return;
    }
    let clean = [
        Config {
            losses: 1,
            ..restart_and_cut("fixed, two writers, restart + cut + loss, 5 ticks")
        },
        Config {
            losses: 1,
            delays: 1,
            waits: 2,
            cuts: 0,
            ..base("fixed, two writers, restart + loss + delay, two waits, 5 ticks")
        },
        Config {
            modes: vec![Mode::Write, Mode::Read, Mode::Read],
            horizon: 4,
            ..restart_and_cut("fixed, a writer and two readers, restart + cut, 4 ticks")
        },
        skewed_clock("fixed, fencing, clock 7 ticks ahead, 7 ticks", 7),
        different_quarantines("fixed, fencing, quarantines 7/3/3, restart + loss, 9 ticks"),
    ];
    for cfg in clean {
        assert_clean(&run(cfg), 1);
    }
    let report = run(Config {
        old_quarantine: true,
        ..restart_and_cut("old quarantine, breadth first, 5 ticks")
    });
    assert_breaks(&report, "mutual exclusion");
    let report = run(Config {
        old_fencing: true,
        depth_first: true,
        ..different_quarantines("old fencing, quarantines 7/3/3, restart + loss, 9 ticks")
    });
    assert_breaks(&report, "fencing order");
}
