//! What `run` and `lock` say when they do not get the lock at once, and
//! the exit codes that tell the outcomes apart: held elsewhere (75), too
//! few servers or servers in quarantine (69), lost while held (79); waiting
//! through an outage without `--timeout`; `--nonblock`; the `lock` verb;
//! a lost lock's entries freed when run exits.

use std::time::{Duration, Instant};

use crate::support::{
    cli, nodes, signal, wait_until, Cli, RefusingPorts, Scratch, Server, SIGCONT, SIGSTOP, SIGTERM,
};

const LIMIT: Duration = Duration::from_secs(30);

fn servers(dir: &Scratch, extra: &[&str]) -> Vec<Server> {
    (0..3).map(|_| Server::start(dir, extra)).collect()
}

/// `quorum-lock VERB --nodes NODES --token-file T EXTRA...`, spawned.
fn spawn(dir: &Scratch, verb: &str, nodes: &str, extra: &[&str]) -> Cli {
    let token = dir.token();
    let mut args = vec![verb, "--nodes", nodes, "--token-file", &token];
    args.extend(extra);
    Cli::spawn(dir, &args, &[])
}

#[test]
fn a_wait_that_ends_says_held_elsewhere_or_which_servers_are_down() {
    let dir = Scratch::new("net-outcome-why");
    let mut servers = servers(&dir, &["--no-quarantine"]);
    let all = nodes(&servers);
    let holder = spawn(&dir, "lock", &all, &["job"]);
    wait_until(LIMIT, "the lock to be held", || {
        holder.stdout_so_far().contains("uid=")
    });

    // Held elsewhere: 75, at once with --nonblock, after --timeout without.
    let started = Instant::now();
    let once = spawn(&dir, "run", &all, &["-n", "job", "--", "true"]).finish(LIMIT);
    assert_eq!(once.code, Some(75), "{once:?}");
    assert!(once.stderr.contains("held elsewhere"), "{once:?}");
    assert!(started.elapsed() < Duration::from_secs(5), "{once:?}");
    let timed = spawn(
        &dir,
        "run",
        &all,
        &["--timeout", "500ms", "job", "--", "true"],
    )
    .finish(LIMIT);
    assert_eq!(timed.code, Some(75), "{timed:?}");
    assert!(
        timed.stderr.contains("timed out after 500ms") && timed.stderr.contains("held elsewhere"),
        "{timed:?}"
    );

    // The cluster down: 69, naming each server that did not answer and why.
    signal(holder.child.id(), SIGTERM);
    assert_eq!(holder.finish(LIMIT).code, Some(0));
    let down: Vec<String> = servers[..2].iter().map(|s| s.addr.to_string()).collect();
    for server in &mut servers[..2] {
        server.kill();
    }
    let timed = spawn(&dir, "run", &all, &["--timeout", "1s", "job", "--", "true"]).finish(LIMIT);
    assert_eq!(timed.code, Some(69), "{timed:?}");
    for node in &down {
        assert!(timed.stderr.contains(node.as_str()), "{node}: {timed:?}");
    }
    assert!(timed.stderr.contains("refused"), "the cause: {timed:?}");
    assert!(!timed.stderr.contains("held elsewhere"), "{timed:?}");
    let once = spawn(&dir, "run", &all, &["--nonblock", "job", "--", "true"]).finish(LIMIT);
    assert_eq!(once.code, Some(69), "{once:?}");
}

#[test]
fn run_without_a_timeout_waits_through_an_outage() {
    let dir = Scratch::new("net-outcome-outage");
    let mut servers = servers(&dir, &["--no-quarantine"]);
    let all = nodes(&servers);
    let addrs: Vec<_> = servers[..2].iter().map(|s| s.addr).collect();
    for server in &mut servers[..2] {
        server.kill();
    }
    let ran = dir.file("ran");
    let script = format!("echo ran > {}", ran.display());
    let waiting = spawn(&dir, "run", &all, &["job", "--", "sh", "-c", &script]);
    // It says what it waits for, and goes on waiting.
    wait_until(LIMIT, "run to say it waits for the servers", || {
        waiting.stderr_so_far().contains("waiting")
    });
    let said = waiting.stderr_so_far();
    for addr in &addrs {
        assert!(said.contains(&addr.to_string()), "{addr}: {said}");
    }
    std::thread::sleep(Duration::from_secs(3));
    assert!(!ran.exists(), "ran without a quorum");

    // The servers come back: the lock is granted and the command runs.
    let _back: Vec<Server> = addrs
        .iter()
        .map(|addr| Server::restart_at(&dir, *addr, &["--no-quarantine"]))
        .collect();
    let done = waiting.finish(LIMIT);
    assert_eq!(done.code, Some(0), "{done:?}");
    assert!(ran.exists());
}

#[test]
fn a_wait_in_quarantine_says_so_with_the_time_left() {
    let dir = Scratch::new("net-outcome-quarantine");
    // Fresh servers refuse new grants for their validity, 6 s here.
    let servers = servers(&dir, &[]);
    let all = nodes(&servers);
    let started = Instant::now();
    let timed = spawn(&dir, "run", &all, &["--timeout", "1s", "job", "--", "true"]).finish(LIMIT);
    assert_eq!(timed.code, Some(69), "{timed:?}");
    assert!(timed.stderr.contains("in quarantine"), "{timed:?}");

    let waiting = spawn(&dir, "run", &all, &["job", "--", "true"]);
    wait_until(LIMIT, "run to say why it waits", || {
        waiting.stderr_so_far().contains("in quarantine")
    });
    let said = waiting.stderr_so_far();
    assert!(said.contains("3 of 3 lockers are in quarantine"), "{said}");
    assert!(said.contains("s more"), "the time left: {said}");
    let done = waiting.finish(LIMIT);
    assert_eq!(done.code, Some(0), "{done:?}");
    assert!(
        started.elapsed() >= Duration::from_secs(5),
        "granted in quarantine"
    );
    assert_eq!(
        done.stderr.matches("in quarantine").count(),
        1,
        "said once: {done:?}"
    );
}

#[test]
fn lock_prints_its_facts_and_holds_until_sigterm() {
    let dir = Scratch::new("net-outcome-lock");
    let servers = servers(&dir, &["--no-quarantine"]);
    let all = nodes(&servers);
    let holder = spawn(&dir, "lock", &all, &["job"]);
    wait_until(LIMIT, "the lock's facts", || {
        holder.stdout_so_far().contains("fencing_token=")
    });
    let facts = holder.stdout_so_far();
    let fact = |key: &str| {
        facts
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{key}=")))
            .map(str::to_owned)
    };
    assert_eq!(fact("name").as_deref(), Some("job"), "{facts}");
    let uid = fact("uid").expect("a uid");
    assert!(!uid.is_empty());
    let token: u64 = fact("fencing_token")
        .and_then(|t| t.parse().ok())
        .expect("a numeric token");
    assert!(token > 0);

    let admin = dir.admin();
    let listed = cli(
        &dir,
        &["locks", "--nodes", &all, "--admin-token-file", &admin],
        &[],
        LIMIT,
    );
    assert!(listed.stdout.contains(&uid), "{listed:?}");
    let busy = spawn(&dir, "run", &all, &["-n", "job", "--", "true"]).finish(LIMIT);
    assert_eq!(busy.code, Some(75), "{busy:?}");

    signal(holder.child.id(), SIGTERM);
    let held = holder.finish(LIMIT);
    assert_eq!(held.code, Some(0), "{held:?}");
    assert!(held.stderr.contains("released"), "{held:?}");
    let free = spawn(&dir, "run", &all, &["-n", "job", "--", "true"]).finish(LIMIT);
    assert_eq!(free.code, Some(0), "{free:?}");
}

#[test]
fn a_lost_lock_is_not_left_behind_when_run_exits() {
    let dir = Scratch::new("net-outcome-lost");
    let servers = servers(&dir, &["--no-quarantine"]);
    let all = nodes(&servers);
    let holder = spawn(
        &dir,
        "run",
        &all,
        &["job", "--", "sh", "-c", "while :; do sleep 0.05; done"],
    );
    wait_until(LIMIT, "the lock to be held", || {
        lists(&dir, &servers[2], "job")
    });
    // Two servers stop answering: the holder loses the lock (79) while
    // the third still holds its entry.
    let frozen: Vec<u32> = servers[..2].iter().map(Server::pid).collect();
    for &pid in &frozen {
        signal(pid, SIGSTOP);
    }
    let lost = holder.finish(LIMIT);
    for &pid in &frozen {
        signal(pid, SIGCONT);
    }
    assert_eq!(lost.code, Some(79), "{lost:?}");
    assert!(lost.stderr.contains("lost the lock 'job'"), "{lost:?}");
    // The command is dead, so run freed the entry before exiting, instead
    // of leaving it to expire with --validity.
    assert!(!lists(&dir, &servers[2], "job"), "left behind");
}

/// Whether `server` alone lists a lock on `name`.
fn lists(dir: &Scratch, server: &Server, name: &str) -> bool {
    let admin = dir.admin();
    let one = server.addr.to_string();
    let listed = cli(
        dir,
        &["locks", "--nodes", &one, "--admin-token-file", &admin],
        &[],
        LIMIT,
    );
    assert_eq!(listed.code, Some(0), "{listed:?}");
    listed.stdout.lines().any(|l| l.starts_with(name))
}

#[test]
fn a_bad_name_is_refused_before_waiting_for_servers() {
    let dir = Scratch::new("net-outcome-bad-name");
    // Nothing listens on these ports: a run would wait for them.
    let closed = RefusingPorts::new(3);
    let all = closed.addrs().join(",");
    for verb in ["run", "lock"] {
        let mut extra = vec!["bad\nname"];
        if verb == "run" {
            extra.extend(["--", "true"]);
        }
        let started = Instant::now();
        let refused = spawn(&dir, verb, &all, &extra).finish(LIMIT);
        assert_eq!(refused.code, Some(2), "{verb}: {refused:?}");
        assert!(refused.stderr.contains("control character"), "{refused:?}");
        assert!(started.elapsed() < Duration::from_secs(5), "{refused:?}");
    }
}

#[test]
fn elect_listen_follows_the_election_through_an_outage() {
    let dir = Scratch::new("net-outcome-listen");
    let mut servers = servers(&dir, &["--no-quarantine"]);
    let all = nodes(&servers);
    let addrs: Vec<_> = servers[..2].iter().map(|s| s.addr).collect();
    for server in &mut servers[..2] {
        server.kill();
    }
    let listening = spawn(&dir, "elect", &all, &["--listen", "scheduler"]);
    wait_until(LIMIT, "elect --listen to say it waits", || {
        listening.stderr_so_far().contains("waiting for them")
    });
    std::thread::sleep(Duration::from_secs(1));
    assert!(
        listening.stdout_so_far().is_empty(),
        "nothing to report without a quorum: {}",
        listening.stdout_so_far()
    );
    let _back: Vec<Server> = addrs
        .iter()
        .map(|addr| Server::restart_at(&dir, *addr, &["--no-quarantine"]))
        .collect();
    wait_until(LIMIT, "the first report once the servers are back", || {
        listening.stdout_so_far().contains("no leader")
    });
    signal(listening.child.id(), SIGTERM);
    let done = listening.finish(LIMIT);
    assert_eq!(done.code, Some(0), "{done:?}");
}
