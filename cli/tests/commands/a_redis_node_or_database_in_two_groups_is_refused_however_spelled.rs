//! A node in two groups of `--nodes` is a usage error (docs/groups.md: "A
//! node listed in two groups is refused: its vote would count in both"),
//! for Redis nodes and databases as for lock servers. Within one group the
//! same Redis node under another database number, or the same database
//! server under another database, is refused as listed twice; across
//! groups it must be refused too, before anything connects.

use std::time::Duration;

use crate::support::{cli, Scratch};

const LIMIT: Duration = Duration::from_secs(20);

/// Reproduces: one Redis node or database server spelled two ways in two groups is accepted and connected (69, not 2).
#[test]
fn a_redis_node_or_database_in_two_groups_is_refused_however_spelled() {
    let dir = Scratch::new("node-groups-shared-urls");
    let token = dir.token();
    for (nodes, within_one) in [
        (
            "east=redis://127.0.0.1:1/0;west=redis://127.0.0.1:1/1",
            "redis://127.0.0.1:1/0,redis://127.0.0.1:1/1",
        ),
        (
            "east=postgres://127.0.0.1:1/a;west=postgres://127.0.0.1:1/b",
            "postgres://127.0.0.1:1/a,postgres://127.0.0.1:1/b",
        ),
    ] {
        let run = |list: &str| {
            let args = [
                "run",
                "--nodes",
                list,
                "--token-file",
                &token,
                "--timeout",
                "1s",
                "x",
                "--",
                "true",
            ];
            cli(&dir, &args, &[], LIMIT)
        };
        // One group: the same node twice is refused before connecting.
        let one = run(within_one);
        assert_eq!(one.code, Some(2), "{within_one}: {one:?}");
        assert!(one.stderr.contains("listed twice"), "{within_one}: {one:?}");
        // Two groups sharing it: refused too, as a node in both groups.
        let two = run(nodes);
        assert_eq!(two.code, Some(2), "{nodes}: {two:?}");
        assert!(two.stderr.contains("in both groups"), "{nodes}: {two:?}");
    }
}
