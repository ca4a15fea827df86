//! `quorum-lock locks` and `quorum-lock force-unlock`: the operator's view
//! of the cluster, both with the admin token.

use std::io::{self, Write};
use std::time::Duration;

use quorum_lock::quorum::write_quorum;
use quorum_lock::{ClusterLock, Dsync, Error, Lease, LockMode, Timeouts};

use crate::args::{ForceUnlockArgs, LocksArgs};
use crate::fail::{Failure, AUTH, UNAVAILABLE};
use crate::nodes::Cluster;

pub async fn locks(args: LocksArgs) -> Result<u8, Failure> {
    let cluster = Cluster::connect(&args.client, true, write_quorum).await?;
    let ds = coordinator(&cluster)?;
    let locks = match ds.locks().await {
        Ok(locks) => locks,
        Err(err) => return Err(diagnose(&cluster, err, "list locks").await),
    };
    let total = cluster.lockers.len();
    match print_table(&locks, total) {
        // A reader that stopped early (`| head`) is not our failure.
        Err(err) if err.kind() != io::ErrorKind::BrokenPipe => Err(Failure::new(
            crate::fail::FAILURE,
            format!("cannot write the listing: {err}"),
        )),
        _ => Ok(0),
    }
}

pub async fn force_unlock(args: ForceUnlockArgs) -> Result<u8, Failure> {
    let cluster = Cluster::connect(&args.client, true, write_quorum).await?;
    let ds = coordinator(&cluster)?;
    match ds.force_unlock(args.names.iter().cloned()).await {
        Ok(confirmed) => {
            // Ignored write errors: the work is done, whoever reads stdout.
            let _ = writeln!(
                io::stdout(),
                "forced open: {} (confirmed by {confirmed} of {} servers)",
                args.names.join(", "),
                cluster.lockers.len()
            );
            Ok(0)
        }
        Err(err @ Error::InvalidArgument(_)) => Err(Failure::usage(err.to_string())),
        Err(err) => Err(diagnose(&cluster, err, "force locks open").await),
    }
}

/// A coordinator for listing and forcing. They take no locks, so the lease
/// only has to be one the servers accept: a `Dsync` refuses a lease longer
/// than the validity a server announced, and servers may run with a short
/// `--validity`.
fn coordinator(cluster: &Cluster) -> Result<Dsync, Failure> {
    let mut builder = Dsync::builder(cluster.lockers.clone());
    if let Some(validity) = cluster.lockers.iter().filter_map(|l| l.validity()).min() {
        let lease = Lease {
            validity,
            refresh_interval: validity / 6,
            safety_margin: validity / 6,
        };
        let timeouts = Timeouts {
            acquire: Timeouts::default().acquire.min(lease.trusted_for() / 2),
            refresh: Timeouts::default().refresh.min(lease.trusted_for() / 2),
            ..Timeouts::default()
        };
        builder = builder.lease(lease).timeouts(timeouts);
    }
    Ok(builder.build()?)
}

/// Names the unreachable servers when too few answered; other errors
/// (such as a token that is not the admin token) speak for themselves.
async fn diagnose(cluster: &Cluster, err: Error, what: &str) -> Failure {
    if !matches!(err, Error::QuorumUnavailable { .. }) {
        return match err {
            Error::Unauthorized { endpoint, reason } => Failure::new(
                AUTH,
                format!(
                    "lock server {endpoint} refused to {what}: {reason}; \
                     pass --admin-token-file FILE or set QUORUM_LOCK_ADMIN_TOKEN"
                ),
            ),
            err => Failure::from(err),
        };
    }
    let down = cluster.down();
    let mut message = format!("cannot {what}: {err}");
    if !down.is_empty() {
        message.push_str(&format!(" (unreachable: {})", down.join(", ")));
    }
    Failure::new(UNAVAILABLE, message)
}

const HEADER: [&str; 7] = ["RESOURCE", "MODE", "OWNER", "AGE", "NODES", "UID", "SOURCE"];

fn print_table(locks: &[ClusterLock], total: usize) -> io::Result<()> {
    let mut out = io::stdout().lock();
    if locks.is_empty() {
        writeln!(out, "no locks held")?;
        return out.flush();
    }
    let rows: Vec<[String; 7]> = locks
        .iter()
        .map(|l| {
            [
                l.resource.clone(),
                match l.mode {
                    LockMode::Read => "read".to_owned(),
                    LockMode::Write => "write".to_owned(),
                },
                l.owner.clone(),
                age(l.age),
                format!("{}/{total}", l.nodes),
                l.uid.clone(),
                l.source.clone(),
            ]
        })
        .collect();
    let mut widths = HEADER.map(str::len);
    for row in &rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let header = HEADER.map(str::to_owned);
    for row in std::iter::once(&header).chain(&rows) {
        let mut line = String::new();
        for (i, (cell, width)) in row.iter().zip(widths).enumerate() {
            if i + 1 == row.len() {
                line.push_str(cell);
            } else {
                line.push_str(&format!("{cell:<width$}  "));
            }
        }
        writeln!(out, "{line}")?;
    }
    out.flush()
}

/// Whole seconds once past a second ("1m 5s"), milliseconds below.
fn age(age: Duration) -> String {
    if age < Duration::from_secs(1) {
        format!("{}ms", age.as_millis())
    } else {
        humantime::format_duration(Duration::from_secs(age.as_secs())).to_string()
    }
}
