//! `--nodes` of two groups (`east=...;west=...`), three lock servers each:
//! `run` takes each name in the group `Groups::place` names (and only
//! there, as the servers themselves list), `locks` lists each lock once
//! with its group, `status` shows both groups, `force-unlock` frees a name
//! in its group and a uid in whichever group holds it; a group without its
//! quorum fails what needs it, naming the group, and leaves the other
//! group's names alone.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use quorum_lock::net::RemoteLocker;
use quorum_lock::{Groups, NetLocker};
use serde_json::Value;

use crate::support::{
    cli, forced_open_on_a_quorum, nodes, on_a_quorum_of_three, remote_config, wait_until, Cli,
    Finished, RefusingPorts, Scratch, Server, ADMIN,
};

const LIMIT: Duration = Duration::from_secs(20);
const IDS: [&str; 2] = ["east", "west"];

/// The first `count` names `job-N` that live in group `id`.
fn names_in(id: &str, count: usize) -> Vec<String> {
    (0..1_000)
        .map(|n| format!("job-{n}"))
        .filter(|name| Groups::place(IDS, name) == Some(id))
        .take(count)
        .collect()
}

fn servers(dir: &Scratch) -> Vec<Server> {
    (0..3)
        .map(|_| Server::start(dir, &["--no-quarantine"]))
        .collect()
}

/// `quorum-lock COMMAND --nodes NODES --admin-token-file .. ARGS..`.
fn admin(dir: &Scratch, nodes: &str, command: &str, args: &[&str]) -> Finished {
    let token = dir.admin();
    let mut all = vec![command, "--nodes", nodes, "--admin-token-file", &token];
    all.extend(args);
    cli(dir, &all, &[], LIMIT)
}

/// `quorum-lock run NAME` holding the lock for a minute, having written
/// its uid to `$D/NAME.uid`.
fn hold(dir: &Scratch, nodes: &str, name: &str) -> Cli {
    let token = dir.token();
    let script = format!("echo \"$QUORUM_LOCK_UID\" > \"$D/{name}.uid\"; sleep 60");
    let args = [
        "run",
        "--nodes",
        nodes,
        "--token-file",
        &token,
        name,
        "--",
        "sh",
        "-c",
        &script,
    ];
    let d = dir.path.display().to_string();
    Cli::spawn(dir, &args, &[("D", &d)])
}

/// The resources each server lists, asked of the servers themselves.
async fn held_on(addrs: &[SocketAddr]) -> Vec<Vec<String>> {
    let mut all = Vec::new();
    for addr in addrs {
        let server = RemoteLocker::connect(addr.to_string(), remote_config(ADMIN))
            .await
            .expect("connect to a test server");
        let locks = server.locks().await.expect("the server lists its locks");
        all.push(locks.into_iter().map(|e| e.resource).collect());
    }
    all
}

/// The rows of `locks` text output by resource: (group, NODES column).
fn rows(listing: &str) -> BTreeMap<String, Vec<(String, String)>> {
    let mut rows: BTreeMap<String, Vec<(String, String)>> = BTreeMap::new();
    for line in listing.lines().skip(1) {
        let cells: Vec<&str> = line.split_whitespace().collect();
        if let [group, resource, _mode, _owner, ..] = cells.as_slice() {
            // AGE may be "1m 5s": NODES is the first cell with a '/' of
            // the form held/total after the owner.
            let nodes = cells[4..]
                .iter()
                .find(|c| c.contains('/') && c.split('/').all(|n| n.parse::<u32>().is_ok()))
                .map_or_else(String::new, |c| (*c).to_owned());
            rows.entry((*resource).to_owned())
                .or_default()
                .push(((*group).to_owned(), nodes));
        }
    }
    rows
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_land_in_their_groups_and_the_admin_commands_see_every_group() {
    let dir = Scratch::new("node-groups");
    let (east, west) = (servers(&dir), servers(&dir));
    let nodes = format!("east={};west={}", nodes(&east), nodes(&west));
    let addrs = |group: &[Server]| group.iter().map(|s| s.addr).collect::<Vec<_>>();
    let (east_addrs, west_addrs) = (addrs(&east), addrs(&west));
    let in_east = names_in("east", 2);
    let in_west = names_in("west", 2);
    let all: Vec<&String> = in_east.iter().chain(&in_west).collect();

    let holders: Vec<Cli> = all.iter().map(|name| hold(&dir, &nodes, name)).collect();
    tokio::task::block_in_place(|| {
        wait_until(LIMIT, "every run to hold its lock", || {
            all.iter()
                .all(|name| !dir.read(&format!("{name}.uid")).trim().is_empty())
        })
    });
    let uid = |name: &str| dir.read(&format!("{name}.uid")).trim().to_owned();

    // Each name is on a quorum of its own group's servers (a third grant
    // is not promised), and on none of the other's.
    let listed_on = |lists: &[Vec<String>], name: &str| {
        lists.iter().filter(|l| l.iter().any(|r| r == name)).count()
    };
    let lists = (held_on(&east_addrs).await, held_on(&west_addrs).await);
    for name in &in_east {
        assert!(listed_on(&lists.0, name) >= 2, "{name} in east: {lists:?}");
        assert_eq!(listed_on(&lists.1, name), 0, "{name} in west: {lists:?}");
    }
    for name in &in_west {
        assert!(listed_on(&lists.1, name) >= 2, "{name} in west: {lists:?}");
        assert_eq!(listed_on(&lists.0, name), 0, "{name} in east: {lists:?}");
    }

    // `locks`: each lock once, in its group, on a quorum of its 3 servers.
    let listed = tokio::task::block_in_place(|| admin(&dir, &nodes, "locks", &[]));
    assert_eq!(listed.code, Some(0), "{listed:?}");
    let header: Vec<&str> = listed
        .stdout
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    assert_eq!(
        header,
        ["GROUP", "RESOURCE", "MODE", "OWNER", "AGE", "NODES", "UID", "SOURCE"],
        "{listed:?}"
    );
    let by_resource = rows(&listed.stdout);
    assert_eq!(by_resource.len(), 4, "{listed:?}");
    for (names, group) in [(&in_east, "east"), (&in_west, "west")] {
        for name in names {
            let row = by_resource.get(name.as_str()).map(Vec::as_slice);
            assert!(
                matches!(row, Some([(g, held)]) if g == group && on_a_quorum_of_three(held)),
                "{name}: {listed:?}"
            );
        }
    }

    // The same as JSON: a group on every lock and node, each group's counts.
    let json = tokio::task::block_in_place(|| admin(&dir, &nodes, "locks", &["--output", "json"]));
    assert_eq!(json.code, Some(0), "{json:?}");
    let doc: Value = serde_json::from_str(json.stdout.trim()).expect("one JSON document");
    let locks = doc["locks"].as_array().expect("locks");
    assert_eq!(locks.len(), 4, "{doc}");
    for lock in locks {
        let resource = lock["resource"].as_str().unwrap_or_default();
        let expected = Groups::place(IDS, resource).unwrap_or_default();
        assert_eq!(lock["group"], expected, "{lock}");
        let held_on = lock["held_on"].as_array().map_or(0, Vec::len);
        assert!((2..=3).contains(&held_on), "{lock}");
    }
    let nodes_json = doc["nodes"].as_array().expect("nodes");
    assert_eq!(nodes_json.len(), 6, "{doc}");
    let groups: Vec<&str> = doc["groups"]
        .as_array()
        .expect("groups")
        .iter()
        .map(|g| g["group"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(groups, IDS, "{doc}");

    // `status`: every server, each line with its group.
    let status = tokio::task::block_in_place(|| admin(&dir, &nodes, "status", &[]));
    assert_eq!(status.code, Some(0), "{status:?}");
    for (group, servers) in [("east", &east), ("west", &west)] {
        for server in servers {
            let addr = server.addr.to_string();
            let line = status
                .stdout
                .lines()
                .find(|l| l.contains(&addr) && l.contains("reachable"))
                .unwrap_or_else(|| panic!("{addr} not shown: {status:?}"));
            assert_eq!(line.split_whitespace().next(), Some(group), "{line}");
        }
    }

    let json = tokio::task::block_in_place(|| admin(&dir, &nodes, "status", &["--output", "json"]));
    assert_eq!(json.code, Some(0), "{json:?}");
    let doc: Value = serde_json::from_str(json.stdout.trim()).expect("one JSON document");
    let groups_of_nodes: Vec<&str> = doc["nodes"]
        .as_array()
        .expect("nodes")
        .iter()
        .map(|n| n["group"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(
        groups_of_nodes,
        ["east", "east", "east", "west", "west", "west"],
        "{doc}"
    );
    assert_eq!(doc["quorum_healthy"], true, "{doc}");

    // `force-unlock NAME`: in its group, and only that name.
    let (forced_name, by_uid) = (&in_east[0], &in_west[0]);
    let forced = tokio::task::block_in_place(|| {
        admin(&dir, &nodes, "force-unlock", &[forced_name.as_str()])
    });
    assert_eq!(forced.code, Some(0), "{forced:?}");
    assert!(
        forced_open_on_a_quorum(
            &forced.stdout,
            &format!("forced open: {forced_name} in group 'east'"),
            "lock servers"
        ),
        "{forced:?}"
    );

    // `force-unlock --uid`: every group is asked; the one that holds it
    // frees it.
    let uid_of = uid(by_uid);
    let forced =
        tokio::task::block_in_place(|| admin(&dir, &nodes, "force-unlock", &["--uid", &uid_of]));
    assert_eq!(forced.code, Some(0), "{forced:?}");
    let lines: Vec<&str> = forced.stdout.lines().collect();
    assert_eq!(lines.len(), 2, "{forced:?}");
    assert_eq!(
        lines[0],
        format!("not held: uid {uid_of} in group 'east' (confirmed by 3 of 3 lock servers)"),
        "{forced:?}"
    );
    assert!(
        forced_open_on_a_quorum(
            lines[1],
            &format!("forced open: uid {uid_of} in group 'west'"),
            "lock servers"
        ),
        "{forced:?}"
    );

    let left = (held_on(&east_addrs).await, held_on(&west_addrs).await);
    assert_eq!(listed_on(&left.0, forced_name), 0, "{left:?}");
    assert_eq!(listed_on(&left.1, by_uid), 0, "{left:?}");
    assert!(listed_on(&left.0, &in_east[1]) >= 2, "{left:?}");
    assert!(listed_on(&left.1, &in_west[1]) >= 2, "{left:?}");
    drop(holders);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_without_its_quorum_fails_only_what_needs_it_naming_the_group() {
    let dir = Scratch::new("node-groups-down");
    let east = servers(&dir);
    let down = RefusingPorts::new(3);
    let nodes = format!("east={};west={}", nodes(&east), down.addrs().join(","));
    let token = dir.token();
    let run = |name: &str| {
        let args = [
            "run",
            "--nodes",
            &nodes,
            "--token-file",
            &token,
            "--timeout",
            "2s",
            name,
            "--",
            "true",
        ];
        cli(&dir, &args, &[], LIMIT)
    };

    // A name of the east group is locked as if west were not listed.
    let east_name = &names_in("east", 1)[0];
    let ran = tokio::task::block_in_place(|| run(east_name));
    assert_eq!(ran.code, Some(0), "{ran:?}");

    let west_name = &names_in("west", 1)[0];
    let failed = tokio::task::block_in_place(|| run(west_name));
    assert_eq!(failed.code, Some(69), "{failed:?}");
    assert!(
        failed
            .stderr
            .contains("group 'west': only 0 of 3 lock servers answered"),
        "{failed:?}"
    );

    let listed = tokio::task::block_in_place(|| admin(&dir, &nodes, "locks", &[]));
    assert_eq!(listed.code, Some(69), "{listed:?}");
    assert!(
        listed
            .stderr
            .contains("group 'west': cannot list locks: only 0 of 3 lock servers"),
        "{listed:?}"
    );
    assert!(!listed.stderr.contains("group 'east'"), "{listed:?}");
}

#[test]
fn bad_groups_in_nodes_are_usage_errors_saying_the_fix() {
    let dir = Scratch::new("node-groups-usage");
    for (nodes, says) in [
        ("e=127.0.0.1:1;", "group 2 of 2 of --nodes is empty"),
        (
            "east=127.0.0.1:1;east=127.0.0.1:2",
            "the group id 'east' is given twice",
        ),
        (
            "e=127.0.0.1:1;w=127.0.0.1:2,127.0.0.1:1",
            "node 127.0.0.1:1 is in both groups 'e' and 'w'",
        ),
        (
            "127.0.0.1:1;w=127.0.0.1:2",
            "group 1 of 2 of --nodes has no id: with several groups, start each with its id",
        ),
        ("postgres://u:Pw;Hidden7@db/x", "%3B"),
        ("e=redis://127.0.0.1:1/0?password=Pw;Hidden7:7", "%3B"),
    ] {
        for command in [&["locks"][..], &["run", "x", "--", "true"]] {
            let mut args = vec![command[0], "--nodes", nodes];
            args.extend(&command[1..]);
            let done = cli(&dir, &args, &[], LIMIT);
            assert_eq!(done.code, Some(2), "{nodes}: {done:?}");
            assert!(done.stderr.contains(says), "{nodes}: {done:?}");
            assert!(!done.stderr.contains("Hidden7"), "{done:?}");
        }
    }
}

/// A name whose group differs from that of `prefix` + name: a semaphore or
/// an election placed by its lock's resource would land elsewhere.
fn placed_apart(prefix: &str) -> String {
    (0..1_000)
        .map(|n| format!("pool-{n}"))
        .find(|name| Groups::place(IDS, name) != Groups::place(IDS, &format!("{prefix}{name}")))
        .expect("a name placed apart from its resource")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn semaphores_and_elections_live_in_the_group_of_their_name() {
    let dir = Scratch::new("node-groups-kinds");
    let (east, west) = (servers(&dir), servers(&dir));
    let nodes = format!("east={};west={}", nodes(&east), nodes(&west));
    let by_id = |id: &str| -> Vec<SocketAddr> {
        let group = if id == "east" { &east } else { &west };
        group.iter().map(|s| s.addr).collect()
    };
    let token = dir.token();
    let d = dir.path.display().to_string();
    let pool = placed_apart("semaphore/");
    let leader = placed_apart("election/");
    let script = |file: &str| format!("touch \"$D/{file}\"; sleep 60");
    let (pool_script, leader_script) = (script("pool"), script("leader"));
    let permit = Cli::spawn(
        &dir,
        &[
            "run",
            "--nodes",
            &nodes,
            "--token-file",
            &token,
            "--permits",
            "2",
            &pool,
            "--",
            "sh",
            "-c",
            &pool_script,
        ],
        &[("D", &d)],
    );
    let lead = Cli::spawn(
        &dir,
        &[
            "elect",
            "--nodes",
            &nodes,
            "--token-file",
            &token,
            &leader,
            "me",
            "--",
            "sh",
            "-c",
            &leader_script,
        ],
        &[("D", &d)],
    );
    tokio::task::block_in_place(|| {
        wait_until(LIMIT, "the permit and the lead", || {
            dir.file("pool").exists() && dir.file("leader").exists()
        })
    });
    for (name, prefix) in [(&pool, "semaphore/"), (&leader, "election/")] {
        let home = Groups::place(IDS, name).expect("a group");
        let other = if home == "east" { "west" } else { "east" };
        let (there, elsewhere) = (held_on(&by_id(home)).await, held_on(&by_id(other)).await);
        let ours = |lists: &[Vec<String>]| {
            lists
                .iter()
                .flatten()
                .filter(|r| r.starts_with(&format!("{prefix}{name}")))
                .count()
        };
        assert!(ours(&there) > 0, "{name} not in {home}: {there:?}");
        assert_eq!(ours(&elsewhere), 0, "{name} in {other}: {elsewhere:?}");
    }
    drop((permit, lead));
}
