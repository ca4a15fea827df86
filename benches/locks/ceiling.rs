//! The ceiling rows of `--ceiling on`: the same TCP scenario against
//! trivial servers (the `ceiling-server` processes: our framing, encoding
//! and handshake, every request answered at once, no lock table), driven
//! by a trivial client loop (`quorum_lock::net::ceiling::TrivialClient`:
//! a lock to every server, a quorum of replies, an unlock likewise, with
//! nothing of the library in between). What our servers and client reach
//! is reported as a share of it.

use std::sync::Arc;
use std::time::Duration;

use quorum_lock::net::ceiling::TrivialClient;
use quorum_lock::LockArgs;

use crate::context::Context;
use crate::counts::Probe;
use crate::scenario::Scenario;
use crate::servers::{Kind, Servers, TOKEN};
use crate::stats::{Bounds, ClientTally, Locking, Snapshot, Summary};

/// How long a phase may wait for its quorum before the run fails.
const PHASE_TIMEOUT: Duration = Duration::from_secs(5);

fn client(cluster: Arc<TrivialClient>, index: usize, scenario: Scenario) -> Trivial {
    let name = scenario.names.of("bench/", index);
    // Fields of the sizes ours sends: a UUID, the host and pid, a source
    // location.
    let args = LockArgs {
        uid: format!("{:08x}-0000-4000-8000-{index:012x}", std::process::id()).into(),
        resources: vec![name].into(),
        owner: format!("bench-host:{}", std::process::id()).into(),
        source: "benches/locks/ceiling.rs:40:20".into(),
        quorum: scenario.nodes / 2 + 1,
    };
    Trivial {
        cluster,
        index,
        args,
    }
}

/// The trivial client's lock: a lock phase to every server, a quorum of
/// replies; its unlock likewise.
struct Trivial {
    cluster: Arc<TrivialClient>,
    index: usize,
    args: LockArgs,
}

impl Locking for Trivial {
    type Held = ();

    async fn acquire(&mut self) -> Result<(), String> {
        let phase = self
            .cluster
            .phase(self.index, &self.args, false, PHASE_TIMEOUT);
        phase.await.context("trivial lock failed")
    }

    async fn release(&mut self, (): (), _: &mut ClientTally, _: bool) -> Result<(), String> {
        let phase = self
            .cluster
            .phase(self.index, &self.args, true, PHASE_TIMEOUT);
        phase.await.context("trivial unlock failed")
    }
}

/// The ceiling of `scenario`: the trivial client on `scenario.nodes`
/// trivial servers with `threads` workers each.
pub async fn run(
    scenario: Scenario,
    bounds: Bounds,
    threads: usize,
    counts: bool,
) -> Result<Summary, String> {
    let (servers, lockers) =
        Servers::start_kind(scenario.nodes, None, Kind::Trivial { threads }).await?;
    // Only the trivial client's connections stay open.
    drop(lockers);
    let cluster = Arc::new(
        TrivialClient::connect(&servers.addrs, TOKEN, scenario.clients)
            .await
            .context("trivial client")?,
    );
    let probe = counts.then(|| Probe::start(servers.pids())).transpose()?;
    let frames = cluster.frames.clone();
    let frame_counts = || {
        use std::sync::atomic::Ordering::Relaxed;
        (frames.sent.load(Relaxed), frames.received.load(Relaxed))
    };
    let marks = std::sync::Mutex::new(Vec::new());
    let snapshot = || {
        probe.iter().for_each(Probe::mark);
        if let Ok(mut marks) = marks.lock() {
            marks.push(frame_counts());
        }
        Snapshot::now(None, servers.cpu())
    };
    let load = bounds.load(scenario.clients, scenario.hold, snapshot, |c| {
        client(cluster.clone(), c, scenario)
    });
    let mut summary = load.await?;
    if let Some(probe) = probe {
        let marks = marks.into_inner().unwrap_or_default();
        let (sent, received) = match (marks.first(), marks.last()) {
            (Some(a), Some(b)) => (b.0 - a.0, b.1 - a.1),
            _ => (0, 0),
        };
        summary.counts = Some(probe.finish(sent, received)?);
    }
    Ok(summary)
}
