//! Lock tables a MariaDB user made first, each in a shape `schema()` does
//! not give, are not used: the lockers refuse them, naming the table and
//! what differs, or else still keep their promises on them.
//!
//! Mallory has `CREATE` on the database and nothing else, and acts before
//! any locker's setup: she makes the entries table from schema()'s
//! statement with one change (each test's shape) and the fence table as
//! given, and may not read or write either. Each test then runs one scene
//! on the lockers that find those tables: a second client asks for a name
//! another holds, or a candidate campaigns and the election is asked who
//! leads. Each shape has its own table prefix.

use std::sync::Arc;
use std::time::Duration;

use quorum_lock::sql::{Backend, SqlConfig, SqlLocker};
use quorum_lock::{Dsync, Error, NetLocker};
use sqlx::Connection;

use crate::both::config;
use crate::mallory::{as_mallory, mallory_with, refused_to_mallory};
use crate::sql_shared::args_from;
use crate::sql_support::MariaServer;

/// How a refusal of one shape's table reads.
struct Shape {
    /// The lockers' table prefix for this shape.
    prefix: &'static str,
    /// A word the refusal says besides the table's name.
    word: &'static str,
    /// What the refusal names besides the table, for the failure message.
    naming: &'static str,
}

/// The lockers' settings for `shape`'s tables.
fn settings(shape: &Shape) -> SqlConfig {
    SqlConfig {
        poll_interval: Duration::from_secs(30),
        ..config(shape.prefix, Duration::from_secs(60), Duration::ZERO)
    }
}

/// Mallory (`CREATE` on the database only) makes the entries table as
/// `plant` rewrites schema()'s statement, and the fence table as given,
/// before any locker; she may not delete the entries table's rows.
async fn mallory_makes_the_tables(
    server: &MariaServer,
    shape: &Shape,
    plant: impl FnOnce(&str) -> String,
) {
    let statements =
        quorum_lock::sql::schema(Backend::MySql, &settings(shape)).expect("the statements");
    let (entries, fence) = (
        format!("CREATE TABLE `{}entries`", shape.prefix),
        format!("CREATE TABLE IF NOT EXISTS `{}fence`", shape.prefix),
    );
    let entries = statements
        .iter()
        .find(|s| s.starts_with(&entries))
        .expect("the entries table's statement");
    let fence = statements
        .iter()
        .find(|s| s.starts_with(&fence))
        .expect("the fence table's statement");
    let planted = plant(entries);

    let mut mallory = mallory_with(server, "CREATE").await;
    as_mallory(
        &mut mallory,
        &planted,
        "mallory makes the entries table before any locker (CREATE)",
    )
    .await;
    as_mallory(
        &mut mallory,
        fence,
        "mallory makes the fence table (CREATE)",
    )
    .await;
    // Control: she may not read or write them.
    refused_to_mallory(
        &mut mallory,
        &format!("DELETE FROM {}entries", shape.prefix),
        "mallory has no right to the table's rows",
    )
    .await;
    let _ = mallory.close().await;
}

/// Refusing the table is safe, when the refusal names why.
fn assert_the_refusal_names_why(shape: &Shape, refused: &Error) {
    let said = refused.to_string();
    assert!(
        said.contains(&format!("{}entries", shape.prefix)) && said.contains(shape.word),
        "the lockers refuse the table, naming it and {}: {said}",
        shape.naming
    );
}

/// A client of one locker on `server`'s `shape` tables, as `owner`.
fn node(server: &MariaServer, shape: &Shape, owner: &str) -> Dsync {
    let locker = SqlLocker::new(&server.url(), settings(shape)).expect("a URL");
    crate::sql_shared::client_of(locker, owner)
}

/// The holders' rows a query of one text column shows, and how they read.
struct Rows {
    query: &'static str,
    label: &'static str,
}

/// Fails with `broke` and the rows unless a second client's request for a
/// held name, `answer`, was refused.
fn assert_not_granted<T>(server: &MariaServer, answer: &Result<T, Error>, broke: &str, rows: Rows) {
    let shown = server.sql(rows.query);
    assert!(
        answer.is_err(),
        "{broke} ({}: {})",
        rows.label,
        shown.trim()
    );
}

/// The held-name scene: `holder` takes `name` for writing, then `asker`
/// asks for it, for reading when `read`, and must not get it.
async fn a_held_name_is_not_granted_again(
    server: &MariaServer,
    shape: &Shape,
    (name, read): (&str, bool),
    (holder, asker): (&str, &str),
    broke: &str,
    rows: Rows,
) {
    let (holder, asker) = (node(server, shape, holder), node(server, shape, asker));
    let held = match holder
        .rw_mutex([name])
        .expect("a name")
        .lock_timeout(Duration::from_secs(10))
        .await
    {
        Ok(held) => held,
        Err(refused) => return assert_the_refusal_names_why(shape, &refused),
    };
    let asked = asker.rw_mutex([name]).expect("a name");
    if read {
        let shared = asked.read_timeout(Duration::from_millis(800)).await;
        assert_not_granted(server, &shared, broke, rows);
    } else {
        let stolen = asked.lock_timeout(Duration::from_millis(800)).await;
        assert_not_granted(server, &stolen, broke, rows);
    }
    held.unlock().await.ok();
}

/// The election scene: a candidate campaigns with the value `honest`, and
/// the election, asked who leads, must report that value.
async fn the_leader_is_reported_with_its_own_value(
    server: &MariaServer,
    shape: &Shape,
    broke: &str,
) {
    let locker = SqlLocker::new(&server.url(), settings(shape)).expect("a URL");
    let ds = Dsync::builder(vec![Arc::new(locker) as Arc<dyn NetLocker>])
        .owner("candidate")
        .build()
        .expect("a client");
    let election = ds.election("primary").expect("an election");
    // One round, so that a refusal of the table comes back as the error.
    let mut leading = match tokio::time::timeout(
        Duration::from_secs(15),
        election.try_campaign(&b"honest"[..]),
    )
    .await
    .expect("the campaign ends")
    {
        Ok(leading) => leading,
        Err(refused) => return assert_the_refusal_names_why(shape, &refused),
    };
    let leader = tokio::time::timeout(Duration::from_secs(10), election.leader())
        .await
        .expect("the read ends")
        .expect("a leader is read");
    let rows = server.sql(&format!(
        "SELECT GROUP_CONCAT(CONCAT(kind, ':', owner, ':', stamp, ':', COALESCE(value, '')) \
         SEPARATOR ',') FROM {}entries WHERE kind = 'h';",
        shape.prefix
    ));
    assert_eq!(
        leader.as_ref().map(|l| l.value_lossy()),
        Some("honest".to_owned()),
        "the election's leader is reported with a value it never proclaimed: the entries \
         table mallory (CREATE only) made with {broke} (leader: {leader:?}; \
         holders, kind:owner:stamp:value: {})",
        rows.trim()
    );
    leading.resign().await.ok();
}

/// Reproduces a past break: a MariaDB user who may only create tables in the lockers' database makes the entries table first, exactly as schema() gives it but with `value` a generated column (`value blob AS (...) VIRTUAL`: same type, nullability and, as information_schema shows it, default); the shape check never looks at generation, so the lockers use it, and on a server whose sql_mode is not strict the leader's proclamation writes its stamp while the server ignores its value, and the election's leader is reported with mallory's value.
///
/// docs/sql.md ("What it does not guarantee"): "a user that may only
/// create tables in the database could make them first: a locker refuses
/// lock tables that are not as `schema()` makes them" (every column's
/// type, collation, nullability and default), and such a user must not
/// forge an election's value. The check (src/sql/store/shape.rs,
/// `Store::mysql_shape`, over `Dialect::mysql_columns` in
/// src/sql/dialect.rs) reads `COLUMN_TYPE`, `COLLATION_NAME`,
/// `IS_NULLABLE` and `COLUMN_DEFAULT`, never `EXTRA`/`IS_GENERATED`: a
/// virtual column shows type `blob`, nullable, no default. The proclaim
/// (`UPDATE ... SET stamp = ?, value = ?`) is refused in strict mode, but
/// nothing the locker does sets strict mode: with the server's sql_mode
/// empty (a common setting for older applications) MariaDB only warns
/// (1906, "has been ignored"), the stamp is stored and the value read back
/// is the column's expression.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_table_another_user_made_with_a_generated_value_column_is_not_used() {
    let Some(server) = MariaServer::start() else {
        return;
    };
    let shape = Shape {
        prefix: "gv_",
        word: "generated",
        naming: "its generated column",
    };
    // A server that is not in strict mode (the lockers' sessions take the
    // global sql_mode, as the driver leaves it).
    server.sql("SET GLOBAL sql_mode = '';");
    mallory_makes_the_tables(&server, &shape, |entries| {
        let value = "value blob,";
        assert!(
            entries.contains(value),
            "control: the value column: {entries}"
        );
        // Same type and nullability, and no default, as information_schema
        // shows it: only the generation differs.
        entries.replace(value, "value blob AS (CAST('mallory' AS BINARY)) VIRTUAL,")
    })
    .await;
    the_leader_is_reported_with_its_own_value(
        &server,
        &shape,
        "`value` generated keeps her expression in place of the leader's value, while its \
         stamp is stored",
    )
    .await;
}

/// Reproduces a past break: a MariaDB user who may only create tables in the lockers' database makes the entries table first, exactly as schema() gives it plus a UNIQUE KEY (uid, kind); the shape check looks at the primary key only, so the lockers use it, a second name's resource row is never made while a first name's exists, and once that first name is released the one-round-trip grant finds the second name "free" and grants its held write lock to a second writer.
///
/// docs/sql.md ("What it does not guarantee"): "a user that may only
/// create tables in the database could make them first: a locker refuses
/// lock tables that are not as `schema()` makes them". The check
/// (src/sql/store/shape.rs, `Store::mysql_shape`) compares the primary
/// keys, the columns and the engine, never the other unique keys. Every
/// resource row is `(name, '', 'r')`, so a unique key over `(uid, kind)`
/// lets one exist at a time: the upsert of another name's resource row
/// (`ON DUPLICATE KEY UPDATE`) lands on the existing one instead, and
/// the one-round-trip grant (`INSERT IGNORE` of the resource row, a new
/// row meaning a free name: src/sql/routines.rs) succeeds for a held
/// name as soon as the other name's row is gone.
///
/// `first` takes `a`, `holder` takes `b` (its resource row cannot be
/// made), `first` lets `a` go, and a thief asks for `b`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_table_another_user_made_with_an_extra_unique_key_is_not_used() {
    let Some(server) = MariaServer::start() else {
        return;
    };
    let shape = Shape {
        prefix: "uk_",
        word: "key",
        naming: "its key",
    };
    mallory_makes_the_tables(&server, &shape, |entries| {
        let key = "KEY uk_entries_by_uid (uid)";
        assert!(entries.contains(key), "control: the uid index: {entries}");
        // Every column, the primary key and the engine stay schema()'s.
        entries.replace(key, "UNIQUE KEY uk_entries_by_uid (uid, kind)")
    })
    .await;

    let (first, holder, thief) = (
        node(&server, &shape, "first"),
        node(&server, &shape, "holder"),
        node(&server, &shape, "thief"),
    );
    let a = match first
        .rw_mutex(["a"])
        .expect("a name")
        .lock_timeout(Duration::from_secs(10))
        .await
    {
        Ok(held) => held,
        Err(refused) => return assert_the_refusal_names_why(&shape, &refused),
    };
    let b = holder
        .rw_mutex(["b"])
        .expect("a name")
        .lock_timeout(Duration::from_secs(10))
        .await
        .expect("`b` is free");
    tokio::time::timeout(Duration::from_secs(10), a.unlock())
        .await
        .expect("the unlock ends")
        .expect("`a` is released");
    let stolen = thief
        .rw_mutex(["b"])
        .expect("a name")
        .lock_timeout(Duration::from_millis(800))
        .await;
    assert_not_granted(
        &server,
        &stolen,
        "`b` was granted to a second writer while `holder` holds it: the entries table \
         mallory (CREATE only) made with an extra unique key over (uid, kind) kept `b` \
         without its resource row, so the one-round-trip grant took it for free",
        Rows {
            query: "SELECT GROUP_CONCAT(CONCAT(name, ':', kind, ':', owner) ORDER BY granted \
                    SEPARATOR ',') FROM uk_entries;",
            label: "rows, name:kind:owner",
        },
    );
    b.unlock().await.ok();
}

/// Reproduces a past break: a MariaDB user who may only create tables in the lockers' database makes the entries table first, with schema()'s primary key (name, uid, kind) but `kind` an ENUM('e', 'H', 'q', 'r') that ignores case; the lockers use it, every holder's row reads back as kind `H`, which they skip, and a held write lock is granted to a second writer.
///
/// docs/sql.md ("What it does not guarantee"): "a locker refuses lock
/// tables whose primary keys are not those `schema()` makes". The check
/// (src/sql/store/setup.rs, `Store::mysql_keys`) compares the key's
/// column names only, not their types. The full transaction reads each
/// row's kind back as text and skips a row whose kind is neither `h` nor
/// `q` (src/sql/state.rs, `Table::load`). An ENUM column whose members
/// are compared without case stores the locker's `h` as the member `H`
/// (no error, strict mode or not) and answers `H`, while the epoch
/// marker's `e` is kept as it is, so no quarantine follows.
///
/// A holder takes `res` for writing; a second client then asks to write
/// it too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_table_another_user_made_with_another_kind_column_is_not_used() {
    let Some(server) = MariaServer::start() else {
        return;
    };
    let shape = Shape {
        prefix: "kd_",
        word: "kind",
        naming: "its column",
    };
    mallory_makes_the_tables(&server, &shape, |entries| {
        let kind = "kind char(1) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,";
        assert!(
            entries.contains(kind),
            "control: the kind column: {entries}"
        );
        let planted = entries.replace(
            kind,
            "kind ENUM('e', 'H', 'q', 'r') CHARACTER SET ascii COLLATE ascii_general_ci NOT NULL,",
        );
        assert!(
            planted.contains("PRIMARY KEY (name, uid, kind)"),
            "control: schema()'s primary key is kept: {planted}"
        );
        planted
    })
    .await;
    a_held_name_is_not_granted_again(
        &server,
        &shape,
        ("res", false),
        ("writer", "thief"),
        "`res` was granted to a second writer while the first holds it: the entries table \
         mallory (CREATE only) made before the lockers' setup stores the kind `h` as `H`, \
         which the lockers skip",
        Rows {
            query: "SELECT GROUP_CONCAT(CONCAT(kind, ':', mode, ':', owner) ORDER BY granted \
                    SEPARATOR ',') FROM kd_entries WHERE name = 'res';",
            label: "rows of `res`, kind:mode:owner",
        },
    )
    .await;
}

/// Reproduces a past break: a MariaDB user who may only create tables in the lockers' database makes the entries table first, with schema()'s primary key but its `mode` an ENUM('', 'r', 'W') that ignores case; the lockers use it, every write holder reads back as mode `W`, which they take for a reader, and a held write lock is shared with a reader.
///
/// docs/sql.md ("What it does not guarantee"): "a locker refuses lock
/// tables whose primary keys are not those `schema()` makes". The check
/// (src/sql/store/setup.rs, `Store::mysql_keys`) compares the key's
/// column names only; the columns themselves are whatever the table's
/// maker chose. The full transaction reads each holder's mode back as
/// text and takes anything but `w` for a reader
/// (src/sql/state.rs, `parse_mode`). An ENUM column whose members
/// are compared without case stores the locker's `w` as the member `W`
/// (no error, strict mode or not), and answers `W`.
///
/// A holder takes `res` for writing; a second client then asks to read
/// it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_table_another_user_made_with_another_mode_column_is_not_used() {
    let Some(server) = MariaServer::start() else {
        return;
    };
    let shape = Shape {
        prefix: "md_",
        word: "mode",
        naming: "its column",
    };
    mallory_makes_the_tables(&server, &shape, |entries| {
        let mode = "mode char(1) CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT '',";
        assert!(
            entries.contains(mode),
            "control: the mode column: {entries}"
        );
        entries.replace(
            mode,
            "mode ENUM('', 'r', 'W') CHARACTER SET ascii COLLATE ascii_general_ci NOT NULL DEFAULT '',",
        )
    })
    .await;
    a_held_name_is_not_granted_again(
        &server,
        &shape,
        ("res", true),
        ("writer", "reader"),
        "`res` was granted to a reader while a writer holds it: the entries table mallory \
         (CREATE only) made before the lockers' setup stores the mode `w` as `W`, which the \
         lockers read as a reader's",
        Rows {
            query: "SELECT GROUP_CONCAT(CONCAT(kind, ':', mode, ':', owner) ORDER BY granted \
                    SEPARATOR ',') FROM md_entries WHERE name = 'res';",
            label: "rows of `res`, kind:mode:owner",
        },
    )
    .await;
}

/// Reproduces a past break: a MariaDB user who may only create tables in the lockers' database makes the entries table first, with schema()'s primary key (name, uid, kind) but `name` a CHAR column, which drops trailing spaces; the lockers use it, the holder of a name ending in a space reads back under another name, and the held lock is granted to a second writer.
///
/// docs/sql.md ("What it does not guarantee"): "a locker refuses lock
/// tables whose primary keys are not those `schema()` makes". The check
/// (src/sql/store/setup.rs, `Store::mysql_keys`) compares the key's
/// column names only, not their types. Lock names are any text, and the
/// full transaction matches the rows it loads to the names asked for
/// byte for byte (src/sql/state.rs, `Table::load`). A CHAR column keeps
/// `job ` as `job` (no error, strict mode or not), finds it for `job `
/// (its collation pads), and answers `job`: the holder's row is loaded
/// and skipped.
///
/// A holder takes `job ` for writing; a second client then asks to write
/// it too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_table_another_user_made_with_another_name_column_is_not_used() {
    let Some(server) = MariaServer::start() else {
        return;
    };
    let shape = Shape {
        prefix: "nm_",
        word: "name",
        naming: "its column",
    };
    mallory_makes_the_tables(&server, &shape, |entries| {
        let name = "name varbinary(1024) NOT NULL,";
        assert!(
            entries.contains(name),
            "control: the name column: {entries}"
        );
        entries.replace(
            name,
            "name char(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,",
        )
    })
    .await;
    a_held_name_is_not_granted_again(
        &server,
        &shape,
        ("job ", false),
        ("writer", "thief"),
        "`job ` was granted to a second writer while the first holds it: the entries table \
         mallory (CREATE only) made before the lockers' setup stores the name `job ` as \
         `job`, whose rows the lockers skip",
        Rows {
            query: "SELECT GROUP_CONCAT(CONCAT(kind, ':', mode, ':', owner) ORDER BY granted \
                    SEPARATOR ',') FROM nm_entries WHERE name = 'job';",
            label: "rows of `job`, kind:mode:owner",
        },
    )
    .await;
}

/// Reproduces a past break: a MariaDB user who may only create tables in the lockers' database makes the entries table first, exactly as schema() gives it but with DEFAULTs on `stamp` and `value`; the shape check compares no defaults, so the lockers use it, every new holder's row carries mallory's proclamation, and an election's leader is reported with her value, never the one it proclaimed.
///
/// docs/sql.md ("What it does not guarantee"): "a user that may only
/// create tables in the database could make them first: a locker refuses
/// lock tables that are not as `schema()` makes them". The check
/// (src/sql/store/shape.rs, `Store::mysql_shape`) compares each column's
/// type, collation and nullability, not its default. A holder's row is
/// inserted without `stamp` and `value` (src/sql/dialect.rs,
/// `insert_holder`; the grant procedure in src/sql/routines.rs), so it
/// takes the table's defaults: a proclamation. A leader's own
/// proclamation replaces a stored one only when its stamp is higher
/// (src/sql/calls.rs, `proclaim`), and the planted stamp is higher than
/// any term the lockers draw, yet the call still answers that it stored
/// the value.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_table_another_user_made_with_other_column_defaults_is_not_used() {
    let Some(server) = MariaServer::start() else {
        return;
    };
    let shape = Shape {
        prefix: "df_",
        word: "default",
        naming: "the defaults",
    };
    mallory_makes_the_tables(&server, &shape, |entries| {
        let stamp = "stamp varchar(40) CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT '',";
        let value = "value blob,";
        assert!(
            entries.contains(stamp) && entries.contains(value),
            "control: the stamp and value columns: {entries}"
        );
        // Same types, collations and nullability: only the defaults differ.
        // Term 10^19, above any fencing token the clock gives for centuries.
        entries
            .replace(
                stamp,
                "stamp varchar(40) CHARACTER SET ascii COLLATE ascii_bin NOT NULL \
                 DEFAULT '1000000000000000000000000000000000000000',",
            )
            .replace(value, "value blob DEFAULT 'mallory',")
    })
    .await;
    the_leader_is_reported_with_its_own_value(
        &server,
        &shape,
        "defaults on stamp and value gives every holder her proclamation, which the leader's \
         own cannot replace",
    )
    .await;
}

/// Reproduces a past break: a MariaDB user who may only create tables in the lockers' database makes the entries table first, with a plain key where its primary key should be; the lockers use it as their own, and the one-round-trip grant, whose `INSERT IGNORE` of the resource's row now always succeeds, grants a held lock twice.
///
/// docs/sql.md ("What it does not guarantee") names who can break a lock:
/// "a user with write access to the table", on MySQL and MariaDB "a user
/// who may alter or drop routines", and "the tables' owner", for which a
/// PostgreSQL locker warns by name. MySQL and MariaDB tables have no
/// owner: a user with `CREATE` on the database, and no right to read or
/// write any table, may make one, and the locker's setup
/// (src/sql/store/setup.rs, `Store::setup`) takes any table of that name
/// as its own (`SELECT 1 FROM entries WHERE 1 = 0`, or a `CREATE TABLE`
/// that fails with 1050), whatever its keys. The rules of docs/sql.md
/// ("Tables, isolation and locking") rest on the primary key `(name,
/// uid, kind)`: "a missing row means a free resource", and the grant
/// procedure's `INSERT IGNORE` of the resource's row is what finds it
/// there. Without the key every `INSERT IGNORE` inserts, and every grant
/// of a name by the one-round-trip procedure succeeds.
///
/// Mallory acts as the planted routines of earlier findings did. She
/// makes the entries table as schema() gives it but for the primary key
/// (a plain key on the same columns). Since then the lockers refuse such
/// a table, naming it and its key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_table_another_user_made_without_its_primary_key_is_not_used() {
    let Some(server) = MariaServer::start() else {
        return;
    };
    let shape = Shape {
        prefix: "pk_",
        word: "primary key",
        naming: "its missing key",
    };
    mallory_makes_the_tables(&server, &shape, |entries| {
        let key = "PRIMARY KEY (name, uid, kind),";
        assert!(entries.contains(key), "control: the primary key: {entries}");
        entries.replace(key, "KEY pk_entries_by_row (name, uid, kind),")
    })
    .await;
    a_held_name_is_not_granted_again(
        &server,
        &shape,
        ("res", false),
        ("holder", "thief"),
        "`res` was granted to a second holder while the first holds it: the entries table \
         mallory (CREATE only) made before the lockers' setup has no primary key, and the \
         lockers used it",
        Rows {
            query: "SELECT GROUP_CONCAT(CONCAT(kind, ':', owner) ORDER BY granted SEPARATOR ',') \
                    FROM pk_entries WHERE name = 'res';",
            label: "rows of `res`, kind:owner",
        },
    )
    .await;
}

/// Reproduces a past break: a MariaDB user who may only create tables in the lockers' database makes the entries table first, as schema() gives it but `WITH SYSTEM VERSIONING`; the shape check does not see the hidden period columns or the primary key's extra `row_end`, so the lockers use it, and every row they delete (holders with their uids, owners and sources, resource rows, places) stays in the table as history, forever.
///
/// docs/sql.md ("What it does not guarantee"): "a user that may only
/// create tables in the database could make them first: a locker refuses
/// lock tables that are not as `schema()` makes them (the primary keys
/// `(name, uid, kind)` and `id` and no other constraint, every column's
/// type, …), naming the table and what differs"; src/sql/store/shape.rs:
/// "a MySQL or MariaDB locker uses no table whose primary keys, columns …
/// differ from `schema()`'s". A system-versioned table has the hidden
/// columns `row_start` and `row_end`, and its primary key is `(name, uid,
/// kind, row_end)`, but information_schema's `COLUMNS` and `STATISTICS`
/// (which the check reads) show neither. docs/sql.md ("Tables"): "A
/// resource's row is deleted with its last holder or place"; ("Time and
/// expiry"): expired rows are deleted, "No cron job is needed": on this
/// table no `DELETE` of the lockers removes a row.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_table_another_user_made_system_versioned_is_not_used() {
    let Some(server) = MariaServer::start() else {
        return;
    };
    let shape = Shape {
        prefix: "sv_",
        word: "system versioned",
        naming: "its system versioning",
    };
    mallory_makes_the_tables(&server, &shape, |entries| {
        format!(
            "{} WITH SYSTEM VERSIONING",
            entries.trim_end().trim_end_matches(';')
        )
    })
    .await;
    let locker = match SqlLocker::connect(&server.url(), settings(&shape)).await {
        Err(refused) => return assert_the_refusal_names_why(&shape, &refused),
        Ok(locker) => locker,
    };
    // Used: show what it keeps.
    if let Some(left) = locker.quarantine_left().await.expect("a database") {
        tokio::time::sleep(left + Duration::from_millis(100)).await;
    }
    for uid in ["first", "second", "third"] {
        let args = args_from(
            "tests/sql/a_lock_table_another_user_made_in_another_shape_is_not_used.rs",
            uid,
            "x",
        );
        assert!(locker.lock(&args).await.expect("a lock"));
        assert!(locker.unlock(&args).await.expect("an unlock"));
    }
    let current = server.sql("SELECT COUNT(*) FROM sv_entries WHERE kind <> 'e';");
    let kept = server.sql(
        "SELECT GROUP_CONCAT(CONCAT(kind, ':', uid) ORDER BY row_end) \
         FROM sv_entries FOR SYSTEM_TIME ALL WHERE kind <> 'e';",
    );
    panic!(
        "the lockers used a system-versioned entries table another user made (CREATE only): \
         {} rows left in it now, but every row they deleted is kept as history: {}",
        current.trim(),
        kept.trim()
    );
}
