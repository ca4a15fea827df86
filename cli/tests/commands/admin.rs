//! `quorum-lock locks` and `quorum-lock force-unlock` against real servers,
//! with locks held by an in-process client.

use std::net::SocketAddr;
use std::time::Duration;

use crate::support::{cli, dsync, nodes, wait_until, Finished, Scratch, Server, ADMIN, TOKEN};

const LIMIT: Duration = Duration::from_secs(20);

fn locks(dir: &Scratch, nodes: &str) -> Finished {
    let admin = dir.admin();
    let args = ["locks", "--nodes", nodes, "--admin-token-file", &admin];
    tokio::task::block_in_place(|| cli(dir, &args, &[], LIMIT))
}

fn row<'a>(listing: &'a str, resource: &str) -> Option<&'a str> {
    listing
        .lines()
        .find(|l| l.split_whitespace().next() == Some(resource))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn locks_lists_and_force_unlock_frees_across_the_servers() {
    let dir = Scratch::new("net-admin");
    let servers: Vec<Server> = (0..3)
        .map(|_| Server::start(&dir, &["--no-quarantine"]))
        .collect();
    let addrs: Vec<SocketAddr> = servers.iter().map(|s| s.addr).collect();
    let nodes = nodes(&servers);

    let ds = dsync(&addrs, TOKEN, "test-holder").await;
    let writer = ds.rw_mutex(["reports/1"]).unwrap().lock().await.unwrap();
    let reader = ds.rw_mutex(["config"]).unwrap().read().await.unwrap();

    // lock() returns once a quorum granted; the third server's grant may
    // land a moment later, so wait for the state the checks need.
    let mut listed = locks(&dir, &nodes);
    tokio::task::block_in_place(|| {
        wait_until(LIMIT, "every server to list reports/1", || {
            listed = locks(&dir, &nodes);
            row(&listed.stdout, "reports/1").is_some_and(|line| line.contains("3/3"))
        })
    });
    assert_eq!(listed.code, Some(0), "{listed:?}");
    let header = listed.stdout.lines().next().unwrap_or_default();
    for column in ["RESOURCE", "MODE", "OWNER", "AGE", "NODES", "UID", "SOURCE"] {
        assert!(header.contains(column), "{column} missing from {header:?}");
    }
    let line = row(&listed.stdout, "reports/1").expect("reports/1 listed");
    for field in ["write", "test-holder", "3/3", writer.uid()] {
        assert!(line.contains(field), "{field} missing from {line:?}");
    }
    let line = row(&listed.stdout, "config").expect("config listed");
    assert!(
        line.contains("read") && line.contains(reader.uid()),
        "{line:?}"
    );

    // The same through the environment, with the admin token's value.
    let by_env = tokio::task::block_in_place(|| {
        cli(
            &dir,
            &["locks"],
            &[
                ("QUORUM_LOCK_NODES", &nodes),
                ("QUORUM_LOCK_ADMIN_TOKEN", ADMIN),
            ],
            LIMIT,
        )
    });
    assert_eq!(by_env.code, Some(0), "{by_env:?}");
    assert!(row(&by_env.stdout, "reports/1").is_some(), "{by_env:?}");

    let admin = dir.admin();
    let args = [
        "force-unlock",
        "--nodes",
        &nodes,
        "--admin-token-file",
        &admin,
        "reports/1",
    ];
    let forced = tokio::task::block_in_place(|| cli(&dir, &args, &[], LIMIT));
    assert_eq!(forced.code, Some(0), "{forced:?}");
    assert_eq!(
        forced.stdout.trim(),
        "forced open: reports/1 (confirmed by 3 of 3 servers)"
    );

    // The holder learns at its next refresh (every second here).
    tokio::time::timeout(Duration::from_secs(5), writer.lost())
        .await
        .expect("the holder was not told its lock was forced open");
    assert!(ds.rw_mutex(["reports/1"]).unwrap().try_lock().await.is_ok());

    let after = locks(&dir, &nodes);
    assert_eq!(after.code, Some(0), "{after:?}");
    assert!(row(&after.stdout, "config").is_some(), "{after:?}");
    reader.unlock().await.unwrap();
    // unlock() returns once a quorum released; the last server may list the
    // entry a moment longer.
    tokio::task::block_in_place(|| {
        wait_until(LIMIT, "config to be released everywhere", || {
            row(&locks(&dir, &nodes).stdout, "config").is_none()
        })
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn locks_works_with_one_server_down_and_fails_without_a_quorum() {
    let dir = Scratch::new("net-admin-down");
    let mut servers: Vec<Server> = (0..3)
        .map(|_| Server::start(&dir, &["--no-quarantine"]))
        .collect();
    let nodes = nodes(&servers);
    let down = servers[0].addr.to_string();
    tokio::task::block_in_place(|| servers[0].kill());
    let listed = locks(&dir, &nodes);
    assert_eq!(listed.code, Some(0), "{listed:?}");
    assert!(listed.stdout.contains("no locks held"), "{listed:?}");
    assert!(
        listed.stderr.contains(&down),
        "the unreachable node is not named: {listed:?}"
    );

    tokio::task::block_in_place(|| servers[1].kill());
    let failed = locks(&dir, &nodes);
    assert_eq!(failed.code, Some(69), "{failed:?}");
    assert!(failed.stderr.contains("only 1 of 3"), "{failed:?}");
    assert!(failed.stderr.contains("2 are needed"), "{failed:?}");
}
