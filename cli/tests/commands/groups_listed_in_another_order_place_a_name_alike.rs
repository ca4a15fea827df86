//! docs/groups.md: "every process given the same groups places each name
//! alike, in whatever order it lists them". Groups without ids took their
//! positions as ids (`a:1,b:1;c:1,d:1` was groups `1` and `2`), so two
//! clients given the same two clusters in the other order gave each
//! cluster the other's id: one name then lived in a different cluster for
//! each of them, and both held it at once. Several groups now need ids:
//! the same ids in either order place a name alike, and position ids are
//! refused (exit 2) before anything connects.

use std::time::Duration;

use crate::support::{cli, nodes, wait_until, Cli, Scratch, Server};

const LIMIT: Duration = Duration::from_secs(20);

/// Reproduces: `run --nodes "B;A" -n job` is granted `job` while `run --nodes "A;B" job` holds it (position ids swap).
#[test]
fn groups_listed_in_another_order_place_a_name_alike() {
    let dir = Scratch::new("node-groups-order");
    let start = || -> Vec<Server> {
        (0..3)
            .map(|_| Server::start(&dir, &["--no-quarantine"]))
            .collect()
    };
    let (a, b) = (start(), start());
    let (a, b) = (nodes(&a), nodes(&b));
    let token = dir.token();
    let d = dir.path.display().to_string();
    // Position ids are refused, in either order, saying the fix.
    for nodes in [format!("{a};{b}"), format!("{b};{a}")] {
        let args = [
            "run",
            "--nodes",
            &nodes,
            "--token-file",
            &token,
            "--nonblock",
            "job",
            "--",
            "true",
        ];
        let refused = cli(&dir, &args, &[], LIMIT);
        assert_eq!(refused.code, Some(2), "{nodes}: {refused:?}");
        assert!(
            refused.stderr.contains("has no id") && refused.stderr.contains("east=A,B,C"),
            "{nodes}: {refused:?}"
        );
    }
    let first = format!("one={a};two={b}");
    let holder = Cli::spawn(
        &dir,
        &[
            "run",
            "--nodes",
            &first,
            "--token-file",
            &token,
            "job",
            "--",
            "sh",
            "-c",
            "touch \"$D/held\"; sleep 60",
        ],
        &[("D", &d)],
    );
    wait_until(LIMIT, "the first run to hold job", || {
        dir.file("held").exists()
    });

    let second = format!("two={b};one={a}");
    let args = [
        "run",
        "--nodes",
        &second,
        "--token-file",
        &token,
        "--nonblock",
        "job",
        "--",
        "true",
    ];
    let again = cli(&dir, &args, &[], LIMIT);
    assert_eq!(
        again.code,
        Some(75),
        "job was granted to a second client while the first holds it: {again:?}"
    );
    drop(holder);
}
