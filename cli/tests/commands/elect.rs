//! `quorum-lock elect` against three real lock servers: the leader's
//! command runs with its term, `--timeout`, SIGTERM hands the lead over at
//! once, a leadership forced open stops the command, `--listen` prints
//! every change; and the failover the election
//! issue asks for: the leader's process SIGKILLed, then a server
//! SIGSTOPped, with terms that grow and never overlap in time.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::support::{
    running, signal, wait_until, Cli, Cluster, Scratch, SIGCONT, SIGINT, SIGKILL, SIGSTOP, SIGTERM,
};

const LIMIT: Duration = Duration::from_secs(20);

/// A line of `--listen`: `Some((term, value))` for a leader, `None` for
/// "no leader"; panics on anything else.
fn parse_listened(line: &str) -> Option<(u64, String)> {
    if line == "no leader" {
        return None;
    }
    let rest = line
        .strip_prefix("term=")
        .unwrap_or_else(|| panic!("not a --listen line: {line:?}"));
    let (term, value) = rest
        .split_once(" value=")
        .unwrap_or_else(|| panic!("no value in {line:?}"));
    let term = term
        .parse()
        .unwrap_or_else(|_| panic!("not a term in {line:?}"));
    Some((term, value.to_owned()))
}

fn listened(listener: &Cli) -> Vec<Option<(u64, String)>> {
    listener
        .stdout_so_far()
        .lines()
        .map(parse_listened)
        .collect()
}

#[test]
fn the_leader_runs_its_command_with_its_term_and_listeners_see_it_come_and_go() {
    let c = Cluster::start("net-elect-basic");
    let listener = c.listen("jobs");
    wait_until(LIMIT, "the listener's first line", || {
        listened(&listener) == [None]
    });

    let script =
        "echo \"$QUORUM_LOCK_FENCING_TOKEN $QUORUM_LOCK_NAME $QUORUM_LOCK_UID\" > $D/env; \
                  while [ ! -e $D/go ]; do sleep 0.05; done; exit 3";
    // A stale token in elect's own environment is replaced.
    let leader = c.elect(
        &[],
        "jobs",
        "host-a:8080",
        script,
        &[("QUORUM_LOCK_FENCING_TOKEN", "1")],
    );
    wait_until(LIMIT, "the leader's command to start", || {
        c.dir.read("env").ends_with('\n')
    });
    let env = c.dir.read("env");
    let fields: Vec<&str> = env.split_whitespace().collect();
    assert_eq!(fields.len(), 3, "{env:?}");
    let term: u64 = fields[0].parse().expect("the term is a number");
    assert!(term > 1, "{env:?}");
    assert_eq!(fields[1], "jobs");
    assert!(!fields[2].is_empty());
    wait_until(LIMIT, "the listener to print the leader", || {
        listened(&listener).last() == Some(&Some((term, "host-a:8080".to_owned())))
    });

    // Another candidate waits in line and gives up without running.
    let started = Instant::now();
    let waiter = c
        .elect(
            &["--timeout", "700ms"],
            "jobs",
            "host-b:8080",
            "echo ran >> $D/waiter",
            &[],
        )
        .finish(LIMIT);
    assert_eq!(waiter.code, Some(75), "{waiter:?}");
    assert!(
        waiter
            .stderr
            .contains("timed out after 700ms waiting to lead 'jobs'"),
        "{waiter:?}"
    );
    assert!(started.elapsed() < Duration::from_secs(10));
    assert!(c.dir.read("waiter").is_empty(), "the waiter's command ran");

    // The command's exit code passes through, and elect resigns.
    std::fs::write(c.dir.file("go"), "").expect("write go");
    let leader = leader.finish(LIMIT);
    assert_eq!(leader.code, Some(3), "{leader:?}");
    assert!(leader.stderr.is_empty(), "{leader:?}");
    wait_until(LIMIT, "the listener to print that nobody leads", || {
        listened(&listener).len() == 3
    });

    signal(listener.child.id(), SIGINT);
    let listener = listener.finish(LIMIT);
    assert_eq!(listener.code, Some(0), "{listener:?}");
    assert_eq!(
        listener.stdout,
        format!("no leader\nterm={term} value=host-a:8080\nno leader\n")
    );
    assert!(listener.stderr.is_empty(), "{listener:?}");
}

/// A leader that proclaims the value it already has (a re-send after a
/// proclamation that was not confirmed does the same) is one state, not a
/// change: `--listen` prints it once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listen_prints_a_leader_proclaiming_the_same_value_again_once() {
    let c = Cluster::start("net-elect-listen-same");
    let listener = c.listen("jobs");
    wait_until(LIMIT, "the listener's first line", || {
        listened(&listener) == [None]
    });
    let addrs: Vec<_> = c.servers.iter().map(|s| s.addr).collect();
    let ds = crate::support::dsync(&addrs, crate::support::TOKEN, "in-process").await;
    let election = ds.election("jobs").expect("a good name");
    let mut leading = election.campaign(&b"same"[..]).await.expect("leads");
    let term = leading.term();
    let leads = Some((term, "same".to_owned()));
    wait_until(LIMIT, "the listener to print the leader", || {
        listened(&listener).last() == Some(&leads)
    });
    for _ in 0..3 {
        leading.proclaim(&b"same"[..]).await.expect("proclaimed");
    }
    // Longer than the observer's re-check (1s): it has read the lockers
    // since, push or no push, and would have reported a repeat.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    // The observer reports in order: once this line is out, any line for
    // the proclamations before it is out too.
    leading.proclaim(&b"other"[..]).await.expect("proclaimed");
    let other = Some((term, "other".to_owned()));
    wait_until(LIMIT, "the listener to print the new value", || {
        listened(&listener).last() == Some(&other)
    });
    leading.resign().await.expect("resigned");
    wait_until(LIMIT, "the listener to print that nobody leads", || {
        listened(&listener).last() == Some(&None)
    });
    signal(listener.child.id(), SIGINT);
    let listener = listener.finish(LIMIT);
    assert_eq!(listener.code, Some(0), "{listener:?}");
    assert_eq!(
        listener.stdout,
        format!("no leader\nterm={term} value=same\nterm={term} value=other\nno leader\n")
    );
}

#[test]
fn sigterm_stops_the_command_resigns_and_the_next_candidate_leads_at_once() {
    let c = Cluster::start("net-elect-sigterm");
    let script = "echo $QUORUM_LOCK_FENCING_TOKEN >> $D/terms; sleep 30 & echo $! > $D/sleep; wait";
    let first = c.elect(&[], "svc", "first", script, &[]);
    wait_until(LIMIT, "the first command to start", || {
        !c.dir.read("sleep").is_empty()
    });
    let second = c.elect(
        &["--timeout", "15s"],
        "svc",
        "second",
        "echo $QUORUM_LOCK_FENCING_TOKEN >> $D/terms",
        &[],
    );
    // The second candidate is in line before the first resigns; without
    // a resign it would wait for the lease to run out (6s).
    std::thread::sleep(Duration::from_millis(300));
    let stopped = Instant::now();
    signal(first.child.id(), SIGTERM);
    let first = first.finish(LIMIT);
    assert_eq!(first.code, Some(128 + SIGTERM), "{first:?}");
    assert!(
        first
            .stderr
            .contains("SIGTERM: stopped the command and resigned"),
        "{first:?}"
    );
    let sleep = c.dir.read("sleep");
    wait_until(Duration::from_secs(5), "the command's child to die", || {
        !running(&sleep)
    });
    let second = second.finish(LIMIT);
    assert_eq!(second.code, Some(0), "{second:?}");
    assert!(
        stopped.elapsed() < Duration::from_secs(4),
        "the next candidate waited {:?}: the resign did not free the lead",
        stopped.elapsed()
    );
    let terms: Vec<u64> = c
        .dir
        .read("terms")
        .lines()
        .map(|t| t.parse().expect("a term"))
        .collect();
    assert_eq!(terms.len(), 2, "{terms:?}");
    assert!(terms[0] < terms[1], "terms must grow: {terms:?}");
}

#[test]
fn a_leadership_forced_open_stops_the_command_and_exits_79() {
    let c = Cluster::start("net-elect-lost");
    let script = "sleep 30 & echo $! > $D/sleep; wait; echo end >> $D/log";
    let leader = c.elect(&[], "svc", "v", script, &[]);
    wait_until(LIMIT, "the command to start", || {
        !c.dir.read("sleep").is_empty()
    });
    let admin = c.dir.admin();
    // The leadership is the write lock election/NAME.
    let forced = crate::support::cli(
        &c.dir,
        &[
            "force-unlock",
            "--nodes",
            &c.nodes,
            "--admin-token-file",
            &admin,
            "election/svc",
        ],
        &[],
        LIMIT,
    );
    assert_eq!(forced.code, Some(0), "{forced:?}");
    let leader = leader.finish(LIMIT);
    assert_eq!(leader.code, Some(79), "{leader:?}");
    assert!(
        leader
            .stderr
            .contains("lost the leadership of 'svc' (term "),
        "{leader:?}"
    );
    assert_eq!(leader.stderr.lines().count(), 1, "{leader:?}");
    assert!(
        c.dir.read("log").is_empty(),
        "the command ran on after the loss"
    );
    let sleep = c.dir.read("sleep");
    wait_until(Duration::from_secs(5), "the command's child to die", || {
        !running(&sleep)
    });
}

/// One line of the candidates' record: `TERM VALUE NANOS`, written every
/// 20 ms by the command of whoever leads.
struct Tick {
    term: u64,
    value: String,
    at: u128,
}

/// The wall clock as `date +%s%N` prints it.
fn now_nanos() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970")
        .as_nanos()
}

/// The complete lines of `text` (the last one may be half written).
fn ticks(text: &str) -> Vec<Tick> {
    text.lines()
        .filter_map(|line| {
            let mut fields = line.split(' ');
            let (term, value, at) = (fields.next()?, fields.next()?, fields.next()?);
            Some(Tick {
                term: term.parse().ok()?,
                value: value.to_owned(),
                at: at.parse().ok()?,
            })
        })
        .collect()
}

/// Each term's value and its first and last tick, by term.
fn tenures(ticks: &[Tick]) -> BTreeMap<u64, (String, u128, u128)> {
    let mut tenures: BTreeMap<u64, (String, u128, u128)> = BTreeMap::new();
    for t in ticks {
        let entry = tenures
            .entry(t.term)
            .or_insert_with(|| (t.value.clone(), t.at, t.at));
        assert_eq!(entry.0, t.value, "term {} has two values", t.term);
        entry.1 = entry.1.min(t.at);
        entry.2 = entry.2.max(t.at);
    }
    tenures
}

/// Kills the candidates' commands that outlive the test when it fails (a
/// command whose elect was SIGKILLed has no one else to stop it), by the
/// pids they recorded.
struct Reaper<'a>(&'a Scratch);

impl Drop for Reaper<'_> {
    fn drop(&mut self) {
        for v in ["a", "b", "c"] {
            let pid = self.0.read(&format!("pid.{v}"));
            if let Ok(pid) = pid.trim().parse::<u32>()
                && running(&pid.to_string())
            {
                signal(pid, SIGKILL);
            }
        }
    }
}

/// The real-process test: three servers, three candidates whose
/// command records its term every 20 ms, and a listener. The first
/// leader's elect is SIGKILLed (the kernel kills its command: it cannot
/// act once its lease may be gone), the next leader takes over once the
/// lease runs out; then a server is frozen with SIGSTOP, and the lead
/// passes on twice more over the other two. Terms grow, tenures never
/// overlap in time, and the listener printed every leader.
#[cfg(target_os = "linux")]
#[test]
fn failover_after_the_leader_is_killed_and_a_server_frozen_keeps_one_leader_at_a_time() {
    let c = Cluster::start("net-elect-failover");
    let listener = c.listen("primary");
    wait_until(LIMIT, "the listener's first line", || {
        !listened(&listener).is_empty()
    });
    // No `exec`: the shell itself writes, so once it is dead nothing does.
    let script = "echo $$ > $D/pid.$V; \
                  while [ ! -e $D/stop.$V ]; do \
                    echo \"$QUORUM_LOCK_FENCING_TOKEN $V $(date +%s%N)\" >> $D/ticks; \
                    sleep 0.02; \
                  done";
    let _reaper = Reaper(&c.dir);
    let mut candidates: BTreeMap<String, Cli> = ["a", "b", "c"]
        .into_iter()
        .map(|v| {
            (
                v.to_owned(),
                c.elect(&[], "primary", v, script, &[("V", v)]),
            )
        })
        .collect();
    let recorded = || ticks(&c.dir.read("ticks"));
    let leaders = || {
        let mut seen: Vec<String> = Vec::new();
        for t in recorded() {
            if !seen.contains(&t.value) {
                seen.push(t.value);
            }
        }
        seen
    };
    let ticks_of = |value: &str| recorded().iter().filter(|t| t.value == value).count();

    // 1. SIGKILL the first leader's elect once its command is at work.
    wait_until(LIMIT, "a first leader", || leaders().len() == 1);
    let first = leaders()[0].clone();
    wait_until(LIMIT, "the first leader to tick", || ticks_of(&first) >= 5);
    let pid = c.dir.read(&format!("pid.{first}"));
    let mut killed = candidates.remove(&first).expect("the first leader's elect");
    killed.child.kill().expect("SIGKILL the leader's elect");
    killed.child.wait().expect("reap it");
    // Long before its lease (6s) can run out on the servers.
    wait_until(
        Duration::from_secs(3),
        "the killed elect's command to die with it",
        || !running(&pid),
    );

    // 2. The next candidate leads once the lease ran out.
    wait_until(LIMIT, "a second leader", || leaders().len() == 2);
    let second = leaders()[1].clone();
    wait_until(LIMIT, "the second leader to tick", || {
        ticks_of(&second) >= 5
    });

    // 3. Freeze a server: the second leader keeps leading on the other two
    // through more than a refresh (every 1s) ...
    let frozen = c.servers[0].pid();
    signal(frozen, SIGSTOP);
    let frozen_at = now_nanos() + 1_500_000_000;
    wait_until(
        LIMIT,
        "the second leader to lead on with a server frozen",
        || {
            recorded()
                .iter()
                .any(|t| t.value == second && t.at > frozen_at)
        },
    );

    // ... then its command exits: it resigns, and the third leads, on the
    // two servers that answer.
    std::fs::write(c.dir.file(&format!("stop.{second}")), "").expect("write stop");
    let done = candidates
        .remove(&second)
        .expect("the second leader's elect")
        .finish(LIMIT);
    assert_eq!(done.code, Some(0), "{done:?}");
    wait_until(LIMIT, "a third leader", || leaders().len() == 3);
    let third = leaders()[2].clone();
    wait_until(LIMIT, "the third leader to tick", || ticks_of(&third) >= 5);
    std::fs::write(c.dir.file(&format!("stop.{third}")), "").expect("write stop");
    let done = candidates
        .remove(&third)
        .expect("the third leader's elect")
        .finish(LIMIT);
    assert_eq!(done.code, Some(0), "{done:?}");
    assert!(candidates.is_empty());

    wait_until(LIMIT, "the listener to print that nobody leads", || {
        listened(&listener).last() == Some(&None) && listened(&listener).len() > 3
    });
    signal(frozen, SIGCONT);
    signal(listener.child.id(), SIGINT);
    let listener = listener.finish(LIMIT);
    assert_eq!(listener.code, Some(0), "{listener:?}");

    // Terms grow from leader to leader, and no tenure overlaps the next.
    let tenures = tenures(&ticks(&c.dir.read("ticks")));
    let order: Vec<&str> = tenures.values().map(|(v, _, _)| v.as_str()).collect();
    assert_eq!(
        order,
        [first.as_str(), second.as_str(), third.as_str()],
        "terms must grow in the order the candidates led: {tenures:?}"
    );
    let spans: Vec<(u64, u128, u128)> = tenures.iter().map(|(t, (_, s, e))| (*t, *s, *e)).collect();
    for w in spans.windows(2) {
        let ((t1, _, end1), (t2, start2, _)) = (w[0], w[1]);
        assert!(
            end1 < start2,
            "term {t1} was still at work {} ms after term {t2} started",
            (end1 - start2) / 1_000_000
        );
    }

    // The listener printed every leader, in order, and that none was left.
    let lines: Vec<Option<(u64, String)>> = listener.stdout.lines().map(parse_listened).collect();
    let printed: Vec<(u64, String)> = lines.iter().flatten().cloned().collect();
    let expected: Vec<(u64, String)> = tenures
        .iter()
        .map(|(term, (value, _, _))| (*term, value.clone()))
        .collect();
    assert_eq!(printed, expected, "{}", listener.stdout);
    assert_eq!(lines.last(), Some(&None), "{}", listener.stdout);
}
