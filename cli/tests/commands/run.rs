//! `quorum-lock run` against three real servers: waiting for a holder,
//! exit codes, `--timeout`, `--read`, stopping the command when the lock is
//! forced open or lost, stopping it on SIGTERM, and refusing a `--grace`
//! that would let it outlive a lost lock.

use std::time::{Duration, Instant};

use crate::support::{
    catches, cli, running, signal, wait_until, Cluster, Server, SIGCONT, SIGINT, SIGKILL, SIGSTOP,
    SIGTERM,
};

const LIMIT: Duration = Duration::from_secs(20);

#[test]
fn a_second_run_waits_for_the_first_and_exit_codes_pass_through() {
    let c = Cluster::start("net-run-order");
    let first = c.run(
        &[],
        "job",
        "echo start1 >> $D/order; sleep 1; echo end1 >> $D/order",
    );
    wait_until(LIMIT, "the first command to start", || {
        c.dir.read("order").contains("start1")
    });
    let second = c.run(
        &[],
        "job",
        "echo start2 >> $D/order; echo end2 >> $D/order; exit 3",
    );
    let first = first.finish(LIMIT);
    let second = second.finish(LIMIT);
    assert_eq!(first.code, Some(0), "{first:?}");
    assert_eq!(second.code, Some(3), "{second:?}");
    assert_eq!(c.lines("order"), ["start1", "end1", "start2", "end2"]);
    assert!(
        first.stderr.is_empty() && second.stderr.is_empty(),
        "{first:?} {second:?}"
    );
}

#[test]
fn run_gives_up_after_its_timeout_without_running_the_command() {
    let c = Cluster::start("net-run-timeout");
    let holder = c.run(
        &[],
        "job",
        "echo held >> $D/log; while [ ! -e $D/go ]; do sleep 0.05; done",
    );
    wait_until(LIMIT, "the holder to start", || {
        c.dir.read("log").contains("held")
    });
    let started = Instant::now();
    let waiter = c
        .run(&["--timeout", "700ms"], "job", "echo ran >> $D/log")
        .finish(LIMIT);
    assert_eq!(waiter.code, Some(75), "{waiter:?}");
    assert!(
        waiter.stderr.contains("timed out after 700ms"),
        "{waiter:?}"
    );
    assert_eq!(waiter.stderr.lines().count(), 1, "{waiter:?}");
    assert!(started.elapsed() < Duration::from_secs(10));
    std::fs::write(c.dir.file("go"), "").unwrap();
    assert_eq!(holder.finish(LIMIT).code, Some(0));
    assert_eq!(
        c.lines("log"),
        ["held"],
        "the timed-out command must not run"
    );
}

#[test]
fn readers_share_the_lock_and_a_writer_waits_for_both() {
    let c = Cluster::start("net-run-read");
    let reader =
        "echo rstart >> $D/log; while [ ! -e $D/go ]; do sleep 0.05; done; echo rend >> $D/log";
    let r1 = c.run(&["--read"], "catalog", reader);
    let r2 = c.run(&["--read"], "catalog", reader);
    // Both inside at once: the second reader did not wait for the first.
    wait_until(LIMIT, "both readers to start", || {
        c.dir.read("log").matches("rstart").count() == 2
    });
    let writer = c.run(&[], "catalog", "echo write >> $D/log");
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        !c.dir.read("log").contains("write"),
        "a writer got in beside readers"
    );
    std::fs::write(c.dir.file("go"), "").unwrap();
    for run in [r1, r2, writer] {
        assert_eq!(run.finish(LIMIT).code, Some(0));
    }
    assert_eq!(
        c.lines("log"),
        ["rstart", "rstart", "rend", "rend", "write"]
    );
}

#[test]
fn run_stops_its_command_when_the_lock_is_forced_open() {
    let c = Cluster::start("net-run-lost");
    let script = "echo start >> $D/log; sleep 30 & echo $! > $D/sleep; wait; echo end >> $D/log";
    let holder = c.run(&[], "job", script);
    wait_until(LIMIT, "the command to start", || {
        !c.dir.read("sleep").is_empty()
    });
    let started = Instant::now();
    let admin = c.dir.admin();
    let forced = cli(
        &c.dir,
        &[
            "force-unlock",
            "--nodes",
            &c.nodes,
            "--admin-token-file",
            &admin,
            "job",
        ],
        &[],
        LIMIT,
    );
    assert_eq!(forced.code, Some(0), "{forced:?}");

    // Noticed at the next refresh (every second with --validity 6s).
    let holder = holder.finish(LIMIT);
    assert_eq!(holder.code, Some(79), "{holder:?}");
    assert!(holder.stderr.contains("lost the lock 'job'"), "{holder:?}");
    assert!(
        started.elapsed() < Duration::from_secs(8),
        "took {:?}",
        started.elapsed()
    );
    assert_eq!(
        c.lines("log"),
        ["start"],
        "the command ran on after the loss"
    );
    let sleep = c.dir.read("sleep");
    wait_until(Duration::from_secs(5), "the command's child to die", || {
        !running(&sleep)
    });

    let next = c.run(&["--timeout", "5s"], "job", "exit 0").finish(LIMIT);
    assert_eq!(next.code, Some(0), "the forced lock is free: {next:?}");
}

#[test]
fn sigterm_stops_the_command_and_releases_the_lock() {
    let c = Cluster::start("net-run-sigterm");
    let script = "sleep 30 & echo $! > $D/sleep; wait; echo end >> $D/log";
    let holder = c.run(&[], "job", script);
    wait_until(LIMIT, "the command to start", || {
        !c.dir.read("sleep").is_empty()
    });
    signal(holder.child.id(), SIGTERM);
    let holder = holder.finish(LIMIT);
    assert_eq!(holder.code, Some(128 + SIGTERM), "{holder:?}");
    assert!(c.dir.read("log").is_empty(), "the command ran to its end");
    let sleep = c.dir.read("sleep");
    wait_until(Duration::from_secs(5), "the command's child to die", || {
        !running(&sleep)
    });

    // Released, not left to expire: the next run gets it at once.
    let started = Instant::now();
    let next = c.run(&["--timeout", "3s"], "job", "exit 0").finish(LIMIT);
    assert_eq!(next.code, Some(0), "{next:?}");
    assert!(started.elapsed() < Duration::from_secs(3));
}

#[test]
fn a_missing_command_is_reported_and_releases_the_lock() {
    let c = Cluster::start("net-run-missing");
    let token = c.dir.token();
    let args = [
        "run",
        "--nodes",
        &c.nodes,
        "--token-file",
        &token,
        // The servers' validity: a longer lease is refused (PROTOCOL.md).
        "--validity",
        "6s",
        "job",
        "--",
        "/nonexistent/cmd",
    ];
    let missing = cli(&c.dir, &args, &[], LIMIT);
    assert_eq!(missing.code, Some(127), "{missing:?}");
    assert!(
        missing
            .stderr
            .contains("command not found: /nonexistent/cmd"),
        "{missing:?}"
    );
    let next = c.run(&["--timeout", "3s"], "job", "exit 0").finish(LIMIT);
    assert_eq!(next.code, Some(0), "{next:?}");
}

#[test]
fn sigint_while_waiting_gives_up_without_running_the_command() {
    let c = Cluster::start("net-run-sigint");
    let holder = c.run(
        &[],
        "job",
        "echo held >> $D/log; while [ ! -e $D/go ]; do sleep 0.05; done",
    );
    wait_until(LIMIT, "the holder to start", || {
        c.dir.read("log").contains("held")
    });
    let waiter = c.run(&[], "job", "echo ran >> $D/log");
    // Once run catches SIGINT, the signal ends its wait (or its connecting,
    // if it comes that early): either way the command must not run.
    let pid = waiter.child.id();
    wait_until(LIMIT, "the waiter to catch SIGINT", || catches(pid, SIGINT));
    signal(pid, SIGINT);
    let waiter = waiter.finish(LIMIT);
    assert_eq!(waiter.code, Some(128 + SIGINT), "{waiter:?}");
    std::fs::write(c.dir.file("go"), "").unwrap();
    assert_eq!(holder.finish(LIMIT).code, Some(0));
    assert_eq!(
        c.lines("log"),
        ["held"],
        "the command of a run given up on must not run"
    );
}

/// A `run` killed with SIGKILL cannot stop its command itself: the kernel
/// does (PR_SET_PDEATHSIG), so the command never outlives the lease that
/// nobody refreshes any more.
#[cfg(target_os = "linux")]
#[test]
fn a_sigkilled_run_takes_its_command_with_it() {
    let c = Cluster::start("net-run-sigkill");
    let holder = c.run(&[], "job", "echo $$ > $D/pid; while :; do sleep 0.05; done");
    wait_until(LIMIT, "the command to start", || {
        !c.dir.read("pid").is_empty()
    });
    let pid = c.dir.read("pid");
    assert!(running(&pid));
    signal(holder.child.id(), SIGKILL);
    wait_until(LIMIT, "the command to die with run", || !running(&pid));
    let _ = holder.finish(LIMIT);
}

#[test]
fn a_command_that_ignores_sigterm_is_dead_before_the_lock_is_granted_again() {
    let c = Cluster::start("net-run-kill-in-time");
    // The shell survives SIGTERM (its `sleep` does not) and ticks until
    // SIGKILL.
    let script = "trap 'echo term >> $D/log' TERM; echo $$ > $D/pid; \
                  while :; do echo tick >> $D/ticks; sleep 0.05; done";
    let holder = c.run(&[], "job", script);
    wait_until(LIMIT, "the command to start", || {
        !c.dir.read("pid").is_empty()
    });

    // Freeze two of the three servers: they keep the entries but confirm
    // no refresh, so the holder declares the lock lost 5s after its last
    // confirmed refresh, while the lock is still held everywhere.
    let frozen: Vec<u32> = c.servers[..2].iter().map(Server::pid).collect();
    for &pid in &frozen {
        signal(pid, SIGSTOP);
    }
    wait_until(LIMIT, "the command to get SIGTERM", || {
        c.dir.read("log").contains("term")
    });
    for &pid in &frozen {
        signal(pid, SIGCONT);
    }

    // Takes the lock as soon as the servers let anyone have it.
    let next = c
        .run(&["--timeout", "15s"], "job", "echo next >> $D/ticks")
        .finish(LIMIT);
    assert_eq!(next.code, Some(0), "{next:?}");
    let holder = holder.finish(LIMIT);
    assert_eq!(holder.code, Some(79), "{holder:?}");
    assert!(holder.stderr.contains("lost the lock 'job'"), "{holder:?}");

    let ticks = c.lines("ticks");
    let next_at = ticks
        .iter()
        .position(|line| line == "next")
        .expect("the second command ran");
    let overlap = ticks[next_at..].iter().filter(|l| *l == "tick").count();
    assert_eq!(
        overlap, 0,
        "the first command ticked {overlap} times after the second one started"
    );
    assert!(!running(&c.dir.read("pid")));
}

#[test]
fn a_grace_longer_than_the_safety_margin_is_refused() {
    let c = Cluster::start("net-run-grace");
    let token = c.dir.token();
    let dir = c.dir.path.display().to_string();
    let run = |flags: &[&str]| {
        let mut args = vec!["run", "--nodes", &c.nodes, "--token-file", &token];
        args.extend(flags);
        args.extend(["job", "--", "sh", "-c", "echo ran >> $D/log"]);
        cli(&c.dir, &args, &[("D", &dir)], LIMIT)
    };
    let check = |flags: &[&str], needle: &str| {
        let refused = run(flags);
        assert_eq!(refused.code, Some(2), "{flags:?}: {refused:?}");
        assert!(refused.stderr.contains(needle), "{flags:?}: {refused:?}");
        assert_eq!(refused.stderr.lines().count(), 1, "{refused:?}");
    };
    // The case that let two commands run for 7.8s at once.
    check(
        &["--validity", "12s", "--grace", "10s"],
        "--grace 10s must be shorter than --validity/6 - 500ms = 1s 500ms",
    );
    // The old defaults (10s at 60s) left exactly no room.
    check(
        &["--validity", "60s", "--grace", "10s"],
        "--grace 10s must be shorter than --validity/6 - 1s = 9s",
    );
    // A lease longer than the servers keep entries is refused, not trusted.
    check(
        &["--validity", "60s"],
        "must not exceed the validity of locker",
    );
    // Without --validity the servers' 6s decides, after connecting.
    check(
        &["--grace", "1s"],
        "--grace 1s must be shorter than --validity/6 - 250ms = 750ms",
    );
    assert!(
        c.dir.read("log").is_empty(),
        "a refused run ran its command"
    );

    // Just inside the limit is accepted.
    let fits = run(&["--validity", "6s", "--grace", "700ms"]);
    assert_eq!(fits.code, Some(0), "{fits:?}");
    assert_eq!(c.lines("log"), ["ran"]);
}
