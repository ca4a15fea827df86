//! What a command leaves running when it exits: `run` and `elect` end the
//! rest of its process group (SIGTERM, SIGKILL after `--grace`) and keep
//! the lock, or the lead, until the group is gone; only then does the
//! next holder, or the next leader, get in.
//!
//! Each test starts a command that puts a worker in the background and
//! exits with 3 at once. The worker ticks into a file, as a worker writing
//! with the old fencing token would; the next holder writes `next` into
//! the same file as soon as it gets in. No tick may follow `next`.

use std::time::Duration;

use crate::support::{nodes, running, wait_until, Cli, Cluster, Finished, Holder, Scratch, Server};

const LIMIT: Duration = Duration::from_secs(20);

/// A worker that ticks every 50 ms, 60 times, then writes `done` to the
/// log. `on_term` is its SIGTERM trap: a handler, or `''` to ignore the
/// signal (its `sleep`s inherit that, so only SIGKILL ends it). The
/// command exits with 3 as soon as the worker ticked once (and so has set
/// its trap), leaving it behind.
fn leaves_a_worker(on_term: &str) -> String {
    format!(
        "( trap {on_term} TERM; i=0; while [ $i -lt 60 ]; do echo tick >> $D/ticks; \
         sleep 0.05; i=$((i+1)); done; echo done >> $D/log ) & echo $! > $D/worker; \
         while [ ! -s $D/ticks ]; do sleep 0.01; done; exit 3"
    )
}

/// Ticks five more times after SIGTERM, as a worker flushing its last
/// writes would: it needs part of the grace.
const FINISHES_ON_TERM: &str =
    "'echo term >> $D/log; for j in 1 2 3 4 5; do echo tick >> $D/ticks; sleep 0.05; done; exit 0'";
const IGNORES_TERM: &str = "''";

/// How many ticks came after the next holder's `next`.
fn ticks_after_next(dir: &Scratch) -> usize {
    let ticks = dir.read("ticks");
    let lines: Vec<&str> = ticks.lines().collect();
    let next = lines
        .iter()
        .position(|l| *l == "next")
        .expect("the next holder's command ran");
    lines[next..].iter().filter(|l| **l == "tick").count()
}

/// Starts a holder whose command leaves a worker with the SIGTERM trap
/// `on_term`, then a second one of the same kind that waits for it, and
/// checks that the second got in only once the worker was gone. Returns
/// how the first one finished.
fn next_gets_in_only_after_the_worker(c: &Cluster, holder: Holder, on_term: &str) -> Finished {
    let first = c.hold(holder, &[], "first", &leaves_a_worker(on_term));
    wait_until(LIMIT, "the worker to start", || {
        c.dir.read("worker").ends_with('\n') && c.dir.read("ticks").contains("tick")
    });
    let second = c
        .hold(
            holder,
            &["--timeout", "15s"],
            "second",
            "echo next >> $D/ticks",
        )
        .finish(LIMIT);
    assert_eq!(second.code, Some(0), "{second:?}");
    let first = first.finish(LIMIT);
    let after = ticks_after_next(&c.dir);
    assert_eq!(
        after, 0,
        "the worker ticked {after} times after the next holder got in"
    );
    assert!(
        !running(&c.dir.read("worker")),
        "the worker outlived its command's lock"
    );
    assert!(
        !c.dir.read("log").contains("done"),
        "the worker ran to its end: nothing stopped it"
    );
    first
}

#[test]
fn run_holds_the_lock_until_the_commands_background_worker_finished_on_sigterm() {
    let c = Cluster::start("net-bg-run-term");
    let first = next_gets_in_only_after_the_worker(&c, Holder::Run, FINISHES_ON_TERM);
    // The command's own exit code, not the worker's.
    assert_eq!(first.code, Some(3), "{first:?}");
    // Nothing to say (the shell may report its `sleep` as terminated).
    assert!(!first.stderr.contains("quorum-lock"), "{first:?}");
    assert_eq!(c.dir.read("log"), "term\n", "the worker got no SIGTERM");
}

#[test]
fn run_kills_a_background_worker_that_ignores_sigterm_before_releasing() {
    let c = Cluster::start("net-bg-run-kill");
    let first = next_gets_in_only_after_the_worker(&c, Holder::Run, IGNORES_TERM);
    assert_eq!(first.code, Some(3), "{first:?}");
}

#[test]
fn elect_leads_until_the_commands_background_worker_finished_on_sigterm() {
    let c = Cluster::start("net-bg-elect-term");
    let first = next_gets_in_only_after_the_worker(&c, Holder::Elect, FINISHES_ON_TERM);
    assert_eq!(first.code, Some(3), "{first:?}");
    // Nothing to say (the shell may report its `sleep` as terminated).
    assert!(!first.stderr.contains("quorum-lock"), "{first:?}");
    assert_eq!(c.dir.read("log"), "term\n", "the worker got no SIGTERM");
}

#[test]
fn elect_kills_a_background_worker_that_ignores_sigterm_before_resigning() {
    let c = Cluster::start("net-bg-elect-kill");
    let first = next_gets_in_only_after_the_worker(&c, Holder::Elect, IGNORES_TERM);
    assert_eq!(first.code, Some(3), "{first:?}");
}

#[test]
fn a_command_that_leaves_nothing_behind_passes_its_code_and_frees_the_lock_at_once() {
    let c = Cluster::start("net-bg-none");
    for (holder, code) in [(Holder::Run, 3), (Holder::Elect, 4)] {
        let done = c
            .hold(holder, &[], "v", &format!("exit {code}"))
            .finish(LIMIT);
        assert_eq!(done.code, Some(code), "{done:?}");
        assert!(done.stderr.is_empty(), "{done:?}");
        // Released at once: the next one gets in without waiting.
        let next = c
            .hold(holder, &["--timeout", "1s"], "v", "exit 0")
            .finish(LIMIT);
        assert_eq!(next.code, Some(0), "{next:?}");
    }
}

#[test]
fn sigterm_to_run_while_it_ends_the_leftovers_is_forwarded_and_then_releases() {
    let c = Cluster::start("net-bg-run-sigterm");
    let script = format!("echo $$ > $D/command; {}", leaves_a_worker(IGNORES_TERM));
    let first = c.hold(Holder::Run, &[], "first", &script);
    wait_until(LIMIT, "the command to exit, leaving its worker", || {
        let command = c.dir.read("command");
        c.dir.read("worker").ends_with('\n') && !command.is_empty() && !running(&command)
    });
    crate::support::signal(first.child.id(), crate::support::SIGTERM);
    let first = first.finish(LIMIT);
    assert_eq!(first.code, Some(128 + crate::support::SIGTERM), "{first:?}");
    assert!(
        first.stderr.contains("SIGTERM: stopped") && first.stderr.contains("released the lock"),
        "{first:?}"
    );
    assert!(!running(&c.dir.read("worker")), "the worker outlived run");
    // Released, not left to expire.
    let next = c
        .hold(Holder::Run, &["--nonblock"], "next", "exit 0")
        .finish(LIMIT);
    assert_eq!(next.code, Some(0), "{next:?}");
}

/// A worker whose main thread exits with SYS_exit (not exit_group) while a
/// second thread keeps ticking into `$1` every 50 ms, 60 times. Linux then
/// shows the thread-group leader as a zombie (state `Z` in /proc/PID/stat)
/// although the process still runs and writes.
const WORKER_C: &str = r#"
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>
#include <sys/syscall.h>
static const char *out;
static void *tick(void *a) {
  (void)a;
  for (int i = 0; i < 60; i++) {
    FILE *f = fopen(out, "a"); if (f) { fputs("tick\n", f); fclose(f); }
    usleep(50000);
  }
  FILE *f = fopen(out, "a"); if (f) { fputs("done\n", f); fclose(f); }
  _exit(0);
}
int main(int argc, char **argv) {
  (void)argc;
  out = argv[1];
  pthread_t t; pthread_create(&t, 0, tick, 0);
  usleep(100000);
  syscall(SYS_exit, 0);
  return 0;
}
"#;

/// /proc shows a process whose main thread ended while another thread runs
/// as a zombie (`Z`), though it still writes: `run` must not take it for
/// gone, and must end it before the next holder gets the lock.
#[test]
fn run_ends_a_worker_whose_main_thread_exited_before_releasing() {
    if std::process::Command::new("cc")
        .arg("--version")
        .output()
        .is_err()
    {
        eprintln!("skipped: no C compiler (cc) to build the worker");
        return;
    }
    let dir = Scratch::new("main-thread-exited");
    let src = dir.file("worker.c");
    std::fs::write(&src, WORKER_C).unwrap();
    let exe = dir.file("worker");
    let built = std::process::Command::new("cc")
        .args(["-O1", "-pthread", "-o"])
        .arg(&exe)
        .arg(&src)
        .status()
        .expect("cc runs");
    assert!(built.success());
    let servers: Vec<Server> = (0..3)
        .map(|_| Server::start(&dir, &["--no-quarantine"]))
        .collect();
    let nodes = nodes(&servers);
    let token = dir.token();
    let d = dir.path.display().to_string();
    let script =
        "$D/worker $D/ticks & while [ ! -s $D/ticks ]; do sleep 0.01; done; sleep 0.2; exit 3";
    let first = Cli::spawn(
        &dir,
        &[
            "run",
            "--nodes",
            &nodes,
            "--token-file",
            &token,
            "--grace",
            "700ms",
            "job",
            "--",
            "sh",
            "-c",
            script,
        ],
        &[("D", &d)],
    );
    wait_until(LIMIT, "the worker to tick", || {
        dir.read("ticks").contains("tick")
    });
    let second = Cli::spawn(
        &dir,
        &[
            "run",
            "--nodes",
            &nodes,
            "--token-file",
            &token,
            "--timeout",
            "15s",
            "job",
            "--",
            "sh",
            "-c",
            "echo next >> $D/ticks",
        ],
        &[("D", &d)],
    )
    .finish(LIMIT);
    assert_eq!(second.code, Some(0), "{second:?}");
    let first = first.finish(LIMIT);
    // `run` returned once the group was gone: a worker still running would
    // tick again within 50 ms.
    std::thread::sleep(Duration::from_millis(300));
    let ticks = dir.read("ticks");
    let lines: Vec<&str> = ticks.lines().collect();
    let next = lines.iter().position(|l| *l == "next").unwrap();
    let after = lines[next..].iter().filter(|l| **l == "tick").count();
    assert_eq!(first.code, Some(3), "the command's own code: {first:?}");
    assert!(
        !ticks.contains("done"),
        "the worker was ended, not left to finish"
    );
    assert_eq!(
        after, 0,
        "the worker ticked {after} times after the next holder got the lock"
    );
}
