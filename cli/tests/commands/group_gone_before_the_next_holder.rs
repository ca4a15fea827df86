//! `run` and `elect` keep the lock, or the lead, until nothing of the
//! command's process group runs any more: also when what the command left
//! behind is a stopped process that ignores SIGTERM, or a loop that keeps
//! forking short-lived children that ignore it. The next holder's command
//! looks through /proc, the moment it gets in, for any process of the
//! first command's group that is not a zombie.

use std::time::Duration;

use crate::support::{wait_until, Cluster, Holder};

const LIMIT: Duration = Duration::from_secs(25);

/// The next holder's command: writes `alive` for each process of group
/// `$D/pgid` that is not a zombie, then `next`.
const LOOK: &str = "g=$(cat $D/pgid); for s in /proc/[0-9]*/stat; do \
     line=$(cat $s 2>/dev/null) || continue; rest=${line##*) }; set -- $rest; \
     if [ \"$3\" = \"$g\" ] && [ \"$1\" != Z ]; then echo \"alive ${s} $1\" >> $D/seen; fi; \
     done; echo next >> $D/seen";

/// Each command first writes its process group's id (from /proc) to
/// `$D/pgid`. Left behind: a process that ignores SIGTERM and stops itself.
const STOPPED: &str =
    "line=$(cat /proc/$$/stat); rest=${line##*) }; set -- $rest; echo $3 > $D/pgid; \
     sh -c 'trap \"\" TERM; echo started > $D/started; kill -STOP $$; sleep 30' & \
     while [ ! -s $D/started ]; do sleep 0.01; done; sleep 0.1; exit 3";

/// Left behind: a loop that ignores SIGTERM and forks a short-lived child
/// every few milliseconds.
const FORKING: &str =
    "line=$(cat /proc/$$/stat); rest=${line##*) }; set -- $rest; echo $3 > $D/pgid; \
     ( trap '' TERM; echo started > $D/started; i=0; \
       while [ $i -lt 3000 ]; do sh -c 'sleep 0.005' & i=$((i+1)); sleep 0.005; done ) & \
     while [ ! -s $D/started ]; do sleep 0.01; done; exit 3";

fn nothing_of_the_group_runs_when_the_next_holder_gets_in(test: &str, holder: Holder, left: &str) {
    let c = Cluster::start(test);
    let first = c.hold(holder, &[], "first", left);
    wait_until(LIMIT, "the command to leave its process behind", || {
        c.dir.read("started").contains("started") && c.dir.read("pgid").ends_with('\n')
    });
    let second = c
        .hold(holder, &["--timeout", "20s"], "second", LOOK)
        .finish(LIMIT);
    assert_eq!(second.code, Some(0), "{second:?}");
    let first = first.finish(LIMIT);
    assert_eq!(first.code, Some(3), "{first:?}");
    let seen = c.dir.read("seen");
    assert!(seen.ends_with("next\n"), "{seen:?}");
    assert!(
        !seen.contains("alive"),
        "processes of the first command's group ran when the next holder got in:\n{seen}"
    );
}

#[test]
fn run_waits_for_a_stopped_process_that_ignores_sigterm() {
    nothing_of_the_group_runs_when_the_next_holder_gets_in(
        "net-gone-run-stopped",
        Holder::Run,
        STOPPED,
    );
}

#[test]
fn elect_waits_for_a_stopped_process_that_ignores_sigterm() {
    nothing_of_the_group_runs_when_the_next_holder_gets_in(
        "net-gone-elect-stopped",
        Holder::Elect,
        STOPPED,
    );
}

#[test]
fn run_waits_for_a_loop_that_keeps_forking() {
    nothing_of_the_group_runs_when_the_next_holder_gets_in(
        "net-gone-run-forking",
        Holder::Run,
        FORKING,
    );
}

#[test]
fn elect_waits_for_a_loop_that_keeps_forking() {
    nothing_of_the_group_runs_when_the_next_holder_gets_in(
        "net-gone-elect-forking",
        Holder::Elect,
        FORKING,
    );
}
