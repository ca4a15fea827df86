//! `quorum-lock run` hands its command a fencing token and the lock's
//! name: tokens increase from one run to the next, and against servers too
//! old to issue tokens the command runs anyway, without the variable (not
//! even one inherited from an outer run), after a warning.

use std::time::Duration;

use crate::support::old_server::OldServer;
use crate::support::{cli, nodes, Scratch, Server};

const LIMIT: Duration = Duration::from_secs(20);

/// Runs `script` under the lock `name` on `nodes`, with `$D` the scratch
/// directory and `env` added to run's own environment.
fn run(
    dir: &Scratch,
    nodes: &str,
    name: &str,
    script: &str,
    env: &[(&str, &str)],
) -> crate::support::Finished {
    let token = dir.token();
    let path = dir.path.display().to_string();
    let mut vars = vec![("D", path.as_str())];
    vars.extend_from_slice(env);
    cli(
        dir,
        &[
            "run",
            "--nodes",
            nodes,
            "--token-file",
            &token,
            name,
            "--",
            "sh",
            "-c",
            script,
        ],
        &vars,
        LIMIT,
    )
}

const RECORD: &str = "echo \"${QUORUM_LOCK_FENCING_TOKEN-unset} $QUORUM_LOCK_NAME\" >> $D/tokens";

#[test]
fn each_run_gets_a_larger_fencing_token_and_the_lock_name() {
    let dir = Scratch::new("net-run-fencing");
    let servers: Vec<Server> = (0..3)
        .map(|_| Server::start(&dir, &["--no-quarantine"]))
        .collect();
    let nodes = nodes(&servers);
    for _ in 0..3 {
        // A stale token in run's own environment is replaced.
        let done = run(
            &dir,
            &nodes,
            "fenced-job",
            RECORD,
            &[("QUORUM_LOCK_FENCING_TOKEN", "1")],
        );
        assert_eq!(done.code, Some(0), "{done:?}");
        assert!(!done.stderr.contains("warning"), "{}", done.stderr);
    }
    let lines = dir.read("tokens");
    let mut tokens = Vec::new();
    for line in lines.lines() {
        let (token, name) = line.split_once(' ').expect("token and name");
        assert_eq!(name, "fenced-job");
        tokens.push(
            token
                .parse::<u64>()
                .unwrap_or_else(|_| panic!("not a token: {line}")),
        );
    }
    assert_eq!(tokens.len(), 3, "{lines}");
    assert!(tokens[0] > 1, "{tokens:?}");
    assert!(
        tokens.windows(2).all(|w| w[0] < w[1]),
        "tokens must increase from run to run: {tokens:?}"
    );
}

#[test]
fn against_version_2_servers_the_command_runs_without_a_token() {
    let dir = Scratch::new("net-run-fencing-old");
    // The stand-ins serve from this runtime's threads while run runs.
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let old: Vec<OldServer> = (0..3)
        .map(|_| runtime.block_on(OldServer::start(crate::support::TOKEN)))
        .collect();
    let nodes = old
        .iter()
        .map(|s| s.addr.to_string())
        .collect::<Vec<_>>()
        .join(",");
    let done = run(
        &dir,
        &nodes,
        "old-job",
        RECORD,
        &[("QUORUM_LOCK_FENCING_TOKEN", "7")],
    );
    assert_eq!(done.code, Some(0), "{done:?}");
    assert!(
        done.stderr.contains(
            "warning: no fencing token for 'old-job', so QUORUM_LOCK_FENCING_TOKEN is not set"
        ),
        "{}",
        done.stderr
    );
    assert!(
        done.stderr.contains("does not support fencing tokens"),
        "{}",
        done.stderr
    );
    assert_eq!(dir.read("tokens").trim(), "unset old-job");
    assert!(old.iter().all(|s| s.seen().hellos.contains(&2)));
}
