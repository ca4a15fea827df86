//! A seeded fault schedule for the chaos run, and its execution in real
//! time against the server processes and the proxies' switches.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::context::Context;
use crate::proxy::{NetFault, Switch};
use crate::servers::ServerSet;

/// A delay longer than this makes a server count as impaired.
const SLOW: Duration = Duration::from_secs(1);

/// One fault; every one but `DropConnections` lasts a while and then ends.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Fault {
    /// SIGKILL, restarted after `down_for` on the same port; it comes back
    /// in quarantine (no grants for one validity).
    KillRestart { server: usize, down_for: Duration },
    /// SIGSTOP, SIGCONT after `for_`.
    Pause { server: usize, for_: Duration },
    /// On the server's switch, so for every client.
    Net {
        server: usize,
        fault: NetFault,
        for_: Duration,
    },
    /// Closes every open connection to the server (through the proxies).
    DropConnections { server: usize },
    /// Blackholes the client's switch, so it reaches no server.
    PauseClient { client: usize, for_: Duration },
}

impl Fault {
    /// How long the fault lasts (zero for `DropConnections`).
    pub fn duration(&self) -> Duration {
        match *self {
            Fault::KillRestart { down_for, .. } => down_for,
            Fault::Pause { for_, .. } | Fault::Net { for_, .. } => for_,
            Fault::PauseClient { for_, .. } => for_,
            Fault::DropConnections { .. } => Duration::ZERO,
        }
    }

    /// The same fault, lasting `d` instead.
    pub fn lasting(mut self, d: Duration) -> Fault {
        match &mut self {
            Fault::KillRestart { down_for: for_, .. }
            | Fault::Pause { for_, .. }
            | Fault::Net { for_, .. }
            | Fault::PauseClient { for_, .. } => *for_ = d,
            Fault::DropConnections { .. } => {}
        }
        self
    }

    /// How long the fault keeps its server from granting: a restarted
    /// server stays in quarantine for one `validity` after its restart.
    fn busy(&self, validity: Duration) -> Duration {
        match self {
            Fault::KillRestart { down_for, .. } => *down_for + validity,
            other => other.duration(),
        }
    }

    /// Whether it impairs a server.
    pub fn impairs(&self) -> bool {
        self.impaired_server().is_some()
    }

    /// The server it impairs (killed, paused, blackholed or delayed > 1 s).
    fn impaired_server(&self) -> Option<usize> {
        match *self {
            Fault::KillRestart { server, .. } | Fault::Pause { server, .. } => Some(server),
            Fault::Net {
                server,
                fault: NetFault::Blackhole,
                ..
            } => Some(server),
            Fault::Net {
                server,
                fault: NetFault::Delay(d),
                ..
            } if d > SLOW => Some(server),
            _ => None,
        }
    }

    fn kind(&self) -> &'static str {
        match self {
            Fault::KillRestart { .. } => "kill-restart",
            Fault::Pause { .. } => "pause-server",
            Fault::Net {
                fault: NetFault::Blackhole,
                ..
            } => "blackhole-server",
            Fault::Net {
                fault: NetFault::Delay(_),
                ..
            } => "delay-server",
            Fault::Net {
                fault: NetFault::Healthy,
                ..
            } => "healthy-net",
            Fault::DropConnections { .. } => "drop-connections",
            Fault::PauseClient { .. } => "pause-client",
        }
    }
}

/// A fault starting `at` after the start of the run.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Event {
    pub at: Duration,
    pub fault: Fault,
}

fn between(rng: &mut StdRng, lo: Duration, hi: Duration) -> Duration {
    if hi <= lo {
        return lo;
    }
    Duration::from_secs_f64(rng.random_range(lo.as_secs_f64()..hi.as_secs_f64()))
}

/// A schedule over `run`, drawn from `seed` (same seed and arguments, same
/// schedule), sorted by start.
///
/// Faults start after a short warm-up (run/20, within 0.5..3 s) and all
/// end, including the quarantine after a restart, at least 2 validities
/// before the end of `run`; a run too short for that gets no faults. At
/// most a minority of the servers (2 of 5) is unavailable at once
/// (`unavailable_at`, which counts the quarantine), except about one server
/// fault in seven may make it one more (3 of 5, a majority); past the cap
/// a harmless fault (short delay, dropped connections) is drawn instead.
/// One lasting fault per server or client at a time. About four faults
/// start per validity.
pub fn draw(
    seed: u64,
    servers: usize,
    clients: usize,
    run: Duration,
    validity: Duration,
) -> Vec<Event> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut events: Vec<Event> = Vec::new();
    let v = validity;
    if v.is_zero() || (servers == 0 && clients == 0) {
        return events;
    }
    let warm = (run / 20).clamp(Duration::from_millis(500), Duration::from_secs(3));
    let Some(limit) = run.checked_sub(v * 2) else {
        return events;
    };
    if limit <= warm + v / 2 {
        return events;
    }
    // Same server or client again only this long after its last fault.
    let rest = Duration::from_millis(100);
    let step = (v / 5).max(Duration::from_millis(4));
    let minority = servers.saturating_sub(1) / 2;
    let mut server_free = vec![Duration::ZERO; servers];
    let mut client_free = vec![Duration::ZERO; clients];
    let mut t = warm;
    // Each round advances t by at least step/4 > 0; the cap is a backstop.
    for _ in 0..100_000 {
        t += between(&mut rng, step / 4, step * 7 / 4);
        if t >= limit {
            break;
        }
        let roll = rng.random_range(0..100u32);
        let server_fault = servers > 0 && (roll < 80 || clients == 0);
        if !server_fault {
            if clients == 0 {
                continue;
            }
            let client = rng.random_range(0..clients);
            let for_ = between(&mut rng, v * 6 / 5, v * 2);
            if client_free[client] > t || t + for_ > limit {
                continue;
            }
            client_free[client] = t + for_ + rest;
            events.push(Event {
                at: t,
                fault: Fault::PauseClient { client, for_ },
            });
            continue;
        }
        let free: Vec<usize> = (0..servers).filter(|&s| server_free[s] <= t).collect();
        if free.is_empty() {
            continue;
        }
        let server = free[rng.random_range(0..free.len())];
        let fault = match roll % 10 {
            // Instantaneous; does not impair, does not occupy the server.
            0 | 1 => {
                events.push(Event {
                    at: t,
                    fault: Fault::DropConnections { server },
                });
                continue;
            }
            2..=4 => Fault::KillRestart {
                server,
                down_for: between(&mut rng, v / 4, v * 2),
            },
            5..=6 => {
                let for_ = if rng.random_bool(0.5) {
                    between(&mut rng, v / 10, v * 4 / 5)
                } else {
                    between(&mut rng, v * 6 / 5, v * 5 / 2)
                };
                Fault::Pause { server, for_ }
            }
            _ => {
                let for_ = between(&mut rng, v / 4, v * 3 / 2);
                let x = rng.random_range(0..100u32);
                let fault = if x < 45 {
                    NetFault::Blackhole
                } else if x < 75 {
                    NetFault::Delay(between(
                        &mut rng,
                        Duration::from_millis(5),
                        Duration::from_millis(200),
                    ))
                } else {
                    NetFault::Delay(between(&mut rng, SLOW, SLOW + v / 3))
                };
                Fault::Net {
                    server,
                    fault,
                    for_,
                }
            }
        };
        let mut fault = fault;
        if fault.impaired_server().is_some() {
            let cap = if rng.random_range(0..7u32) == 0 {
                minority + 1
            } else {
                minority
            };
            // Faults are added in order of start, and all earlier ones
            // started before t, so the count only falls after t.
            if unavailable_at(&events, t, v) >= cap {
                // Too many down already: a harmless fault instead.
                if rng.random_bool(0.5) {
                    events.push(Event {
                        at: t,
                        fault: Fault::DropConnections { server },
                    });
                    continue;
                }
                fault = Fault::Net {
                    server,
                    fault: NetFault::Delay(between(
                        &mut rng,
                        Duration::from_millis(5),
                        Duration::from_millis(200),
                    )),
                    for_: between(&mut rng, v / 4, v),
                };
            }
        }
        let busy = fault.busy(v);
        if t + busy > limit {
            continue;
        }
        server_free[server] = t + busy + rest;
        events.push(Event { at: t, fault });
    }
    events
}

/// A schedule of process faults only, kills (with restarts) and pauses,
/// for runs whose clients connect to the servers directly (no proxies):
/// drawn from `seed`, sorted by start. One is drawn every validity/8 to
/// validity/2 after a warm-up of one second; never more than `most` servers
/// are unavailable at once, a restarted server counting until its
/// quarantine is over; pauses are shorter or longer than the validity,
/// half each. Every fault has ended, quarantine included, a validity
/// before the end of `run`.
pub fn draw_process_faults(
    seed: u64,
    servers: usize,
    most: usize,
    run: Duration,
    validity: Duration,
) -> Vec<Event> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut events: Vec<Event> = Vec::new();
    let v = validity;
    let warm = Duration::from_secs(1);
    let Some(limit) = run.checked_sub(v) else {
        return events;
    };
    if servers == 0 || most == 0 || v.is_zero() {
        return events;
    }
    let mut t = warm;
    // Each round advances t by at least v/8 > 0; the cap is a backstop.
    for _ in 0..100_000 {
        t += between(&mut rng, v / 8, v / 2);
        if t >= limit {
            break;
        }
        let server = rng.random_range(0..servers);
        let fault = if rng.random_bool(0.4) {
            Fault::KillRestart {
                server,
                down_for: between(&mut rng, v / 4, v),
            }
        } else if rng.random_bool(0.5) {
            Fault::Pause {
                server,
                for_: between(&mut rng, v / 10, v * 4 / 5),
            }
        } else {
            Fault::Pause {
                server,
                for_: between(&mut rng, v * 6 / 5, v * 2),
            }
        };
        let busy = fault.busy(v);
        if t + busy > limit {
            continue;
        }
        // Never the same server twice at once, never more than `most`.
        // Checking at t covers the whole span: the faults drawn so far all
        // started by t, so the count only falls after it.
        let same = events.iter().any(|e| {
            e.fault.impaired_server() == Some(server) && e.at <= t && t < e.at + e.fault.busy(v)
        });
        if same || unavailable_at(&events, t, v) >= most {
            continue;
        }
        events.push(Event { at: t, fault });
    }
    events
}

/// How many servers impaired by the faults `counts` picks are down at
/// `t`, a killed one until its quarantine is over.
fn count_where(
    events: &[Event],
    t: Duration,
    quarantine: Duration,
    counts: impl Fn(&Fault) -> bool,
) -> usize {
    let mut down: Vec<usize> = Vec::new();
    for e in events.iter().filter(|e| counts(&e.fault)) {
        let Some(server) = e.fault.impaired_server() else {
            continue;
        };
        if e.at <= t && t < e.at + e.fault.busy(quarantine) && !down.contains(&server) {
            down.push(server);
        }
    }
    down.len()
}

/// How many servers are impaired (killed, paused, blackholed or delayed
/// more than 1 s) at `t`; a restarted server counts until its quarantine
/// (one `validity`) is over, since it grants nothing before that: the
/// number of servers that cannot grant at `t` (the restart's own delay
/// aside).
pub fn unavailable_at(events: &[Event], t: Duration, validity: Duration) -> usize {
    count_where(events, t, validity, |_| true)
}

/// Like `unavailable_at`, without the servers that are only slow (delayed
/// more than 1 s): their replies time out, but their pushed grants still
/// arrive, so they can still take part in a grant.
pub fn silent_at(events: &[Event], t: Duration, validity: Duration) -> usize {
    count_where(events, t, validity, |f| {
        !matches!(
            f,
            Fault::Net {
                fault: NetFault::Delay(_),
                ..
            }
        )
    })
}

/// When the stretch in which more than `tolerated` servers are silent
/// (`silent_at`), and that holds `t`, began; `None` when `t` is not in one.
/// The count only rises where a fault starts, so the stretch begins at the
/// latest fault start at or before `t` just before which it was not above.
pub fn silent_majority_since(
    events: &[Event],
    t: Duration,
    validity: Duration,
    tolerated: usize,
) -> Option<Duration> {
    if silent_at(events, t, validity) <= tolerated {
        return None;
    }
    let mut starts: Vec<Duration> = events.iter().map(|e| e.at).filter(|&at| at <= t).collect();
    starts.sort_unstable();
    starts.dedup();
    starts.into_iter().rev().find(|&at| {
        at.checked_sub(Duration::from_nanos(1))
            .is_none_or(|before| silent_at(events, before, validity) <= tolerated)
    })
}

/// Whether `client` was cut off from every server (a paused client) at `t`.
pub fn client_cut_off_at(events: &[Event], client: usize, t: Duration) -> bool {
    client_cut_off_during(events, client, t, t)
}

/// Whether `client` was cut off from every server at some moment of
/// `from..=to`.
pub fn client_cut_off_during(
    events: &[Event],
    client: usize,
    from: Duration,
    to: Duration,
) -> bool {
    events.iter().any(|e| {
        matches!(e.fault, Fault::PauseClient { client: c, .. } if c == client)
            && e.at <= to
            && from < e.at + e.fault.duration()
    })
}

/// The most servers `unavailable_at` any moment of `from..=to`. The count
/// only rises where a fault starts, so it is read at `from` and at every
/// start inside the span.
pub fn most_unavailable(
    events: &[Event],
    from: Duration,
    to: Duration,
    validity: Duration,
) -> usize {
    events
        .iter()
        .map(|e| e.at)
        .filter(|&at| at > from && at <= to)
        .chain([from])
        .map(|t| unavailable_at(events, t, validity))
        .max()
        .unwrap_or(0)
}

fn secs(d: Duration) -> String {
    format!("{:.3}s", d.as_secs_f64())
}

/// One line, for logs and reports.
pub fn describe(e: &Event) -> String {
    let what = match e.fault {
        Fault::KillRestart { server, down_for } => format!(
            "kill server {server}, restart after {} (then in quarantine)",
            secs(down_for)
        ),
        Fault::Pause { server, for_ } => {
            format!("pause server {server} (SIGSTOP) for {}", secs(for_))
        }
        Fault::Net {
            server,
            fault,
            for_,
        } => match fault {
            NetFault::Blackhole => format!("blackhole server {server} for {}", secs(for_)),
            NetFault::Delay(d) => {
                format!("delay server {server} by {} for {}", secs(d), secs(for_))
            }
            NetFault::Healthy => format!("healthy network to server {server} for {}", secs(for_)),
        },
        Fault::DropConnections { server } => format!("drop connections to server {server}"),
        Fault::PauseClient { client, for_ } => format!(
            "pause client {client} (blackhole to every server) for {}",
            secs(for_)
        ),
    };
    format!("+{} {what}", secs(e.at))
}

/// Counts by kind, every kind listed (zeros too), in a fixed order.
pub fn counts(events: &[Event]) -> Vec<(&'static str, usize)> {
    let kinds = [
        "kill-restart",
        "pause-server",
        "blackhole-server",
        "delay-server",
        "drop-connections",
        "pause-client",
    ];
    let mut out: Vec<(&'static str, usize)> = kinds.iter().map(|&k| (k, 0)).collect();
    for e in events {
        let kind = e.fault.kind();
        match out.iter_mut().find(|(k, _)| *k == kind) {
            Some((_, n)) => *n += 1,
            None => out.push((kind, 1)),
        }
    }
    out
}

/// Runs `f` on the server set in a blocking thread. Servers are not locked
/// as a whole, so a slow restart of one never delays a fault on another.
async fn on_servers<T: Send + 'static>(
    servers: &Arc<ServerSet>,
    f: impl FnOnce(&ServerSet) -> T + Send + 'static,
) -> Result<T, String> {
    let servers = Arc::clone(servers);
    tokio::task::spawn_blocking(move || f(&servers))
        .await
        .context("server operation failed")
}

struct Ctx<L> {
    servers: Arc<ServerSet>,
    server_switches: Vec<Switch>,
    client_switches: Vec<Switch>,
    start: Instant,
    log: L,
    errors: Mutex<Vec<String>>,
    /// The faults as they took effect: when each began and how long it
    /// lasted in fact (a kill until its restart was done).
    taken: Arc<Mutex<Vec<Event>>>,
}

impl<L: Fn(String)> Ctx<L> {
    fn say(&self, what: &str, text: &str) {
        let at = Instant::now().saturating_duration_since(self.start);
        (self.log)(format!("[{}] {what}: {text}", secs(at)));
    }

    fn fail(&self, text: String) {
        self.say("FAULT ERROR", &text);
        self.errors
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(text);
    }

    /// Runs `f` on the servers, logging its error.
    async fn on(&self, f: impl FnOnce(&ServerSet) + Send + 'static) {
        if let Err(err) = on_servers(&self.servers, f).await {
            self.fail(err);
        }
    }

    /// Sets the switch of server or client `i` to `to`, or drops its
    /// connections (`None`).
    fn set(&self, client: bool, i: usize, to: Option<NetFault>) {
        let (list, what) = match client {
            true => (&self.client_switches, "client"),
            false => (&self.server_switches, "server"),
        };
        match (list.get(i), to) {
            (Some(sw), Some(to)) => sw.set(to),
            (Some(sw), None) => sw.drop_connections(),
            (None, _) => self.fail(format!(
                "no switch for {what} {i} (there are {})",
                list.len()
            )),
        }
    }

    async fn begin(&self, e: &Event) {
        // Logged once in effect, so the log shows when it really began.
        match e.fault {
            Fault::KillRestart { server, .. } => self.on(move |s| s.kill(server)).await,
            Fault::Pause { server, .. } => self.on(move |s| s.pause(server)).await,
            Fault::Net { server, fault, .. } => self.set(false, server, Some(fault)),
            Fault::DropConnections { server } => self.set(false, server, None),
            Fault::PauseClient { client, .. } => self.set(true, client, Some(NetFault::Blackhole)),
        }
        self.say("begin", &describe(e));
    }

    async fn end(&self, e: &Event) {
        let text = describe(e);
        match e.fault {
            Fault::KillRestart { server, .. } => {
                match on_servers(&self.servers, move |s| s.restart(server)).await {
                    Ok(Ok(())) => self.say("end", &format!("{text}: restarted, in quarantine")),
                    Ok(Err(err)) | Err(err) => self.fail(format!("{text}: {err}")),
                }
                return;
            }
            Fault::Pause { server, .. } => self.on(move |s| s.resume(server)).await,
            Fault::Net { server, .. } => self.set(false, server, Some(NetFault::Healthy)),
            Fault::DropConnections { .. } => return,
            Fault::PauseClient { client, .. } => self.set(true, client, Some(NetFault::Healthy)),
        }
        self.say("end", &text);
    }
}

/// Executes `events` in real time from `start`: each fault begins at its
/// offset and ends after its duration (a timer task each), logging both with
/// the actual offset. Returns when every fault has ended; then every server
/// is running and resumed and every switch healthy. A server found down
/// then (a crash, or a failed restart) is restarted and reported.
///
/// Each fault is also added to `taken` once it has ended, with the offset
/// at which it took effect and how long it really lasted: under load these
/// lag the schedule, and the checks that ask which servers were down use
/// them.
///
/// Err lists what went wrong (failed restarts, servers found down at the
/// end); every fault has been ended either way. Dropping the returned
/// future before it finishes leaves the faults that are on in place.
pub async fn apply(
    mut events: Vec<Event>,
    servers: Arc<ServerSet>,
    switches: (Vec<Switch>, Vec<Switch>),
    start: Instant,
    taken: Arc<Mutex<Vec<Event>>>,
    log: impl Fn(String) + Send + Sync + 'static,
) -> Result<(), String> {
    let (server_switches, client_switches) = switches;
    events.sort_by_key(|e| e.at);
    let ctx = Arc::new(Ctx {
        servers,
        server_switches,
        client_switches,
        start,
        log,
        errors: Mutex::new(Vec::new()),
        taken,
    });
    let took = |ctx: &Ctx<_>, at: Duration, fault: Fault| {
        ctx.taken
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(Event { at, fault });
    };
    let mut ends = JoinSet::new();
    for e in events {
        tokio::time::sleep_until(start + e.at).await;
        ctx.begin(&e).await;
        let began = start.elapsed();
        if matches!(e.fault, Fault::DropConnections { .. }) {
            took(&ctx, began, e.fault);
            continue;
        }
        let ctx = Arc::clone(&ctx);
        ends.spawn(async move {
            tokio::time::sleep_until(start + e.at + e.fault.duration()).await;
            ctx.end(&e).await;
            let lasted = start.elapsed().saturating_sub(began);
            took(&ctx, began, e.fault.lasting(lasted));
        });
    }
    while let Some(done) = ends.join_next().await {
        if let Err(err) = done {
            ctx.fail(format!("a fault's end task failed: {err}"));
        }
    }
    // Safety net: everything healthy, whatever happened above.
    let report = on_servers(&ctx.servers, |s| {
        let mut problems = Vec::new();
        for i in 0..s.len() {
            if s.is_paused(i) {
                s.resume(i);
                problems.push(format!("server {i} was still paused at the end; resumed"));
            } else if !s.is_up(i) {
                let log = s.log_tail(i, 20);
                match s.restart(i) {
                    Ok(()) => problems.push(format!(
                        "server {i} was down at the end of the schedule (crashed?); restarted. \
                         Its log ended with:\n{log}"
                    )),
                    Err(err) => problems.push(format!(
                        "server {i} was down at the end of the schedule and {err}. \
                         Its log ended with:\n{log}"
                    )),
                }
            }
        }
        problems
    })
    .await;
    match report {
        Ok(problems) => problems.into_iter().for_each(|p| ctx.fail(p)),
        Err(err) => ctx.fail(err),
    }
    for sw in ctx.server_switches.iter().chain(&ctx.client_switches) {
        sw.set(NetFault::Healthy);
    }
    ctx.say("schedule", "every fault has ended");
    let errors = std::mem::take(&mut *ctx.errors.lock().unwrap_or_else(|e| e.into_inner()));
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors.join("\n"))
    }
}
