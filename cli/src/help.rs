//! The long help texts of `quorum-lock --help` and of each command's
//! `--help`: examples, what the command does beyond its flags, its exit
//! codes. The flags' own help is on their declarations in args.rs.

/// Shown after the command list of `quorum-lock --help`. The exit codes
/// are the constants in `fail.rs`.
pub const TOP_HELP: &str = "\
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

Several clusters, each a group of its own nodes separated by ';', each
group starting with its id and '=' (the same ids for every client, in any
order); each lock name lives in one group, as the library's Groups places
it, and run, lock and elect connect only that group; locks, status and
force-unlock see every group. A ';' inside a URL must be written %3B:
  export QUORUM_LOCK_NODES='east=e1:7070,e2:7070,e3:7070;west=w1:7070,w2:7070,w3:7070'

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

pub const SERVER_EXAMPLES: &str = "\
Examples:
  # first start of a brand-new cluster: grant at once
  quorum-lock server --listen 10.0.0.1:7070 --token-file /etc/qlock/token \\
      --admin-token-file /etc/qlock/admin-token --no-quarantine
  # any later (re)start: refuse new grants for one validity period
  QUORUM_LOCK_TOKEN=s3cret quorum-lock server --listen 127.0.0.1:0

Prints exactly one line, 'listening on <addr>', to stdout once bound; logs go
to stderr (filter with RUST_LOG, default info).";

pub const RUN_EXAMPLES: &str = "\
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
with a warning. The command gets none of quorum-lock's secrets (the
QUORUM_LOCK_ tokens and token files, NODES, REDIS, TLS_CERT, TLS_KEY; with
database nodes PGPASSWORD, PGPASSFILE, PGSSLKEY, PGSSLCERT, MYSQL_PWD) unless
--pass-secrets is given. Its exit code is passed through; if the lock is lost
while it runs, the group gets SIGTERM, then SIGKILL after --grace, and run
exits with 79. SIGINT/SIGTERM to run is forwarded to the group the same way,
the lock is released and run exits with 128+signal. If run itself is
SIGKILLed, the lock expires after --validity and, on Linux, the kernel kills
the command at once (its own process; end a script with exec).

When the command exits, whatever it left running in its process group (a
job started with &, a worker it forked) gets SIGTERM, and SIGKILL after
--grace; run keeps the lock, refreshed, until the group is empty, and
releases it only then, so nothing the command started goes on working
without it. A command that leaves nothing running is not held up. Processes
that left the group (setsid, setpgid, a shell with job control, set -m) are
out of reach, and so is all but the command itself with --foreground. If
some outlive SIGKILL (stuck in the kernel), run keeps holding the lock and
says so; SIGINT or SIGTERM then makes it exit and leave the lock to expire
after --validity instead of releasing it.

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
signalled and waited for, so processes it started can outlive the lock. A lock forced open
with force-unlock, or lost because a majority of servers restarted without
quarantine, is free at once: no --grace protects against that.

While it waits longer than a second for a reason other than a holder,
run says why on stderr: servers in quarantine after a restart (and for how
long), or servers unreachable (which, and why); again when the reason
changes or another server joins it, not as servers come back. A wait for
a holder is silent.

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
  79        the lock was lost while the command, or what it left running in
            its group, ran; they were stopped
  126, 127  the command cannot be executed, or was not found
  1         anything else";

pub const LOCK_EXAMPLES: &str = "\
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

pub const ELECT_EXAMPLES: &str = "\
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
term: larger than every earlier leader's) set, and none of quorum-lock's
secrets unless --pass-secrets (as for `run`); when it exits, elect ends
what it left running in its process group as `run` does (SIGTERM, SIGKILL
after --grace, leading and refreshing until the group is empty), then
resigns and exits with its code. If the leadership is lost while it runs,
the command is stopped as `run` stops its command when the lock is lost
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
are escaped as \\\\, \\n, \\r, \\t and \\xNN. Terms never go back, and each
state is printed once: not a leader proclaiming its value again, nor a
leader again after a newer state (\"no leader\" after its resign, say). A
change is printed when the nodes push it, or within a second if a push is
lost; \"no leader\" follows a leader's loss once a quorum of nodes freed
it. Runs until SIGINT or SIGTERM, then exits 0.";

pub const LOCKS_EXAMPLES: &str = "\
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

pub const STATUS_EXAMPLES: &str = "\
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

pub const FORCE_EXAMPLES: &str = "\
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

pub const CERTS_EXAMPLES: &str = "\
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
