//! `locks` shows the command a `run` or `elect` holds its lock for as the
//! lock's source, and `lock` for `quorum-lock lock`, rather than a
//! location in quorum-lock's own code.

use std::time::Duration;

use crate::support::{cli, nodes, wait_until, Cli, Finished, Scratch, Server, VALIDITY};

const LIMIT: Duration = Duration::from_secs(20);

fn locks(dir: &Scratch, list: &str) -> Finished {
    let admin = dir.admin();
    cli(
        dir,
        &["locks", "--nodes", list, "--admin-token-file", &admin],
        &[],
        LIMIT,
    )
}

/// The `locks` row of `resource`.
fn row_of<'a>(listing: &'a Finished, resource: &str) -> &'a str {
    listing
        .stdout
        .lines()
        .find(|l| l.starts_with(resource))
        .unwrap_or_else(|| panic!("no row for {resource}: {listing:?}"))
}

#[test]
fn locks_shows_the_command_a_lock_is_held_for() {
    let dir = Scratch::new("edges-source");
    let servers = [
        Server::start(&dir, &["--no-quarantine"]),
        Server::start(&dir, &["--no-quarantine"]),
        Server::start(&dir, &["--no-quarantine"]),
    ];
    let list = nodes(&servers);
    let token = dir.token();
    let d = dir.path.display().to_string();
    let holder = Cli::spawn(
        &dir,
        &[
            "run",
            "--nodes",
            &list,
            "--token-file",
            &token,
            "--validity",
            VALIDITY,
            "nightly",
            "--",
            "sh",
            "-c",
            "touch \"$D/held\"; sleep 60",
        ],
        &[("D", &d)],
    );
    let leader = Cli::spawn(
        &dir,
        &[
            "elect",
            "--nodes",
            &list,
            "--token-file",
            &token,
            "--validity",
            VALIDITY,
            "scheduler",
            "me",
            "--",
            "sh",
            "-c",
            "touch \"$D/leading\"; sleep 60",
        ],
        &[("D", &d)],
    );
    let held = Cli::spawn(
        &dir,
        &[
            "lock",
            "--nodes",
            &list,
            "--token-file",
            &token,
            "--validity",
            VALIDITY,
            "by-hand",
        ],
        &[],
    );
    wait_until(LIMIT, "the command under the lock", || {
        dir.file("held").exists()
    });
    wait_until(LIMIT, "the leader's command", || {
        dir.file("leading").exists()
    });

    let listing = locks(&dir, &list);
    assert_eq!(listing.code, Some(0), "{listing:?}");
    assert!(
        row_of(&listing, "nightly").ends_with("run: sh -c 'touch \"$D/held\"; sleep 60'"),
        "{listing:?}"
    );
    assert!(
        row_of(&listing, "election/scheduler")
            .ends_with("elect: sh -c 'touch \"$D/leading\"; sleep 60'"),
        "{listing:?}"
    );
    wait_until(LIMIT, "quorum-lock lock to hold", || {
        held.stdout_so_far().contains("uid=")
    });
    let listing = locks(&dir, &list);
    assert!(
        row_of(&listing, "by-hand").ends_with("  lock"),
        "{listing:?}"
    );
    assert!(
        !listing.stdout.contains(".rs:"),
        "a code location: {listing:?}"
    );
    drop((holder, leader, held));
}
