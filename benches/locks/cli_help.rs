//! The text of `--help`: every option of `locks`, its values and its
//! default, in one place apart from the parser that reads them.

pub const HELP: &str = "\
Lock throughput and latency of quorum-lock, with a Redis baseline when
redis-server is installed, and side by side with Redis, Redlock and etcd
(--backend compare).

USAGE:
    cargo bench -p quorum-lock-benches --bench locks -- [OPTIONS]

SCENARIOS (lists are comma-separated; every combination runs):
    --nodes LIST         lockers in the cluster, e.g. 1,3,5,8,16     [default: 5]
    --clients LIST       concurrent client tasks, e.g. 1,8,64       [default: 1,8,64]
    --names own|shared|both
                         a distinct name per client, or one name for all
                                                                    [default: own]
    --shared             same as --names shared
    --mix write|read90|both
                         write locks only, or 90% reads / 10% writes [default: write]
    --hold LIST          how long each lock is held: 0 (unlock at once), yield
                         (one trip through the scheduler while holding, so
                         other clients run and find the lock taken), a
                         time such as 1ms (a tokio sleep: its timer rounds up
                         to whole milliseconds), spin:1ms (exactly that
                         long, yielding in a loop; burns the holder's worker),
                         or exact:1ms (a thread of tokio's blocking pool
                         sleeps that long: no rounding to the timer's
                         milliseconds, no CPU burnt; over by the kernel's
                         sleep and a wake-up, 1ms measures about 1.2ms on
                         2 vCPUs)
                                                                    [default: 0]
    --transport inproc|tcp
                         how the coordinator reaches its lockers: inproc
                         means LocalLockers in this process; tcp starts one
                         `quorum-lock server` process per node on 127.0.0.1
                         (build the server first:
                         cargo build --release -p quorum-lock-cli)
                                                                    [default: inproc]
    --wait push|poll|both
                         how a waiter learns that a lock was freed
                         (DsyncBuilder::waiting): push waits in line on every
                         locker and is granted by a pushed wake-up; poll
                         repeats rounds with jittered backoff; both runs each
                         scenario with push, then at once with poll
                         (also accepted: a list, e.g. poll,push)    [default: push]
    --matrix             run the default set described in BENCHMARKS.md instead
                         of --nodes/--clients/--names/--mix
    --backend lockers|redis|compare|postgres|mysql
                         lockers: our own lockers, reached as --transport says;
                         redis: start max(--nodes) redis-server processes on
                         127.0.0.1 and measure, on the first N of them for
                         each N in --nodes, our Dsync over RedisLockers, rslock
                         (Redlock) and the single-node SET NX lock, with the
                         Redis commands each one sends per lock. Defaults
                         change with it: --nodes
                         1,3,5, --names both, and a shared name runs with push
                         and poll unless --wait is given; write locks only.
                         compare: one run that measures, for each client
                         count and naming in turn, back to back: ours over
                         --nodes `quorum-lock server` processes via TCP (as
                         --transport tcp; build the server first), ours over
                         --nodes redis-servers (RedisLocker), the SET NX lock
                         on one redis-server, rslock (Redlock) over --nodes
                         redis-servers, and etcd's lock on one etcd node
                         (lease per client, Lock/Unlock of its lock service).
                         Ours waits in line (push). Defaults change with it:
                         --nodes 3 (one value), --names both, --seconds 3;
                         write locks only. Ends with a Markdown table of
                         every row (the one in BENCHMARKS.md).
                         postgres, mysql: start a PostgreSQL or MariaDB
                         server of the run's own (temporary directory, free
                         127.0.0.1 port, stopped by its PID) and measure on
                         it, for each client count and naming, our Dsync
                         over one SqlLocker and the classic SQL lock
                         recipes: a unique-index lock table (INSERT to
                         lock, a 50 ms sleep and a retry on a duplicate
                         key, DELETE to unlock; autocommit), SELECT ... FOR
                         UPDATE of a pre-created row in a transaction held
                         while locked, and session advisory locks
                         (pg_advisory_lock) or GET_LOCK on MariaDB. Counts
                         the statements each sends per lock (see
                         --sql-counters). Defaults change with it: --names
                         both; write locks only, one locker (no --nodes);
                         ours waits in line (push) unless --wait is given.
                         Ends with the targets of the SQL issue and a
                         Markdown table.
                                                                    [default: lockers]
    --sql-url URL        with --backend postgres or mysql: measure on this
                         existing database instead of starting a server
                         (no server CPU then, and statements are counted
                         only where the server shows them)
    --sql-lockers N      with --backend postgres or mysql: spread ours's clients
                         over N SqlLockers, each with its own pool and Dsync,
                         as N processes would (hand-offs between them go by
                         NOTIFY, or the doorbell on MySQL); on one shared
                         name, the hand-offs between them are timed, from
                         the holder's unlock call to the next grant
                                                                   [default: 1]
    --sql-systems LIST   with --backend postgres or mysql: which to measure,
                         of ours, insert, for-update and advisory (get_lock
                         on MySQL)
                                  [default: ours,insert,for-update,advisory]
    --sql-counters on|off
                         with --backend postgres or mysql: count the
                         statements each system makes the server run
                         (PostgreSQL: pg_stat_statements, preloaded in the
                         server started here, and pg_stat_database's
                         transactions; MariaDB: SHOW GLOBAL STATUS
                         Questions); off leaves pg_stat_statements out of
                         the server, to see what it costs  [default: on]
    --rslock on|off      with --backend redis or compare: measure rslock too
                                                                    [default: on]
    --etcd auto|on|off   with --backend compare: auto measures etcd when
                         etcd is on PATH (apt-get install -y etcd-server) and
                         prints why not otherwise; on fails without it
                                                                    [default: auto]

LEADER ELECTION (--scenario election):
    --scenario locks|election|semaphore|scale
                         locks: the lock runs above; election: leader
                         election, ours against etcd's in one run:
                         hand-off (the leader resigns -> the next
                         candidate's campaign returns), observer lag (a
                         campaign returned -> each observer yields that
                         leader) and failover (the leader's process is
                         SIGKILLed -> the next campaign returns) at each
                         --failover-validity. Ours: a Dsync per candidate
                         and per observer over --nodes (one value, default
                         5) `quorum-lock server` processes via TCP (build
                         the server first), or with --transport inproc
                         over LocalLockers (no failover then). etcd (as
                         --etcd says): one node, the recipe of etcd's Go
                         client (concurrency.Election), a client and session
                         per candidate and per observer, session TTL = the
                         validity. --seconds bounds the hand-off run
                         (default 60 with it); --count-rpcs on counts our
                         calls to lockers per leader change (off by
                         default with it). Ends with a Markdown table.
                                                                    [default: locks]
    --candidates N       candidates, each a client of its own      [default: 8]
    --observers N        observers, each a client of its own       [default: 8]
    --handoffs N         hand-offs to measure, after 10 uncounted   [default: 200]
    --failover-validity LIST
                         validities (our servers' --validity and the
                         clients' lease; etcd's session TTL) at which
                         failover is measured, whole seconds; none: off
                                                                    [default: 2s,60s]
    --failovers N        most failover samples per validity and system
                                                                    [default: 20]
    --failover-seconds S time for the failover samples of one validity and
                         system: as many as fit, at least one      [default: 200]

COUNTING SEMAPHORE (--scenario semaphore):
    --scenario semaphore one semaphore of --permits permits on --nodes
                         lockers (one value, default 5), in process or
                         over TCP as --transport says; --clients clients
                         (one value, default 64) loop acquire, hold for
                         --hold (one value, default exact:1ms), release,
                         until --seconds (default 3) or --max-locks. Reports
                         permits/s against the ideal permits / hold, how
                         full the permits were (from the grant and release
                         times), fairness (Jain, fewest per client), waits,
                         the time a slot stays free between two holders,
                         and with --count-rpcs on the calls to lockers per
                         permit. Fails loudly if more than --permits
                         holders (or two holders of one slot) ever overlap.
                         Ends with a Markdown table.
    --permits K          permits of the semaphore, 1 to 1000        [default: 4]

HOW FAR ONE SERVER GOES (--scenario scale):
    --scenario scale     one `quorum-lock server` per part, over TCP (build
                         it first), --validity 1h, the limits a part needs
                         raised (printed): locks held, connections open and
                         waiters in line for one name, each grown through
                         its sizes; per size the server's VmRSS before and
                         after, bytes per item added, p50/p99 of a
                         lock+unlock of one more name (waiters: of the
                         hand-off, release sent -> next grant pushed) and,
                         for held locks, the admin listing's time. A step
                         not done in 600 s, or refused, ends its part;
                         a LIST of none skips the part.
    --held LIST          locks held, pipelined over 60 connections
                                        [default: 1000,10000,100000,1000000]
    --connections LIST   connections open, 32 of them busy  [default: 100,1000,10000]
    --waiters LIST       waiters in line, over 16 connections
                                                  [default: 10,100,1000,10000]
    --samples N          lock+unlocks (hand-offs) timed per size [default: 2000]

BOUNDS AND MEASUREMENT:
    --seconds S          measured time per scenario, (0, 600]       [default: 2]
    --warmup S           unmeasured run-in per scenario, [0, 60]    [default: 0.2]
    --max-locks N        stop a scenario after N locks in all       [default: 20000000]
    --threads N          tokio worker threads                       [default: CPUs]
    --runtime multi|current
                         tokio runtime flavour; current ignores --threads
                                                                    [default: multi]
    --metrics off|prometheus
                         prometheus: install metrics-exporter-prometheus's
                         recorder before any Dsync is built, so the library's
                         metrics are recorded (feature metrics, on by default)
                                                                    [default: off]
    --ceiling on|off     with --transport tcp: before each of our rows, the
                         same scenario on trivial servers (ceiling-server
                         processes of the benches package: our framing,
                         encoding and handshake, every request answered at
                         once, no lock table), first with a trivial client
                         loop (a lock to every server, a quorum of replies,
                         an unlock likewise; row `ceiling`), then with our
                         client (Dsync over RemoteLockers; row `ours-triv`).
                         Our rows show their locks/s as a share of the
                         ceiling (`x ceil`)                  [default: on with tcp]
    --ceiling-threads N  tokio workers of each trivial server; 0 runs a
                         current-thread runtime                     [default: 0]
    --counts on|off      with --transport tcp: count, in each row's window,
                         the system calls of this process and of the
                         servers (perf stat on their tracepoints; needs perf
                         and root or perf_event_paranoid <= -1), their
                         context switches (/proc/PID/task/*/status) and the
                         frames per write and per read on each side; printed
                         per lock under the row and in the JSON  [default: off]
    --count-rpcs on|off  wrap every locker in a call counter (one atomic add
                         per call); off measures without it         [default: on]

BASELINE:
    --redis auto|on|off  auto: measure Redis when redis-server is on PATH;
                         on: fail without it                        [default: auto]
    --redis-retry DUR    sleep before a Redis waiter retries SET NX, and with
                         --backend redis before rslock tries again   [default: 1ms]
                         (with --backend redis, --redis off leaves out SET NX;
                         with --backend compare, every Redis row)

OUTPUT:
    --json FILE          also write the results as JSON to FILE
    -h, --help           print this help

Every scenario is bounded by --warmup + --seconds and by --max-locks. Only
127.0.0.1 is used; the servers started here (redis-server, quorum-lock
server, etcd) are stopped by their PIDs at the end.
";
