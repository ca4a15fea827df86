//! The command line, declared with clap's derive API. Every flag carries its
//! help text here, so `--help` is the reference for operators.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

/// Distributed read/write locks granted by a quorum of lock servers, Redis
/// servers or SQL databases (PostgreSQL, MySQL, MariaDB), alone or mixed.
///
/// Start one `server` per node (or use standalone Redis servers or
/// databases as nodes), then take locks with `run`, elect a leader with `elect`,
/// inspect locks with `locks` and `status` and break stuck ones with
/// `force-unlock`. A write lock needs ⌊n/2⌋+1 of the n
/// nodes, a read lock ⌈n/2⌉.
#[derive(Debug, Parser)]
// clap's own `help` subcommand refuses flags, so `help --help` failed:
// `help` is a subcommand of ours (`Command::Help`).
#[command(
    name = "quorum-lock",
    version,
    after_long_help = TOP_HELP,
    disable_help_subcommand = true
)]
#[command(after_help = "Run 'quorum-lock help <COMMAND>' for the flags and examples of a command.")]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve a lock table on one node until SIGTERM or Ctrl-C.
    #[command(after_help = SERVER_EXAMPLES)]
    Server(ServerArgs),
    /// Run a command while holding a lock, like flock(1) across machines,
    /// or one of a semaphore's K permits.
    #[command(after_help = RUN_EXAMPLES)]
    Run(RunArgs),
    /// Take a lock, print its uid and fencing token, and hold it until
    /// SIGINT or SIGTERM, like `etcdctl lock NAME` without a command.
    #[command(after_help = LOCK_EXAMPLES)]
    Lock(HoldArgs),
    /// Campaign to lead an election and run a command while leading, like
    /// `etcdctl elect`; or, with --listen, print each change of leader.
    #[command(
        after_help = ELECT_EXAMPLES,
        override_usage = "quorum-lock elect [OPTIONS] <NAME> <VALUE> -- <CMD>...\n       \
                          quorum-lock elect --listen [OPTIONS] <NAME>"
    )]
    Elect(ElectArgs),
    /// List the locks held on the nodes (lock servers: needs the admin token).
    #[command(after_help = LOCKS_EXAMPLES)]
    Locks(LocksArgs),
    /// Drop every lock on the given names, or one lock by uid, whoever holds it
    /// (lock servers: needs the admin token).
    #[command(after_help = FORCE_EXAMPLES)]
    ForceUnlock(ForceUnlockArgs),
    /// Show each node's state: reachable, quarantined, its entries and
    /// locks (lock servers: needs the admin token); with --health, only
    /// whether enough nodes can grant locks (any token).
    #[command(after_help = STATUS_EXAMPLES)]
    Status(StatusArgs),
    /// Make a CA and TLS certificates for lock servers, and client
    /// certificates for mutual TLS, as PEM files.
    #[command(after_help = CERTS_EXAMPLES)]
    Certs(CertsArgs),
    /// Print this message or the help of the given command.
    Help(HelpArgs),
}

/// `quorum-lock help [COMMAND]`.
#[derive(Debug, Args)]
pub struct HelpArgs {
    /// The command whose help to print, as `quorum-lock COMMAND --help`
    /// does; without it, the help of quorum-lock itself.
    #[arg(value_name = "COMMAND")]
    pub command: Option<String>,
}

/// Shown after the command list of `quorum-lock --help`. The exit codes
/// are the constants in `fail.rs`.
const TOP_HELP: &str = "\
Quick start, three nodes on one host:
  echo s3cret > token; echo adm1n > admin-token
  for port in 7001 7002 7003; do
    quorum-lock server --listen 127.0.0.1:$port --token-file token \\
        --admin-token-file admin-token --no-quarantine &
  done
  export QUORUM_LOCK_NODES=127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003
  quorum-lock run --token-file token backup -- ./backup.sh
  quorum-lock locks --admin-token-file admin-token

The same with three standalone Redis servers instead of lock servers (no
tokens: put a password in the URLs if the servers require one):
  export QUORUM_LOCK_REDIS=redis://127.0.0.1:6379,redis://127.0.0.1:6380,redis://127.0.0.1:6381
  quorum-lock run backup -- ./backup.sh
  quorum-lock locks

Or databases, alone or beside lock servers and Redis nodes, each told by its
URL's scheme (the tables are created on first use):
  export QUORUM_LOCK_NODES=postgres://locks:pw@db1/app,mysql://locks:pw@db2/app,10.0.0.3:7070
  quorum-lock run --token-file token backup -- ./backup.sh

Exit codes:
  0        success (run: the command exited with 0)
  1        other failure, e.g. the server cannot listen on its address
  2        bad usage: flags, durations, addresses, URLs (an unknown scheme
           in --nodes), missing or empty token, both or neither of --nodes
           and --redis; run --permits K on a semaphore that others hold
           with another K
  69       too few nodes reachable for a quorum, or too many in quarantine
           after a restart (run, lock, elect: within --timeout, or at once
           with --nonblock; without either they wait); locks --per-node:
           some nodes did not answer (the others' entries were listed);
           status --health: fewer than a write quorum of nodes are healthy
  75       run, lock, elect: held elsewhere, not granted within --timeout
           or at once with --nonblock; the command did not run
  77       a server rejected the token, or it is not the admin token; or
           too few nodes answered and some refused the credentials (Redis:
           the password; databases: the user, password, privileges or TLS;
           lock servers: TLS over a certificate)
  79       run, lock, elect: the lock (or leadership) was lost while held;
           the command was stopped
  126/127  run, elect: the command cannot be executed / was not found
  128+N    run, elect: stopped by signal N (e.g. 130 after Ctrl-C);
           lock and elect --listen exit 0 on SIGINT/SIGTERM
  other    run, elect: the command's own exit code

Environment: QUORUM_LOCK_NODES, QUORUM_LOCK_TOKEN, QUORUM_LOCK_ADMIN_TOKEN,
QUORUM_LOCK_TOKEN_FILE, QUORUM_LOCK_ADMIN_TOKEN_FILE, QUORUM_LOCK_TLS_CA,
QUORUM_LOCK_TLS_CERT, QUORUM_LOCK_TLS_KEY, QUORUM_LOCK_REDIS,
QUORUM_LOCK_REDIS_PREFIX, QUORUM_LOCK_REDIS_CA, QUORUM_LOCK_SQL_PREFIX stand in for the flags; RUST_LOG sets the log filter (server default: info; clients: off).";

const SERVER_EXAMPLES: &str = "\
Examples:
  # first start of a brand-new cluster: grant at once
  quorum-lock server --listen 10.0.0.1:7070 --token-file /etc/qlock/token \\
      --admin-token-file /etc/qlock/admin-token --no-quarantine
  # any later (re)start: refuse new grants for one validity period
  QUORUM_LOCK_TOKEN=s3cret quorum-lock server --listen 127.0.0.1:0

Prints exactly one line, 'listening on <addr>', to stdout once bound; logs go
to stderr (filter with RUST_LOG, default info).";

const RUN_EXAMPLES: &str = "\
Examples:
  export QUORUM_LOCK_NODES=10.0.0.1:7070,10.0.0.2:7070,10.0.0.3:7070
  export QUORUM_LOCK_TOKEN=s3cret
  quorum-lock run nightly-backup -- /usr/local/bin/backup --full
  quorum-lock run --read --timeout 30s reports -- sh -c 'make report'
  # at most 3 rebuilds at once, whichever hosts start them
  quorum-lock run --permits 3 rebuilds -- ./rebuild.sh
  # on three Redis servers instead (password in the environment, not in ps):
  export QUORUM_LOCK_REDIS=redis://:pw@10.0.0.1:6379,redis://:pw@10.0.0.2:6379,redis://:pw@10.0.0.3:6379
  quorum-lock run nightly-backup -- /usr/local/bin/backup --full
  # on two databases and a lock server, mixed in one list:
  export QUORUM_LOCK_NODES=postgres://locks:pw@db1/app,mysql://locks:pw@db2/app,10.0.0.3:7070
  quorum-lock run nightly-backup -- /usr/local/bin/backup --full

The command runs in its own process group with QUORUM_LOCK_NAME (the lock's
name), QUORUM_LOCK_UID and QUORUM_LOCK_FENCING_TOKEN set. The fencing token
is a number larger than that of every earlier holder of the lock: pass it
with each write to what the lock protects, and have that refuse tokens
smaller than the largest it has seen, so that a holder that stalled past
its lock cannot write late. Servers too old to issue tokens leave it unset,
with a warning. Its exit code is passed through; if the lock is lost
while it runs, the group gets SIGTERM, then SIGKILL after --grace, and run
exits with 79. SIGINT/SIGTERM to run is forwarded to the group the same way,
the lock is released and run exits with 128+signal. If run itself is
SIGKILLed, the lock expires after --validity and, on Linux, the kernel kills
the command at once (its own process; end a script with exec).

With --permits K, NAME is a semaphore: the command runs under one of its K
permits, so at most K such commands run at once; runs wait in line, first
come, first served. Everything above applies to the permit as to a lock.
QUORUM_LOCK_PERMIT_SLOT is set to the permit's slot, 0 to K-1 (listed as
semaphore/NAME/permit/SLOT by `locks`), and the fencing token is that
slot's: larger than every earlier holder's of the same slot, not of the
other slots, so keep the largest token seen per slot. Every run on NAME
must give the same K: while others hold it with another K, run exits with
2 without running the command once it is at the head of the line (at once
when nobody waits ahead of it). --permits cannot be combined with --read.

When the lock is lost (no quorum confirmed it for 5/6 of --validity), counting
from the moment run notices:
  0                       SIGTERM to the command's process group
  --grace                 SIGKILL to whatever is left of the group
  --grace + allowance     the command is dead (allowance: 1s, or a quarter
                          of --validity/6 if that is less)
  --validity/6            the earliest the lock can be granted to anyone else
So --grace + allowance must be shorter than --validity/6, or run refuses to
start (exit 2); the default --grace is half of --validity/6 (5s at the
default --validity 60s). With --foreground only the command itself is
signalled, so processes it started can outlive the lock. A lock forced open
with force-unlock, or lost because a majority of servers restarted without
quarantine, is free at once: no --grace protects against that.

While it waits longer than a second, run says why on stderr, once per
reason: held elsewhere, servers in quarantine after a restart (and for how
long), or servers unreachable (which, and why).

Exit codes:
  CODE      the command ran: its own exit code
  128+N     run was stopped by signal N (SIGINT, SIGTERM), the command too
  2         usage or configuration: bad flags, names, token files, another
            --permits than the semaphore's holders use
  69        too few servers reachable, or too many in quarantine, within
            --timeout or at once with --nonblock; the command did not run
  75        held elsewhere: not granted within --timeout, or at once with
            --nonblock; the command did not run
  77        a server rejected the token or a TLS certificate
  79        the lock was lost while the command ran; the command was stopped
  126, 127  the command cannot be executed, or was not found
  1         anything else";

const LOCK_EXAMPLES: &str = "\
Examples:
  quorum-lock lock maintenance          # holds it until Ctrl-C
  quorum-lock lock --timeout 10s -n deploy   # -n: fail at once if taken

Once granted, lock prints one line per fact on stdout, then holds the lock
until SIGINT or SIGTERM, releases it and exits with 0:
  name=NAME
  uid=UID
  fencing_token=TOKEN        (left out if the servers issue none)
  slot=SLOT                  (with --permits)
If the lock is lost meanwhile it exits with 79 at once, and leaves the
lock's entries to expire (up to --validity): whatever relied on the lock
has that long to stop before anyone else can be granted it. The exit codes
are those of `run` (see `quorum-lock help run`).";

const ELECT_EXAMPLES: &str = "\
Examples:
  export QUORUM_LOCK_NODES=10.0.0.1:7070,10.0.0.2:7070,10.0.0.3:7070
  export QUORUM_LOCK_TOKEN=s3cret
  # on each replica: the first to campaign leads, the others wait in line
  quorum-lock elect scheduler \"$(hostname):8080\" -- ./scheduler --primary
  # who leads, and every change, until Ctrl-C
  quorum-lock elect --listen scheduler

Campaigning: the candidates wait in line, first come, first served. Once
this one leads, the command runs in its own process group with
QUORUM_LOCK_NAME (the election's name), QUORUM_LOCK_UID (the uid of the
leader's lock, election/NAME in `locks`) and QUORUM_LOCK_FENCING_TOKEN (the
term: larger than every earlier leader's) set; when it exits, elect resigns
and exits with its code. If the leadership is lost while it runs, the
command is stopped as `run` stops its command when the lock is lost
(SIGTERM, SIGKILL after --grace, dead before anyone else can lead) and
elect exits with 79. SIGINT/SIGTERM to elect is forwarded the same way,
elect resigns and exits with 128+signal. On Linux, if elect itself is
killed with SIGKILL, the kernel kills the command at once (SIGKILL, the
command's own process only: what it started keeps running unless it exits
with it); the next leader is elected once the lease runs out, --validity
later.

Listening (--listen): one line per change on stdout, flushed at once:
  term=17 value=host-a:8080    a leader, with its term and its value
  no leader                    nobody leads (resigned, or its lease ran out)
The first line is the state when listening begins. The value is the rest
of the line; a backslash, control characters and bytes that are not UTF-8
are escaped as \\\\, \\n, \\r, \\t and \\xNN. Terms never go back. A change
is printed when the nodes push it, or within a second if a push is lost;
\"no leader\" follows a leader's loss once a quorum of nodes freed it. Runs
until SIGINT or SIGTERM, then exits 0.";

const LOCKS_EXAMPLES: &str = "\
Examples:
  quorum-lock locks --nodes 10.0.0.1:7070,10.0.0.2:7070,10.0.0.3:7070 \\
      --admin-token-file /etc/qlock/admin-token
  quorum-lock locks --per-node \\
      --redis redis://10.0.0.1:6379,redis://10.0.0.2:6379,redis://10.0.0.3:6379
  quorum-lock locks --nodes postgres://locks:pw@db1/app,mysql://locks:pw@db2/app,10.0.0.3:7070 \\
      --admin-token-file /etc/qlock/admin-token

NODES is how many nodes hold the entry; fewer than the write quorum means a
leftover that expires on its own, not a held lock. A semaphore (run
--permits) shows its permits as semaphore/NAME/permit/SLOT, with their
holders as OWNER and with held rows that spell K, beside its queue and
count-bit rows.

The merged view needs a write quorum (⌊n/2⌋+1) of the nodes to answer:
every held lock is on a quorum, so with fewer one could be missing. It
fails (69) without one; nodes that did not answer are named on stderr.
--per-node works with any number of nodes down, which is when it matters:
it lists what the nodes that answered hold, then one line per node that
did not, with why (NODE  unreachable: REASON, or failing: REASON), and
exits with 69 when any did not (0 when all answered), saying so on stderr.

--output json prints one JSON document instead, on one line, whenever the
nodes were asked, with the same exit codes; docs/cli.md lists its fields.";

const STATUS_EXAMPLES: &str = "\
Examples:
  quorum-lock status --nodes 10.0.0.1:7070,10.0.0.2:7070,10.0.0.3:7070 \\
      --admin-token-file /etc/qlock/admin-token
  QUORUM_LOCK_ADMIN_TOKEN=adm1n quorum-lock status --watch --interval 5s

  # readiness probe: client token only, exit 0 while a write quorum is healthy
  quorum-lock status --health --token-file /etc/qlock/token
  quorum-lock status --redis redis://10.0.0.1:6379,redis://10.0.0.2:6379,redis://10.0.0.3:6379
  quorum-lock status --nodes postgres://locks:pw@db1/app,mysql://locks:pw@db2/app,10.0.0.3:7070 \\
      --admin-token-file /etc/qlock/admin-token

One line per server: reachable or why not, its protocol version, whether
it is in quarantine (refusing new grants after a restart) and for how much
longer, and how many entries it holds; then its locks, with their age and
the time since their holder last refreshed them. A holder refreshes every
validity/6: a lock not refreshed for much longer has lost its holder and
will expire. Servers older than protocol version 4 cannot say how long
their quarantine lasts. Exits with 69 when no server answered (77 when
servers refused TLS over a certificate), and with 77 when the token is not
the admin token.

With --redis: the same for Redis nodes, except the protocol version (Redis
has none of ours). A Redis node keeps no quarantine of its own: clients
refuse its grants for their --validity after it started, so status counts
the quarantine with its own --validity (default 60s, as run), and a lock's
last refresh as its expiry less that --validity. Give the clients' value.

Databases (postgres://, mysql:// in --nodes): the same as Redis nodes, the
line naming the database (PostgreSQL, MySQL/MariaDB). Their quarantine
follows a lock table that was emptied (a PostgreSQL crash, a failover, a
restored backup) and, on MySQL and MariaDB, a server start, counted with
--validity too; a table created on first use starts out of quarantine. A database that refuses the credentials counts as not
answering (77 when too few answered).

--health asks only whether each node answers and is out of quarantine,
with any token (no listing, so no admin token): one line per node,
'NODE  healthy' or 'NODE  unhealthy: REASON', and exits with 0 when at
least a write quorum (⌊n/2⌋+1) is healthy, 69 when fewer are (77 when
servers refused the credentials or TLS over a certificate).

--output json prints one JSON document per snapshot, on one line (so
--watch prints JSON Lines); see docs/cli.md for its fields.";

const FORCE_EXAMPLES: &str = "\
Examples:
  QUORUM_LOCK_ADMIN_TOKEN=adm1n quorum-lock force-unlock nightly-backup reports
  QUORUM_LOCK_REDIS=redis://10.0.0.1:6379,redis://10.0.0.2:6379,redis://10.0.0.3:6379 \\
      quorum-lock force-unlock --uid 4dba5d45-2989-4eff-a937-01a99ffbbf76

Prints one line per name: 'forced open: NAME (held on N, confirmed by A of
T servers)', or 'not held: NAME (confirmed by A of T servers)' when no node
that confirmed had an entry on it; the latter also warns on stderr (a
mistyped name?) but exits with 0, so that forcing stays idempotent for
scripts. Needs a write quorum to confirm each name (69 otherwise).

A holder that was forced out keeps running until its next refresh, up to
its refresh interval later (validity/6 for quorum-lock run): it learns of
the loss only then (a 'quorum-lock run' then stops its command and exits
with 79), and its work is no longer protected by the lock from the moment
it was forced. force-unlock warns about this on stderr when something was
held.";

const CERTS_EXAMPLES: &str = "\
Examples:
  # a CA, one certificate per server, one client certificate
  quorum-lock certs --dir tls --nodes 10.0.0.1:7070,10.0.0.2:7070,10.0.0.3:7070 --client app
  # later, with the same CA: a fourth server, a new certificate for another
  quorum-lock certs --dir tls --node db4.example.net:7070
  quorum-lock certs --dir tls --node 10.0.0.2:7070 --force

The first run in a directory makes the CA (ca.pem, and ca-key.pem, which
signs certificates and belongs somewhere safe, not on the servers); later
runs sign with it. Each server's certificate names its host as clients list
it in --nodes (a DNS name or an IP address), so every server has its own
and clients check each one by its host. Key files are written with mode
600; existing files are refused unless --force, which never replaces the
CA. The command prints the files and the server and client flags that use
them.";

/// The shared secrets, from files (preferred), flags or the environment.
#[derive(Debug, Args)]
pub struct Tokens {
    /// File holding the client token (whitespace around it is ignored).
    #[arg(long, value_name = "FILE", env = "QUORUM_LOCK_TOKEN_FILE")]
    pub token_file: Option<PathBuf>,
    /// The client token itself; prefer --token-file, since arguments are
    /// visible to other users in ps.
    #[arg(
        long,
        value_name = "TOKEN",
        env = "QUORUM_LOCK_TOKEN",
        hide_env_values = true
    )]
    pub token: Option<String>,
    /// File holding the admin token. A server with one lets it list and
    /// force locks (without one, nobody can); `locks`, `force-unlock` and
    /// `status` use it, falling back to the client token.
    #[arg(long, value_name = "FILE", env = "QUORUM_LOCK_ADMIN_TOKEN_FILE")]
    pub admin_token_file: Option<PathBuf>,
    /// The admin token itself; prefer --admin-token-file.
    #[arg(
        long,
        value_name = "TOKEN",
        env = "QUORUM_LOCK_ADMIN_TOKEN",
        hide_env_values = true
    )]
    pub admin_token: Option<String>,
}

/// Flags of `server`.
#[derive(Debug, Args)]
pub struct ServerArgs {
    /// Address to listen on, e.g. 10.0.0.1:7070; port 0 picks a free port.
    #[arg(long, value_name = "ADDR")]
    pub listen: String,
    #[command(flatten)]
    pub tokens: Tokens,
    /// How long an entry lives without a refresh; also the quarantine after
    /// start. Clients' --validity must not exceed it.
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = duration)]
    pub validity: Duration,
    /// Grant at once instead of starting in quarantine. Only safe when no
    /// client can hold a lock that this server granted before a restart,
    /// e.g. on the first start of a new cluster.
    #[arg(long)]
    pub no_quarantine: bool,
    /// How long a new connection has to authenticate before it is closed.
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = duration)]
    pub handshake_timeout: Duration,
    /// Most connections served at once. At the limit, a new connection
    /// replaces the oldest one that has not authenticated yet; if all have,
    /// it is closed. Lowered to fit the open-files limit (ulimit -n).
    #[arg(long, value_name = "N", default_value_t = 512, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_connections: u32,
    /// Most locks one connection may hold.
    #[arg(long, value_name = "N", default_value_t = 100_000, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_locks_per_connection: u32,
    /// Most bytes the locks of one connection may take in the lock table
    /// (names, uid, owner, source, plus what the table costs at worst:
    /// about 900 bytes per name and 380 per lock).
    #[arg(long, value_name = "SIZE", default_value = "64MiB", value_parser = size)]
    pub max_bytes_per_connection: usize,
    /// Most bytes all locks together may take in the lock table, counted
    /// the same way; a lock counts until it is released or expires.
    #[arg(long, value_name = "SIZE", default_value = "1GiB", value_parser = size)]
    pub max_lock_bytes: usize,
    /// Most bytes of released lock ids remembered (to refuse requests that
    /// arrive after their own release); the oldest are forgotten first.
    #[arg(long, value_name = "SIZE", default_value = "64MiB", value_parser = size)]
    pub max_released_bytes: usize,
    /// Most places in line one connection may hold: clients waiting for a
    /// lock to be pushed to them, and polling clients' reservations. A
    /// waiting request beyond it is refused with an error.
    #[arg(long, value_name = "N", default_value_t = 1024, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_waiters_per_connection: u32,
    /// Serve TLS only, with this PEM certificate chain (needs --tls-key).
    /// Its certificate must name the host clients list for this server
    /// (see `quorum-lock certs`).
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The PEM private key of --tls-cert.
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// Mutual TLS: admit only clients that present a certificate signed by
    /// a CA in this PEM file (their --tls-cert); others are refused during
    /// the TLS handshake. Clients still need the token.
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_client_ca: Option<PathBuf>,
    /// Serve Prometheus metrics over plain HTTP on this address, e.g.
    /// 127.0.0.1:9464 (any path answers). Unauthenticated: bind it where
    /// only the scraper can reach it. Default: no endpoint.
    #[arg(long, value_name = "ADDR")]
    pub metrics: Option<String>,
}

/// The nodes and credentials every client subcommand needs.
#[derive(Debug, Args)]
pub struct ClientArgs {
    /// Comma-separated nodes, of one kind or mixed, each told by its
    /// scheme: host:port (no scheme) for a lock server, redis:// or
    /// rediss:// for a Redis node (as --redis), postgres:// or
    /// postgresql:// for PostgreSQL, mysql:// or mariadb:// for MySQL or
    /// MariaDB (user:password@host:port/database, TLS in the URL's
    /// parameters), e.g.
    /// postgres://locks:pw@db1/app,mysql://locks:pw@db2/app,10.0.0.3:7070.
    /// Every client of the same locks must list the same nodes, since a
    /// lock is granted by a majority of the list: two clients with
    /// different lists could each count a majority of their own and both
    /// hold it. The order does not matter. Passwords are never shown;
    /// prefer QUORUM_LOCK_NODES for URLs with passwords, since arguments
    /// are visible to other users in ps. Either this or --redis.
    #[arg(
        long,
        value_name = "A,B,C",
        env = "QUORUM_LOCK_NODES",
        hide_env_values = true
    )]
    pub nodes: Option<String>,
    #[command(flatten)]
    pub redis: RedisArgs,
    #[command(flatten)]
    pub sql: SqlArgs,
    #[command(flatten)]
    pub tokens: Tokens,
    /// Longest wait for each server's connection and handshake; for Redis
    /// nodes and databases, also for each call.
    #[arg(long, value_name = "DURATION", default_value = "2s", value_parser = duration)]
    pub connect_timeout: Duration,
    /// Connect to lock servers with TLS, trusting the CA certificates in
    /// this PEM file (for Redis, see --redis-ca; databases take theirs in
    /// the URL, e.g. sslrootcert=FILE). Each server's certificate
    /// must name its host as given in --nodes: a DNS name, or an IP address.
    #[arg(long, value_name = "FILE", env = "QUORUM_LOCK_TLS_CA")]
    pub tls_ca: Option<PathBuf>,
    /// Mutual TLS: present this PEM client certificate to the servers
    /// (needs --tls-key and --tls-ca), for servers started with
    /// --tls-client-ca.
    #[arg(
        long,
        value_name = "FILE",
        env = "QUORUM_LOCK_TLS_CERT",
        requires_all = ["tls_key", "tls_ca"]
    )]
    pub tls_cert: Option<PathBuf>,
    /// The PEM private key of --tls-cert.
    #[arg(
        long,
        value_name = "FILE",
        env = "QUORUM_LOCK_TLS_KEY",
        requires = "tls_cert"
    )]
    pub tls_key: Option<PathBuf>,
    /// Expect this name on every server's certificate instead of each
    /// node's host (kept for setups where all servers share one
    /// certificate; earlier versions expected localhost unless told).
    #[arg(long, value_name = "NAME", requires = "tls_ca")]
    pub tls_server_name: Option<String>,
}

/// Redis nodes instead of lock servers.
#[derive(Debug, Args)]
pub struct RedisArgs {
    /// Comma-separated Redis nodes instead of lock servers (--nodes), as
    /// redis://host:port or redis://user:password@host:port/db (user,
    /// password and database optional), rediss://... for TLS, the same
    /// list on every client. Each node is a standalone Redis server
    /// (6 or later, not a replica, not a cluster, maxmemory-policy
    /// noeviction); a write lock needs a majority of them. Percent-encode a
    /// comma in a password as %2C. Passwords are never shown in output or
    /// errors; prefer QUORUM_LOCK_REDIS for URLs with passwords, since
    /// arguments are visible to other users in ps.
    #[arg(
        long,
        value_name = "URL,URL,URL",
        env = "QUORUM_LOCK_REDIS",
        hide_env_values = true
    )]
    pub redis: Option<String>,
    /// Prefix of the Redis keys (and pub/sub channels) of the locks; every
    /// client of the same locks must use the same one. [default:
    /// quorum-lock:]
    #[arg(long, value_name = "PREFIX", env = "QUORUM_LOCK_REDIS_PREFIX")]
    pub redis_prefix: Option<String>,
    /// Trust the CA certificates in this PEM file for rediss:// nodes
    /// (default: the system's trust store).
    #[arg(long, value_name = "FILE", env = "QUORUM_LOCK_REDIS_CA")]
    pub redis_ca: Option<PathBuf>,
}

/// Options of the databases in --nodes.
#[derive(Debug, Args)]
pub struct SqlArgs {
    /// Prefix of the lock tables' names on the databases of --nodes
    /// (PREFIXentries, PREFIXfence): ASCII letters, digits and
    /// underscores, at most 40; every client of the same locks must use
    /// the same one. [default: quorum_lock_]
    #[arg(long, value_name = "PREFIX", env = "QUORUM_LOCK_SQL_PREFIX")]
    pub sql_prefix: Option<String>,
}

/// Flags of `run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub client: ClientArgs,
    /// Take a shared (read) lock instead of an exclusive one.
    #[arg(long)]
    pub read: bool,
    /// Run under one of K permits of the semaphore NAME instead of a lock:
    /// at most K commands run at once, served in line. Every run on NAME
    /// must give the same K (exit 2 if others hold it with another).
    #[arg(
        long,
        value_name = "K",
        conflicts_with = "read",
        value_parser = clap::value_parser!(u16).range(1..=quorum_lock::MAX_PERMITS as i64)
    )]
    pub permits: Option<u16>,
    /// Give up if the lock (or permit) is not granted within this long:
    /// exit 75 when it is held elsewhere, 69 when too few servers are
    /// reachable or out of quarantine. Without it, wait for as long as it
    /// takes, through server outages, saying what the wait is for.
    #[arg(long, value_name = "DURATION", value_parser = duration, conflicts_with = "nonblock")]
    pub timeout: Option<Duration>,
    /// Make one attempt and exit at once if the lock is not free (75), as
    /// `flock -n` does; 69 if too few servers answer.
    #[arg(short = 'n', long)]
    pub nonblock: bool,
    /// Lease validity; must not exceed the servers' --validity. The lock is
    /// refreshed every validity/6 and given up when no quorum confirmed it
    /// for 5/6 of the validity; another client can get it validity/6 later.
    /// [default: the shortest validity the lock servers announce, 60s if
    /// none answered, at most 60s with Redis nodes or databases in the
    /// list]. With Redis nodes or databases this is
    /// how long they keep the lock unrefreshed, and one that restarted (or
    /// whose lock table was emptied) refuses new grants for as long: every
    /// client of the same Redis or database locks must use the same
    /// --validity.
    #[arg(long, value_name = "DURATION", value_parser = duration)]
    pub validity: Option<Duration>,
    /// Time between SIGTERM and SIGKILL when the command must be stopped.
    /// Must end, with 1s to spare for the kill (less for a --validity under
    /// 24s), before --validity/6, when a lost lock can be granted again.
    /// [default: half of --validity/6, 5s at --validity 60s]
    #[arg(long, value_name = "DURATION", value_parser = duration)]
    pub grace: Option<Duration>,
    /// Keep the command in quorum-lock's process group so that it can read
    /// the terminal; only the command itself, not its children, is then
    /// signalled when the lock is lost.
    #[arg(long)]
    pub foreground: bool,
    /// Owner shown in `locks`. Default: host:pid.
    #[arg(long, value_name = "TEXT")]
    pub owner: Option<String>,
    /// Name of the lock (the resource), or of the semaphore with
    /// --permits.
    #[arg(value_name = "NAME")]
    pub name: String,
    /// The command and its arguments, after `--`.
    #[arg(last = true, required = true, num_args = 1.., value_name = "CMD")]
    pub command: Vec<OsString>,
}

/// Flags of `lock`.
#[derive(Debug, Args)]
pub struct HoldArgs {
    #[command(flatten)]
    pub client: ClientArgs,
    /// Take a shared (read) lock instead of an exclusive one.
    #[arg(long)]
    pub read: bool,
    /// Hold one of K permits of the semaphore NAME instead of a lock (the
    /// same K on every client, as for `run`).
    #[arg(
        long,
        value_name = "K",
        conflicts_with = "read",
        value_parser = clap::value_parser!(u16).range(1..=quorum_lock::MAX_PERMITS as i64)
    )]
    pub permits: Option<u16>,
    /// Give up if not granted within this long (75 held elsewhere, 69 too
    /// few servers); without it, wait for as long as it takes.
    #[arg(long, value_name = "DURATION", value_parser = duration, conflicts_with = "nonblock")]
    pub timeout: Option<Duration>,
    /// Make one attempt and exit at once (75) if the lock is not free.
    #[arg(short = 'n', long)]
    pub nonblock: bool,
    /// Lease validity, as for `run`. [default: the shortest validity the
    /// lock servers announce, 60s if none answered, at most 60s with Redis
    /// nodes or databases in the list]
    #[arg(long, value_name = "DURATION", value_parser = duration)]
    pub validity: Option<Duration>,
    /// Owner shown in `locks`. Default: host:pid.
    #[arg(long, value_name = "TEXT")]
    pub owner: Option<String>,
    /// Name of the lock (the resource), or of the semaphore with
    /// --permits.
    #[arg(value_name = "NAME")]
    pub name: String,
}

/// Flags of `elect`.
#[derive(Debug, Args)]
pub struct ElectArgs {
    #[command(flatten)]
    pub client: ClientArgs,
    /// Do not campaign: print the leader, then one line per change, until
    /// SIGINT or SIGTERM (see the format below).
    #[arg(long, conflicts_with_all = ["value", "command", "timeout", "grace", "foreground", "owner"])]
    pub listen: bool,
    /// Give up if this candidate does not lead within this long: exit 75
    /// when another candidate leads or waits ahead, 69 when too few servers
    /// are reachable or out of quarantine. Without it, wait for as long as
    /// it takes, through server outages.
    #[arg(long, value_name = "DURATION", value_parser = duration)]
    pub timeout: Option<Duration>,
    /// Lease validity, as for `run`: must not exceed the servers'
    /// --validity; the leadership is refreshed every validity/6 and given up
    /// when no quorum confirmed it for 5/6 of the validity, and the next
    /// candidate can lead validity/6 later. [default: the shortest validity
    /// the lock servers announce, 60s if none answered, at most 60s with
    /// Redis nodes or databases in the list, the same on every client]
    #[arg(long, value_name = "DURATION", value_parser = duration)]
    pub validity: Option<Duration>,
    /// Time between SIGTERM and SIGKILL when the command must be stopped,
    /// as for `run`: must end, with 1s to spare (less for a --validity
    /// under 24s), before --validity/6. [default: half of --validity/6]
    #[arg(long, value_name = "DURATION", value_parser = duration)]
    pub grace: Option<Duration>,
    /// Keep the command in quorum-lock's process group so that it can read
    /// the terminal; only the command itself, not its children, is then
    /// signalled when the leadership is lost.
    #[arg(long)]
    pub foreground: bool,
    /// Owner shown in `locks`. Default: host:pid.
    #[arg(long, value_name = "TEXT")]
    pub owner: Option<String>,
    /// Name of the election.
    #[arg(value_name = "NAME")]
    pub name: String,
    /// This candidate's value, reported to observers while it leads (e.g.
    /// its address); at most 4096 bytes.
    #[arg(value_name = "VALUE", required_unless_present = "listen")]
    pub value: Option<String>,
    /// The command to run while leading, and its arguments, after `--`.
    #[arg(last = true, num_args = 1.., value_name = "CMD", required_unless_present = "listen")]
    pub command: Vec<OsString>,
}

/// How `locks` and `status` print what they found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Output {
    /// Aligned columns for people.
    #[default]
    Text,
    /// One JSON document on one line, for scripts (docs/cli.md).
    Json,
}

/// Flags of `locks`.
#[derive(Debug, Args)]
pub struct LocksArgs {
    #[command(flatten)]
    pub client: ClientArgs,
    /// One row per entry on each node, with a NODE column, instead of one
    /// row per lock. Works however many nodes are down: those that did not
    /// answer are listed after the table, with why (exit 69).
    #[arg(long)]
    pub per_node: bool,
    /// text for people, json for scripts.
    #[arg(long, value_name = "FORMAT", value_enum, default_value_t = Output::Text)]
    pub output: Output,
}

/// Flags of `status`.
#[derive(Debug, Args)]
pub struct StatusArgs {
    #[command(flatten)]
    pub client: ClientArgs,
    /// Show the status again every --interval, clearing the terminal
    /// first (or after a separator line when stdout is not a terminal),
    /// until Ctrl-C or --count.
    #[arg(long)]
    pub watch: bool,
    /// Time between two snapshots of --watch. [default: 2s]
    #[arg(long, value_name = "DURATION", value_parser = duration, requires = "watch")]
    pub interval: Option<Duration>,
    /// Stop --watch after N snapshots.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..), requires = "watch")]
    pub count: Option<u64>,
    /// Only whether each node answers and is out of quarantine, with any
    /// token: one line per node; exits 0 when a write quorum is healthy,
    /// 69 when not. For readiness probes.
    #[arg(long)]
    pub health: bool,
    /// text for people, json for scripts.
    #[arg(long, value_name = "FORMAT", value_enum, default_value_t = Output::Text)]
    pub output: Output,
    /// Redis nodes and databases only: the --validity of the clients,
    /// which is also how long they refuse a Redis node's or database's
    /// grants after it started or its lock table was emptied (lock servers
    /// announce theirs). [default: 60s, as run]
    #[arg(long, value_name = "DURATION", value_parser = duration)]
    pub validity: Option<Duration>,
}

/// Flags of `force-unlock`.
#[derive(Debug, Args)]
pub struct ForceUnlockArgs {
    #[command(flatten)]
    pub client: ClientArgs,
    /// Drop only the lock with this uid (the UID column of `locks`, or a
    /// holder's QUORUM_LOCK_UID), on whatever names it holds, instead of
    /// everything on NAMEs.
    #[arg(long, value_name = "UID", conflicts_with = "names")]
    pub uid: Option<String>,
    /// The lock names to force open.
    #[arg(value_name = "NAME", required_unless_present = "uid", num_args = 1..)]
    pub names: Vec<String>,
}

/// Flags of `certs`.
#[derive(Debug, Args)]
pub struct CertsArgs {
    /// Directory of the files, created (mode 700) if missing. Its ca.pem
    /// and ca-key.pem are the CA: made by the first run, used by later ones.
    #[arg(long, value_name = "DIR")]
    pub dir: PathBuf,
    /// A lock server to make a certificate for, by its host as clients list
    /// it (a DNS name or an IP address), with or without the port;
    /// repeatable. One certificate per host.
    #[arg(long, value_name = "HOST[:PORT]")]
    pub node: Vec<String>,
    /// Lock servers as a comma-separated list, as the client commands'
    /// --nodes.
    #[arg(long, value_name = "A,B,C")]
    pub nodes: Option<String>,
    /// Also make a client certificate for mutual TLS, named NAME
    /// (client-NAME.pem and client-NAME-key.pem); repeatable.
    #[arg(long, value_name = "NAME")]
    pub client: Vec<String>,
    /// How many days the server and client certificates are valid. A new CA is
    /// valid for 10 years, or as long as these if longer.
    #[arg(long, value_name = "N", default_value_t = 730, value_parser = clap::value_parser!(u32).range(1..=36_500))]
    pub days: u32,
    /// Replace server and client files that exist. The CA is never
    /// replaced: for a new one, use a new --dir.
    #[arg(long)]
    pub force: bool,
}

/// Parses a byte size: "4096", "512KiB", "64MiB", "1GiB" (also KB, MB and
/// GB, taken as the binary units too, since limits need no precision).
fn size(text: &str) -> Result<usize, String> {
    let text = text.trim();
    let digits = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(digits);
    let number: usize = number
        .parse()
        .map_err(|_| format!("'{text}' is not a size (expected e.g. 4096, 512KiB, 64MiB, 1GiB)"))?;
    let scale: usize = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        other => return Err(format!("unknown size unit '{other}' (use KiB, MiB or GiB)")),
    };
    match number.checked_mul(scale) {
        Some(0) => Err("must be greater than zero".into()),
        Some(bytes) => Ok(bytes),
        None => Err(format!("'{text}' is too large")),
    }
}

/// Parses "6s", "500ms", "1m 30s" and the like; zero is refused because
/// every duration here is a period or a deadline.
fn duration(text: &str) -> Result<Duration, String> {
    let parsed = humantime::parse_duration(text.trim())
        .map_err(|e| format!("{e} (expected e.g. 500ms, 6s, 1m)"))?;
    if parsed.is_zero() {
        return Err("must be greater than zero".into());
    }
    Ok(parsed)
}

#[cfg(test)]
mod tests {
    use super::size;

    #[test]
    fn sizes_take_binary_units() {
        assert_eq!(size("4096"), Ok(4096));
        assert_eq!(size("512KiB"), Ok(512 << 10));
        assert_eq!(size(" 64MiB "), Ok(64 << 20));
        assert_eq!(size("1gb"), Ok(1 << 30));
        assert!(size("0").is_err());
        assert!(size("12 parsecs")
            .unwrap_err()
            .contains("unknown size unit"));
        assert!(size("MiB").is_err());
        assert!(size("99999999999999999999GiB").is_err());
    }
}
