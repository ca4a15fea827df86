//! `quorum-lock status`: what each node (lock server, Redis node or
//! database) says about itself and the locks it holds, once or again and
//! again with `--watch`; with `--health`, only whether enough nodes can
//! grant. Lock servers need the admin token for the full status, as
//! `locks` does; `--health` takes any token.

use std::fmt::Write as _;
use std::io::{self, IsTerminal, Write};
use std::time::{Duration, SystemTime};

use futures::future::join_all;
use quorum_lock::net::RemoteLocker;
use quorum_lock::quorum::write_quorum;
use quorum_lock::redis::RedisLocker;
use quorum_lock::sql::SqlLocker;
use quorum_lock::{LockInfo, NetLocker};

use crate::admin::{age, entry_json, mode_name, table};
use crate::args::{ClientArgs, Output, StatusArgs};
use crate::fail::{Failure, FAILURE};
use crate::fleet::{ask, Fleet, Member, Missing};
use crate::json;
use crate::plan::{Kind, Plan};
use crate::signals::Signals;
use crate::words::escaped;

/// Time between two snapshots of `--watch` unless `--interval` says.
const INTERVAL: Duration = Duration::from_secs(2);

/// Moves the cursor home and clears the screen (ANSI).
const CLEAR: &str = "\x1b[H\x1b[2J";

/// What `locks` reports when the token is not the admin token; the same
/// words here.
const WHAT: &str = "list locks";

/// The full status, or only health.
#[derive(Clone, Copy, PartialEq, Eq)]
enum View {
    Status,
    Health,
}

pub async fn status(args: StatusArgs) -> Result<u8, Failure> {
    // Every group of --nodes (one, mostly), each its own cluster.
    let groups = crate::plan::groups(&args.client)?;
    let mut kinds = Vec::with_capacity(groups.len());
    for group in &groups {
        kinds.push(Plan::of(&group.client)?.kind);
    }
    if args.validity.is_some() && kinds.iter().all(|k| *k == Kind::LockServers) {
        return Err(Failure::usage(
            "status --validity is for Redis nodes and databases; lock servers announce their own",
        ));
    }
    let view = if args.health {
        View::Health
    } else {
        View::Status
    };
    // Health lists no locks, so any token will do: a readiness probe needs
    // only the client token.
    let connected = join_all(
        groups
            .iter()
            .map(|g| Fleet::connect(&g.client, view == View::Status, args.validity)),
    )
    .await;
    let mut fleets = Vec::with_capacity(groups.len());
    for (group, fleet) in groups.into_iter().zip(connected) {
        let fleet = fleet.map_err(|f| group.named(f))?;
        fleets.push((group, fleet));
    }
    let fleet = Fleets(fleets);
    if !args.watch {
        let snapshot = Snapshots::take(&fleet, view).await?;
        write_out(&snapshot.render(args.output)?)?;
        return snapshot.verdict(&fleet);
    }

    let interval = args.interval.unwrap_or(INTERVAL);
    let terminal = io::stdout().is_terminal();
    // From here on Ctrl-C ends the watch instead of killing us mid-write.
    let mut signals = Signals::install()
        .map_err(|e| Failure::new(FAILURE, format!("cannot install signal handlers: {e}")))?;
    let mut ticks = tokio::time::interval(interval);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut shown = 0u64;
    loop {
        tokio::select! {
            _ = ticks.tick() => {}
            _ = signals.recv() => return Ok(0),
        }
        let snapshot = tokio::select! {
            snapshot = Snapshots::take(&fleet, view) => snapshot?,
            _ = signals.recv() => return Ok(0),
        };
        let mut text = String::new();
        // JSON Lines carry their own time; no headers between them.
        if args.output == Output::Text {
            let now = humantime::format_rfc3339_seconds(snapshot.time());
            if terminal {
                let every = humantime::format_duration(interval);
                let _ = writeln!(
                    text,
                    "{CLEAR}quorum-lock status every {every}, Ctrl-C to stop  {now}\n"
                );
            } else {
                if shown > 0 {
                    text.push('\n');
                }
                let _ = writeln!(text, "--- {now}");
            }
        }
        text.push_str(&snapshot.render(args.output)?);
        if !write_out(&text)? {
            // Nobody reads any more (`| head`): not our failure.
            return Ok(0);
        }
        shown += 1;
        if args.count.is_some_and(|count| shown >= count) {
            return snapshot.verdict(&fleet);
        }
    }
}

/// Writes `text` to stdout at once; `false` when the reader is gone.
fn write_out(text: &str) -> Result<bool, Failure> {
    let mut out = io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Ok(()) => Ok(true),
        Err(err) if err.kind() == io::ErrorKind::BrokenPipe => Ok(false),
        Err(err) => Err(Failure::new(
            FAILURE,
            format!("cannot write the status: {err}"),
        )),
    }
}

/// Every group's nodes, connected, in the order given: one group unless
/// `--nodes` lists several.
struct Fleets(Vec<(crate::plan::Group, Fleet)>);

/// One look at every group, in the order given.
struct Snapshots(Vec<Snapshot>);

impl Snapshots {
    /// Every group's snapshot, taken at once.
    async fn take(fleets: &Fleets, view: View) -> Result<Snapshots, Failure> {
        let looks = join_all(fleets.0.iter().map(|(group, fleet)| async move {
            let mut snapshot = Snapshot::take(fleet, view)
                .await
                .map_err(|f| group.named(f))?;
            snapshot.group = group.client.group.clone();
            Ok::<_, Failure>(snapshot)
        }))
        .await;
        Ok(Snapshots(looks.into_iter().collect::<Result<_, _>>()?))
    }

    fn time(&self) -> SystemTime {
        self.0.first().map_or_else(SystemTime::now, |s| s.time)
    }

    /// Each group's verdict ([`Snapshot::verdict`]); with several groups,
    /// every failing group is named, under the first one's exit code.
    fn verdict(&self, fleets: &Fleets) -> Result<u8, Failure> {
        let mut failures: Vec<Failure> = Vec::new();
        for (snapshot, (group, fleet)) in self.0.iter().zip(&fleets.0) {
            if let Err(failure) = snapshot.verdict(fleet, &group.client) {
                failures.push(group.named(failure));
            }
        }
        let Some(first) = failures.first() else {
            return Ok(0);
        };
        let message: Vec<&str> = failures.iter().map(|f| f.message.as_str()).collect();
        Err(Failure::new(first.code, message.join("; ")))
    }

    fn render(&self, output: Output) -> Result<String, Failure> {
        let [one] = self.0.as_slice() else {
            return match output {
                Output::Json => json::line(&self.json()),
                Output::Text => Ok(self.text()),
            };
        };
        one.render(output)
    }

    /// Each group's lines, the group's id before each node's endpoint.
    fn text(&self) -> String {
        let width = self.0.iter().map(Snapshot::width).max().unwrap_or(0);
        let ids = self.0.iter().filter_map(|s| s.group.as_deref());
        let id_width = ids.map(|id| id.chars().count()).max().unwrap_or(0);
        let mut out = String::new();
        for snapshot in &self.0 {
            let id = snapshot.group.as_deref().unwrap_or_default();
            let before = format!("{id:<id_width$}  ");
            out.push_str(&match snapshot.view {
                View::Status => snapshot.text_in(&before, width),
                View::Health => snapshot.health_text_in(&before, width),
            });
        }
        out
    }

    /// One document: every group's nodes, each with its group; the counts
    /// summed, and each group's own under `groups`.
    fn json(&self) -> json::Status {
        let each: Vec<json::Status> = self.0.iter().map(Snapshot::json).collect();
        let kinds: Vec<&str> = each.iter().map(|s| s.kind).collect();
        let kind = match kinds.first() {
            Some(first) if kinds.iter().all(|k| k == first) => *first,
            _ => json::kind(Kind::Mixed),
        };
        let groups = self
            .0
            .iter()
            .zip(&each)
            .map(|(snapshot, doc)| json::GroupCounts {
                group: snapshot.group.clone().unwrap_or_default(),
                total: doc.total,
                answered: None,
                quorum: doc.quorum,
                listed: None,
                healthy: Some(doc.healthy),
                quorum_healthy: Some(doc.quorum_healthy),
            })
            .collect();
        json::Status {
            format: json::FORMAT,
            kind,
            view: each.first().map_or("status", |s| s.view),
            time: humantime::format_rfc3339_seconds(self.time()).to_string(),
            total: each.iter().map(|s| s.total).sum(),
            quorum: each.iter().map(|s| s.quorum).sum(),
            healthy: each.iter().map(|s| s.healthy).sum(),
            quorum_healthy: each.iter().all(|s| s.quorum_healthy),
            nodes: each.into_iter().flat_map(|s| s.nodes).collect(),
            groups: Some(groups),
        }
    }
}

/// One look at every node of one group, in the order given.
struct Snapshot {
    /// The group's id, when `--nodes` has several.
    group: Option<String>,
    kind: Kind,
    view: View,
    time: SystemTime,
    nodes: Vec<Node>,
}

/// What one node said, or why it said nothing.
struct Node {
    endpoint: String,
    /// As `Member::kind`.
    kind: &'static str,
    /// "protocol 6", "Redis", "PostgreSQL" or "MySQL/MariaDB".
    speaks: String,
    /// The lock server's protocol version, if connected.
    version: Option<u16>,
    state: State,
}

enum State {
    Missing(Missing),
    Up {
        quarantine: Quarantine,
        /// `None` for Redis and databases with `--health`, which lists
        /// nothing.
        entries: Option<u64>,
        /// `None` with `--health`.
        locks: Option<Vec<LockInfo>>,
    },
}

#[derive(Clone, Copy)]
enum Quarantine {
    Out,
    For(Duration),
    /// Quarantined, but a lock server before protocol 4 cannot say for
    /// how long.
    Unknown,
}

impl Node {
    fn healthy(&self) -> bool {
        matches!(
            self.state,
            State::Up {
                quarantine: Quarantine::Out,
                ..
            }
        )
    }
}

impl Snapshot {
    /// Asks every node at once. A lock server that refuses the token for
    /// listing ends the command (exit 77), as for `locks`: it is not the
    /// admin token.
    async fn take(fleet: &Fleet, view: View) -> Result<Snapshot, Failure> {
        let time = SystemTime::now();
        let looks = join_all(fleet.members.iter().map(|member| async move {
            match member {
                Member::Server(server) => look_server(server, view).await,
                Member::Redis(node) => look_redis(node, view).await,
                Member::Sql(node) => look_sql(node, member.kind(), view).await,
            }
        }))
        .await;
        Ok(Snapshot {
            group: None,
            kind: fleet.kind(),
            view,
            time,
            nodes: looks.into_iter().collect::<Result<_, _>>()?,
        })
    }

    /// The full status: 0 when any node answered; when none did, 69 (as
    /// `locks`), or 77 when nodes refused the credentials or TLS over a
    /// certificate, with the setting to change. Health: 0 when a write
    /// quorum of nodes is healthy, 69 (or 77 as above) when not.
    fn verdict(&self, fleet: &Fleet, args: &ClientArgs) -> Result<u8, Failure> {
        let total = self.nodes.len();
        let quorum = write_quorum(total);
        let missing: Vec<&Missing> = self
            .nodes
            .iter()
            .filter_map(|n| match &n.state {
                State::Missing(why) => Some(why),
                State::Up { .. } => None,
            })
            .collect();
        let mut message = match self.view {
            View::Status if missing.len() < total => return Ok(0),
            View::Status => {
                let down: Vec<&str> = self.nodes.iter().map(|n| n.endpoint.as_str()).collect();
                let none = match self.kind {
                    Kind::LockServers => "no lock server answered",
                    Kind::Redis => "no Redis node answered",
                    Kind::Sql => "no database answered",
                    Kind::Mixed => "no node answered",
                };
                format!("{none}; unreachable or failing: {}", down.join(", "))
            }
            View::Health => {
                let healthy = self.nodes.iter().filter(|n| n.healthy()).count();
                if healthy >= quorum {
                    return Ok(0);
                }
                let sick: Vec<String> = self
                    .nodes
                    .iter()
                    .filter(|n| !n.healthy())
                    .map(|n| format!("{}: {}", n.endpoint, n.trouble()))
                    .collect();
                format!(
                    "unhealthy: {healthy} of {total} {} healthy, {quorum} needed for a write \
                     lock; {}",
                    self.kind.nodes(),
                    sick.join("; ")
                )
            }
        };
        let (code, advice) = fleet.verdict(args, &missing);
        if let Some(advice) = advice {
            message.push_str(&format!(" ({advice})"));
        }
        Err(Failure::new(code, message))
    }

    fn render(&self, output: Output) -> Result<String, Failure> {
        match (output, self.view) {
            (Output::Json, _) => json::line(&self.json()),
            (Output::Text, View::Status) => Ok(self.text()),
            (Output::Text, View::Health) => Ok(self.health_text()),
        }
    }

    /// One line per node, each followed by a table of its locks.
    fn text(&self) -> String {
        self.text_in("", self.width())
    }

    /// [`text`](Self::text) with `before` at the start of each node's
    /// line and its endpoints padded to `width`.
    fn text_in(&self, before: &str, width: usize) -> String {
        let mut out = String::new();
        for node in &self.nodes {
            let endpoint = &node.endpoint;
            let line = format!("{before}{endpoint:<width$}  {}", node.summary());
            let _ = writeln!(out, "{}", escaped(&line));
            if let State::Up {
                locks: Some(locks), ..
            } = &node.state
                && !locks.is_empty()
            {
                out.push_str(&table(&HEADER, &rows(locks), "  "));
            }
        }
        out
    }

    /// One line per node: healthy, or why not.
    fn health_text(&self) -> String {
        self.health_text_in("", self.width())
    }

    /// [`health_text`](Self::health_text) as [`text_in`](Self::text_in).
    fn health_text_in(&self, before: &str, width: usize) -> String {
        let mut out = String::new();
        for node in &self.nodes {
            let endpoint = &node.endpoint;
            let line = if node.healthy() {
                format!("{before}{endpoint:<width$}  healthy")
            } else {
                format!("{before}{endpoint:<width$}  unhealthy: {}", node.trouble())
            };
            let _ = writeln!(out, "{}", escaped(&line));
        }
        out
    }

    /// The endpoint column's width; bounded, since a format width above
    /// 65,535 panics (a longer endpoint just pushes its row's text right).
    fn width(&self) -> usize {
        self.nodes
            .iter()
            .map(|n| n.endpoint.chars().count())
            .max()
            .unwrap_or(0)
            .min(256)
    }

    fn json(&self) -> json::Status {
        let total = self.nodes.len();
        let quorum = write_quorum(total);
        let healthy = self.nodes.iter().filter(|n| n.healthy()).count();
        json::Status {
            format: json::FORMAT,
            kind: json::kind(self.kind),
            view: match self.view {
                View::Status => "status",
                View::Health => "health",
            },
            time: humantime::format_rfc3339_seconds(self.time).to_string(),
            total,
            quorum,
            healthy,
            quorum_healthy: healthy >= quorum,
            nodes: self
                .nodes
                .iter()
                .map(|n| n.json(self.group.as_deref()))
                .collect(),
            groups: None,
        }
    }
}

impl Node {
    fn summary(&self) -> String {
        match &self.state {
            State::Missing(Missing::Unreachable(why)) => format!("unreachable: {why}"),
            State::Missing(Missing::Failing(why)) => {
                format!("reachable, {}, but failing: {why}", self.speaks)
            }
            State::Up {
                quarantine,
                entries,
                ..
            } => {
                let quarantine = match quarantine {
                    Quarantine::Out => "not quarantined".to_owned(),
                    Quarantine::For(left) => format!("quarantined, {} left", age(*left)),
                    Quarantine::Unknown => {
                        "quarantined, time left unknown (protocol before 4)".to_owned()
                    }
                };
                let entries = match entries {
                    Some(1) => ", 1 entry".to_owned(),
                    Some(n) => format!(", {n} entries"),
                    None => String::new(),
                };
                format!("reachable, {}, {quarantine}{entries}", self.speaks)
            }
        }
    }

    /// Why the node is not healthy.
    fn trouble(&self) -> String {
        match &self.state {
            State::Missing(why) => why.describe(),
            State::Up {
                quarantine: Quarantine::For(left),
                ..
            } => format!("quarantined, {} left", age(*left)),
            State::Up {
                quarantine: Quarantine::Unknown,
                ..
            } => "quarantined, time left unknown (protocol before 4)".to_owned(),
            State::Up { .. } => "healthy".to_owned(),
        }
    }

    fn json(&self, group: Option<&str>) -> json::StatusNode {
        let healthy = self.healthy();
        let (reachable, reason) = match &self.state {
            State::Missing(Missing::Unreachable(why)) => (false, Some(why.clone())),
            State::Missing(Missing::Failing(why)) => (true, Some(why.clone())),
            State::Up { .. } => (true, None),
        };
        let (quarantined, left, entries, locks) = match &self.state {
            State::Missing(_) => (None, None, None, None),
            State::Up {
                quarantine,
                entries,
                locks,
            } => (
                Some(!matches!(quarantine, Quarantine::Out)),
                match quarantine {
                    Quarantine::For(left) => Some(json::ms(*left)),
                    _ => None,
                },
                *entries,
                locks
                    .as_ref()
                    .map(|locks| locks.iter().map(|e| entry_json(e, true)).collect()),
            ),
        };
        json::StatusNode {
            group: group.map(str::to_owned),
            node: self.endpoint.clone(),
            kind: self.kind,
            reachable,
            answered: matches!(self.state, State::Up { .. }),
            reason,
            protocol: self.version,
            quarantined,
            quarantine_left_ms: left,
            entries,
            healthy,
            locks,
        }
    }
}

/// Asks one lock server for its status and, for the full status, its
/// locks.
async fn look_server(server: &RemoteLocker, view: View) -> Result<Node, Failure> {
    let version = server.protocol_version();
    let asked = ask(server, Some(server), WHAT, async {
        match view {
            View::Status => {
                let (health, locks) = tokio::try_join!(server.status(), server.locks())?;
                Ok((health, Some(locks)))
            }
            View::Health => Ok((server.status().await?, None)),
        }
    })
    .await?;
    let state = match asked {
        Err(why) => State::Missing(why),
        Ok((health, locks)) => State::Up {
            quarantine: match (health.quarantined, health.quarantine_left) {
                (false, _) => Quarantine::Out,
                (true, Some(left)) => Quarantine::For(left),
                (true, None) => Quarantine::Unknown,
            },
            entries: Some(health.entries),
            locks,
        },
    };
    Ok(Node {
        endpoint: server.endpoint(),
        kind: "lock-server",
        speaks: protocol(version),
        version,
        state,
    })
}

/// Asks one Redis node how long it stays in quarantine (as this client
/// counts it: see `--validity`) and, for the full status, its locks.
async fn look_redis(node: &RedisLocker, view: View) -> Result<Node, Failure> {
    let (state, endpoint) = look_quarantined(node, view, node.quarantine_left()).await?;
    Ok(Node {
        endpoint,
        kind: "redis",
        speaks: "Redis".to_owned(),
        version: None,
        state,
    })
}

/// Asks one database how long its lock table stays in quarantine (after
/// it was emptied, or the server started, counted with
/// `--validity`) and, for the full status, its locks.
async fn look_sql(node: &SqlLocker, kind: &'static str, view: View) -> Result<Node, Failure> {
    let (state, endpoint) = look_quarantined(node, view, node.quarantine_left()).await?;
    Ok(Node {
        endpoint,
        kind,
        speaks: node.backend().name().to_owned(),
        version: None,
        state,
    })
}

/// The state of a node whose quarantine this client counts (Redis, a
/// database): `left` first, which connects if need be, then its locks for
/// the full status; and its endpoint.
async fn look_quarantined(
    node: &dyn NetLocker,
    view: View,
    left: impl std::future::Future<Output = Result<Option<Duration>, quorum_lock::Error>>,
) -> Result<(State, String), Failure> {
    let asked = ask(node, None, WHAT, async {
        // One after the other: the first connects if need be.
        let left = left.await?;
        let locks = match view {
            View::Status => Some(node.locks().await?),
            View::Health => None,
        };
        Ok((left, locks))
    })
    .await?;
    let state = match asked {
        Err(why) => State::Missing(why),
        Ok((left, locks)) => State::Up {
            quarantine: left.map_or(Quarantine::Out, Quarantine::For),
            entries: locks.as_ref().map(|l| l.len() as u64),
            locks,
        },
    };
    Ok((state, node.endpoint()))
}

fn protocol(version: Option<u16>) -> String {
    match version {
        Some(version) => format!("protocol {version}"),
        None => "protocol ?".to_owned(),
    }
}

const HEADER: [&str; 7] = [
    "RESOURCE",
    "MODE",
    "OWNER",
    "AGE",
    "REFRESHED",
    "UID",
    "SOURCE",
];

fn rows(locks: &[LockInfo]) -> Vec<[String; 7]> {
    locks
        .iter()
        .map(|l| {
            [
                l.resource.clone(),
                mode_name(l.mode),
                l.owner.clone(),
                age(l.age()),
                format!("{} ago", age(l.refreshed.elapsed())),
                l.uid.clone(),
                l.source.clone(),
            ]
        })
        .collect()
}
