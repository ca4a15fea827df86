//! `quorum-lock run --permits K`: commands under the permits of a
//! semaphore, against three real servers (and three Redis nodes). At most
//! K run at once and the next one runs when a permit is freed, in the slot
//! it freed, with a larger token for that slot; a run with another K is
//! refused with exit 2 while the semaphore is held; a permit forced open
//! stops its command; `locks` shows who holds which permit; bad flags are
//! usage errors.

use std::time::Duration;

use crate::redis_support::RedisServer;
use crate::support::{cli, on_a_quorum_of_three, wait_until, Cli, Cluster, Scratch};

const LIMIT: Duration = Duration::from_secs(20);

/// A command that records what it got, `started <slot> <token> <uid>` in
/// `$D/<tag>`, and runs until the file `$D/go-<tag>` appears.
fn holding(tag: &str) -> String {
    format!(
        "echo \"${{QUORUM_LOCK_PERMIT_SLOT-unset}} ${{QUORUM_LOCK_FENCING_TOKEN-unset}} \
         $QUORUM_LOCK_UID $QUORUM_LOCK_NAME\" > $D/{tag}.tmp; mv $D/{tag}.tmp $D/{tag}; \
         while [ ! -e $D/go-{tag} ]; do sleep 0.05; done"
    )
}

/// What [`holding`] recorded.
#[derive(Debug)]
struct Held {
    slot: usize,
    token: u64,
    uid: String,
    name: String,
}

/// Waits until the command tagged `tag` started; what it got.
fn started(dir: &Scratch, tag: &str) -> Held {
    wait_until(LIMIT, &format!("command {tag} to start"), || {
        dir.file(tag).exists()
    });
    let line = dir.read(tag);
    let fields: Vec<&str> = line.split_whitespace().collect();
    let [slot, token, uid, name] = fields[..] else {
        panic!("unexpected record {line:?}");
    };
    Held {
        slot: slot.parse().unwrap_or_else(|_| panic!("no slot: {line:?}")),
        token: token
            .parse()
            .unwrap_or_else(|_| panic!("no token: {line:?}")),
        uid: uid.to_owned(),
        name: name.to_owned(),
    }
}

/// Lets the command tagged `tag` end.
fn release(dir: &Scratch, tag: &str) {
    std::fs::write(dir.file(&format!("go-{tag}")), "").expect("write the go file");
}

impl Cluster {
    fn started(&self, tag: &str) -> Held {
        started(&self.dir, tag)
    }

    fn release(&self, tag: &str) {
        release(&self.dir, tag);
    }
}

#[test]
fn at_most_k_commands_run_and_the_next_takes_the_freed_slot() {
    let c = Cluster::start("net-permits-k");
    let a = c.run(&["--permits", "2"], "rebuilds", &holding("a"));
    let b = c.run(&["--permits", "2"], "rebuilds", &holding("b"));
    let (held_a, held_b) = (c.started("a"), c.started("b"));
    let mut slots = [held_a.slot, held_b.slot];
    slots.sort_unstable();
    assert_eq!(slots, [0, 1], "{held_a:?} {held_b:?}");
    assert_ne!(held_a.uid, held_b.uid);
    assert_eq!(held_a.name, "rebuilds");

    // Both permits held: a third waits, and gives up after its timeout
    // without running its command.
    let refused = c
        .run(
            &["--permits", "2", "--timeout", "1s"],
            "rebuilds",
            &holding("x"),
        )
        .finish(LIMIT);
    assert_eq!(refused.code, Some(75), "{refused:?}");
    assert!(
        refused.stderr.contains(
            "timed out after 1s waiting for a permit of the semaphore 'rebuilds' (2 permits): \
             all 2 permits are held elsewhere"
        ),
        "{refused:?}"
    );
    assert!(!c.dir.file("x").exists(), "the timed-out command ran");

    // A third that waits runs once a permit is freed, in the slot freed,
    // with a larger token for that slot.
    let third = c.run(&["--permits", "2"], "rebuilds", &holding("c"));
    // The only wait for an absence: the third must still be waiting.
    std::thread::sleep(Duration::from_millis(500));
    assert!(!c.dir.file("c").exists(), "a third command ran beside two");
    c.release("a");
    let a = a.finish(LIMIT);
    assert_eq!(a.code, Some(0), "{a:?}");
    assert!(a.stderr.is_empty(), "{a:?}");
    let held_c = c.started("c");
    assert!(
        !c.dir.file("go-b").exists(),
        "b must still hold while c runs"
    );
    assert_eq!(held_c.slot, held_a.slot, "{held_a:?} {held_c:?}");
    assert!(
        held_c.token > held_a.token,
        "tokens grow per slot: {held_a:?} {held_c:?}"
    );

    for (tag, run) in [("b", b), ("c", third)] {
        c.release(tag);
        let done = run.finish(LIMIT);
        assert_eq!(done.code, Some(0), "{tag}: {done:?}");
    }
    // Everything released: both permits are free at once.
    let again = c
        .run(&["--permits", "2", "--timeout", "5s"], "rebuilds", "exit 4")
        .finish(LIMIT);
    assert_eq!(again.code, Some(4), "exit codes pass through: {again:?}");
}

#[test]
fn a_run_with_another_count_is_refused_while_the_semaphore_is_held() {
    let c = Cluster::start("net-permits-mismatch");
    let holder = c.run(&["--permits", "2"], "reports", &holding("a"));
    c.started("a");
    let other = c
        .run(&["--permits", "3"], "reports", "echo ran > $D/other")
        .finish(LIMIT);
    assert_eq!(other.code, Some(2), "{other:?}");
    assert_eq!(
        other.stderr.trim(),
        "quorum-lock: the semaphore 'reports' is held with 2 permits, but --permits 3 was given: \
         every run on a semaphore must give the same --permits; the command was not run",
        "{other:?}"
    );
    assert!(!c.dir.file("other").exists(), "the refused command ran");
    // The same K is admitted beside the holder at once: the refused run
    // released its place at the head of the line before exiting, instead
    // of leaving it to expire (6 s).
    let same = c
        .run(&["--permits", "2", "--timeout", "3s"], "reports", "exit 0")
        .finish(LIMIT);
    assert_eq!(same.code, Some(0), "{same:?}");

    c.release("a");
    assert_eq!(holder.finish(LIMIT).code, Some(0));
    // Nobody holds it any more: another K is a new semaphore of the name.
    let later = c
        .run(&["--permits", "3", "--timeout", "5s"], "reports", "exit 0")
        .finish(LIMIT);
    assert_eq!(later.code, Some(0), "{later:?}");
}

#[test]
fn locks_shows_the_permits_and_a_permit_forced_open_stops_its_command() {
    let c = Cluster::start("net-permits-admin");
    let holder = c.run(
        &["--permits", "3", "--owner", "the-holder"],
        "jobs",
        &holding("a"),
    );
    let held = c.started("a");
    let resource = format!("semaphore/jobs/permit/{}", held.slot);
    // The command runs once a quorum granted: the permit is listed on two
    // or three of the servers (a third grant is not promised).
    let listed = c.admin(&["locks"]);
    assert_eq!(listed.code, Some(0), "{listed:?}");
    let row = listed
        .stdout
        .lines()
        .find(|l| l.split_whitespace().next() == Some(resource.as_str()))
        .expect("the permit's row");
    for field in ["write", "the-holder", held.uid.as_str()] {
        assert!(row.contains(field), "{field} missing from {row:?}");
    }
    assert!(on_a_quorum_of_three(row), "{listed:?}");
    let permits = listed.stdout.matches("semaphore/jobs/permit/").count();
    assert_eq!(permits, 1, "one permit held: {listed:?}");
    assert!(
        listed.stdout.contains("semaphore/jobs/count-bit/"),
        "{listed:?}"
    );

    // QUORUM_LOCK_UID is the slot's lock: forcing it open loses the permit.
    let forced = c.admin(&["force-unlock", "--uid", &held.uid]);
    assert_eq!(forced.code, Some(0), "{forced:?}");
    let holder = holder.finish(LIMIT);
    assert_eq!(holder.code, Some(79), "{holder:?}");
    assert!(
        holder.stderr.contains(&format!(
            "lost permit {} of the semaphore 'jobs' (3 permits) while the command ran",
            held.slot
        )),
        "{holder:?}"
    );
}

#[test]
fn a_plain_lock_does_not_pass_on_an_inherited_slot() {
    let c = Cluster::start("net-permits-env");
    let token = c.dir.token();
    let dir = c.dir.path.display().to_string();
    let done = cli(
        &c.dir,
        &[
            "run",
            "--nodes",
            &c.nodes,
            "--token-file",
            &token,
            "plain",
            "--",
            "sh",
            "-c",
            "echo ${QUORUM_LOCK_PERMIT_SLOT-unset} > $D/slot",
        ],
        &[("D", &dir), ("QUORUM_LOCK_PERMIT_SLOT", "7")],
        LIMIT,
    );
    assert_eq!(done.code, Some(0), "{done:?}");
    assert_eq!(c.dir.read("slot").trim(), "unset");
}

#[test]
fn bad_permit_flags_are_usage_errors() {
    let dir = Scratch::new("permits-usage");
    // Refused before connecting: this address has no server.
    let base = ["run", "--nodes", "127.0.0.1:9", "--token", "t"];
    for (extra, expected) in [
        (
            &["--permits", "2", "--read", "n", "--", "true"][..],
            "the argument '--permits <K>' cannot be used with '--read'",
        ),
        (
            &["--permits", "0", "n", "--", "true"][..],
            "0 is not in 1..=1000",
        ),
        (
            &["--permits", "1001", "n", "--", "true"][..],
            "1001 is not in 1..=1000",
        ),
        (
            &["--permits", "two", "n", "--", "true"][..],
            "invalid value 'two'",
        ),
        (
            &["--permits", "2", "a", "b", "--", "true"][..],
            "unexpected argument 'b'",
        ),
        (
            &["--permits", "2", "--", "true"][..],
            "required arguments were not provided",
        ),
    ] {
        let mut args = base.to_vec();
        args.extend(extra);
        let done = cli(&dir, &args, &[], LIMIT);
        assert_eq!(done.code, Some(2), "{args:?}: {done:?}");
        assert!(done.stderr.contains(expected), "{args:?}: {done:?}");
        assert_eq!(done.stderr.lines().count(), 1, "{done:?}");
    }
}

#[test]
fn permits_over_three_redis_nodes() {
    let Some(servers) = RedisServer::start_many(3) else {
        return;
    };
    let urls = servers
        .iter()
        .map(RedisServer::url)
        .collect::<Vec<_>>()
        .join(",");
    let dir = Scratch::new("redis-permits");
    let path = dir.path.display().to_string();
    let run = |extra: &[&str], script: &str| {
        let mut args = vec!["run", "--redis", &urls, "--validity", "3s"];
        args.extend(extra);
        args.extend(["--permits", "2", "builds", "--", "sh", "-c", script]);
        Cli::spawn(&dir, &args, &[("D", &path)])
    };
    // The CLI's quarantine after a Redis start is its --validity, and a
    // fresh Redis draws no fencing token for FENCE_QUARANTINE (see
    // redis_cli.rs).
    std::thread::sleep(quorum_lock::redis::FENCE_QUARANTINE + Duration::from_millis(1500));
    let a = run(&[], &holding("a"));
    let b = run(&[], &holding("b"));
    let (held_a, held_b) = (started(&dir, "a"), started(&dir, "b"));
    assert_ne!(held_a.slot, held_b.slot);
    let third = run(&["--timeout", "1s"], &holding("x")).finish(LIMIT);
    assert_eq!(third.code, Some(75), "{third:?}");
    for tag in ["a", "b"] {
        release(&dir, tag);
    }
    for done in [a.finish(LIMIT), b.finish(LIMIT)] {
        assert_eq!(done.code, Some(0), "{done:?}");
        assert!(done.stderr.is_empty(), "{done:?}");
    }
    assert!(!dir.file("x").exists(), "a third command ran beside two");
}
