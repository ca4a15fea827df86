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
use tokio::time::{timeout_at, Instant};

use crate::counts::Probe;
use crate::scenario::{Names, Scenario};
use crate::servers::{Kind, Servers, TOKEN};
use crate::stats::{drive, process_cpu, summarize, ClientTally, Snapshot, Summary, Window};

/// How long a phase may wait for its quorum before the run fails.
const PHASE_TIMEOUT: Duration = Duration::from_secs(5);

async fn client(
    cluster: Arc<TrivialClient>,
    index: usize,
    scenario: Scenario,
    window: Window,
) -> Result<ClientTally, String> {
    let mut tally = ClientTally::new();
    let name = match scenario.names {
        Names::Own => format!("bench/client-{index}"),
        Names::Shared => "bench/shared".to_owned(),
    };
    // Fields of the sizes ours sends: a UUID, the host and pid, a source
    // location.
    let args = LockArgs {
        uid: format!("{:08x}-0000-4000-8000-{index:012x}", std::process::id()).into(),
        resources: vec![name].into(),
        owner: format!("bench-host:{}", std::process::id()).into(),
        source: "benches/locks/ceiling.rs:40:20".into(),
        quorum: scenario.nodes / 2 + 1,
    };
    let mut done = 0u64;
    loop {
        let asked = Instant::now();
        if asked >= window.end {
            break;
        }
        if done >= window.max_per_client {
            tally.hit_count_bound = true;
            break;
        }
        match timeout_at(
            window.end,
            cluster.phase(index, &args, false, PHASE_TIMEOUT),
        )
        .await
        {
            Ok(Ok(())) => {}
            Ok(Err(err)) => return Err(format!("trivial lock failed: {err}")),
            Err(_) => {
                tally.unfinished = Some(asked.elapsed());
                break;
            }
        }
        if asked >= window.start {
            tally.record(asked.elapsed());
        }
        done += 1;
        scenario.hold.run().await;
        cluster
            .phase(index, &args, true, PHASE_TIMEOUT)
            .await
            .map_err(|e| format!("trivial unlock failed: {e}"))?;
    }
    tally.finished_at = Instant::now();
    Ok(tally)
}

/// The ceiling of `scenario`: the trivial client on `scenario.nodes`
/// trivial servers with `threads` workers each.
pub async fn run(
    scenario: Scenario,
    warmup: Duration,
    seconds: Duration,
    max_locks: u64,
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
            .map_err(|e| format!("trivial client: {e}"))?,
    );
    let probe = if counts {
        Some(Probe::start(servers.pids())?)
    } else {
        None
    };
    let start = Instant::now() + warmup;
    let window = Window {
        start,
        end: start + seconds,
        max_per_client: max_locks.div_ceil(scenario.clients as u64),
    };
    let frames = cluster.frames.clone();
    let frame_counts = || {
        use std::sync::atomic::Ordering::Relaxed;
        (frames.sent.load(Relaxed), frames.received.load(Relaxed))
    };
    let marks = std::sync::Mutex::new(Vec::new());
    let snapshot = || {
        if let Some(probe) = &probe {
            probe.mark();
        }
        if let Ok(mut marks) = marks.lock() {
            marks.push(frame_counts());
        }
        Snapshot {
            at: Instant::now(),
            cpu: process_cpu(),
            calls: None,
            server_cpu: servers.cpu(),
        }
    };
    let (tallies, first, last) = drive(scenario.clients, window, snapshot, |c| {
        client(cluster.clone(), c, scenario, window)
    })
    .await?;
    let mut summary = summarize(window, &tallies, &first, &last);
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
