//! What the command that `run` runs under a lock inherits besides its
//! environment: no open descriptor of quorum-lock's own (a connection to
//! a lock server, an authenticated socket it could speak on, a token
//! file), only its standard input, output and error.

use std::time::Duration;

use crate::support::{cli, Scratch, Server};

const LIMIT: Duration = Duration::from_secs(20);

#[test]
fn the_command_inherits_no_descriptor_but_stdin_stdout_and_stderr() {
    let dir = Scratch::new("inherited-descriptors");
    let server = Server::start(&dir, &["--no-quarantine"]);
    let node = server.addr.to_string();
    let token = dir.token();
    let admin = dir.admin();
    let path = dir.path.display().to_string();
    // The shell's own descriptors, as the kernel lists them, before it
    // opens anything itself: `exec` keeps the shell's process, and the
    // listing of /proc/self/fd by `ls` adds only its directory.
    let script = "exec ls -l /proc/self/fd/ > \"$D/fds\"";
    let done = cli(
        &dir,
        &[
            "run",
            "--nodes",
            &node,
            "--token-file",
            &token,
            "--admin-token-file",
            &admin,
            "-n",
            "job",
            "--",
            "sh",
            "-c",
            script,
        ],
        &[("D", &path)],
        LIMIT,
    );
    assert_eq!(done.code, Some(0), "{done:?}");
    let through_run = descriptors(&dir.read("fds"));
    // The same script started by the test itself: what the test harness
    // hands every process it starts (a jobserver pipe, say) is no
    // descriptor of quorum-lock's.
    let direct = std::process::Command::new("sh")
        .args(["-c", script])
        .env("D", &path)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .expect("run the script directly");
    assert!(direct.success());
    let baseline = descriptors(&dir.read("fds"));
    let seen = through_run.len();
    for (fd, target) in &through_run {
        assert!(
            *fd <= 2
                || target.starts_with("/proc/")
                || baseline.iter().any(|(b, t)| b == fd && t == target),
            "the command inherited descriptor {fd} -> {target}, which a command started \
             without quorum-lock does not have: {through_run:?}; without it: {baseline:?}"
        );
    }
    assert!(seen >= 3, "no listing of descriptors: {through_run:?}");
}

/// The descriptors `ls -l /proc/self/fd/` listed: number and target.
fn descriptors(listing: &str) -> Vec<(u32, String)> {
    listing
        .lines()
        .filter_map(|line| line.split_once(" -> "))
        .map(|(left, target)| {
            let fd = left
                .split_whitespace()
                .last()
                .and_then(|n| n.parse().ok())
                .unwrap_or_else(|| panic!("no descriptor number in {left:?}"));
            (fd, target.to_owned())
        })
        .collect()
}
