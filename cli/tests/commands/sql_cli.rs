//! Databases in `--nodes`: `postgres://` and `mysql://` URLs beside a lock
//! server's `host:port`, in one list. Without servers: every client
//! command tells each entry's kind by its scheme, and an unknown scheme, a
//! URL that is no database, a server listed twice or an option for a kind
//! that is not listed is a one-line usage error (exit 2) that never shows a
//! password. With a real PostgreSQL, MariaDB and lock server (skipped,
//! saying why, without the server programs, unless
//! `QUORUM_LOCK_REQUIRE_SQL` is set): `run` runs its command under a lock
//! held on all three, with a fencing token; `locks`, `status` (text and
//! JSON, with each node's kind) and `force-unlock` see and free it, `elect`
//! leads, and a database that refuses the password is exit 77, its password
//! never shown.

use std::time::{Duration, Instant};

use crate::sql_support::{MariaServer, PgServer};
use crate::support::{cli, cli_with_logs, wait_until, Cli, Finished, Scratch, Server};

const LIMIT: Duration = Duration::from_secs(30);
/// The lease of every client here; also how long a freshly started
/// MariaDB is in quarantine for them (a server start, as they count it).
const VALIDITY: &str = "3s";
/// How long a fresh grant may take to show on every node: a late grant is
/// recorded within the acquire timeout (1 s), listings take a moment more.
const EVERY_NODE: Duration = Duration::from_secs(8);
/// What a password looks like in the tests that check it never shows.
const SECRET: &str = "s3cret-Pa55";

/// `quorum-lock ARGS`, checked to be one line of usage error (exit 2)
/// saying `needle`, with no password anywhere.
fn usage_error(dir: &Scratch, args: &[&str], env: &[(&str, &str)], needle: &str) -> Finished {
    let done = cli(dir, args, env, LIMIT);
    assert_eq!(done.code, Some(2), "{args:?}: {done:?}");
    assert!(
        done.stderr.contains(needle),
        "{needle:?} not in {args:?}: {done:?}"
    );
    assert_eq!(done.stderr.lines().count(), 1, "not one line: {done:?}");
    assert!(done.stdout.is_empty(), "{done:?}");
    no_secret(&done);
    done
}

fn no_secret(done: &Finished) {
    for shown in [&done.stdout, &done.stderr] {
        assert!(!shown.contains(SECRET), "a password shown: {done:?}");
        assert!(
            !shown.contains("Pa55"),
            "part of a password shown: {done:?}"
        );
    }
}

#[test]
fn every_client_command_tells_entries_apart_by_scheme_and_refuses_bad_ones() {
    let dir = Scratch::new("sql-cli-usage");
    let token = dir.token();
    let admin = dir.admin();
    let http = format!("http://user:{SECRET}@127.0.0.1:80/x");
    // Each command with an unknown scheme in --nodes: refused before
    // anything connects, naming the schemes it takes.
    let commands: [Vec<&str>; 6] = [
        vec!["run", "--token-file", &token, "job", "--", "true"],
        vec!["lock", "--token-file", &token, "job"],
        vec!["elect", "--token-file", &token, "job", "v", "--", "true"],
        vec!["locks", "--admin-token-file", &admin],
        vec!["force-unlock", "--admin-token-file", &admin, "job"],
        vec!["status", "--admin-token-file", &admin],
    ];
    let nodes = format!("127.0.0.1:1,postgres://127.0.0.1:2/x,{http}");
    for command in &commands {
        // The flags go first: everything after `--` is the command.
        let mut args = vec![command[0], "--nodes", &nodes];
        args.extend(&command[1..]);
        let done = usage_error(
            &dir,
            &args,
            &[],
            "node 3 of 3 (not shown since the list carries credentials; write a comma in a \
             password as %2C): scheme \"http\" is not a kind of node --nodes takes",
        );
        for scheme in [
            "host:port (no scheme) for a lock server",
            "redis://",
            "postgres://",
            "postgresql://",
            "mysql://",
            "mariadb://",
        ] {
            assert!(done.stderr.contains(scheme), "{scheme}: {done:?}");
        }
        // The environment is read the same way.
        usage_error(
            &dir,
            command,
            &[("QUORUM_LOCK_NODES", &format!("mongodb://root:{SECRET}@h:1"))],
            "scheme \"mongodb\" is not a kind of node",
        );
    }

    let run = |nodes: &str, extra: &[&str], needle: &str| {
        let mut args = vec!["run", "--nodes", nodes];
        args.extend(extra);
        args.extend(["job", "--", "true"]);
        usage_error(&dir, &args, &[], needle);
    };
    let user = format!("locks:{SECRET}");
    run(
        &format!("{user}@db.internal:5432/app"),
        &[],
        "it names a user but has no scheme; write postgres://, mysql:// or redis:// before it",
    );
    run(
        &format!("postgres://{user}@127.0.0.1:notaport/app"),
        &[],
        "node 1 of 1 (postgres://***): not a usable PostgreSQL URL",
    );
    run(
        &format!("postgres://{user}@127.0.0.1/a,postgresql://127.0.0.1:5432/b"),
        &[],
        "database server postgresql://127.0.0.1:5432/b is listed twice",
    );
    run(
        &format!("mysql://{user}@127.0.0.1:3306/a,127.0.0.1:1,mariadb://127.0.0.1/b"),
        &["--token-file", &token],
        "database server mariadb://127.0.0.1/b is listed twice",
    );
    run(
        "127.0.0.1:1,,mysql://h/x",
        &[],
        "empty entry in the node list",
    );
    run(
        "postgres://127.0.0.1/a",
        &["--sql-prefix", "bad-prefix"],
        "--sql-prefix: table prefix \"bad-prefix\": use at most 40 ASCII letters",
    );
    run(
        "127.0.0.1:1",
        &["--token-file", &token, "--sql-prefix", "ok_"],
        "--sql-prefix / QUORUM_LOCK_SQL_PREFIX is set, but it only applies to databases",
    );
    run(
        "postgres://127.0.0.1/a",
        &["--redis-prefix", "x:"],
        "--redis-prefix / QUORUM_LOCK_REDIS_PREFIX is set, but it only applies to Redis nodes",
    );
    run(
        "postgres://127.0.0.1/a,mysql://127.0.0.1/b",
        &["--tls-ca", "/nonexistent"],
        "for databases put it in the URL",
    );
    run(
        "postgres://127.0.0.1/a",
        &["--redis", "redis://127.0.0.1:1"],
        "both lock servers (--nodes / QUORUM_LOCK_NODES) and Redis nodes",
    );
    // A lock server beside databases still needs the token; databases
    // alone do not ask for one (the test above got past it).
    run(
        "postgres://127.0.0.1/a,127.0.0.1:1,mysql://127.0.0.1/b",
        &[],
        "no token: pass --token-file FILE",
    );
    usage_error(
        &dir,
        &[
            "status",
            "--nodes",
            "127.0.0.1:1",
            "--admin-token-file",
            &admin,
            "--validity",
            "3s",
        ],
        &[],
        "status --validity is for Redis nodes and databases",
    );

    // The help names the schemes, and never shows the environment's URLs.
    let help = cli(
        &dir,
        &["run", "--help"],
        &[(
            "QUORUM_LOCK_NODES",
            &format!("postgres://u:{SECRET}@h/x,10.0.0.1:7070"),
        )],
        LIMIT,
    );
    assert_eq!(help.code, Some(0), "{help:?}");
    for words in [
        "postgres://",
        "mysql://",
        "redis://",
        "--sql-prefix <PREFIX>",
    ] {
        assert!(help.stdout.contains(words), "{words}: {help:?}");
    }
    no_secret(&help);
}

/// A PostgreSQL, a MariaDB and a lock server, and the --nodes list of all
/// three; `None` (the test is skipped) without the database servers.
struct Mixed {
    dir: Scratch,
    pg: PgServer,
    maria: MariaServer,
    server: Server,
    nodes: String,
}

fn mixed(test: &str) -> Option<Mixed> {
    let pg = PgServer::start()?;
    let maria = MariaServer::start()?;
    let dir = Scratch::new(test);
    let server = Server::start(&dir, &["--no-quarantine"]);
    let nodes = format!("{},{},{}", pg.url(), maria.url(), server.addr);
    Some(Mixed {
        dir,
        pg,
        maria,
        server,
        nodes,
    })
}

impl Mixed {
    /// `quorum-lock SUBCOMMAND --nodes ... ARGS` with the tokens and the
    /// tests' validity, to completion.
    fn command(&self, subcommand: &str, args: &[&str]) -> Finished {
        let (token, admin) = (self.dir.token(), self.dir.admin());
        let mut all = vec![subcommand, "--nodes", &self.nodes];
        match subcommand {
            "locks" | "force-unlock" => all.extend(["--admin-token-file", &admin]),
            "status" => all.extend(["--admin-token-file", &admin, "--validity", VALIDITY]),
            _ => all.extend(["--token-file", &token, "--validity", VALIDITY]),
        }
        all.extend(args);
        cli(&self.dir, &all, &[], LIMIT)
    }

    /// A `run` holding `name` whose grant every node lists, with its uid
    /// and the `locks` listing. A grant needs only a quorum: a node whose
    /// lock call ran past the acquire timeout (a database on a loaded
    /// machine) keeps no entry, and the refresh does not add one. Such a
    /// holder is ended and the lock taken again, at most three times.
    fn hold_on_every_node(&self, name: &str) -> (Cli, String, Finished) {
        let script = "echo $QUORUM_LOCK_UID > $D/uid; sleep 30 & echo $! > $D/sleep; wait";
        let mut seen = Vec::new();
        for _ in 0..3 {
            let _ = std::fs::remove_file(self.dir.file("sleep"));
            let holder = self.spawn_run(name, script);
            wait_until(LIMIT, "the command to start", || {
                !self.dir.read("sleep").is_empty()
            });
            let uid = self.dir.read("uid").trim().to_owned();
            let start = Instant::now();
            while start.elapsed() < EVERY_NODE {
                let listed = self.command("locks", &[]);
                if listed.stdout.contains("3/3") {
                    return (holder, uid, listed);
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            seen.push(self.command("locks", &["--per-node"]));
            drop(holder);
            wait_until(LIMIT, "every entry to be gone", || {
                self.command("locks", &["--per-node"]).stdout.trim() == "no locks held"
            });
        }
        panic!("no grant of {name} reached every node in 3 tries: {seen:#?}");
    }

    /// `quorum-lock run --nodes ... NAME -- sh -c SCRIPT`, in the
    /// background, with `$D` the scratch directory.
    fn spawn_run(&self, name: &str, script: &str) -> Cli {
        let token = self.dir.token();
        let args = [
            "run",
            "--nodes",
            &self.nodes,
            "--token-file",
            &token,
            "--validity",
            VALIDITY,
            name,
            "--",
            "sh",
            "-c",
            script,
        ];
        let dir = self.dir.path.display().to_string();
        Cli::spawn(&self.dir, &args, &[("D", &dir)])
    }
}

#[test]
fn run_locks_status_force_unlock_and_elect_over_postgres_mariadb_and_a_lock_server() {
    let Some(m) = mixed("sql-cli-mixed") else {
        return;
    };
    // A lock server and PostgreSQL make a quorum at once: the command runs
    // even while the fresh MariaDB is in quarantine.
    let first = m.command(
        "run",
        &[
            "job",
            "--",
            "sh",
            "-c",
            "echo \"$QUORUM_LOCK_FENCING_TOKEN\"",
        ],
    );
    assert_eq!(first.code, Some(0), "{first:?}");
    assert!(
        first.stdout.trim().parse::<u64>().is_ok(),
        "no fencing token: {first:?}"
    );
    wait_until(LIMIT, "MariaDB's quarantine to end", || {
        let health = m.command("status", &["--health"]);
        health.code == Some(0) && health.stdout.matches("  healthy").count() == 3
    });
    // `run` exits once a quorum confirmed the release, so an unlock still
    // on its way to the third node may be cut off: that entry (on fewer
    // than a quorum) expires on its own within the validity.
    wait_until(LIMIT, "every entry to be gone", || {
        m.command("locks", &["--per-node"]).stdout.trim() == "no locks held"
    });

    let (holder, uid, listed) = m.hold_on_every_node("reports");
    assert_eq!(listed.code, Some(0), "{listed:?}");
    assert!(
        listed.stdout.contains(&uid) && listed.stdout.contains("reports"),
        "{listed:?}"
    );

    // Held: another run does not get it.
    let refused = m.command("run", &["-n", "reports", "--", "true"]);
    assert_eq!(refused.code, Some(75), "{refused:?}");

    // Status: each node's line says what it is; JSON gives each its kind.
    let pg = format!("postgres://127.0.0.1:{}/quorum", m.pg.port());
    let maria = format!("mysql://127.0.0.1:{}/quorum", m.maria.port());
    let shown = m.command("status", &[]);
    assert_eq!(shown.code, Some(0), "{shown:?}");
    for (node, speaks) in [(&pg, "PostgreSQL"), (&maria, "MySQL/MariaDB")] {
        let line = shown
            .stdout
            .lines()
            .find(|l| l.starts_with(node.as_str()))
            .unwrap_or_else(|| panic!("{node} not shown: {shown:?}"));
        assert!(
            line.contains(&format!("reachable, {speaks}, not quarantined, 1 entry")),
            "{line}: {shown:?}"
        );
    }
    no_secret(&shown);
    let json = m.command("status", &["--output", "json"]);
    assert_eq!(json.code, Some(0), "{json:?}");
    let doc: serde_json::Value = serde_json::from_str(&json.stdout).expect("JSON");
    assert_eq!(doc["kind"], "mixed", "{doc}");
    let kinds: Vec<&str> = doc["nodes"]
        .as_array()
        .expect("nodes")
        .iter()
        .map(|n| n["kind"].as_str().expect("a kind"))
        .collect();
    assert_eq!(kinds, ["postgres", "mysql", "lock-server"], "{doc}");
    assert_eq!(doc["nodes"][0]["node"], pg.as_str(), "{doc}");
    assert_eq!(doc["nodes"][1]["locks"][0]["uid"], uid.as_str(), "{doc}");
    let per_node = m.command("locks", &["--per-node", "--output", "json"]);
    let doc: serde_json::Value = serde_json::from_str(&per_node.stdout).expect("JSON");
    assert_eq!(doc["kind"], "mixed", "{doc}");
    assert_eq!(doc["nodes"][1]["kind"], "mysql", "{doc}");

    let forced = m.command("force-unlock", &["reports"]);
    assert_eq!(forced.code, Some(0), "{forced:?}");
    assert_eq!(
        forced.stdout.trim(),
        "forced open: reports (held on 3, confirmed by 3 of 3 nodes)"
    );
    let holder = holder.finish(LIMIT);
    assert_eq!(holder.code, Some(79), "{holder:?}");

    // Elections too: the candidate leads, with its term as the token.
    let elected = m.command(
        "elect",
        &[
            "--timeout",
            "10s",
            "scheduler",
            "host-a",
            "--",
            "sh",
            "-c",
            "echo \"$QUORUM_LOCK_FENCING_TOKEN\"",
        ],
    );
    assert_eq!(elected.code, Some(0), "{elected:?}");
    assert!(
        elected.stdout.trim().parse::<u64>().is_ok(),
        "no term: {elected:?}"
    );
}

#[test]
fn a_database_that_refuses_the_password_is_exit_77_and_the_password_never_shows() {
    let Some(m) = mixed("sql-cli-password") else {
        return;
    };
    let wrong = m.maria.url_as("quorum", SECRET);
    let nodes = format!("{},{}", m.pg.url(), wrong);
    // Two databases, one refusing: no quorum, and waiting does not mend it.
    let token = m.dir.token();
    let done = cli(
        &m.dir,
        &[
            "run",
            "--nodes",
            &nodes,
            "--validity",
            VALIDITY,
            "job",
            "--",
            "true",
        ],
        &[],
        LIMIT,
    );
    assert_eq!(done.code, Some(77), "{done:?}");
    assert!(
        done.stderr.contains(&format!(
            "mysql://127.0.0.1:{}/quorum: the database refused the credentials",
            m.maria.port()
        )),
        "{done:?}"
    );
    assert!(
        done.stderr
            .contains("check the user and password in the database URLs"),
        "{done:?}"
    );
    no_secret(&done);
    // With a quorum of the rest it goes on, with a warning.
    let nodes = format!("{},{},{}", m.pg.url(), wrong, m.server.addr);
    let done = cli_with_logs(
        &m.dir,
        &[
            "run",
            "--nodes",
            &nodes,
            "--token-file",
            &token,
            "--validity",
            VALIDITY,
            "job",
            "--",
            "true",
        ],
        LIMIT,
    );
    assert_eq!(done.code, Some(0), "{done:?}");
    assert!(
        done.stderr
            .contains("warning: not answering, continuing with a quorum of the rest"),
        "{done:?}"
    );
    no_secret(&done);
    // Health: the refusing node is named; a quorum is still healthy.
    let health = cli(
        &m.dir,
        &[
            "status",
            "--health",
            "--nodes",
            &nodes,
            "--token-file",
            &token,
            "--validity",
            VALIDITY,
        ],
        &[],
        LIMIT,
    );
    assert!(
        health
            .stdout
            .contains("unhealthy: unreachable: the database refused the credentials"),
        "{health:?}"
    );
    no_secret(&health);
}
