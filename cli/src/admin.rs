//! `quorum-lock locks` and `quorum-lock force-unlock`: the operator's view
//! of the cluster, both with the admin token.

use std::collections::BTreeMap;
use std::io::{self, Write};
use std::time::Duration;

use futures::future::join_all;
use quorum_lock::quorum::write_quorum;
use quorum_lock::{Dsync, Error, Lease, LockArgs, LockInfo, LockMode, Timeouts};

use crate::args::{ForceUnlockArgs, LocksArgs, Output};
use crate::fail::{Failure, FAILURE, UNAVAILABLE};
use crate::fleet::{ask, refused, Fleet, Missing, ADMIN_CALL};
use crate::json;
use crate::nodes::Cluster;
use crate::plan::Kind;
use crate::words::escaped;

/// What `locks` reports when the token is not the admin token.
const LIST: &str = "list locks";

pub async fn locks(args: LocksArgs) -> Result<u8, Failure> {
    let fleet = Fleet::connect(&args.client, true, None).await?;
    let listings = list_each(&fleet).await?;
    let total = listings.len();
    let missing: Vec<&Missing> = listings
        .iter()
        .filter_map(|l| l.result.as_ref().err())
        .collect();
    let answered = total - missing.len();
    let quorum = write_quorum(total);
    let kind = fleet.kind();
    // Each node that did not answer, and why, for messages.
    let unanswered: Vec<String> = listings
        .iter()
        .filter_map(|l| {
            let why = l.result.as_ref().err()?;
            Some(format!("{}: {}", l.node, why.describe()))
        })
        .collect();
    let failure = |message: String| {
        let (code, advice) = fleet.verdict(&args.client, &missing);
        match advice {
            Some(advice) => Failure::new(code, format!("{message} ({advice})")),
            None => Failure::new(code, message),
        }
    };

    if args.per_node {
        let text = match args.output {
            Output::Text => per_node_text(&listings, kind),
            Output::Json => json::line(&json::Locks {
                format: json::FORMAT,
                kind: json::kind(kind),
                view: "per-node",
                total,
                answered,
                quorum,
                nodes: listings.iter().map(|l| l.json(true)).collect(),
                locks: json::Field::Absent,
                groups: None,
            })?,
        };
        write_out(&text)?;
        if missing.is_empty() {
            return Ok(0);
        }
        // The listing is printed, but it is not the whole cluster's: a
        // script must not take it for that.
        return Err(failure(format!(
            "only {answered} of {total} {} answered; the listing shows what they hold, not \
             what the others hold: {}",
            kind.nodes(),
            unanswered.join("; ")
        )));
    }

    let merged = (answered >= quorum).then(|| merge(&listings));
    let text = match (args.output, &merged) {
        (Output::Json, merged) => json::line(&json::Locks {
            format: json::FORMAT,
            kind: json::kind(kind),
            view: "merged",
            total,
            answered,
            quorum,
            nodes: listings.iter().map(|l| l.json(false)).collect(),
            locks: json::Field::Present(merged.as_ref().map(|locks| {
                locks
                    .iter()
                    .map(|m| json::Lock {
                        group: None,
                        resource: m.resource.clone(),
                        mode: json::mode(m.mode),
                        owner: m.owner.clone(),
                        uid: m.uid.clone(),
                        source: m.source.clone(),
                        age_ms: json::ms(m.age),
                        held_on: m.held_on.clone(),
                    })
                    .collect()
            })),
            groups: None,
        })?,
        (Output::Text, Some(merged)) => merged_text(merged, total),
        (Output::Text, None) => String::new(),
    };
    write_out(&text)?;
    if merged.is_none() {
        return Err(failure(format!(
            "cannot list locks: only {answered} of {total} {} answered but {quorum} are needed \
             for the merged view (every held lock is on a write quorum of nodes, so with fewer \
             one could be missing); {}; 'quorum-lock locks --per-node' lists what the nodes \
             that answer hold",
            kind.nodes(),
            unanswered.join("; ")
        )));
    }
    for line in &unanswered {
        crate::words::warn(&format!("not listed: {line}"));
    }
    Ok(0)
}

/// What one node listed, or why it did not.
pub struct Listing {
    pub node: String,
    /// As `Member::kind`.
    pub kind: &'static str,
    pub result: Result<Vec<LockInfo>, Missing>,
}

impl Listing {
    /// The node in `locks --output json`; `entries`: the per-node view.
    pub fn json(&self, entries: bool) -> json::Node {
        let (reachable, reason) = match &self.result {
            Ok(_) => (true, None),
            Err(Missing::Failing(why)) => (true, Some(why.clone())),
            Err(Missing::Unreachable(why)) => (false, Some(why.clone())),
        };
        let locks = match (&self.result, entries) {
            (_, false) => json::Field::Absent,
            (Ok(list), true) => {
                json::Field::Present(Some(list.iter().map(|e| entry_json(e, false)).collect()))
            }
            (Err(_), true) => json::Field::Present(None),
        };
        json::Node {
            group: None,
            node: self.node.clone(),
            kind: self.kind,
            reachable,
            answered: self.result.is_ok(),
            reason,
            locks,
        }
    }
}

/// One entry as JSON; `refreshed`: with the time since its last refresh.
pub fn entry_json(e: &LockInfo, refreshed: bool) -> json::Entry {
    json::Entry {
        resource: e.resource.clone(),
        mode: json::mode(e.mode),
        owner: e.owner.clone(),
        uid: e.uid.clone(),
        source: e.source.clone(),
        age_ms: json::ms(e.age()),
        refreshed_ms_ago: refreshed.then(|| json::ms(e.refreshed.elapsed())),
    }
}

/// Asks every node at once for its entries.
pub async fn list_each(fleet: &Fleet) -> Result<Vec<Listing>, Failure> {
    let answers = join_all(fleet.members.iter().map(|member| {
        let locker = member.locker();
        ask(locker, member.server(), LIST, locker.locks())
    }))
    .await;
    let mut listings = Vec::with_capacity(answers.len());
    for (member, answer) in fleet.members.iter().zip(answers) {
        listings.push(Listing {
            node: member.locker().endpoint(),
            kind: member.kind(),
            result: answer?,
        });
    }
    Ok(listings)
}

/// One lock across the nodes: the entries of one uid on one resource.
pub struct Merged {
    pub resource: String,
    pub uid: String,
    pub owner: String,
    pub source: String,
    pub mode: LockMode,
    /// Of its oldest entry.
    pub age: Duration,
    /// The nodes holding an entry, in the order given.
    pub held_on: Vec<String>,
}

/// The entries of the nodes that answered, merged by resource and uid,
/// sorted by resource, then oldest first (as `Dsync::locks`).
pub fn merge(listings: &[Listing]) -> Vec<Merged> {
    let mut merged: BTreeMap<(String, String), Merged> = BTreeMap::new();
    for listing in listings {
        let Ok(entries) = &listing.result else {
            continue;
        };
        for e in entries {
            let age = e.age();
            let m = merged
                .entry((e.resource.clone(), e.uid.clone()))
                .or_insert_with(|| Merged {
                    resource: e.resource.clone(),
                    uid: e.uid.clone(),
                    owner: e.owner.clone(),
                    source: e.source.clone(),
                    mode: e.mode,
                    age,
                    held_on: Vec::new(),
                });
            m.age = m.age.max(age);
            if !m.held_on.contains(&listing.node) {
                m.held_on.push(listing.node.clone());
            }
        }
    }
    let mut out: Vec<Merged> = merged.into_values().collect();
    out.sort_by(|a, b| a.resource.cmp(&b.resource).then(b.age.cmp(&a.age)));
    out
}

fn merged_text(locks: &[Merged], total: usize) -> String {
    let rows: Vec<[String; 7]> = locks
        .iter()
        .map(|l| {
            [
                l.resource.clone(),
                mode_name(l.mode),
                l.owner.clone(),
                age(l.age),
                format!("{}/{total}", l.held_on.len()),
                l.uid.clone(),
                l.source.clone(),
            ]
        })
        .collect();
    if rows.is_empty() {
        return "no locks held\n".to_owned();
    }
    table(&HEADER, &rows, "")
}

/// `locks --per-node`: every node's own entries, one row each, in the
/// order the nodes were given; then one line per node that did not
/// answer, with why.
fn per_node_text(listings: &[Listing], kind: Kind) -> String {
    let mut rows: Vec<[String; 7]> = Vec::new();
    for listing in listings {
        let Ok(entries) = &listing.result else {
            continue;
        };
        for e in entries {
            rows.push([
                listing.node.clone(),
                e.resource.clone(),
                mode_name(e.mode),
                e.owner.clone(),
                age(e.age()),
                e.uid.clone(),
                e.source.clone(),
            ]);
        }
    }
    let total = listings.len();
    let answered = listings.iter().filter(|l| l.result.is_ok()).count();
    let mut out = if !rows.is_empty() {
        table(&PER_NODE_HEADER, &rows, "")
    } else if answered == total {
        "no locks held\n".to_owned()
    } else if answered > 0 {
        format!(
            "no locks held on the {answered} of {total} {} that answered\n",
            kind.nodes()
        )
    } else {
        String::new()
    };
    for listing in listings {
        if let Err(why) = &listing.result {
            let line = format!("{}  {}", listing.node, why.describe());
            out.push_str(&format!("{}\n", escaped(&line)));
        }
    }
    out
}

/// Writes `text` to stdout at once. A reader that stopped early (`| head`)
/// is not our failure.
pub fn write_out(text: &str) -> Result<(), Failure> {
    let mut out = io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(err) if err.kind() != io::ErrorKind::BrokenPipe => Err(Failure::new(
            FAILURE,
            format!("cannot write the listing: {err}"),
        )),
        _ => Ok(()),
    }
}

pub async fn force_unlock(args: ForceUnlockArgs) -> Result<u8, Failure> {
    let cluster = Cluster::connect(&args.client, true, write_quorum, None).await?;
    if let Some(uid) = &args.uid {
        return force_uid(&cluster, uid, None).await.map(|_| 0);
    }
    let names = checked_names(&args.names)?;
    force_names(&cluster, &names, None, &[]).await.map(|_| 0)
}

/// The names of `force-unlock`, each once, in the order given. Each name
/// is forced on its own, to say which ones were held; all are checked
/// first, so that a bad one forces none.
pub fn checked_names(given: &[String]) -> Result<Vec<String>, Failure> {
    let mut names: Vec<String> = Vec::with_capacity(given.len());
    for name in given {
        crate::target::refuse_node_url(name)?;
        if !names.contains(name) {
            names.push(name.clone());
        }
    }
    let check = LockArgs {
        uid: "".into(),
        resources: names.clone().into(),
        owner: "".into(),
        source: "".into(),
        quorum: 0,
    };
    check
        .validate_resources()
        .map_err(|e| Failure::usage(e.to_string()))?;
    Ok(names)
}

/// Forces each of `names` open on `cluster`; `group` names the cluster's
/// group in each line when `--nodes` has several. The names it held come
/// back. Of `everywhere` (names forced in every group), one found free is
/// not warned of here: the caller warns once if no group held it.
pub async fn force_names(
    cluster: &Cluster,
    names: &[String],
    group: Option<&str>,
    everywhere: &[String],
) -> Result<Vec<String>, Failure> {
    let in_group = group.map_or_else(String::new, |id| format!(" in group '{id}'"));
    let ds = coordinator(cluster)?;
    let total = cluster.lockers.len();
    let nodes = cluster.kind.nodes();
    let mut forced: Vec<String> = Vec::new();
    let mut held: Vec<String> = Vec::new();
    let mut done: Vec<String> = Vec::new();
    for given in names {
        // As given, but it is printed: escaped like everything else.
        let name = escaped(given).into_owned();
        let result = match ds.force_unlock_counted([given.as_str()]).await {
            Ok(result) => result,
            Err(err @ Error::InvalidArgument(_)) => return Err(Failure::usage(err.to_string())),
            Err(err) => {
                let mut failure = diagnose(cluster, err, &format!("force {name} open")).await;
                if !done.is_empty() {
                    failure
                        .message
                        .push_str(&format!("; already done, before it: {}", done.join(", ")));
                }
                if !forced.is_empty() {
                    holder_warning(cluster, &forced.join(", "));
                }
                return Err(failure);
            }
        };
        done.push(name.clone());
        // Ignored write errors: the work is done, whoever reads stdout.
        if result.removed_on == 0 {
            let _ = writeln!(
                io::stdout(),
                "not held: {name}{in_group} (confirmed by {} of {total} {nodes})",
                result.confirmed
            );
            if !everywhere.contains(given) {
                crate::words::warn(&format!(
                    "nothing was held on {name}: none of the {} {nodes} that \
                     confirmed had an entry on it (a mistyped name? 'quorum-lock locks' lists \
                     the names held)",
                    result.confirmed
                ));
            }
        } else {
            let _ = writeln!(
                io::stdout(),
                "forced open: {name}{in_group} (held on {}, confirmed by {} of {total} {nodes})",
                result.removed_on,
                result.confirmed
            );
            forced.push(name);
            held.push(given.clone());
        }
    }
    if !forced.is_empty() {
        holder_warning(cluster, &forced.join(", "));
    }
    Ok(held)
}

/// Warns that whoever held `what` still runs: a holder learns that its
/// lock is gone only at its next refresh, and nothing protects its work
/// from the moment it was forced.
pub fn holder_warning(cluster: &Cluster, what: &str) {
    let interval = match cluster.lockers.iter().filter_map(|l| l.validity()).min() {
        Some(validity) if cluster.kind == Kind::LockServers => format!(
            "{} with these servers' {} validity",
            age(validity / 6),
            age(validity)
        ),
        _ => "10s at the default --validity of 60s".to_owned(),
    };
    crate::words::warn(&format!(
        "whoever held {what} keeps running until its next refresh, up to \
         its refresh interval from now (validity/6 for 'quorum-lock run': {interval}), and \
         learns of the loss only then; its work is not protected by the lock from now on"
    ));
}

/// `force-unlock --uid`: drops one acquisition's entries on every node,
/// whatever names they are on. Needs a write quorum to confirm, as forcing
/// by name does, because a holder could otherwise keep its lock. With
/// `group` (one of several), the lines name it, and a group that held
/// nothing is not warned about: the uid's lock is in one group. Returns
/// how many entries were removed.
pub async fn force_uid(
    cluster: &Cluster,
    uid: &str,
    group: Option<&str>,
) -> Result<usize, Failure> {
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
        crate::words::warn(&format!("not confirmed: {line}"));
    }
    let nodes = cluster.kind.nodes();
    // As given, but it is printed: escaped like everything else.
    let uid = escaped(uid);
    let in_group = group.map_or_else(String::new, |id| format!(" in group '{id}'"));
    if removed == 0 {
        let _ = writeln!(
            io::stdout(),
            "not held: uid {uid}{in_group} (confirmed by {answered} of {total} {nodes})"
        );
        if group.is_some() {
            return Ok(0);
        }
        crate::words::warn(&format!(
            "nothing was held by uid {uid}: none of the {answered} {nodes} \
             that confirmed had an entry of it (released, expired or forced before?)"
        ));
    } else {
        let _ = writeln!(
            io::stdout(),
            "forced open: uid {uid}{in_group} (held on {removed}, confirmed by {answered} of {total} {nodes})"
        );
        holder_warning(cluster, &format!("the lock of uid {uid}"));
    }
    Ok(removed)
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
    // The error names each locker that did not answer and why; the
    // connections that are down only add to that when it could not.
    let listed =
        matches!(&err, Error::QuorumUnavailable { unreachable, .. } if !unreachable.is_empty());
    let down = cluster.down();
    let mut message = format!("cannot {what}: {err}");
    if !listed && !down.is_empty() {
        message.push_str(&format!(" (unreachable: {})", down.join(", ")));
    }
    Failure::new(UNAVAILABLE, message)
}

const HEADER: [&str; 7] = ["RESOURCE", "MODE", "OWNER", "AGE", "NODES", "UID", "SOURCE"];
const PER_NODE_HEADER: [&str; 7] = ["NODE", "RESOURCE", "MODE", "OWNER", "AGE", "UID", "SOURCE"];

pub fn mode_name(mode: LockMode) -> String {
    match mode {
        LockMode::Read => "read".to_owned(),
        LockMode::Write => "write".to_owned(),
    }
}

/// `header` and `rows` in aligned columns, each line after `indent`. The
/// last column is not padded. Every cell is [`escaped`]: the rows hold what
/// the nodes listed, which must not break a row or drive the terminal.
pub fn table<const N: usize>(header: &[&str; N], rows: &[[String; N]], indent: &str) -> String {
    let rows: Vec<[String; N]> = rows
        .iter()
        .map(|row| row.clone().map(|cell| escaped(&cell).into_owned()))
        .collect();
    let rows = rows.as_slice();
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
            out.push_str(cell);
            if i + 1 < N {
                // Padded by hand (a format width above 65,535 panics), to
                // at most 256 characters: a wider cell pushes the rest of
                // its row right rather than widen every row.
                let pad = width.min(256).saturating_sub(cell.chars().count()) + 2;
                out.extend(std::iter::repeat_n(' ', pad));
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
