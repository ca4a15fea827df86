//! `quorum-lock status`: what each lock server says about itself and the
//! locks it holds, once or again and again with `--watch`. Needs the admin
//! token, as `locks` does.

use std::fmt::Write as _;
use std::io::{self, IsTerminal, Write};
use std::time::{Duration, SystemTime};

use futures::future::join_all;
use quorum_lock::net::{RemoteLocker, ServerHealth};
use quorum_lock::{Error, LockInfo, NetLocker};

use crate::admin::{age, mode_name, refused, table, ADMIN_CALL};
use crate::args::{ClientArgs, StatusArgs};
use crate::fail::{Failure, FAILURE};
use crate::nodes::{connect_servers, parse_nodes, remote_config, Down, Kind};
use crate::signals::Signals;

/// Time between two snapshots of `--watch` unless `--interval` says.
const INTERVAL: Duration = Duration::from_secs(2);

/// Moves the cursor home and clears the screen (ANSI).
const CLEAR: &str = "\x1b[H\x1b[2J";

/// What `locks` reports when the token is not the admin token; the same
/// words here.
const WHAT: &str = "list locks";

pub async fn status(args: StatusArgs) -> Result<u8, Failure> {
    let nodes = match (Kind::of(&args.client)?, &args.client.nodes) {
        (Kind::LockServers, Some(nodes)) => nodes,
        _ => {
            return Err(Failure::usage(
                "status shows lock servers (--nodes); for Redis nodes, \
                 'quorum-lock locks --per-node' lists each node's locks",
            ))
        }
    };
    let nodes = parse_nodes(nodes)?;
    let config = remote_config(&args.client, true)?;
    let servers = connect_servers(&nodes, &config, true).await?;
    if !args.watch {
        let snapshot = Snapshot::take(&servers).await?;
        write_out(&snapshot.render())?;
        return snapshot.verdict(&servers, &args.client);
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
            snapshot = Snapshot::take(&servers) => snapshot?,
            _ = signals.recv() => return Ok(0),
        };
        let mut text = String::new();
        let now = humantime::format_rfc3339_seconds(SystemTime::now());
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
        text.push_str(&snapshot.render());
        if !write_out(&text)? {
            // Nobody reads any more (`| head`): not our failure.
            return Ok(0);
        }
        shown += 1;
        if args.count.is_some_and(|count| shown >= count) {
            return snapshot.verdict(&servers, &args.client);
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

/// One look at every server, in the order given.
struct Snapshot {
    nodes: Vec<Node>,
}

/// What one server said, or why it said nothing.
struct Node {
    endpoint: String,
    state: State,
}

enum State {
    /// No connection: why the latest attempt failed.
    Unreachable(String),
    /// Connected, but a call failed or did not answer in time.
    Failed { version: Option<u16>, why: String },
    Up {
        version: Option<u16>,
        health: ServerHealth,
        locks: Vec<LockInfo>,
    },
}

impl Snapshot {
    /// Asks every server at once for its status and its locks. A server
    /// that refuses the token for listing ends the command (exit 77), as
    /// for `locks`: it is not the admin token.
    async fn take(servers: &[RemoteLocker]) -> Result<Snapshot, Failure> {
        let nodes = join_all(servers.iter().map(look)).await;
        let mut out = Vec::with_capacity(nodes.len());
        for node in nodes {
            match node {
                Ok(node) => out.push(node),
                Err((endpoint, reason)) => return Err(refused(&endpoint, &reason, WHAT)),
            }
        }
        Ok(Snapshot { nodes: out })
    }

    /// 0 when any server answered; when none did, 69 (as `locks`), or 77
    /// when servers refused TLS over certificates, with the flag to change.
    fn verdict(&self, servers: &[RemoteLocker], args: &ClientArgs) -> Result<u8, Failure> {
        if self
            .nodes
            .iter()
            .any(|n| matches!(n.state, State::Up { .. }))
        {
            return Ok(0);
        }
        let down: Vec<&str> = self.nodes.iter().map(|n| n.endpoint.as_str()).collect();
        let mut message = format!(
            "no lock server answered; unreachable or failing: {}",
            down.join(", ")
        );
        let unreachable = Down::of(servers);
        if let Some(advice) = unreachable.advice(args) {
            message.push_str(&format!(" ({advice})"));
        }
        Err(Failure::new(unreachable.code(), message))
    }

    /// One line per server, each followed by a table of its locks.
    fn render(&self) -> String {
        let width = self
            .nodes
            .iter()
            .map(|n| n.endpoint.chars().count())
            .max()
            .unwrap_or(0);
        let mut out = String::new();
        for node in &self.nodes {
            let endpoint = &node.endpoint;
            let _ = writeln!(out, "{endpoint:<width$}  {}", node.summary());
            if let State::Up { locks, .. } = &node.state {
                if !locks.is_empty() {
                    out.push_str(&table(&HEADER, &rows(locks), "  "));
                }
            }
        }
        out
    }
}

impl Node {
    fn summary(&self) -> String {
        match &self.state {
            State::Unreachable(why) => format!("unreachable: {why}"),
            State::Failed { version, why } => {
                format!("reachable, {}, but failing: {why}", protocol(*version))
            }
            State::Up {
                version, health, ..
            } => {
                let quarantine = match (health.quarantined, health.quarantine_left) {
                    (false, _) => "not quarantined".to_owned(),
                    (true, Some(left)) => format!("quarantined, {} left", age(left)),
                    (true, None) => "quarantined, time left unknown (protocol before 4)".to_owned(),
                };
                let entries = match health.entries {
                    1 => "1 entry".to_owned(),
                    n => format!("{n} entries"),
                };
                format!("reachable, {}, {quarantine}, {entries}", protocol(*version))
            }
        }
    }
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

/// Asks one server; `Err` with its endpoint and reason when it refused our
/// token for listing.
async fn look(server: &RemoteLocker) -> Result<Node, (String, String)> {
    let endpoint = server.endpoint();
    if !server.is_online() {
        let why = server
            .connect_error()
            .map_or_else(|| "not connected".to_owned(), |e| short(&e));
        return Ok(Node {
            endpoint,
            state: State::Unreachable(why),
        });
    }
    let version = server.protocol_version();
    let asked = tokio::time::timeout(ADMIN_CALL, async {
        tokio::join!(server.status(), server.locks())
    })
    .await;
    let state = match asked {
        Err(_) => State::Failed {
            version,
            why: format!("no answer within {ADMIN_CALL:?}"),
        },
        Ok((health, locks)) => match (health, locks) {
            (_, Err(Error::Unauthorized { reason, .. }))
            | (Err(Error::Unauthorized { reason, .. }), _) => return Err((endpoint, reason)),
            (Ok(health), Ok(locks)) => State::Up {
                version,
                health,
                locks,
            },
            (Err(err), _) | (_, Err(err)) if !server.is_online() => State::Unreachable(short(&err)),
            (Err(err), _) | (_, Err(err)) => State::Failed {
                version,
                why: short(&err),
            },
        },
    };
    Ok(Node { endpoint, state })
}

/// An error without the endpoint, which the line already names.
fn short(err: &Error) -> String {
    crate::nodes::why(err)
}
