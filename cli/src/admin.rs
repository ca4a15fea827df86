//! `quorum-lock locks` and `quorum-lock force-unlock`: the operator's view
//! of the cluster, both with the admin token.

use std::io::{self, Write};
use std::time::Duration;

use futures::future::join_all;
use quorum_lock::quorum::write_quorum;
use quorum_lock::{ClusterLock, Dsync, Error, Lease, LockArgs, LockMode, Timeouts};

use crate::args::{ForceUnlockArgs, LocksArgs};
use crate::fail::{Failure, AUTH, UNAVAILABLE};
use crate::nodes::{Cluster, Kind};

pub async fn locks(args: LocksArgs) -> Result<u8, Failure> {
    let cluster = Cluster::connect(&args.client, true, write_quorum, None).await?;
    if args.per_node {
        return per_node(&cluster).await;
    }
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
    let cluster = Cluster::connect(&args.client, true, write_quorum, None).await?;
    if let Some(uid) = &args.uid {
        return force_uid(&cluster, uid).await;
    }
    let ds = coordinator(&cluster)?;
    match ds.force_unlock(args.names.iter().cloned()).await {
        Ok(confirmed) => {
            // Ignored write errors: the work is done, whoever reads stdout.
            let _ = writeln!(
                io::stdout(),
                "forced open: {} (confirmed by {confirmed} of {} {})",
                args.names.join(", "),
                cluster.lockers.len(),
                match cluster.kind {
                    Kind::LockServers => "servers",
                    Kind::Redis => "Redis nodes",
                }
            );
            Ok(0)
        }
        Err(err @ Error::InvalidArgument(_)) => Err(Failure::usage(err.to_string())),
        Err(err) => Err(diagnose(&cluster, err, "force locks open").await),
    }
}

/// How long each node may take to list or to force a lock open.
pub const ADMIN_CALL: Duration = Duration::from_secs(5);

/// `locks --per-node`: every node's own entries, one row each, in the
/// order the nodes were given. Nodes that cannot list are named on stderr;
/// fewer than a write quorum answering is a failure, as for the merged view.
async fn per_node(cluster: &Cluster) -> Result<u8, Failure> {
    let listings = join_all(
        cluster
            .lockers
            .iter()
            .map(|l| tokio::time::timeout(ADMIN_CALL, l.locks())),
    )
    .await;
    let mut rows: Vec<[String; 7]> = Vec::new();
    let mut failed: Vec<String> = Vec::new();
    let mut refused = None;
    for (locker, listing) in cluster.lockers.iter().zip(listings) {
        let node = locker.endpoint();
        let entries = match listing {
            Ok(Ok(entries)) => entries,
            Ok(Err(err)) => {
                if let Error::Unauthorized { .. } = err {
                    refused.get_or_insert(err.clone());
                }
                failed.push(format!("{node}: {err}"));
                continue;
            }
            Err(_) => {
                failed.push(format!("{node}: did not answer within {ADMIN_CALL:?}"));
                continue;
            }
        };
        for e in entries {
            rows.push([
                node.clone(),
                e.resource.clone(),
                mode_name(e.mode),
                e.owner.clone(),
                age(e.age()),
                e.uid.clone(),
                e.source.clone(),
            ]);
        }
    }
    let total = cluster.lockers.len();
    let answered = total - failed.len();
    let quorum = write_quorum(total);
    if answered < quorum {
        if let Some(err) = refused {
            return Err(diagnose(cluster, err, "list locks").await);
        }
        return Err(Failure::new(
            UNAVAILABLE,
            format!(
                "cannot list locks: only {answered} of {total} {} answered, {quorum} needed; {}",
                cluster.kind.nodes(),
                failed.join("; ")
            ),
        ));
    }
    for line in &failed {
        eprintln!("quorum-lock: warning: not listed: {line}");
    }
    match print_rows(&PER_NODE_HEADER, &rows) {
        Err(err) if err.kind() != io::ErrorKind::BrokenPipe => Err(Failure::new(
            crate::fail::FAILURE,
            format!("cannot write the listing: {err}"),
        )),
        _ => Ok(0),
    }
}

/// `force-unlock --uid`: drops one acquisition's entries on every node,
/// whatever names they are on. Needs a write quorum to confirm, as forcing
/// by name does, because a holder could otherwise keep its lock.
async fn force_uid(cluster: &Cluster, uid: &str) -> Result<u8, Failure> {
    if uid.trim().is_empty() {
        return Err(Failure::usage(
            "--uid is empty; pass the UID column of 'quorum-lock locks'",
        ));
    }
    let args = LockArgs {
        uid: uid.into(),
        resources: Vec::new().into(),
        owner: "quorum-lock force-unlock".into(),
        source: "quorum-lock force-unlock --uid".into(),
        quorum: write_quorum(cluster.lockers.len()),
    };
    let results = join_all(
        cluster
            .lockers
            .iter()
            .map(|l| tokio::time::timeout(ADMIN_CALL, l.force_unlock(&args))),
    )
    .await;
    let mut removed = 0;
    let mut failed: Vec<String> = Vec::new();
    let mut permanent = None;
    for (locker, result) in cluster.lockers.iter().zip(results) {
        match result {
            Ok(Ok(held)) => removed += usize::from(held),
            Ok(Err(err)) => {
                if !err.is_retryable() {
                    permanent.get_or_insert(err.clone());
                }
                failed.push(format!("{}: {err}", locker.endpoint()));
            }
            Err(_) => failed.push(format!(
                "{}: did not answer within {ADMIN_CALL:?}",
                locker.endpoint()
            )),
        }
    }
    let total = cluster.lockers.len();
    let answered = total - failed.len();
    if answered < args.quorum {
        if let Some(err @ Error::InvalidArgument(_)) = permanent {
            return Err(Failure::usage(err.to_string()));
        }
        if let Some(err) = permanent {
            return Err(diagnose(cluster, err, "force locks open").await);
        }
        return Err(Failure::new(
            UNAVAILABLE,
            format!(
                "cannot force lock {uid} open: only {answered} of {total} {} confirmed, {} needed; {}",
                cluster.kind.nodes(),
                args.quorum,
                failed.join("; ")
            ),
        ));
    }
    for line in &failed {
        eprintln!("quorum-lock: warning: not confirmed: {line}");
    }
    let _ = writeln!(
        io::stdout(),
        "forced open: uid {uid} (held on {removed}, confirmed by {answered} of {total} {})",
        cluster.kind.nodes()
    );
    Ok(0)
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
            Error::Unauthorized { endpoint, reason } => refused(&endpoint, &reason, what),
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

/// A server that answered, but refused `what` to our token: it is not the
/// admin token.
pub fn refused(endpoint: &str, reason: &str, what: &str) -> Failure {
    Failure::new(
        AUTH,
        format!(
            "lock server {endpoint} refused to {what}: {reason}; \
             pass --admin-token-file FILE or set QUORUM_LOCK_ADMIN_TOKEN"
        ),
    )
}

const HEADER: [&str; 7] = ["RESOURCE", "MODE", "OWNER", "AGE", "NODES", "UID", "SOURCE"];
const PER_NODE_HEADER: [&str; 7] = ["NODE", "RESOURCE", "MODE", "OWNER", "AGE", "UID", "SOURCE"];

pub fn mode_name(mode: LockMode) -> String {
    match mode {
        LockMode::Read => "read".to_owned(),
        LockMode::Write => "write".to_owned(),
    }
}

fn print_table(locks: &[ClusterLock], total: usize) -> io::Result<()> {
    let rows: Vec<[String; 7]> = locks
        .iter()
        .map(|l| {
            [
                l.resource.clone(),
                mode_name(l.mode),
                l.owner.clone(),
                age(l.age),
                format!("{}/{total}", l.nodes),
                l.uid.clone(),
                l.source.clone(),
            ]
        })
        .collect();
    print_rows(&HEADER, &rows)
}

/// The rows under `header` in aligned columns, or "no locks held".
fn print_rows(header: &[&str; 7], rows: &[[String; 7]]) -> io::Result<()> {
    let mut out = io::stdout().lock();
    if rows.is_empty() {
        writeln!(out, "no locks held")?;
        return out.flush();
    }
    out.write_all(table(header, rows, "").as_bytes())?;
    out.flush()
}

/// `header` and `rows` in aligned columns, each line after `indent`. The
/// last column is not padded.
pub fn table<const N: usize>(header: &[&str; N], rows: &[[String; N]], indent: &str) -> String {
    let mut widths = header.map(|h| h.chars().count());
    for row in rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let header = header.map(str::to_owned);
    let mut out = String::new();
    for row in std::iter::once(&header).chain(rows) {
        out.push_str(indent);
        for (i, (cell, width)) in row.iter().zip(widths).enumerate() {
            if i + 1 == N {
                out.push_str(cell);
            } else {
                out.push_str(&format!("{cell:<width$}  "));
            }
        }
        out.push('\n');
    }
    out
}

/// Whole seconds once past a second ("1m 5s"), milliseconds below.
pub fn age(age: Duration) -> String {
    if age < Duration::from_secs(1) {
        format!("{}ms", age.as_millis())
    } else {
        humantime::format_duration(Duration::from_secs(age.as_secs())).to_string()
    }
}
