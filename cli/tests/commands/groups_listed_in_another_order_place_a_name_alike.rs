//! docs/groups.md: "every process given the same groups places each name
//! alike, in whatever order it lists them". Groups without ids take their
//! positions as ids (`a:1,b:1;c:1,d:1` is groups `1` and `2`), so two
//! clients given the same two clusters in the other order give each
//! cluster the other's id: one name then lives in a different cluster for
//! each of them, and both hold it at once.

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
    let first = format!("{a};{b}");
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

    let second = format!("{b};{a}");
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
