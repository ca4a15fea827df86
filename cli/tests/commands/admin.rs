//! `quorum-lock locks` and `quorum-lock force-unlock` against real servers,
//! with locks held by an in-process client: the listing with a majority of
//! the servers down (`--per-node` still lists), its JSON, and what
//! force-unlock says about what it forced.

use std::net::SocketAddr;
use std::time::Duration;

use quorum_lock::net::RemoteLocker;
use quorum_lock::{LockArgs, NetLocker};
use serde_json::Value;

use crate::support::{
    cli, dsync, forced_open_on_a_quorum, nodes, on_a_quorum_of_three, remote_config, wait_until,
    Finished, Scratch, Server, ADMIN, TOKEN,
};

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

    // lock() returns once a quorum granted: the listing shows it on two
    // or three servers (a third grant is not promised).
    let listed = locks(&dir, &nodes);
    assert_eq!(listed.code, Some(0), "{listed:?}");
    let header = listed.stdout.lines().next().unwrap_or_default();
    for column in ["RESOURCE", "MODE", "OWNER", "AGE", "NODES", "UID", "SOURCE"] {
        assert!(header.contains(column), "{column} missing from {header:?}");
    }
    let line = row(&listed.stdout, "reports/1").expect("reports/1 listed");
    for field in ["write", "test-holder", writer.uid()] {
        assert!(line.contains(field), "{field} missing from {line:?}");
    }
    assert!(on_a_quorum_of_three(line), "{line:?}");
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
    assert!(
        forced_open_on_a_quorum(&forced.stdout, "forced open: reports/1", "lock servers"),
        "{forced:?}"
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

/// `quorum-lock locks ARGS` with the admin token.
fn locks_with(dir: &Scratch, nodes: &str, extra: &[&str]) -> Finished {
    let admin = dir.admin();
    let mut args = vec!["locks", "--nodes", nodes, "--admin-token-file", &admin];
    args.extend_from_slice(extra);
    tokio::task::block_in_place(|| cli(dir, &args, &[], LIMIT))
}

fn parse(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}): {text:?}"))
}

/// Takes `resource` on every server in `addrs` directly, entry by entry,
/// as uid `uid`. Nothing refreshes these entries, so they stay exactly as
/// placed (for the servers' validity) whatever happens to the others.
async fn place(addrs: &[SocketAddr], uid: &str, resource: &str) {
    let args = LockArgs {
        uid: uid.into(),
        resources: vec![resource.to_owned()].into(),
        owner: "placed-by-test".into(),
        source: "cli/tests/commands/admin.rs".into(),
        quorum: 1,
    };
    for addr in addrs {
        let node = RemoteLocker::connect(addr.to_string(), remote_config(TOKEN))
            .await
            .expect("connect to a test server");
        assert!(node.lock(&args).await.expect("a grant"), "{addr} refused");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn locks_per_node_lists_what_the_reachable_servers_hold_when_most_are_down() {
    let dir = Scratch::new("net-admin-majority-down");
    // Entries that outlive the test: nothing refreshes them.
    let mut servers: Vec<Server> = (0..5)
        .map(|_| Server::start_with_validity(&dir, "60s", &["--no-quarantine"]))
        .collect();
    let addrs: Vec<SocketAddr> = servers.iter().map(|s| s.addr).collect();
    let nodes = nodes(&servers);
    place(&addrs, "uid-of-the-holder", "reports/9").await;

    let whole = locks_with(&dir, &nodes, &["--per-node"]);
    assert_eq!(whole.code, Some(0), "{whole:?}");
    assert_eq!(
        rows_with(&whole.stdout, "uid-of-the-holder"),
        5,
        "{whole:?}"
    );
    assert!(whole.stderr.is_empty(), "{whole:?}");

    // Three of five down: no quorum, which is when the listing matters.
    let down: Vec<String> = addrs[..3].iter().map(ToString::to_string).collect();
    let up: Vec<String> = addrs[3..].iter().map(ToString::to_string).collect();
    tokio::task::block_in_place(|| servers[..3].iter_mut().for_each(Server::kill));

    let listed = locks_with(&dir, &nodes, &["--per-node"]);
    assert_eq!(listed.code, Some(69), "{listed:?}");
    for node in &up {
        let row = listed
            .stdout
            .lines()
            .find(|l| l.split_whitespace().next() == Some(node.as_str()))
            .unwrap_or_else(|| panic!("{node} not listed: {listed:?}"));
        assert!(
            row.contains("reports/9") && row.contains("uid-of-the-holder"),
            "{row:?}"
        );
    }
    for node in &down {
        let line = listed
            .stdout
            .lines()
            .find(|l| l.split_whitespace().next() == Some(node.as_str()))
            .unwrap_or_else(|| panic!("{node} not marked: {listed:?}"));
        assert!(line.contains("unreachable: cannot connect"), "{line:?}");
    }
    assert!(listed.stderr.contains("only 2 of 5"), "{listed:?}");
    for node in &down {
        assert!(listed.stderr.contains(node.as_str()), "{listed:?}");
    }

    // The merged view needs a quorum, and says so, and where to turn.
    let merged = locks_with(&dir, &nodes, &[]);
    assert_eq!(merged.code, Some(69), "{merged:?}");
    assert!(merged.stdout.is_empty(), "{merged:?}");
    for words in [
        "only 2 of 5",
        "3 are needed",
        "--per-node",
        "cannot connect",
    ] {
        assert!(merged.stderr.contains(words), "{words:?}: {merged:?}");
    }

    // Not a single server left: still a listing, of nothing but causes.
    tokio::task::block_in_place(|| servers[3..].iter_mut().for_each(Server::kill));
    let none = locks_with(&dir, &nodes, &["--per-node"]);
    assert_eq!(none.code, Some(69), "{none:?}");
    assert_eq!(
        none.stdout
            .lines()
            .filter(|l| l.contains("unreachable: cannot connect"))
            .count(),
        5,
        "{none:?}"
    );
    assert!(none.stderr.contains("only 0 of 5"), "{none:?}");
}

/// How many lines of `listing` mention `text`.
fn rows_with(listing: &str, text: &str) -> usize {
    listing.lines().filter(|l| l.contains(text)).count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn locks_output_json_describes_every_node_and_lock() {
    let dir = Scratch::new("net-admin-json");
    let mut servers: Vec<Server> = (0..3)
        .map(|_| Server::start_with_validity(&dir, "60s", &["--no-quarantine"]))
        .collect();
    let addrs: Vec<SocketAddr> = servers.iter().map(|s| s.addr).collect();
    let nodes = nodes(&servers);
    place(&addrs, "json-holder", "reports/3").await;
    let down = addrs[0].to_string();
    tokio::task::block_in_place(|| servers[0].kill());

    let merged = locks_with(&dir, &nodes, &["--output", "json"]);
    assert_eq!(merged.code, Some(0), "{merged:?}");
    // One document, on one line.
    assert_eq!(merged.stdout.lines().count(), 1, "{merged:?}");
    let doc = parse(&merged.stdout);
    assert_eq!(doc["format"], 1, "{doc}");
    assert_eq!(doc["kind"], "lock-servers", "{doc}");
    assert_eq!(doc["view"], "merged", "{doc}");
    assert_eq!(
        (&doc["total"], &doc["answered"], &doc["quorum"]),
        (&Value::from(3), &Value::from(2), &Value::from(2)),
        "{doc}"
    );
    let listed = doc["nodes"].as_array().expect("nodes");
    assert_eq!(listed.len(), 3, "{doc}");
    assert_eq!(listed[0]["node"], down.as_str(), "{doc}");
    assert_eq!(listed[0]["reachable"], false, "{doc}");
    assert_eq!(listed[0]["answered"], false, "{doc}");
    let reason = listed[0]["reason"].as_str().expect("a reason");
    assert!(reason.contains("cannot connect"), "{doc}");
    for node in &listed[1..] {
        assert_eq!(node["answered"], true, "{doc}");
        assert!(node["reason"].is_null(), "{doc}");
        assert!(node.get("locks").is_none(), "{doc}");
    }
    let locks = doc["locks"].as_array().expect("locks");
    assert_eq!(locks.len(), 1, "{doc}");
    let lock = &locks[0];
    assert_eq!(lock["resource"], "reports/3", "{doc}");
    assert_eq!(lock["mode"], "write", "{doc}");
    assert_eq!(lock["uid"], "json-holder", "{doc}");
    assert_eq!(lock["owner"], "placed-by-test", "{doc}");
    assert!(
        lock["age_ms"].as_u64().is_some_and(|ms| ms < 60_000),
        "{doc}"
    );
    let held_on: Vec<&str> = lock["held_on"]
        .as_array()
        .expect("held_on")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(held_on, [addrs[1].to_string(), addrs[2].to_string()]);

    // Per node: the entries under each node, null where it did not answer.
    let per_node = locks_with(&dir, &nodes, &["--per-node", "--output", "json"]);
    assert_eq!(per_node.code, Some(69), "{per_node:?}");
    let doc = parse(&per_node.stdout);
    assert_eq!(doc["view"], "per-node", "{doc}");
    assert!(doc.get("locks").is_none(), "{doc}");
    let listed = doc["nodes"].as_array().expect("nodes");
    assert!(listed[0]["locks"].is_null(), "{doc}");
    for node in &listed[1..] {
        let entries = node["locks"].as_array().expect("entries");
        assert_eq!(entries.len(), 1, "{doc}");
        assert_eq!(entries[0]["resource"], "reports/3", "{doc}");
        assert_eq!(entries[0]["uid"], "json-holder", "{doc}");
    }

    // Without a quorum the merged view has no locks to show: null, 69.
    tokio::task::block_in_place(|| servers[1].kill());
    let short = locks_with(&dir, &nodes, &["--output", "json"]);
    assert_eq!(short.code, Some(69), "{short:?}");
    let doc = parse(&short.stdout);
    assert!(doc["locks"].is_null(), "{doc}");
    assert_eq!(doc["answered"], 1, "{doc}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn force_unlock_says_whether_anything_was_held_and_warns_about_the_holder() {
    let dir = Scratch::new("net-admin-force-says");
    let servers: Vec<Server> = (0..3)
        .map(|_| Server::start(&dir, &["--no-quarantine"]))
        .collect();
    let addrs: Vec<SocketAddr> = servers.iter().map(|s| s.addr).collect();
    let nodes = nodes(&servers);
    let admin = dir.admin();
    let force = |names: &[&str]| {
        let mut args = vec![
            "force-unlock",
            "--nodes",
            &nodes,
            "--admin-token-file",
            &admin,
        ];
        args.extend_from_slice(names);
        tokio::task::block_in_place(|| cli(&dir, &args, &[], LIMIT))
    };

    // A name nobody holds: said on stderr, and still success, so that a
    // script forcing a name twice does not fail the second time.
    let nothing = force(&["nosuchlock"]);
    assert_eq!(nothing.code, Some(0), "{nothing:?}");
    assert_eq!(
        nothing.stdout.trim(),
        "not held: nosuchlock (confirmed by 3 of 3 lock servers)"
    );
    assert!(
        nothing.stderr.contains("nothing was held on nosuchlock"),
        "{nothing:?}"
    );
    assert!(!nothing.stderr.contains("keeps running"), "{nothing:?}");

    let ds = dsync(&addrs, TOKEN, "forced-holder").await;
    let guard = ds.rw_mutex(["reports/2"]).unwrap().lock().await.unwrap();
    let forced = force(&["reports/2", "nosuchlock"]);
    assert_eq!(forced.code, Some(0), "{forced:?}");
    let lines: Vec<&str> = forced.stdout.lines().collect();
    assert_eq!(lines.len(), 2, "{forced:?}");
    assert!(
        forced_open_on_a_quorum(lines[0], "forced open: reports/2", "lock servers"),
        "{forced:?}"
    );
    assert_eq!(
        lines[1], "not held: nosuchlock (confirmed by 3 of 3 lock servers)",
        "{forced:?}"
    );
    assert!(
        forced.stderr.contains("nothing was held on nosuchlock"),
        "{forced:?}"
    );
    // The holder still runs until its next refresh: validity/6 of the
    // servers' 6 s.
    for words in [
        "whoever held reports/2 keeps running until its next refresh",
        "1s with these servers' 6s validity",
        "not protected",
    ] {
        assert!(forced.stderr.contains(words), "{words:?}: {forced:?}");
    }
    tokio::time::timeout(Duration::from_secs(5), guard.lost())
        .await
        .expect("the holder was not told its lock was forced open");

    // By uid, the same.
    let args = [
        "force-unlock",
        "--nodes",
        &nodes,
        "--admin-token-file",
        &admin,
    ];
    let mut by_uid = args.to_vec();
    by_uid.extend(["--uid", "no-such-uid"]);
    let by_uid = tokio::task::block_in_place(|| cli(&dir, &by_uid, &[], LIMIT));
    assert_eq!(by_uid.code, Some(0), "{by_uid:?}");
    assert_eq!(
        by_uid.stdout.trim(),
        "not held: uid no-such-uid (confirmed by 3 of 3 lock servers)"
    );
    assert!(
        by_uid
            .stderr
            .contains("nothing was held by uid no-such-uid"),
        "{by_uid:?}"
    );
}
