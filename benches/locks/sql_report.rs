//! What `--backend postgres` and `--backend mysql` print and save: the
//! table, its legend, the targets of the SQL issue, the reference figures,
//! the Markdown table and the JSON.

use std::fmt::Write as _;
use std::time::Duration;

use quorum_lock::sql::Backend;

use crate::cli::Options;
use crate::out::{
    self, key_cols, left, notes, per, right, stat, stats, times, verdict, Col, Doc, Machine,
    Measured, Obj,
};
use crate::scenario::{Names, Wait};
use crate::sql_bench::{HandoffFigures, Key, Row, System};
use crate::sql_recipes::Recipe;
use crate::sql_server::Database;
use crate::stats::{fmt_duration, fmt_rate};

/// The columns of the table, in order.
pub(crate) fn columns(backend: Backend) -> Vec<Col<Row>> {
    let mut cols = vec![
        left("sys", 10, move |r: &Row| r.system.label(backend).to_owned()),
        left("wait", 5, |r: &Row| r.system.wait().to_owned()),
    ];
    cols.extend(key_cols(5));
    cols.extend(stats(&["locks/s", "p50", "p99", "max", "longest"]));
    cols.extend([
        right("min/cl", 6, |r: &Row| r.summary.min_client.to_string()),
        right("max/cl", 6, |r: &Row| r.summary.max_client.to_string()),
        stat("jain"),
        // This process alone: the server has a column of its own.
        right("cpu", 5, |r: &Row| format!("{:.0}%", r.summary.cpu * 100.0)),
        right("srv", 5, |r: &Row| {
            r.summary
                .server_cpu
                .map_or("-".into(), |c| format!("{:.0}%", c * 100.0))
        }),
        stat("cpu/lk"),
        right("stmt/lk", 7, |r: &Row| per(r.statements_per_lock())),
        right("xact/lk", 7, |r: &Row| per(r.transactions_per_lock())),
        right("sent/lk", 7, |r: &Row| per(r.sent_per_lock())),
        right("calls/lk", 8, |r: &Row| per(r.calls_per_lock())),
        right("x ins", 7, |r: &Row| times(r.summary.lsps, r.insert_lsps)),
        right("x adv", 7, |r: &Row| times(r.summary.lsps, r.advisory_lsps)),
    ]);
    cols
}

/// What follows a row's columns: what cut it short, and what the server
/// had to break or end.
pub fn row_notes(row: &Row) -> String {
    let mut out = notes(&row.summary);
    if let Some(c) = &row.counted {
        if let Some(n) = c.deadlocks.filter(|&n| n > 0) {
            let _ = write!(out, "  ({n} deadlocks broken by the server)");
        }
        if let Some(n) = c.lock_waits.filter(|&n| n > 0) {
            let _ = write!(out, "  ({n} row lock waits)");
        }
    }
    if let Some(h) = &row.handoffs {
        let _ = write!(out, "  ({})", handoff_figures(h));
    }
    if row.leftovers > 0 {
        let _ = write!(out, "  ({} queued connections ended after)", row.leftovers);
    }
    out
}

fn handoff_figures(h: &HandoffFigures) -> String {
    format!(
        "{} hand-offs between lockers: p50 {}, p99 {}, max {}",
        h.count,
        fmt_duration(h.p50),
        fmt_duration(h.p99),
        fmt_duration(h.max)
    )
}

pub(crate) fn legend(backend: Backend, db: &Database) -> String {
    let counts = match (backend, &db.counting) {
        (_, Err(why)) => format!("not counted on the server: {why}"),
        (Backend::Postgres, Ok(())) => "PostgreSQL's pg_stat_statements: statements that \
            completed (a failed INSERT on a duplicate key, or one cut off, is not in it), \
            without connection set-up (SET) and the harness's own readings; xact/lk: \
            pg_stat_database xact_commit + xact_rollback, the harness's own taken out"
            .to_owned(),
        (Backend::MySql, Ok(())) => "SHOW GLOBAL STATUS: Questions (every statement a \
            client sent, failed ones included) less Com_set_option (a new connection's SETs) \
            and Com_show_status (the harness's readings)"
            .to_owned(),
    };
    let advisory = match backend {
        Backend::Postgres => {
            "advisory: pg_advisory_lock(key) / pg_advisory_unlock(key), session \
            level, the key a 64-bit hash of the name"
        }
        Backend::MySql => {
            "get_lock: GET_LOCK(name, rest of the window) / RELEASE_LOCK(name), a \
            timeout asked again"
        }
    };
    // With one locker, its own releases grant its waiters; NOTIFY or the
    // doorbell carry another locker's turns (--sql-lockers).
    let push = match backend {
        Backend::Postgres => {
            "a waiter of the releasing locker granted in the release's own transaction and \
             told after its commit; another locker's waiter told its turn by NOTIFY"
        }
        Backend::MySql => {
            "a waiter of the releasing locker granted in the release's own transaction and \
             told after its commit; another locker's waiter told its turn by the doorbell, a \
             KILL QUERY of the waiting locker's sleep (by a poll every 50 ms without it)"
        }
    };
    format!(
        "ours: a Dsync over one SqlLocker as it ships (pool of 16 connections shared by every \
client; with --sql-lockers N, N of them, each with its own Dsync, the clients dealt out in turn; quarantine off: the server is new; push: waiting in line, {push}). insert: INSERT \
into a table with a unique key to lock, on a duplicate key a 50 ms sleep and another try, \
DELETE to unlock, autocommit (InnoDB's occasional deadlock on the INSERT counts as a duplicate). for-update: BEGIN and SELECT ... FOR UPDATE of a pre-created row, \
the transaction open while held, COMMIT to unlock. {advisory}. Each recipe client has a \
connection of its own.
locks/s: locks acquired in the window / window length. p50..max: acquire latency. longest: the \
longest wait, counting waits still unfinished when the window closed. min/cl, max/cl: fewest \
and most locks of one client; jain: Jain's fairness index over clients. cpu: (user+sys)/wall of \
this process; srv: the same for every process of the server; cpu/lk: both per lock.
stmt/lk, xact/lk: what the server counted from before the clients started to after the last \
stopped (warm-up and cut-off waits included), per lock taken in that time; {counts}. sent/lk: \
statements a recipe sent per lock and unlock in the window, counted by the client. Round \
trips that are not statements count nowhere: sqlx 0.8 pings every connection given back to \
its pool; ours keeps a connection for its next call instead, and gives it back (pinged) only \
while another call waits for the pool, once in 256 calls, and after 10 s unused. calls/lk: \
ours's calls to its SqlLocker \
per lock and unlock (each call one transaction). x ins, x adv: \
ours's locks/s over insert's and over {}'s with the same clients, names and hold.",
        Recipe::Advisory.label(backend)
    )
}

pub(crate) fn find(rows: &[Row], system: System, clients: usize, names: Names) -> Option<&Row> {
    out::pick(rows, Key::unheld(clients, names), |r| r.system == system)
}

/// The targets of the SQL issue, with no hold: reported, not asserted.
pub fn targets(rows: &[Row], backend: Backend) -> String {
    let mut out = String::from("targets (SQL lockers issue; no hold; reported, not asserted):\n");
    let push = System::Ours(Wait::Push);
    let missing = "not measured in this run";
    let adv = Recipe::Advisory.label(backend);
    match find(rows, push, 64, Names::Shared) {
        Some(row) => {
            let goals = out::shared_goals(&row.summary, Duration::from_millis(200));
            let _ = writeln!(out, "  (1) one shared name, 64 clients: {goals}");
        }
        None => {
            let _ = writeln!(out, "  (1) one shared name, 64 clients: {missing}");
        }
    }
    for clients in [8, 64] {
        let ours = find(rows, push, clients, Names::Own);
        let insert = find(rows, System::Recipe(Recipe::Insert), clients, Names::Own);
        let advisory = find(rows, System::Recipe(Recipe::Advisory), clients, Names::Own);
        match (ours, insert, advisory) {
            (Some(o), Some(i), Some(a)) if i.summary.lsps > 0.0 && a.summary.lsps > 0.0 => {
                let ri = o.summary.lsps / i.summary.lsps;
                let ra = o.summary.lsps / a.summary.lsps;
                let _ = writeln!(
                    out,
                    "  (2) distinct names, {clients} clients: >= 1.0x insert: ours {} vs {} = {ri:.2}x: {}; >= 0.5x {adv}: vs {} = {ra:.2}x: {}",
                    fmt_rate(o.summary.lsps),
                    fmt_rate(i.summary.lsps),
                    verdict(ri >= 1.0),
                    fmt_rate(a.summary.lsps),
                    verdict(ra >= 0.5),
                );
            }
            _ => {
                let _ = writeln!(out, "  (2) distinct names, {clients} clients: {missing}");
            }
        }
    }
    // MariaDB's target; PostgreSQL's figures beside it for comparison.
    let mut handed = rows
        .iter()
        .filter(|r| r.system == push && r.handoffs.is_some());
    let limit = Duration::from_millis(10);
    match handed.next() {
        None => {
            let _ = writeln!(
                out,
                "  (3) hand-off between processes, p50 <= {}: {missing} (one shared name, --sql-lockers 2 or more)",
                fmt_duration(limit)
            );
        }
        Some(first) => {
            for row in std::iter::once(first).chain(handed) {
                let Some(h) = &row.handoffs else { continue };
                let _ = writeln!(
                    out,
                    "  (3) hand-off between processes, {} clients, p50 <= {}: {}  ({})",
                    row.key.clients,
                    fmt_duration(limit),
                    verdict(h.p50 <= limit),
                    handoff_figures(h)
                );
            }
        }
    }
    out
}

/// The reference figures (pgbench on a machine of this kind), and
/// the recipes measured here beside them.
pub fn references(rows: &[Row], backend: Backend) -> String {
    let own = |recipe: Recipe, clients: usize| {
        find(rows, System::Recipe(recipe), clients, Names::Own)
            .map_or("-".into(), |r| fmt_rate(r.summary.lsps))
    };
    let mut out = String::from(
        "the issue's reference figures (pgbench, lock+unlock cycles/s) and the recipes here:\n",
    );
    let lines: &[(&str, Recipe, [&str; 3])] = match backend {
        Backend::Postgres => &[
            (
                "plain unique-index lock",
                Recipe::Insert,
                ["1.6k", "5.6k", "7.1k"],
            ),
            (
                "session advisory locks",
                Recipe::Advisory,
                ["5.8k", "31k", "30k"],
            ),
        ],
        Backend::MySql => &[
            (
                "plain unique-index lock",
                Recipe::Insert,
                ["2.0k", "7.8k", "11.4k"],
            ),
            ("GET_LOCK", Recipe::Advisory, ["5.2k", "25k", "31k"]),
        ],
    };
    for (what, recipe, reference) in lines {
        let _ = writeln!(
            out,
            "  {what}, distinct names, 1/8/64 clients: issue {} / {} / {}; here ({}) {} / {} / {}",
            reference[0],
            reference[1],
            reference[2],
            recipe.label(backend),
            own(*recipe, 1),
            own(*recipe, 8),
            own(*recipe, 64),
        );
    }
    if backend == Backend::Postgres {
        let shared = find(rows, System::Recipe(Recipe::Advisory), 64, Names::Shared)
            .map_or("-".into(), |r| fmt_rate(r.summary.lsps));
        let _ = writeln!(
            out,
            "  one advisory key shared by 64 clients: reference 7.0k; here {shared}"
        );
    }
    out
}

/// Every row as a Markdown table: one line per system and naming, one
/// column per client count.
pub(crate) fn markdown(opts: &Options, rows: &[Row], backend: Backend) -> String {
    let grid = out::grid(
        opts,
        rows,
        "system | names",
        |r| (r.system, r.key),
        |r, naming| {
            let system = match r.system {
                System::Ours(w) if opts.waits_given => format!("ours ({})", w.label()),
                other => other.label(backend).to_owned(),
            };
            format!("{system} | {naming}")
        },
        cell,
    );
    format!(
        "Markdown (locks/s · p50 / p99 of the acquire · jain; the longest wait in brackets; statements per lock after the slash, server-counted):\n\n{grid}"
    )
}

pub(crate) fn cell(row: &Row) -> String {
    let s = &row.summary;
    let mut text = format!(
        "{} · {} / {} · {:.2}",
        fmt_rate(s.lsps),
        fmt_duration(s.p50),
        fmt_duration(s.p99),
        s.jain
    );
    if row.key.names == Names::Shared {
        let _ = write!(text, " [{}]", fmt_duration(s.longest_wait));
    }
    if let Some(st) = row.statements_per_lock() {
        let _ = write!(text, " / {st:.1}");
    }
    text
}

/// The whole run as JSON, in the spirit of `report::json`.
pub(crate) fn json(opts: &Options, machine: &Machine, backend: Backend, rows: &[Row]) -> String {
    let settings = Obj::new().str("backend", backend.name()).load(opts);
    Doc::now(opts, machine)
        .field("settings", settings)
        .results(rows.iter().map(|row| result(row, backend)))
}

pub(crate) fn result(row: &Row, backend: Backend) -> String {
    let s = &row.summary;
    let counted = row.counted.as_ref();
    let statements = counted.map_or(&[][..], |c| &c.by_statement);
    let by_statement = (statements.iter()).fold(Obj::new(), |o, (text, n)| o.entry(text, n));
    Obj::new()
        .str("system", row.system.label(backend))
        .str("wait", row.system.wait())
        .key(row.key)
        .summary(s, false)
        .raw("cycles_counted_by_server", row.cycles)
        .maybe("server_statements", counted.map(|c| c.statements))
        .maybe("server_transactions", counted.and_then(|c| c.transactions))
        .opt("statements_per_lock", row.statements_per_lock())
        .opt("transactions_per_lock", row.transactions_per_lock())
        .opt("sent_per_lock", row.sent_per_lock())
        .opt("locker_calls_per_lock", row.calls_per_lock())
        .raw("statements_by_text", by_statement)
        .maybe("server_deadlocks", counted.and_then(|c| c.deadlocks))
        .maybe("server_row_lock_waits", counted.and_then(|c| c.lock_waits))
        .raw("leftover_connections_ended", row.leftovers)
        .raw("hit_count_bound", s.hit_count_bound)
        .opt("ratio_vs_insert", row.ratio(row.insert_lsps))
        .opt("ratio_vs_advisory", row.ratio(row.advisory_lsps))
        .maybe("handoffs_between_lockers", row.handoffs.map(|h| h.count))
        .opt(
            "handoff_p50_ms",
            row.handoffs.map(|h| h.p50.as_secs_f64() * 1e3),
        )
        .opt(
            "handoff_p99_ms",
            row.handoffs.map(|h| h.p99.as_secs_f64() * 1e3),
        )
        .opt(
            "handoff_max_ms",
            row.handoffs.map(|h| h.max.as_secs_f64() * 1e3),
        )
        .done()
}
