//! `locks` and `force-unlock` over a `--nodes` of several groups: each
//! group is a cluster of its own, with its own quorum, and a name lives in
//! one of them (plan.rs places it). One group goes to admin.rs as before,
//! so that its output stays what it was.

use futures::future::join_all;
use quorum_lock::quorum::write_quorum;

use crate::admin::{
    self, age, force_names, force_uid, list_each, merge, mode_name, table, write_out, Listing,
};
use crate::args::{ForceUnlockArgs, LocksArgs, Output};
use crate::fail::Failure;
use crate::fleet::{Fleet, Missing};
use crate::json;
use crate::nodes::Cluster;
use crate::plan::{self, Group, Kind};
use crate::words::escaped;

/// `locks`: every group listed at once, each lock once, with its group.
pub async fn locks(args: LocksArgs) -> Result<u8, Failure> {
    let groups = plan::groups(&args.client)?;
    if groups.len() == 1 {
        return admin::locks(args).await;
    }
    let looks = join_all(groups.into_iter().map(|group| async move {
        let fleet = Fleet::connect(&group.client, true, None)
            .await
            .map_err(|f| group.named(f))?;
        let listings = list_each(&fleet).await.map_err(|f| group.named(f))?;
        Ok::<_, Failure>(Listed {
            group,
            fleet,
            listings,
        })
    }))
    .await;
    let listed: Vec<Listed> = looks.into_iter().collect::<Result<_, _>>()?;
    let text = match (args.output, args.per_node) {
        (Output::Json, per_node) => json::line(&document(&listed, per_node))?,
        (Output::Text, true) => per_node_text(&listed),
        (Output::Text, false) => merged_text(&listed),
    };
    write_out(&text)?;
    // The per-node view lists what answered, and fails when a node did
    // not; the merged view fails for a group without its quorum, and
    // warns of the others' silent nodes.
    let mut failures: Vec<Failure> = Vec::new();
    for group in &listed {
        let unanswered = group.unanswered();
        if unanswered.is_empty() {
            continue;
        }
        let (total, answered, quorum) = group.counts();
        let nodes = group.fleet.kind().nodes();
        if args.per_node {
            failures.push(group.failure(format!(
                "only {answered} of {total} {nodes} answered; the listing shows what they \
                 hold, not what the others hold: {}",
                unanswered.join("; ")
            )));
        } else if answered < quorum {
            failures.push(group.failure(format!(
                "cannot list locks: only {answered} of {total} {nodes} answered but {quorum} \
                 are needed for the merged view (every held lock is on a write quorum of \
                 nodes, so with fewer one could be missing); {}; 'quorum-lock locks \
                 --per-node' lists what the nodes that answer hold",
                unanswered.join("; ")
            )));
        } else {
            for line in &unanswered {
                crate::words::warn(&format!("not listed: group '{}': {line}", group.group.id));
            }
        }
    }
    match failures.first() {
        None => Ok(0),
        Some(first) => {
            let message: Vec<&str> = failures.iter().map(|f| f.message.as_str()).collect();
            Err(Failure::new(first.code, message.join("; ")))
        }
    }
}

/// What one group listed.
struct Listed {
    group: Group,
    fleet: Fleet,
    listings: Vec<Listing>,
}

impl Listed {
    /// Its nodes, how many answered, and its write quorum.
    fn counts(&self) -> (usize, usize, usize) {
        let total = self.listings.len();
        let answered = self.listings.iter().filter(|l| l.result.is_ok()).count();
        (total, answered, write_quorum(total))
    }

    fn has_quorum(&self) -> bool {
        let (_, answered, quorum) = self.counts();
        answered >= quorum
    }

    /// Each node that did not answer, and why.
    fn unanswered(&self) -> Vec<String> {
        self.listings
            .iter()
            .filter_map(|l| {
                let why = l.result.as_ref().err()?;
                Some(format!("{}: {}", l.node, why.describe()))
            })
            .collect()
    }

    /// `message`, with the exit code and advice of the nodes that did not
    /// answer, naming the group.
    fn failure(&self, message: String) -> Failure {
        let missing: Vec<&Missing> = self
            .listings
            .iter()
            .filter_map(|l| l.result.as_ref().err())
            .collect();
        let (code, advice) = self.fleet.verdict(&self.group.client, &missing);
        let message = match advice {
            Some(advice) => format!("{message} ({advice})"),
            None => message,
        };
        self.group.named(Failure::new(code, message))
    }
}

const HEADER: [&str; 8] = [
    "GROUP", "RESOURCE", "MODE", "OWNER", "AGE", "NODES", "UID", "SOURCE",
];
const PER_NODE_HEADER: [&str; 8] = [
    "GROUP", "NODE", "RESOURCE", "MODE", "OWNER", "AGE", "UID", "SOURCE",
];

/// The merged view: each group that has its quorum merged on its own (a
/// lock is on a quorum of its group's nodes), one row per lock, groups in
/// the order given.
fn merged_text(listed: &[Listed]) -> String {
    let mut rows: Vec<[String; 8]> = Vec::new();
    for group in listed.iter().filter(|g| g.has_quorum()) {
        let total = group.listings.len();
        for lock in merge(&group.listings) {
            rows.push([
                group.group.id.clone(),
                lock.resource,
                mode_name(lock.mode),
                lock.owner,
                age(lock.age),
                format!("{}/{total}", lock.held_on.len()),
                lock.uid,
                lock.source,
            ]);
        }
    }
    if !rows.is_empty() {
        table(&HEADER, &rows, "")
    } else if listed.iter().all(Listed::has_quorum) {
        "no locks held\n".to_owned()
    } else {
        String::new()
    }
}

/// The per-node view: every node's entries with its group, then one line
/// per node that did not answer.
fn per_node_text(listed: &[Listed]) -> String {
    let mut rows: Vec<[String; 8]> = Vec::new();
    for group in listed {
        for listing in &group.listings {
            let Ok(entries) = &listing.result else {
                continue;
            };
            for e in entries {
                rows.push([
                    group.group.id.clone(),
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
    }
    let answered: usize = listed.iter().map(|g| g.counts().1).sum();
    let mut out = if !rows.is_empty() {
        table(&PER_NODE_HEADER, &rows, "")
    } else if answered > 0 {
        "no locks held on the nodes that answered\n".to_owned()
    } else {
        String::new()
    };
    for group in listed {
        for listing in &group.listings {
            if let Err(why) = &listing.result {
                let line = format!("{}  {}  {}", group.group.id, listing.node, why.describe());
                out.push_str(&format!("{}\n", escaped(&line)));
            }
        }
    }
    out
}

/// `locks --output json` over several groups: one document, each node and
/// lock with its group, the counts summed and each group's under `groups`.
fn document(listed: &[Listed], per_node: bool) -> json::Locks {
    let kinds: Vec<Kind> = listed.iter().map(|g| g.fleet.kind()).collect();
    let kind = match kinds.first() {
        Some(first) if kinds.iter().all(|k| k == first) => *first,
        _ => Kind::Mixed,
    };
    let mut nodes = Vec::new();
    let mut locks = Vec::new();
    let mut groups = Vec::new();
    for group in listed {
        let id = &group.group.id;
        for listing in &group.listings {
            let mut node = listing.json(per_node);
            node.group = Some(id.clone());
            nodes.push(node);
        }
        let (total, answered, quorum) = group.counts();
        if !per_node && group.has_quorum() {
            locks.extend(merge(&group.listings).into_iter().map(|m| json::Lock {
                group: Some(id.clone()),
                resource: m.resource,
                mode: json::mode(m.mode),
                owner: m.owner,
                uid: m.uid,
                source: m.source,
                age_ms: json::ms(m.age),
                held_on: m.held_on,
            }));
        }
        groups.push(json::GroupCounts {
            group: id.clone(),
            total,
            answered: Some(answered),
            quorum,
            listed: (!per_node).then(|| group.has_quorum()),
            healthy: None,
            quorum_healthy: None,
        });
    }
    let sum = |f: fn(&json::GroupCounts) -> usize| groups.iter().map(f).sum();
    let none_listed = !listed.iter().any(Listed::has_quorum);
    json::Locks {
        format: json::FORMAT,
        kind: json::kind(kind),
        view: if per_node { "per-node" } else { "merged" },
        total: sum(|g| g.total),
        answered: sum(|g| g.answered.unwrap_or(0)),
        quorum: sum(|g| g.quorum),
        nodes,
        locks: if per_node {
            json::Field::Absent
        } else {
            json::Field::Present((!none_listed).then_some(locks))
        },
        groups: Some(groups),
    }
}

/// `force-unlock`: each name forced in its own group (only the groups that
/// hold one are connected); `--uid` in every group, since a uid does not
/// say where its lock is. A name under `election/` or `semaphore/` is an
/// election's or a semaphore's resource, which lives in the group of the
/// election's or semaphore's own name; the text does not tell that name
/// for certain (a name may hold `/`, and a plain lock may be called so),
/// so it is forced in every group, its likely groups first.
pub async fn force_unlock(args: ForceUnlockArgs) -> Result<u8, Failure> {
    let groups = plan::groups(&args.client)?;
    if groups.len() == 1 {
        return admin::force_unlock(args).await;
    }
    if let Some(uid) = &args.uid {
        return force_uid_everywhere(groups, uid).await;
    }
    let names = admin::checked_names(&args.names)?;
    let ids: Vec<&str> = groups.iter().map(|g| g.id.as_str()).collect();
    // Each group's names, the groups in the order of their first name.
    let mut per_group: Vec<(String, Vec<String>)> = Vec::new();
    let mut everywhere: Vec<String> = Vec::new();
    for name in names {
        let homes = match crate::resource_homes::owners(&name) {
            Some(owners) => {
                everywhere.push(name.clone());
                crate::resource_homes::likely_first(&ids, &owners)
            }
            None => vec![plan::group_of(&args.client, &name)?.id],
        };
        for id in homes {
            match per_group.iter_mut().find(|(g, _)| *g == id) {
                Some((_, names)) => names.push(name.clone()),
                None => per_group.push((id, vec![name.clone()])),
            }
        }
    }
    // The names forced (or found free) in the groups before a failing one.
    let mut done: Vec<String> = Vec::new();
    let mut held: Vec<String> = Vec::new();
    for (id, names) in &per_group {
        let Some(group) = groups.iter().find(|g| &g.id == id) else {
            continue;
        };
        let forced = match Cluster::connect(&group.client, true, write_quorum, None).await {
            Ok(cluster) => force_names(&cluster, names, Some(&group.id), &everywhere)
                .await
                .map_err(|f| group.named(f)),
            Err(failure) => Err(failure),
        };
        match forced {
            Ok(names) => held.extend(names),
            Err(mut failure) => {
                if !done.is_empty() {
                    failure.message.push_str(&format!(
                        "; already done in other groups, before it: {}",
                        done.join(", ")
                    ));
                }
                return Err(failure);
            }
        }
        done.extend(
            names
                .iter()
                .map(|n| format!("{} in group '{id}'", escaped(n))),
        );
    }
    for name in everywhere.iter().filter(|n| !held.contains(n)) {
        crate::words::warn(&format!(
            "nothing was held on {} in any of the {} groups (a mistyped name? 'quorum-lock \
             locks' lists the names held)",
            escaped(name),
            groups.len()
        ));
    }
    Ok(0)
}

/// `force-unlock --uid` in every group, one after the other; a group that
/// fails does not stop the others, and the command then fails naming it.
async fn force_uid_everywhere(groups: Vec<Group>, uid: &str) -> Result<u8, Failure> {
    if uid.trim().is_empty() {
        return Err(Failure::usage(
            "--uid is empty; pass the UID column of 'quorum-lock locks'",
        ));
    }
    let mut removed = 0;
    let mut failures: Vec<Failure> = Vec::new();
    for group in &groups {
        let forced = match Cluster::connect(&group.client, true, write_quorum, None).await {
            Ok(cluster) => force_uid(&cluster, uid, Some(&group.id))
                .await
                .map_err(|f| group.named(f)),
            Err(failure) => Err(failure),
        };
        match forced {
            Ok(n) => removed += n,
            Err(failure) => failures.push(failure),
        }
    }
    if let Some(first) = failures.first() {
        let message: Vec<&str> = failures.iter().map(|f| f.message.as_str()).collect();
        return Err(Failure::new(first.code, message.join("; ")));
    }
    if removed == 0 {
        crate::words::warn(&format!(
            "nothing was held by uid {} in any of the {} groups (released, expired or forced \
             before?)",
            escaped(uid),
            groups.len()
        ));
    }
    Ok(0)
}
