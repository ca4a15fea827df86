//! The command line, declared with clap's derive API. Every flag carries its
//! help text here, so `--help` is the reference for operators.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use crate::help::{
    CERTS_EXAMPLES, ELECT_EXAMPLES, FORCE_EXAMPLES, LOCKS_EXAMPLES, LOCK_EXAMPLES, RUN_EXAMPLES,
    SERVER_EXAMPLES, STATUS_EXAMPLES, TOP_HELP,
};

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

/// The shared secrets, from files (preferred), flags or the environment.
#[derive(Debug, Clone, Args)]
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
    /// Most connections with the client token at once; one more is
    /// rejected in its handshake, saying so. Lowered to fit the open-files
    /// limit (ulimit -n).
    #[arg(long, value_name = "N", default_value_t = 512, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_connections: u32,
    /// Connections kept beyond --max-connections for handshakes and for
    /// the admin token, so that `status` and `locks` with the admin token
    /// get in however many clients are connected (at least 1). When every
    /// connection is taken, a new one replaces one that has not
    /// authenticated after 100 ms; if all have, it is closed. Peers without
    /// a token that keep sending handshakes compete with the admin for a
    /// turn (docs/lock-servers.md). Lowered to fit the open-files limit.
    #[arg(long, value_name = "N", default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..))]
    pub admin_reserve: u32,
    /// Most connections with the client token from one IP address,
    /// loopback included (clients behind one NAT share an address); the
    /// admin token is not counted.
    #[arg(long, value_name = "N", default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_connections_per_address: u32,
    /// Close a connection that has sent nothing for this long while it
    /// holds no lock, no place in line and no watch; clients connect again
    /// with their next call. 0 keeps such connections open.
    #[arg(long, value_name = "DURATION", default_value = "5m", value_parser = duration_or_off)]
    pub idle_timeout: Duration,
    /// Most lock ids (uids) one connection may hold locks under; several
    /// locks under one uid count once (the byte limit counts each).
    #[arg(long, value_name = "N", default_value_t = 100_000, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_locks_per_connection: u32,
    /// Most bytes the locks of one connection may take in the lock table
    /// (names, uid, owner, source, plus what the table costs at worst:
    /// about 900 bytes per name and 560 per lock).
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
#[derive(Debug, Clone, Args)]
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
    ///
    /// Several clusters: groups of nodes separated by ';', each starting
    /// with its id and '=', e.g.
    /// east=e1:7070,e2:7070,e3:7070;west=w1:7070,w2:7070,w3:7070. Each
    /// group has its own quorum; a name lives in one group (rendezvous
    /// hashing over the ids, as the library's Groups): run, lock and elect
    /// connect only NAME's group, locks, status and force-unlock every
    /// group. ';' always separates groups: write a ';' inside a URL as
    /// %3B. Every client must give the same ids; the groups' order does
    /// not matter.
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
    /// Not a flag: the id of the group `nodes` is, once a command has
    /// narrowed a `--nodes` of several groups to one (`plan::Group`);
    /// `None` for a list of one group, whose messages name no group.
    #[arg(skip)]
    pub group: Option<String>,
    /// Not a flag: the entries of the narrowed group, as node_groups.rs
    /// checked them; what the group connects, never parsed again.
    #[arg(skip)]
    pub group_entries: Option<Vec<crate::node_urls::Entry>>,
}

/// Redis nodes instead of lock servers.
#[derive(Debug, Clone, Args)]
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
#[derive(Debug, Clone, Args)]
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
    /// Time between SIGTERM and SIGKILL when the command's process group
    /// must be stopped: the lock was lost, a stop signal came, or the
    /// command exited and left processes running in it (the lock is held
    /// until they are gone). Must end, with 1s to spare for the kill (less
    /// for a --validity under 24s), before --validity/6, when a lost lock
    /// can be granted again. [default: half of --validity/6, 5s at
    /// --validity 60s]
    #[arg(long, value_name = "DURATION", value_parser = duration)]
    pub grace: Option<Duration>,
    /// Keep the command in quorum-lock's process group so that it can read
    /// the terminal; only the command itself, not its children, is then
    /// signalled when the lock is lost, and waited for before the lock is
    /// released.
    #[arg(long)]
    pub foreground: bool,
    /// Owner shown in `locks`. Default: host:pid.
    #[arg(long, value_name = "TEXT")]
    pub owner: Option<String>,
    /// Leave quorum-lock's secrets in the command's environment, for a
    /// command that runs quorum-lock itself. Without it the command gets
    /// none of QUORUM_LOCK_TOKEN, QUORUM_LOCK_ADMIN_TOKEN, their _FILE
    /// forms, QUORUM_LOCK_NODES, QUORUM_LOCK_REDIS (their URLs may hold
    /// passwords), QUORUM_LOCK_TLS_CERT and QUORUM_LOCK_TLS_KEY: a token
    /// lets whoever has it take any lock, and the admin token force any
    /// lock open.
    #[arg(long)]
    pub pass_secrets: bool,
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
    #[arg(long, conflicts_with_all = ["value", "command", "timeout", "grace", "foreground", "owner", "pass_secrets"])]
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
    /// Time between SIGTERM and SIGKILL when the command's process group
    /// must be stopped, as for `run` (also when the command exited and
    /// left processes running in it: elect leads until they are gone):
    /// must end, with 1s to spare (less for a --validity under 24s), before
    /// --validity/6. [default: half of --validity/6]
    #[arg(long, value_name = "DURATION", value_parser = duration)]
    pub grace: Option<Duration>,
    /// Keep the command in quorum-lock's process group so that it can read
    /// the terminal; only the command itself, not its children, is then
    /// signalled when the leadership is lost, and waited for before elect
    /// resigns.
    #[arg(long)]
    pub foreground: bool,
    /// Owner shown in `locks`. Default: host:pid.
    #[arg(long, value_name = "TEXT")]
    pub owner: Option<String>,
    /// Leave quorum-lock's secrets (the tokens, their files, the node
    /// lists, the TLS client key) in the command's environment, as for
    /// `run`; without it the command gets none of them.
    #[arg(long)]
    pub pass_secrets: bool,
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
    /// Lock servers as the client commands' --nodes: a comma-separated
    /// list, or groups of them (ID=A,B;ID=C), every group's servers taken.
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

/// The longest duration any flag takes: far beyond any use, and short
/// enough that every deadline computed from one (now + a timeout, a
/// grace or a lease) is a time the clocks can hold.
const LONGEST: Duration = Duration::from_secs(100 * 31_557_600);

/// Parses "6s", "500ms", "1m 30s" and the like; zero is refused because
/// every duration here is a period or a deadline, and so is one past
/// [`LONGEST`].
fn duration(text: &str) -> Result<Duration, String> {
    let parsed = humantime::parse_duration(text.trim()).map_err(duration_error)?;
    if parsed.is_zero() {
        return Err("must be greater than zero".into());
    }
    if parsed > LONGEST {
        return Err(format!(
            "must be at most {}",
            humantime::format_duration(LONGEST)
        ));
    }
    Ok(parsed)
}

/// Why a duration did not parse, in words that quote none of its text:
/// the value may be a password typed in the wrong place (the parser's own
/// message quotes the letters it took for a unit).
fn duration_error(err: humantime::DurationError) -> String {
    use humantime::DurationError as E;
    let why = match err {
        E::UnknownUnit { unit, .. } if unit.is_empty() => "a time unit is needed",
        E::UnknownUnit { .. } => "unknown time unit (ns, us, ms, s, m, h, d)",
        E::NumberExpected(_) => "a number is expected before each unit",
        E::InvalidCharacter(_) => "only digits and unit letters are allowed",
        E::NumberOverflow => "the number is too large",
        E::Empty => "the value is empty",
    };
    format!("{why} (expected e.g. 500ms, 6s, 1m)")
}

/// A [`duration`], or `0` / `off` for none (zero).
fn duration_or_off(text: &str) -> Result<Duration, String> {
    match text.trim() {
        "0" | "off" => Ok(Duration::ZERO),
        _ => duration(text).map_err(|e| format!("{e}, or 0 / off for none")),
    }
}

#[cfg(test)]
mod tests {
    use super::{duration, duration_or_off, size, LONGEST};
    use std::time::Duration;

    #[test]
    fn an_idle_timeout_may_be_off() {
        assert_eq!(duration_or_off("0"), Ok(Duration::ZERO));
        assert_eq!(duration_or_off(" off "), Ok(Duration::ZERO));
        assert_eq!(duration_or_off("5m"), Ok(Duration::from_secs(300)));
        assert!(duration_or_off("soon")
            .unwrap_err()
            .contains("off for none"));
    }

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

    #[test]
    fn durations_past_a_century_are_refused() {
        assert_eq!(duration("100years"), Ok(LONGEST));
        assert_eq!(
            duration("18446744073709551615s"),
            Err("must be at most 100years".to_owned())
        );
        assert_eq!(duration(" 1m 30s "), Ok(Duration::from_secs(90)));
    }
}
