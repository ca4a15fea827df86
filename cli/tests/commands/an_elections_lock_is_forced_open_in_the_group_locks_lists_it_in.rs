//! `force-unlock election/NAME` over `--nodes` of two groups: `locks`
//! lists an election's lock `election/NAME` in the group of NAME (as
//! `Groups::election` places it), and forcing that resource must reach
//! that group, not the group the text `election/NAME` would hash to.

use std::net::SocketAddr;
use std::time::Duration;

use quorum_lock::net::RemoteLocker;
use quorum_lock::{Groups, NetLocker};

use crate::support::{cli, nodes, remote_config, wait_until, Cli, Scratch, Server, ADMIN};

const LIMIT: Duration = Duration::from_secs(20);
const IDS: [&str; 2] = ["east", "west"];

async fn held_on(addrs: &[SocketAddr]) -> Vec<String> {
    let mut all = Vec::new();
    for addr in addrs {
        let server = RemoteLocker::connect(addr.to_string(), remote_config(ADMIN))
            .await
            .expect("connect to a test server");
        let locks = server.locks().await.expect("the server lists its locks");
        all.extend(locks.into_iter().map(|e| e.resource));
    }
    all
}

/// Reproduces: `force-unlock election/NAME` forces the hash of `election/NAME`'s group, not NAME's, where `locks` lists it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_elections_lock_is_forced_open_in_the_group_locks_lists_it_in() {
    let dir = Scratch::new("node-groups-force-election");
    let start = || -> Vec<Server> {
        (0..3)
            .map(|_| Server::start(&dir, &["--no-quarantine"]))
            .collect()
    };
    let (east, west) = (start(), start());
    let nodes = format!("east={};west={}", nodes(&east), nodes(&west));
    // An election whose name and lock resource hash to different groups.
    let name = (0..1_000)
        .map(|n| format!("leader-{n}"))
        .find(|n| Groups::place(IDS, n) != Groups::place(IDS, &format!("election/{n}")))
        .expect("a name placed apart from its resource");
    let resource = format!("election/{name}");
    let home = Groups::place(IDS, &name).expect("a group");
    let home_addrs: Vec<SocketAddr> = if home == "east" { &east } else { &west }
        .iter()
        .map(|s| s.addr)
        .collect();

    let token = dir.token();
    let d = dir.path.display().to_string();
    let lead = Cli::spawn(
        &dir,
        &[
            "elect",
            "--nodes",
            &nodes,
            "--token-file",
            &token,
            &name,
            "me",
            "--",
            "sh",
            "-c",
            "touch \"$D/leader\"; sleep 60",
        ],
        &[("D", &d)],
    );
    tokio::task::block_in_place(|| wait_until(LIMIT, "the lead", || dir.file("leader").exists()));

    let admin_token = dir.admin();
    let admin = |args: &[&str]| {
        let mut all = vec![
            args[0],
            "--nodes",
            &nodes,
            "--admin-token-file",
            &admin_token,
        ];
        all.extend(&args[1..]);
        cli(&dir, &all, &[], LIMIT)
    };
    // `locks` lists the leader's lock in NAME's group.
    let listed = tokio::task::block_in_place(|| admin(&["locks"]));
    assert_eq!(listed.code, Some(0), "{listed:?}");
    let row = listed
        .stdout
        .lines()
        .find(|l| l.split_whitespace().nth(1) == Some(resource.as_str()))
        .unwrap_or_else(|| panic!("{resource} not listed: {listed:?}"));
    assert_eq!(row.split_whitespace().next(), Some(home), "{row}");

    // Forcing the resource `locks` listed frees it there.
    let forced = tokio::task::block_in_place(|| admin(&["force-unlock", &resource]));
    assert_eq!(forced.code, Some(0), "{forced:?}");
    assert!(
        forced
            .stdout
            .starts_with(&format!("forced open: {resource} in group '{home}'")),
        "{forced:?}"
    );
    let left = held_on(&home_addrs).await;
    assert!(
        !left.contains(&resource),
        "{resource} still held in {home}: {left:?}"
    );
    drop(lead);
}
