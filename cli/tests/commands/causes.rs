//! Why a node is unreachable, in words: a certificate for another name,
//! TLS against a plain server, plain TCP against a TLS server, and the
//! port of a Redis server in `--nodes` each name the node, the cause and
//! the flag to change, in the "only N of M" failure, in the warning of a
//! run that goes on with a quorum, and on the node's `status` line. A
//! peer that answers at all is named from its answer at once: these runs
//! use a 30 s connect timeout and end long before it.

use std::time::{Duration, Instant};

use crate::redis_support::RedisServer;
use crate::support::fake::{FakePeer, REDIS_ERROR};
use crate::support::{cli, nodes, Finished, Scratch, Server};

const LIMIT: Duration = Duration::from_secs(40);

/// The connect timeout of the runs that must not wait for it.
const PATIENT: &str = "30s";

/// Well below [`PATIENT`]: a run that took longer waited for a timeout
/// instead of reading the answer.
const PROMPT: Duration = Duration::from_secs(15);

/// `quorum-lock run` over `list` with `extra` flags, timed. With a
/// `--timeout`: a run without one waits for missing servers to come back,
/// saying why they are missing, instead of failing.
fn run(dir: &Scratch, list: &str, extra: &[&str]) -> (Finished, Duration) {
    let mut flags = vec!["--timeout", "1m"];
    flags.extend_from_slice(extra);
    run_with(dir, list, &flags)
}

/// `quorum-lock run` over `list` with `flags` only, timed.
fn run_with(dir: &Scratch, list: &str, flags: &[&str]) -> (Finished, Duration) {
    let token = dir.token();
    let mut args = vec![
        "run",
        "--nodes",
        list,
        "--token-file",
        &token,
        "--connect-timeout",
        PATIENT,
    ];
    args.extend_from_slice(flags);
    args.extend(["job", "--", "true"]);
    let started = Instant::now();
    let finished = cli(dir, &args, &[], LIMIT);
    (finished, started.elapsed())
}

/// `quorum-lock status` over `list` with `extra` flags.
fn status(dir: &Scratch, list: &str, extra: &[&str]) -> Finished {
    let admin = dir.admin();
    let mut args = vec![
        "status",
        "--nodes",
        list,
        "--admin-token-file",
        &admin,
        "--connect-timeout",
        PATIENT,
    ];
    args.extend_from_slice(extra);
    cli(dir, &args, &[], LIMIT)
}

/// The `status` line of `node`.
fn line_of<'a>(status: &'a Finished, node: &str) -> &'a str {
    status
        .stdout
        .lines()
        .find(|l| l.starts_with(node))
        .unwrap_or_else(|| panic!("no line for {node}: {status:?}"))
}

/// Each of `nodes` is named in `text` followed by `cause`, and none of
/// the words of a library below ours shows.
fn names_each(text: &str, nodes: &[String], cause: &str) {
    for node in nodes {
        assert!(
            text.contains(&format!("{node}: {cause}"))
                || text.contains(&format!("{node}  unreachable: {cause}")),
            "{node} not named with {cause:?}: {text}"
        );
    }
    for raw in [
        "frame size too big",
        "InvalidContentType",
        "CaUsedAsEndEntity",
        "DnsName(",
    ] {
        assert!(!text.contains(raw), "{raw:?} shown: {text}");
    }
}

fn addrs(servers: &[Server]) -> Vec<String> {
    servers.iter().map(|s| s.addr.to_string()).collect()
}

/// Makes a CA and a certificate for `localhost` with `quorum-lock certs`;
/// the flags a server needs to serve it, and the CA file.
fn localhost_certificate(dir: &Scratch) -> (Vec<String>, String) {
    let made = dir.certificate_for("localhost");
    let flags = vec![
        "--no-quarantine".to_owned(),
        "--tls-cert".to_owned(),
        made.cert,
        "--tls-key".to_owned(),
        made.key,
    ];
    (flags, made.ca)
}

fn tls_servers(dir: &Scratch, flags: &[String], n: usize) -> Vec<Server> {
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    (0..n).map(|_| Server::start(dir, &flags)).collect()
}

#[test]
fn a_certificate_for_another_name_is_named_for_each_node() {
    let dir = Scratch::new("causes-name");
    let (flags, ca) = localhost_certificate(&dir);
    let servers = tls_servers(&dir, &flags, 3);
    // By IP address, which the certificates (for localhost) do not name.
    let (refused, _) = run(&dir, &nodes(&servers), &["--tls-ca", &ca]);
    assert_eq!(refused.code, Some(77), "{refused:?}");
    assert!(
        refused.stderr.contains("only 0 of 3 lock servers answered"),
        "{refused:?}"
    );
    // Servers that failed alike are named together, before their cause.
    let all = addrs(&servers).join(", ");
    names_each(
        &refused.stderr,
        &[all],
        "TLS refused: the server's certificate is for localhost, not for 127.0.0.1",
    );
    assert!(refused.stderr.contains("--tls-server-name"), "{refused:?}");

    let shown = status(&dir, &nodes(&servers), &["--tls-ca", &ca]);
    assert_eq!(shown.code, Some(77), "{shown:?}");
    for node in addrs(&servers) {
        assert!(
            line_of(&shown, &node).contains("certificate is for localhost, not for 127.0.0.1"),
            "{shown:?}"
        );
    }
    names_each(&shown.stdout, &[], "");
}

#[test]
fn tls_against_plain_servers_says_they_do_not_serve_tls_at_once() {
    let dir = Scratch::new("causes-tls-plain");
    let (_, ca) = localhost_certificate(&dir);
    let servers: Vec<Server> = (0..3)
        .map(|_| Server::start(&dir, &["--no-quarantine"]))
        .collect();
    let (refused, took) = run(&dir, &nodes(&servers), &["--tls-ca", &ca]);
    assert_eq!(refused.code, Some(69), "{refused:?}");
    names_each(
        &refused.stderr,
        &[addrs(&servers).join(", ")],
        "the server answered without TLS: it does not serve TLS",
    );
    assert!(
        refused
            .stderr
            .contains("start them with --tls-cert and --tls-key, or drop --tls-ca"),
        "{refused:?}"
    );
    assert!(took < PROMPT, "took {took:?}: it waited for the timeout");

    let shown = status(&dir, &nodes(&servers), &["--tls-ca", &ca]);
    assert_eq!(shown.code, Some(69), "{shown:?}");
    names_each(
        &shown.stdout,
        &addrs(&servers),
        "the server answered without TLS",
    );
}

#[test]
fn plain_tcp_against_tls_servers_says_they_serve_tls_at_once() {
    let dir = Scratch::new("causes-plain-tls");
    let (flags, _) = localhost_certificate(&dir);
    let servers = tls_servers(&dir, &flags, 3);
    let (refused, took) = run(&dir, &nodes(&servers), &[]);
    assert_eq!(refused.code, Some(69), "{refused:?}");
    names_each(
        &refused.stderr,
        &[addrs(&servers).join(", ")],
        "the server answered in TLS: it serves TLS only",
    );
    assert!(refused.stderr.contains("pass --tls-ca FILE"), "{refused:?}");
    assert!(took < PROMPT, "took {took:?}: it waited for the timeout");

    let shown = status(&dir, &nodes(&servers), &[]);
    assert_eq!(shown.code, Some(69), "{shown:?}");
    names_each(
        &shown.stdout,
        &addrs(&servers),
        "the server answered in TLS",
    );
    // The servers say what connected to them, in words.
    for server in &servers {
        let log = server.log_text();
        assert!(log.contains("a client that does not speak TLS"), "{log}");
    }
}

/// A run without `--timeout` waits for servers that are down, but TLS on
/// the servers' side only is a mistake that waiting does not mend: it
/// fails at once, naming each server and the cause.
#[test]
fn a_run_without_a_timeout_does_not_wait_for_servers_that_serve_tls() {
    let dir = Scratch::new("causes-waiting");
    let (flags, _) = localhost_certificate(&dir);
    let servers = tls_servers(&dir, &flags, 3);
    let list = nodes(&servers);
    let (failed, took) = run_with(&dir, &list, &[]);
    assert_eq!(failed.code, Some(69), "{failed:?}");
    assert!(took < PROMPT, "{failed:?}");
    names_each(
        &failed.stderr,
        &[addrs(&servers).join(", ")],
        "the server answered in TLS: it serves TLS only",
    );
}

#[test]
fn a_redis_port_in_nodes_is_named_at_once() {
    let dir = Scratch::new("causes-redis");
    let redis = [
        FakePeer::answering(REDIS_ERROR),
        FakePeer::answering(REDIS_ERROR),
    ];
    let server = Server::start(&dir, &["--no-quarantine"]);
    let fakes: Vec<String> = redis.iter().map(|r| r.addr.to_string()).collect();

    // Two of three are Redis ports: no quorum, each named with its cause.
    let list = format!("{},{},{}", fakes[0], server.addr, fakes[1]);
    let (refused, took) = run(&dir, &list, &[]);
    assert_eq!(refused.code, Some(69), "{refused:?}");
    assert!(
        refused.stderr.contains("only 1 of 3 lock servers answered"),
        "{refused:?}"
    );
    names_each(
        &refused.stderr,
        &[fakes.join(", ")],
        "the server answered \"-ERR unknown command",
    );
    for words in [
        "it is a Redis server, not a lock server",
        "for Redis servers pass --redis redis://HOST:PORT",
    ] {
        assert!(refused.stderr.contains(words), "{words:?}: {refused:?}");
    }
    assert!(took < PROMPT, "took {took:?}: it waited for the timeout");

    // One of three: the run goes on with a quorum, and says which is not a
    // lock server.
    let other = Server::start(&dir, &["--no-quarantine"]);
    let list = format!("{},{},{}", server.addr, other.addr, fakes[0]);
    let (ran, _) = run(&dir, &list, &[]);
    assert_eq!(ran.code, Some(0), "{ran:?}");
    assert!(
        ran.stderr.contains(&format!(
            "continuing with a quorum of the rest: {}: the server answered \"-ERR",
            fakes[0]
        )),
        "{ran:?}"
    );

    let shown = status(&dir, &list, &[]);
    assert_eq!(shown.code, Some(0), "{shown:?}");
    assert!(
        line_of(&shown, &fakes[0]).contains("it is a Redis server"),
        "{shown:?}"
    );
}

#[test]
fn mixed_causes_are_each_named_with_their_node() {
    let dir = Scratch::new("causes-mixed");
    let (flags, _) = localhost_certificate(&dir);
    let plain = Server::start(&dir, &["--no-quarantine"]);
    let tls = tls_servers(&dir, &flags, 1);
    let redis = FakePeer::answering(REDIS_ERROR);
    let (tls_addr, redis_addr) = (tls[0].addr.to_string(), redis.addr.to_string());
    let list = format!("{},{tls_addr},{redis_addr}", plain.addr);
    let (refused, _) = run(&dir, &list, &[]);
    assert_eq!(refused.code, Some(69), "{refused:?}");
    names_each(&refused.stderr, &[tls_addr], "the server answered in TLS");
    names_each(&refused.stderr, &[redis_addr], "the server answered \"-ERR");
    // One piece of advice per cause.
    for words in ["pass --tls-ca FILE", "pass --redis"] {
        assert!(refused.stderr.contains(words), "{words:?}: {refused:?}");
    }
    assert_eq!(refused.stderr.lines().count(), 1, "{refused:?}");
}

#[test]
fn a_real_redis_server_is_suspected_when_it_stays_silent() {
    // A real Redis says nothing to a lock handshake (it waits for the end
    // of a line), so only the timeout can tell; it names Redis as a cause.
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let dir = Scratch::new("causes-real-redis");
    let token = dir.token();
    let list = format!("127.0.0.1:{}", redis.port());
    let args = [
        "run",
        "--nodes",
        &list,
        "--token-file",
        &token,
        "--connect-timeout",
        "500ms",
        "--timeout",
        "1m",
        "job",
        "--",
        "true",
    ];
    let refused = cli(&dir, &args, &[], LIMIT);
    assert_eq!(refused.code, Some(69), "{refused:?}");
    for words in [
        &format!("{list}: the server accepted the connection but did not answer the handshake within 500ms"),
        "it is stopped or overloaded, or it is not a lock server",
        "a Redis server, for one, says nothing to a lock client",
    ] {
        assert!(refused.stderr.contains(words), "{words:?}: {refused:?}");
    }
}

/// A run without `--timeout` waits for servers that are down, but not for
/// nodes that are no lock servers of this setup: a Redis port in
/// `--nodes` (or TLS on one side only) is a mistake that waiting does not
/// mend, so it fails at once, naming the cause.
#[test]
fn a_run_without_a_timeout_does_not_wait_for_a_redis_port() {
    let dir = Scratch::new("causes-no-wait");
    let redis = [
        FakePeer::answering(REDIS_ERROR),
        FakePeer::answering(REDIS_ERROR),
    ];
    let server = Server::start(&dir, &["--no-quarantine"]);
    let list = format!("{},{},{}", server.addr, redis[0].addr, redis[1].addr);
    let (failed, took) = run_with(&dir, &list, &[]);
    assert_eq!(failed.code, Some(69), "{failed:?}");
    assert!(failed.stderr.contains("Redis server"), "{failed:?}");
    assert!(took < PROMPT, "{failed:?}");
}
