//! Tokens are checked: a wrong token is refused at the handshake, and the
//! client token cannot do what needs the admin token.

use std::time::Duration;

use crate::support::{cli, nodes, remote_config, Finished, Scratch, Server, TOKEN};
use quorum_lock::net::RemoteLocker;
use quorum_lock::{Error, NetLocker};

const LIMIT: Duration = Duration::from_secs(20);

fn one_line(finished: &Finished) {
    assert_eq!(
        finished.stderr.lines().count(),
        1,
        "not one line: {finished:?}"
    );
    assert!(!finished.stderr.contains("panicked"), "{finished:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remote_locker_with_a_wrong_token_is_unauthorized() {
    let dir = Scratch::new("net-auth-remote");
    let server = Server::start(&dir, &["--no-quarantine"]);
    let endpoint = server.addr.to_string();
    match RemoteLocker::connect(endpoint.clone(), remote_config("not-the-token")).await {
        Err(Error::Unauthorized {
            endpoint: e,
            reason,
        }) => {
            assert_eq!(e, endpoint);
            assert!(reason.contains("invalid token"), "{reason}");
        }
        Err(other) => panic!("expected Unauthorized, got {other}"),
        Ok(_) => panic!("a wrong token was accepted"),
    }
    // The right token works, and the client token may not list.
    let client = RemoteLocker::connect(endpoint, remote_config(TOKEN))
        .await
        .unwrap();
    assert!(client.is_online());
    assert!(
        client.locks().await.is_err(),
        "the client token listed locks"
    );
}

#[test]
fn run_with_a_wrong_token_exits_with_the_auth_code() {
    let dir = Scratch::new("net-auth-run");
    let servers: Vec<Server> = (0..3)
        .map(|_| Server::start(&dir, &["--no-quarantine"]))
        .collect();
    let nodes = nodes(&servers);
    std::fs::write(dir.file("wrong"), "not-the-token\n").unwrap();
    let wrong = dir.file("wrong").display().to_string();
    let marker = dir.file("ran").display().to_string();
    let args = [
        "run",
        "--nodes",
        &nodes,
        "--token-file",
        &wrong,
        "job",
        "--",
        "touch",
        &marker,
    ];
    let by_file = cli(&dir, &args, &[], LIMIT);
    assert_eq!(by_file.code, Some(77), "{by_file:?}");
    assert!(by_file.stderr.contains("rejected the token"), "{by_file:?}");
    one_line(&by_file);

    let args = ["run", "--nodes", &nodes, "job", "--", "touch", &marker];
    let by_env = cli(
        &dir,
        &args,
        &[("QUORUM_LOCK_TOKEN", "not-the-token")],
        LIMIT,
    );
    assert_eq!(by_env.code, Some(77), "{by_env:?}");
    one_line(&by_env);
    assert!(
        !dir.file("ran").exists(),
        "the command ran without the lock"
    );
}

#[test]
fn admin_commands_refuse_the_client_token() {
    let dir = Scratch::new("net-auth-admin");
    let servers: Vec<Server> = (0..3)
        .map(|_| Server::start(&dir, &["--no-quarantine"]))
        .collect();
    let nodes = nodes(&servers);
    let token = dir.token();

    let listed = cli(
        &dir,
        &["locks", "--nodes", &nodes, "--token-file", &token],
        &[],
        LIMIT,
    );
    assert_eq!(listed.code, Some(77), "{listed:?}");
    assert!(
        listed.stderr.contains("needs the admin token"),
        "{listed:?}"
    );
    one_line(&listed);

    let args = [
        "force-unlock",
        "--nodes",
        &nodes,
        "--token-file",
        &token,
        "job",
    ];
    let forced = cli(&dir, &args, &[], LIMIT);
    assert_eq!(forced.code, Some(77), "{forced:?}");
    assert!(
        forced.stderr.contains("needs the admin token"),
        "{forced:?}"
    );
    one_line(&forced);

    let wrong_admin = cli(
        &dir,
        &["locks", "--nodes", &nodes],
        &[("QUORUM_LOCK_ADMIN_TOKEN", "guess")],
        LIMIT,
    );
    assert_eq!(wrong_admin.code, Some(77), "{wrong_admin:?}");
    one_line(&wrong_admin);
}
