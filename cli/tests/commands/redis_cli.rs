//! `quorum-lock run`, `elect`, `locks` and `force-unlock` with `--redis`:
//! three real `redis-server` processes instead of lock servers. The
//! command runs under the lock and gets a fencing token, a leader's command
//! runs with its term and `elect --listen` follows the leaders, a held lock is listed and can
//! be forced open by name or by uid, a holder killed with SIGKILL takes its
//! command with it and leaves a
//! lock that expires after its validity, bad input is a usage error, and
//! no password from a Redis URL ever shows in what the tool prints.
//! `status --redis` shows each node's quarantine, entries and locks, and
//! `status --health` whether a quorum of them can grant.
//!
//! The CLI's quarantine after a Redis start is its `--validity`, so every
//! `run` here first waits for the freshly started servers to be older than
//! that; the tests use a short `--validity` for it.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::redis_support::{locker, RedisServer};
use crate::support::{
    cli, cli_with_logs, forced_open_on_a_quorum, on_a_quorum_of_three, signal, wait_until, Cli,
    Finished, Scratch,
};
use quorum_lock::{Dsync, Error, NetLocker};

const LIMIT: Duration = Duration::from_secs(30);
/// The lease of every `run` here: refreshes every 500 ms, and the Redis
/// quarantine the CLI applies after a server starts.
const VALIDITY: &str = "3s";

/// Three Redis nodes and a scratch directory for the commands' files.
struct Nodes {
    dir: Scratch,
    servers: Vec<RedisServer>,
    urls: String,
}

fn nodes(test: &str) -> Option<Nodes> {
    let servers = RedisServer::start_many(3)?;
    let urls = servers
        .iter()
        .map(RedisServer::url)
        .collect::<Vec<_>>()
        .join(",");
    Some(Nodes {
        dir: Scratch::new(test),
        servers,
        urls,
    })
}

impl Nodes {
    /// `quorum-lock run --redis ... --validity 3s EXTRA NAME -- sh -c SCRIPT`,
    /// with `$D` the scratch directory.
    fn run(&self, extra: &[&str], name: &str, script: &str) -> Cli {
        let mut args = vec!["run", "--redis", &self.urls, "--validity", VALIDITY];
        args.extend(extra);
        args.extend([name, "--", "sh", "-c", script]);
        let dir = self.dir.path.display().to_string();
        Cli::spawn(&self.dir, &args, &[("D", &dir)])
    }

    /// `quorum-lock SUBCOMMAND --redis ... ARGS`, to completion.
    fn admin(&self, subcommand: &str, args: &[&str]) -> Finished {
        let mut all = vec![subcommand, "--redis", &self.urls];
        all.extend(args);
        cli(&self.dir, &all, &[], LIMIT)
    }

    /// A client in this process, on the same nodes and keys, that ignores
    /// the quarantine (the servers are fresh).
    async fn client(&self) -> Dsync {
        let mut lockers: Vec<Arc<dyn NetLocker>> = Vec::new();
        for server in &self.servers {
            lockers.push(locker(server, Duration::from_secs(3)).await);
        }
        Dsync::builder(lockers)
            .owner("redis-cli-test")
            .lease(quorum_lock::Lease {
                validity: Duration::from_secs(3),
                refresh_interval: Duration::from_millis(500),
                safety_margin: Duration::from_millis(500),
            })
            .timeouts(quorum_lock::Timeouts {
                refresh: Duration::from_secs(1),
                ..quorum_lock::Timeouts::default()
            })
            .build()
            .expect("valid settings")
    }

    /// Every node's entries, straight from the nodes.
    async fn entries(&self) -> usize {
        let mut total = 0;
        for server in &self.servers {
            let node = locker(server, Duration::from_secs(3)).await;
            total += node.locks().await.expect("a node lists its locks").len();
        }
        total
    }
}

/// Rows of a `locks` listing whose first column is `first`.
fn rows<'a>(listing: &'a str, first: &str) -> Vec<&'a str> {
    listing
        .lines()
        .filter(|l| l.split_whitespace().next() == Some(first))
        .collect()
}

/// Whether a process runs (a zombie does not count).
fn running(pid: &str) -> bool {
    match std::fs::read_to_string(format!("/proc/{}/stat", pid.trim())) {
        Ok(stat) => !stat
            .rsplit(')')
            .next()
            .unwrap_or("")
            .trim_start()
            .starts_with('Z'),
        Err(_) => false,
    }
}

/// One Redis command over a plain socket; the first line of the reply.
fn redis_command(port: u16, args: &[&str]) -> String {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("connect to redis-server");
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .expect("a read timeout");
    let mut request = format!("*{}\r\n", args.len());
    for arg in args {
        request.push_str(&format!("${}\r\n{arg}\r\n", arg.len()));
    }
    stream.write_all(request.as_bytes()).expect("send");
    let mut line = String::new();
    BufReader::new(stream)
        .read_line(&mut line)
        .expect("a reply");
    line.trim_end().to_owned()
}

#[test]
fn run_over_three_redis_nodes_runs_the_command_with_a_token_and_releases() {
    let Some(n) = nodes("redis-cli-run") else {
        return;
    };
    let script = "echo \"$QUORUM_LOCK_NAME $QUORUM_LOCK_FENCING_TOKEN\" >> $D/env";
    // A fresh Redis draws no fencing token for `FENCE_QUARANTINE` (4 s),
    // longer than the 3 s lock quarantine, and the quarantine is counted
    // from a start rounded up to a second.
    std::thread::sleep(quorum_lock::redis::FENCE_QUARANTINE + Duration::from_millis(1500));
    for _ in 0..2 {
        let done = n.run(&[], "nightly", script).finish(LIMIT);
        assert_eq!(done.code, Some(0), "{done:?}");
        assert!(done.stderr.is_empty(), "{done:?}");
    }
    let lines = n.dir.read("env");
    let tokens: Vec<u64> = lines
        .lines()
        .map(|line| {
            let (name, token) = line.split_once(' ').expect("name and token");
            assert_eq!(name, "nightly", "{lines:?}");
            token
                .parse()
                .unwrap_or_else(|_| panic!("no token: {lines:?}"))
        })
        .collect();
    assert_eq!(tokens.len(), 2, "{lines:?}");
    assert!(tokens[0] < tokens[1], "tokens did not grow: {tokens:?}");

    // Released, not left to expire: another client gets it at once. `run`
    // exits once a quorum confirmed the release, so an unlock still on its
    // way to the third node may be cut off; that entry (fewer than a
    // quorum) expires on its own within the validity.
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    runtime.block_on(async {
        let ds = n.client().await;
        let guard = ds.rw_mutex(["nightly"]).unwrap().try_lock().await;
        guard.expect("free at once").unlock().await.expect("unlock");
    });
    assert!(runtime.block_on(n.entries()) <= 1, "more than a leftover");
    wait_until(Duration::from_secs(10), "every entry to be gone", || {
        runtime.block_on(n.entries()) == 0
    });
    let listed = n.admin("locks", &[]);
    assert_eq!(listed.code, Some(0), "{listed:?}");
    assert_eq!(listed.stdout.trim(), "no locks held", "{listed:?}");
    // A command's exit code passes through.
    let failed = n.run(&[], "nightly", "exit 7").finish(LIMIT);
    assert_eq!(failed.code, Some(7), "{failed:?}");
}

#[test]
fn locks_shows_a_held_lock_and_force_unlock_frees_it_by_name_and_by_uid() {
    let Some(n) = nodes("redis-cli-admin") else {
        return;
    };
    let script = "echo $QUORUM_LOCK_UID > $D/uid; sleep 30 & echo $! > $D/sleep; wait";
    let holder = n.run(&["--owner", "the-holder"], "reports", script);
    wait_until(LIMIT, "the command to start", || {
        !n.dir.read("sleep").is_empty()
    });
    let uid = n.dir.read("uid").trim().to_owned();

    // The command starts once a quorum granted. The third node's grant is
    // not promised: it is kept if its call answers in time, and undone if
    // the call was cut off. So the listing shows a quorum (2/3 or 3/3), and
    // the per-node rows are checked for the nodes that list the lock.
    let listed = n.admin("locks", &[]);
    assert_eq!(listed.code, Some(0), "{listed:?}");
    let row = rows(&listed.stdout, "reports");
    assert_eq!(row.len(), 1, "{listed:?}");
    for field in ["write", "the-holder", uid.as_str()] {
        assert!(row[0].contains(field), "{field} missing from {listed:?}");
    }
    assert!(on_a_quorum_of_three(row[0]), "{listed:?}");

    // One row per node holding it, each naming its node and the holder.
    let per_node = n.admin("locks", &["--per-node"]);
    assert_eq!(per_node.code, Some(0), "{per_node:?}");
    let mut holding = 0;
    for server in &n.servers {
        let node = format!("127.0.0.1:{}", server.port());
        let row = rows(&per_node.stdout, &node);
        assert!(row.len() <= 1, "{node} in {per_node:?}");
        if let Some(row) = row.first() {
            assert!(
                row.contains("reports") && row.contains(&uid),
                "{per_node:?}"
            );
            holding += 1;
        }
    }
    assert!(
        holding >= 2,
        "a quorum of nodes should hold it: {per_node:?}"
    );

    let forced = n.admin("force-unlock", &["reports"]);
    assert_eq!(forced.code, Some(0), "{forced:?}");
    assert!(
        forced_open_on_a_quorum(&forced.stdout, "forced open: reports", "Redis nodes"),
        "{forced:?}"
    );
    // The holder notices at its next refresh and stops its command.
    let holder = holder.finish(LIMIT);
    assert_eq!(holder.code, Some(79), "{holder:?}");
    assert!(
        holder.stderr.contains("lost the lock 'reports'"),
        "{holder:?}"
    );
    let sleep = n.dir.read("sleep");
    wait_until(Duration::from_secs(5), "the command's child to die", || {
        !running(&sleep)
    });
    let after = n.admin("locks", &[]);
    assert_eq!(after.stdout.trim(), "no locks held", "{after:?}");

    // By uid: only that acquisition goes; another lock stays.
    std::fs::remove_file(n.dir.file("sleep")).expect("remove the pid file");
    let holder = n.run(&[], "reports", script);
    let other = n.run(&[], "other", "sleep 30 & echo $! > $D/other; wait");
    wait_until(LIMIT, "both commands to start", || {
        !n.dir.read("sleep").is_empty() && !n.dir.read("other").is_empty()
    });
    let uid = n.dir.read("uid").trim().to_owned();
    let forced = n.admin("force-unlock", &["--uid", &uid]);
    assert_eq!(forced.code, Some(0), "{forced:?}");
    assert!(
        forced_open_on_a_quorum(
            &forced.stdout,
            &format!("forced open: uid {uid}"),
            "Redis nodes"
        ),
        "{forced:?}"
    );
    let holder = holder.finish(LIMIT);
    assert_eq!(holder.code, Some(79), "{holder:?}");
    let listed = n.admin("locks", &[]);
    assert!(rows(&listed.stdout, "reports").is_empty(), "{listed:?}");
    assert_eq!(rows(&listed.stdout, "other").len(), 1, "{listed:?}");
    // The other holder ends normally on SIGTERM, releasing its lock.
    signal(other.child.id(), 15);
    assert_eq!(other.finish(LIMIT).code, Some(128 + 15));
    let forced_again = n.admin("force-unlock", &["--uid", &uid]);
    assert_eq!(forced_again.code, Some(0), "{forced_again:?}");
    assert_eq!(
        forced_again.stdout.trim(),
        format!("not held: uid {uid} (confirmed by 3 of 3 Redis nodes)")
    );
    assert!(
        forced_again.stderr.contains("nothing was held by uid"),
        "{forced_again:?}"
    );
}

#[test]
fn a_killed_holder_keeps_the_lock_until_its_validity_then_another_run_gets_it() {
    let Some(n) = nodes("redis-cli-killed") else {
        return;
    };
    let holder = n.run(&[], "job", "echo $$ > $D/pid; exec sleep 60");
    wait_until(LIMIT, "the command to start", || {
        !n.dir.read("pid").is_empty()
    });
    let orphan = n.dir.read("pid").trim().to_owned();
    // SIGKILL to `quorum-lock run` itself: no release, no more refreshes.
    let mut holder = holder;
    holder.child.kill().expect("SIGKILL the holder");
    holder.child.wait().expect("reap the holder");
    let killed = Instant::now();

    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    let ds = runtime.block_on(n.client());
    let mutex = ds.rw_mutex(["job"]).expect("a valid name");
    // Still held right after the kill: its entries outlive their holder
    // until they expire.
    let early = runtime.block_on(mutex.try_lock());
    assert!(
        matches!(early, Err(Error::WouldBlock)),
        "granted {:?} after the kill: {early:?}",
        killed.elapsed()
    );
    let listed = n.admin("locks", &[]);
    assert_eq!(rows(&listed.stdout, "job").len(), 1, "{listed:?}");

    // Another run gets it once the entries expired.
    let next = n
        .run(&["--timeout", "20s"], "job", "echo next > $D/next")
        .finish(LIMIT);
    assert_eq!(next.code, Some(0), "{next:?}");
    assert_eq!(n.dir.read("next").trim(), "next");
    assert!(
        killed.elapsed() >= Duration::from_secs(2),
        "granted {:?} after the kill, before a 3s lease could expire",
        killed.elapsed()
    );
    // The kernel killed the command with its run (PR_SET_PDEATHSIG): it
    // did not outlive the lease nobody refreshed.
    wait_until(LIMIT, "the command to die with its run", || {
        !running(&orphan)
    });
}

#[test]
fn bad_input_is_a_usage_error_that_shows_no_password() {
    let dir = Scratch::new("redis-cli-usage");
    let run = |args: &[&str], env: &[(&str, &str)]| {
        let mut all = vec!["run"];
        all.extend(args);
        all.extend(["job", "--", "true"]);
        cli(&dir, &all, env, LIMIT)
    };
    let check = |done: &Finished, needle: &str| {
        assert_eq!(done.code, Some(2), "{done:?}");
        assert!(done.stderr.contains(needle), "{needle:?} not in {done:?}");
        assert_eq!(done.stderr.lines().count(), 1, "not one line: {done:?}");
        assert!(
            !done.stderr.contains("s3cret"),
            "a password shown: {done:?}"
        );
        assert!(
            !done.stdout.contains("s3cret"),
            "a password shown: {done:?}"
        );
    };
    let ok = "redis://127.0.0.1:1,redis://127.0.0.1:2,redis://127.0.0.1:3";
    check(
        &run(&["--redis", "http://:s3cret@127.0.0.1:1"], &[]),
        "Redis node 1 of 1 (not shown since the list carries credentials",
    );
    check(
        &run(
            &["--redis", "redis://:s3cret@127.0.0.1:1,,redis://b:2"],
            &[],
        ),
        "empty entry",
    );
    check(
        &run(&["--redis", "redis://:s3cret@127.0.0.1:notaport"], &[]),
        "Redis node 1 of 1 (redis://***)",
    );
    check(&run(&["--redis", ""], &[]), "empty Redis node list");
    check(
        &run(
            &[
                "--redis",
                "redis://:s3cret@127.0.0.1:1,redis://127.0.0.1:1/2",
            ],
            &[],
        ),
        "127.0.0.1:1 is listed twice",
    );
    check(
        &run(&["--redis", ok, "--nodes", "127.0.0.1:7001"], &[]),
        "both lock servers (--nodes / QUORUM_LOCK_NODES) and Redis nodes",
    );
    // The environment counts as given, too.
    check(
        &run(&["--nodes", "127.0.0.1:7001"], &[("QUORUM_LOCK_REDIS", ok)]),
        "both lock servers",
    );
    check(&run(&[], &[]), "no nodes: pass --nodes");
    check(
        &run(&["--redis", ok, "--redis-ca", "/nonexistent"], &[]),
        "no Redis URL uses TLS",
    );
    check(
        &run(
            &[
                "--redis",
                "rediss://127.0.0.1:1",
                "--redis-ca",
                "/nonexistent",
            ],
            &[],
        ),
        "cannot read the --redis-ca file /nonexistent",
    );
    check(
        &run(&["--redis", ok, "--tls-ca", "/nonexistent"], &[]),
        "for rediss:// Redis nodes pass the CA file with --redis-ca",
    );
    check(
        &run(&["--nodes", "127.0.0.1:7001", "--redis-prefix", "x:"], &[]),
        "--redis-prefix / QUORUM_LOCK_REDIS_PREFIX is set, but it only applies to Redis nodes",
    );
    check(
        &run(&["--redis", ok, "--redis-prefix", ""], &[]),
        "--redis-prefix is empty",
    );
    let forced = cli(&dir, &["force-unlock", "--redis", ok], &[], LIMIT);
    assert_eq!(forced.code, Some(2), "{forced:?}");
    assert!(forced.stderr.contains("<NAME>"), "{forced:?}");
    let both = cli(
        &dir,
        &["force-unlock", "--redis", ok, "--uid", "u", "name"],
        &[],
        LIMIT,
    );
    assert_eq!(both.code, Some(2), "{both:?}");
    assert!(both.stderr.contains("cannot be used with"), "{both:?}");
    let help = cli(
        &dir,
        &["run", "--help"],
        &[("QUORUM_LOCK_REDIS", "redis://:hidden-Pa55@h:1")],
        LIMIT,
    );
    assert_eq!(help.code, Some(0), "{help:?}");
    assert!(help.stdout.contains("--redis <URL,URL,URL>"), "{help:?}");
    assert!(
        !help.stdout.contains("hidden-Pa55"),
        "--help shows the URL: {help:?}"
    );
}

#[test]
fn passwords_in_redis_urls_never_show_in_output_or_errors() {
    let Some(n) = nodes("redis-cli-password") else {
        return;
    };
    const RIGHT: &str = "right-Pa55word-17";
    const WRONG: &str = "wrong-Pa55word-42";
    for server in &n.servers {
        assert_eq!(
            redis_command(server.port(), &["CONFIG", "SET", "requirepass", RIGHT]),
            "+OK"
        );
    }
    let urls = |password: &str, user: &str| {
        n.servers
            .iter()
            .map(|s| format!("redis://{user}:{password}@127.0.0.1:{}", s.port()))
            .collect::<Vec<_>>()
            .join(",")
    };
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
        listener.local_addr().expect("an address").port()
    };
    let shown = |done: &Finished, password: &str| {
        done.stdout.contains(password) || done.stderr.contains(password)
    };
    // With the client's logs on: nothing logged may show it either.
    let dir = &n.dir;

    // A password to a port nothing listens on.
    let to_closed = format!("redis://:{WRONG}@127.0.0.1:{closed}");
    let done = cli_with_logs(
        dir,
        &[
            "run",
            "--redis",
            &to_closed,
            "--timeout",
            "2s",
            "job",
            "--",
            "true",
        ],
        LIMIT,
    );
    assert_eq!(done.code, Some(69), "{done:?}");
    assert!(
        done.stderr.contains(&format!("127.0.0.1:{closed}")),
        "{done:?}"
    );
    assert!(!shown(&done, WRONG), "the password was shown: {done:?}");

    // No password for servers that require one.
    let none = n
        .servers
        .iter()
        .map(RedisServer::url)
        .collect::<Vec<_>>()
        .join(",");
    let done = cli_with_logs(dir, &["locks", "--redis", &none], LIMIT);
    assert_eq!(done.code, Some(77), "{done:?}");
    assert!(done.stderr.contains("password"), "{done:?}");

    // A wrong password, and a wrong user with it, on real servers.
    for user in ["", "someone"] {
        let wrong = urls(WRONG, user);
        for args in [
            vec!["run", "--redis", &wrong, "job", "--", "true"],
            vec!["locks", "--redis", &wrong],
            vec!["force-unlock", "--redis", &wrong, "job"],
        ] {
            let done = cli_with_logs(dir, &args, LIMIT);
            assert_eq!(done.code, Some(77), "{args:?}: {done:?}");
            assert!(done.stderr.contains("password"), "{done:?}");
            assert!(!shown(&done, WRONG), "the password was shown: {done:?}");
        }
    }

    // The right password works, and is not shown either.
    let right = urls(RIGHT, "");
    let ran = cli_with_logs(
        dir,
        &[
            "run",
            "--redis",
            &right,
            "--validity",
            VALIDITY,
            "job",
            "--",
            "true",
        ],
        LIMIT,
    );
    assert_eq!(ran.code, Some(0), "{ran:?}");
    assert!(!ran.stderr.is_empty(), "RUST_LOG=trace logged nothing");
    assert!(!shown(&ran, RIGHT), "the password was shown: {ran:?}");
    let listed = cli_with_logs(dir, &["locks", "--per-node", "--redis", &right], LIMIT);
    assert_eq!(listed.code, Some(0), "{listed:?}");
    assert!(!shown(&listed, RIGHT), "the password was shown: {listed:?}");
}

#[test]
fn a_redis_node_that_does_not_answer_counts_as_not_granting() {
    let Some(servers) = RedisServer::start_many(2) else {
        return;
    };
    let dir = Scratch::new("redis-cli-one-down");
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
        listener.local_addr().expect("an address").port()
    };
    let urls = format!(
        "{},redis://127.0.0.1:{closed},{}",
        servers[0].url(),
        servers[1].url()
    );
    let d = dir.path.display().to_string();
    let ran = cli(
        &dir,
        &[
            "run",
            "--redis",
            &urls,
            "--validity",
            VALIDITY,
            "job",
            "--",
            "sh",
            "-c",
            "echo ran > $D/ran",
        ],
        &[("D", &d)],
        LIMIT,
    );
    assert_eq!(ran.code, Some(0), "{ran:?}");
    assert_eq!(dir.read("ran").trim(), "ran");
    assert!(
        ran.stderr.contains(&format!(
            "continuing with a quorum of the rest: 127.0.0.1:{closed}"
        )),
        "{ran:?}"
    );
    let listed = cli(&dir, &["locks", "--redis", &urls], &[], LIMIT);
    assert_eq!(listed.code, Some(0), "{listed:?}");
    assert_eq!(listed.stdout.trim(), "no locks held", "{listed:?}");

    // With two of three down there is no quorum: said at once when run
    // may not wait (--nonblock; without it, or with --timeout, it waits).
    let only_one = format!(
        "{},redis://127.0.0.1:{closed},redis://127.0.0.1:1",
        servers[0].url()
    );
    let refused = cli(
        &dir,
        &[
            "run",
            "--nonblock",
            "--redis",
            &only_one,
            "job",
            "--",
            "true",
        ],
        &[],
        LIMIT,
    );
    assert_eq!(refused.code, Some(69), "{refused:?}");
    assert!(
        refused
            .stderr
            .contains("only 1 of 3 Redis nodes answered but 2 are needed for a quorum"),
        "{refused:?}"
    );
}

#[test]
fn elect_over_three_redis_nodes_runs_the_leader_and_listen_follows_it() {
    let Some(n) = nodes("redis-cli-elect") else {
        return;
    };
    // The term is the election lock's fencing token: wait out the fresh
    // nodes' quarantines, as above.
    std::thread::sleep(quorum_lock::redis::FENCE_QUARANTINE + Duration::from_millis(1500));
    let dir = n.dir.path.display().to_string();
    let elect = |value: &str| {
        let script = "echo \"$QUORUM_LOCK_FENCING_TOKEN $V\" >> $D/terms; \
                      while [ ! -e $D/stop.$V ]; do sleep 0.05; done";
        let args = [
            "elect",
            "--redis",
            &n.urls,
            "--validity",
            VALIDITY,
            "primary",
            value,
            "--",
            "sh",
            "-c",
            script,
        ];
        Cli::spawn(&n.dir, &args, &[("D", &dir), ("V", value)])
    };
    let listener = Cli::spawn(
        &n.dir,
        &[
            "elect",
            "--listen",
            "--redis",
            &n.urls,
            "--validity",
            VALIDITY,
            "primary",
        ],
        &[],
    );
    let lines = |listener: &Cli| -> Vec<String> {
        listener
            .stdout_so_far()
            .lines()
            .map(str::to_owned)
            .collect()
    };
    wait_until(LIMIT, "the listener's first line", || {
        lines(&listener) == ["no leader"]
    });
    let terms = || -> Vec<(u64, String)> {
        n.dir
            .read("terms")
            .lines()
            .filter_map(|l| {
                let (term, value) = l.split_once(' ')?;
                Some((term.parse().ok()?, value.to_owned()))
            })
            .collect()
    };

    let a = elect("a");
    wait_until(LIMIT, "a to lead", || terms().len() == 1);
    let b = elect("b");
    let (first, _) = terms()[0].clone();
    wait_until(LIMIT, "the listener to print a", || {
        lines(&listener).last() == Some(&format!("term={first} value=a"))
    });
    std::fs::write(n.dir.file("stop.a"), "").expect("write stop.a");
    let a = a.finish(LIMIT);
    assert_eq!(a.code, Some(0), "{a:?}");
    wait_until(LIMIT, "b to lead after a resigned", || terms().len() == 2);
    let (second, _) = terms()[1].clone();
    assert!(first < second, "terms must grow: {:?}", terms());
    wait_until(LIMIT, "the listener to print b", || {
        lines(&listener).last() == Some(&format!("term={second} value=b"))
    });
    std::fs::write(n.dir.file("stop.b"), "").expect("write stop.b");
    let b = b.finish(LIMIT);
    assert_eq!(b.code, Some(0), "{b:?}");
    wait_until(LIMIT, "the listener to print that nobody leads", || {
        lines(&listener).last().map(String::as_str) == Some("no leader")
            && lines(&listener).len() > 3
    });

    signal(listener.child.id(), crate::support::SIGINT);
    let listener = listener.finish(LIMIT);
    assert_eq!(listener.code, Some(0), "{listener:?}");
    let leaders: Vec<&str> = listener
        .stdout
        .lines()
        .filter(|l| *l != "no leader")
        .collect();
    assert_eq!(
        leaders,
        [
            format!("term={first} value=a"),
            format!("term={second} value=b")
        ],
        "{}",
        listener.stdout
    );
    assert_eq!(terms(), [(first, "a".to_owned()), (second, "b".to_owned())]);
}

#[test]
fn status_over_redis_nodes_shows_quarantine_entries_locks_and_health() {
    let Some(mut n) = nodes("redis-cli-status") else {
        return;
    };
    let status = |n: &Nodes, extra: &[&str]| n.admin("status", extra);
    // Fresh servers, and clients of --validity 60s: each is in quarantine.
    let fresh = status(&n, &["--validity", "60s"]);
    assert_eq!(fresh.code, Some(0), "{fresh:?}");
    for server in &n.servers {
        let node = format!("127.0.0.1:{}", server.port());
        let line = rows(&fresh.stdout, &node);
        assert_eq!(line.len(), 1, "{node}: {fresh:?}");
        assert!(
            line[0].contains("reachable, Redis, quarantined, ")
                && line[0].ends_with(" left, 0 entries"),
            "{line:?}"
        );
    }
    let probe = status(&n, &["--validity", "60s", "--health"]);
    assert_eq!(probe.code, Some(69), "{probe:?}");
    assert_eq!(
        probe.stdout.matches("unhealthy: quarantined, ").count(),
        3,
        "{probe:?}"
    );
    assert!(
        probe.stderr.contains("0 of 3 Redis nodes healthy"),
        "{probe:?}"
    );

    // Clients of --validity 1s: the quarantine ends within two seconds of
    // the start (counted from a start rounded up to a second).
    wait_until(LIMIT, "the short quarantine to end", || {
        status(&n, &["--validity", "1s", "--health"]).code == Some(0)
    });

    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    let ds = runtime.block_on(n.client());
    let guard = runtime
        .block_on(ds.rw_mutex(["reports"]).unwrap().lock())
        .expect("a lock");
    let uid = guard.uid().to_owned();
    // A quorum lists it (a third grant is not promised), and every node is
    // past the quarantine of a 3 s validity (each ends 3 s after its
    // server's start, rounded up to a second).
    let mut shown = status(&n, &["--validity", "3s"]);
    wait_until(
        LIMIT,
        "every node out of quarantine, a quorum listing the lock",
        || {
            shown = status(&n, &["--validity", "3s"]);
            shown.stdout.matches("not quarantined").count() == 3
                && shown.stdout.matches("not quarantined, 1 entry").count() >= 2
        },
    );
    assert_eq!(shown.code, Some(0), "{shown:?}");
    let lock_rows = rows(&shown.stdout, "reports");
    assert!((2..=3).contains(&lock_rows.len()), "{shown:?}");
    for row in lock_rows {
        assert!(row.contains("write") && row.contains(&uid), "{row:?}");
    }

    // One node down: named with its cause; the others still shown, with
    // the lock where they hold it.
    let gone = format!("127.0.0.1:{}", n.servers[0].port());
    n.servers[0].kill();
    let partial = status(&n, &["--validity", "3s", "--output", "json"]);
    assert_eq!(partial.code, Some(0), "{partial:?}");
    let doc: serde_json::Value = serde_json::from_str(&partial.stdout).expect("JSON");
    assert_eq!(doc["kind"], "redis", "{doc}");
    let listed = doc["nodes"].as_array().expect("nodes");
    assert_eq!(listed[0]["node"], gone.as_str(), "{doc}");
    assert_eq!(listed[0]["reachable"], false, "{doc}");
    assert!(
        listed[0]["reason"]
            .as_str()
            .is_some_and(|r| r.contains("refused the connection")),
        "{doc}"
    );
    let mut holding = 0;
    for node in &listed[1..] {
        assert_eq!(node["healthy"], true, "{doc}");
        assert!(node["protocol"].is_null(), "{doc}");
        let locks = node["locks"].as_array().expect("a node's locks");
        assert!(locks.len() <= 1, "{doc}");
        if let Some(lock) = locks.first() {
            assert_eq!(lock["uid"], uid.as_str(), "{doc}");
            holding += 1;
        }
    }
    assert!(
        holding >= 1,
        "a quorum held it, so one of these two does: {doc}"
    );
    assert_eq!(doc["quorum_healthy"], true, "{doc}");
    runtime.block_on(guard.unlock()).expect("unlock");
}
