//! Bad input and unreachable servers give one clear line on stderr and the
//! documented exit code, never a panic; and the server's own lifecycle:
//! a taken port, and a graceful stop on SIGTERM.

use std::net::TcpListener;
use std::time::{Duration, Instant};

use crate::support::{
    cli, signal, wait_bounded, wire, Finished, RefusingPorts, Scratch, Server, SIGINT, SIGTERM,
    TOKEN,
};

const LIMIT: Duration = Duration::from_secs(20);

fn check(finished: &Finished, code: i32, needle: &str) {
    assert_eq!(finished.code, Some(code), "{finished:?}");
    assert!(
        finished.stderr.contains(needle),
        "{needle:?} not in {finished:?}"
    );
    assert_eq!(
        finished.stderr.lines().count(),
        1,
        "not one line: {finished:?}"
    );
    assert!(!finished.stderr.contains("panicked"), "{finished:?}");
}

#[test]
fn bad_input_is_a_usage_error() {
    let dir = Scratch::new("net-cli-usage");
    let token = dir.token();
    std::fs::write(dir.file("empty"), " \n").unwrap();
    let empty = dir.file("empty").display().to_string();
    let missing = dir.file("missing").display().to_string();
    let run = |nodes: &str, extra: &[&str]| {
        let mut args = vec!["run", "--nodes", nodes];
        args.extend(extra);
        args.extend(["job", "--", "true"]);
        cli(&dir, &args, &[], LIMIT)
    };
    let t = ["--token-file", token.as_str()];
    check(&run("", &t), 2, "empty node list");
    check(&run("127.0.0.1", &t), 2, "bad node address '127.0.0.1'");
    check(&run("127.0.0.1:1,,127.0.0.1:2", &t), 2, "empty entry");
    check(&run("127.0.0.1:70000", &t), 2, "port must be a number");
    check(&run("127.0.0.1:1,127.0.0.1:1", &t), 2, "listed twice");
    check(
        &run(
            "127.0.0.1:1",
            &["--token-file", &token, "--timeout", "5parsecs"],
        ),
        2,
        "invalid value '5parsecs'",
    );
    check(
        &run("127.0.0.1:1", &["--token-file", &token, "--validity", "0s"]),
        2,
        "greater than zero",
    );
    check(
        &run("127.0.0.1:1", &["--token-file", &missing]),
        2,
        "cannot read the token file",
    );
    check(
        &run("127.0.0.1:1", &["--token-file", &empty]),
        2,
        "is empty",
    );
    check(&run("127.0.0.1:1", &[]), 2, "no token");
    check(
        &cli(&dir, &["run", "--nodes", "127.0.0.1:1", "job"], &[], LIMIT),
        2,
        "<CMD>",
    );
    check(
        &cli(&dir, &["frobnicate"], &[], LIMIT),
        2,
        "unrecognized subcommand",
    );

    let server = |args: &[&str]| cli(&dir, &[&["server"], args].concat(), &[], LIMIT);
    check(
        &server(&["--listen", "localhost", "--token-file", &token]),
        2,
        "bad --listen address",
    );
    check(
        &server(&["--listen", "127.0.0.1:0", "--token-file", &missing]),
        2,
        "cannot read",
    );
    check(&server(&["--listen", "127.0.0.1:0"]), 2, "no client token");
    let same = [
        "--listen",
        "127.0.0.1:0",
        "--token-file",
        &token,
        "--admin-token-file",
        &token,
    ];
    check(&server(&same), 2, "must be non-empty and differ");
}

#[test]
fn help_documents_every_command_and_the_exit_codes() {
    let dir = Scratch::new("net-cli-help");
    let top = cli(&dir, &["--help"], &[], LIMIT);
    assert_eq!(top.code, Some(0));
    for needle in [
        "server",
        "run",
        "locks",
        "force-unlock",
        "Exit codes",
        "69",
        "75",
        "77",
        "79",
    ] {
        assert!(top.stdout.contains(needle), "{needle} missing from --help");
    }
    for command in ["server", "run", "locks", "force-unlock"] {
        let help = cli(&dir, &[command, "--help"], &[], LIMIT);
        assert_eq!(help.code, Some(0));
        assert!(
            help.stdout.contains("Examples:"),
            "{command} --help has no examples"
        );
    }
}

#[test]
fn unreachable_servers_are_named() {
    let dir = Scratch::new("net-cli-unreachable");
    let token = dir.token();
    let refusing = RefusingPorts::new(3);
    let [a, b, c]: [String; 3] = refusing.addrs().try_into().expect("three ports");
    let nodes = format!("{a},{b},{c}");
    // With --timeout, run may not wait for the servers: said at once.
    let args = [
        "run",
        "--timeout",
        "10s",
        "--nodes",
        &nodes,
        "--token-file",
        &token,
        "job",
        "--",
        "true",
    ];
    let none = cli(&dir, &args, &[], LIMIT);
    check(
        &none,
        69,
        "only 0 of 3 lock servers answered but 2 are needed",
    );
    for addr in [&a, &b, &c] {
        assert!(
            none.stderr.contains(addr.as_str()),
            "{addr} not named: {none:?}"
        );
    }

    let server = Server::start(&dir, &["--no-quarantine"]);
    let nodes = format!("{},{b},{c}", server.addr);
    let args = [
        "locks",
        "--nodes",
        &nodes,
        "--admin-token-file",
        &dir.admin(),
    ]
    .map(str::to_owned);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let one = cli(&dir, &args, &[], LIMIT);
    check(
        &one,
        69,
        "only 1 of 3 lock servers answered but 2 are needed",
    );
    assert!(
        one.stderr.contains(&b) && one.stderr.contains(&c),
        "{one:?}"
    );
}

#[test]
fn a_server_cannot_take_a_used_port() {
    let dir = Scratch::new("net-cli-port");
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let args = ["server", "--listen", &addr, "--token-file", &dir.token()].map(str::to_owned);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    check(
        &cli(&dir, &args, &[], LIMIT),
        1,
        &format!("cannot listen on {addr}"),
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_stops_gracefully_on_sigterm_and_sigint() {
    let dir = Scratch::new("net-cli-stop");
    for sig in [SIGTERM, SIGINT] {
        let mut server = Server::start(&dir, &["--handshake-timeout", "2s"]);
        // Neither an authenticated client nor one that never finishes its
        // handshake may hold the shutdown up for long.
        let (_client, welcome) = wire::authenticate(&server.addr.to_string(), TOKEN)
            .await
            .unwrap();
        assert_eq!(welcome[0], 0, "not accepted");
        let _silent = tokio::net::TcpStream::connect(server.addr).await.unwrap();
        tokio::time::sleep(Duration::from_millis(200)).await;
        let started = Instant::now();
        signal(server.pid(), sig);
        let status = tokio::task::block_in_place(|| {
            wait_bounded(
                &mut server.child,
                Duration::from_secs(10),
                "server shutdown",
            )
        });
        eprintln!("signal {sig}: stopped in {:?}", started.elapsed());
        assert_eq!(
            status.code(),
            Some(0),
            "signal {sig}: {}",
            server.log_text()
        );
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "slow shutdown: {:?}",
            started.elapsed()
        );
        assert!(server.log_text().contains("shutting down"));
    }
}
