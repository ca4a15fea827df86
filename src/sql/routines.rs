//! The stored routines that make a call one round trip, in each
//! database's own words: functions on PostgreSQL, procedures on MySQL and
//! MariaDB, that grant a free resource and release one. Each takes the resource's row lock first, as the full
//! transaction does (see `store.rs`), and decides alone only what passes
//! no turn on; otherwise it answers -1 and the call takes the transaction.
//!
//! Their names carry the version of their rules (`ROUTINES_VERSION`):
//! a library with other rules calls routines of other names, made beside
//! these, so that lockers of two versions can share the tables.

use super::dialect::{Backend, Dialect};

/// A routine's answer: an `integer` on PostgreSQL, an integer of the
/// server's choosing on MySQL.
pub(super) fn answer_of(row: &sqlx::any::AnyRow) -> Result<i64, sqlx::Error> {
    use sqlx::Row as _;
    row.try_get::<i64, _>(0)
        .or_else(|_| row.try_get::<i32, _>(0).map(i64::from))
}

/// The body of a MySQL `CREATE PROCEDURE` statement of ours: what follows
/// its characteristics, as the server keeps it in `ROUTINE_DEFINITION`.
fn body_of(create: &str) -> String {
    create
        .split_once("SQL SECURITY INVOKER\n")
        .map(|(_, body)| body.to_owned())
        .unwrap_or_default()
}

/// How the text of every doorbell's sleep begins (`doorbell.rs`), its
/// channel and the comment's end following: the doorbell procedure ends
/// no statement that does not begin so.
pub(super) const DOORBELL_SLEEP: &str = "SELECT SLEEP(10) /* quorum-lock doorbell ";

impl Dialect {
    /// The call of the one-round-trip release in `schema` (quoted):
    /// `$1` name, `$2` uid, `$3` mode. Answers 1 (released), 0 (not held
    /// in that mode), or -1: the resource has places in line or expired
    /// rows, whose turns and clean-up the full transaction decides.
    pub(super) fn fast_release_in(&self, schema: &str) -> String {
        format!("SELECT {schema}.\"{}\"($1, $2, $3)", self.tables.release)
    }

    /// The call of the one-round-trip grant of a free resource in
    /// `schema` (quoted): `$1` name, `$2` quarantine ms (0 for none), `$3`
    /// uid, `$4` mode, `$5` validity ms, `$6` ticket, `$7` channel, `$8`
    /// owner, `$9` source. Answers 1 (granted), 0 (the resource has a
    /// row) or -1 (the epoch is in doubt): the call then takes the full
    /// transaction.
    pub(super) fn fast_grant_in(&self, schema: &str) -> String {
        format!(
            "SELECT {schema}.\"{}\"($1, $2, $3, $4, $5, $6, $7, $8, $9)",
            self.tables.grant
        )
    }

    /// The schema the entries table resolves to for this locker's
    /// sessions (PostgreSQL): `$1` the table's name as the locker writes
    /// it. No row when there is no such table.
    pub(super) fn table_schema(&self) -> Option<&'static str> {
        (self.backend == Backend::Postgres).then_some(
            "SELECT CAST(n.nspname AS text) FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n \
             ON n.oid OPERATOR(pg_catalog.=) c.relnamespace \
             WHERE c.oid OPERATOR(pg_catalog.=) pg_catalog.to_regclass($1)",
        )
    }

    /// Whether a function exists, whether this session may call it, and
    /// its body: `$1` its signature, as `schema.name(types)`.
    ///
    /// The fourth column: whether the function's owner is one the locker
    /// may trust: this user, or the owner of the entries table `$2` (who
    /// may write the table anyway). A function of another role, made where
    /// none was before the tables (any role that may create in the schema
    /// can), stays that role's to replace whenever it likes, and could be
    /// this version's body over other parameter names: never used. Nor is
    /// one beside an overload of its name (made by a role that may create
    /// in the schema), which makes every call of it ambiguous.
    pub(super) fn routine_usable(&self) -> &'static str {
        "SELECT p IS NOT NULL, coalesce(pg_catalog.has_function_privilege(p, 'EXECUTE'), false), \
         coalesce((SELECT prosrc FROM pg_catalog.pg_proc WHERE oid OPERATOR(pg_catalog.=) p), ''), \
         coalesce((SELECT (f.proowner OPERATOR(pg_catalog.=) (SELECT oid FROM pg_catalog.pg_roles \
                            WHERE rolname OPERATOR(pg_catalog.=) current_user) \
                     OR f.proowner OPERATOR(pg_catalog.=) (SELECT relowner FROM pg_catalog.pg_class \
                            WHERE oid OPERATOR(pg_catalog.=) pg_catalog.to_regclass($2))) \
                     AND (SELECT pg_catalog.count(*) FROM pg_catalog.pg_proc o \
                          WHERE o.proname OPERATOR(pg_catalog.=) f.proname \
                          AND o.pronamespace OPERATOR(pg_catalog.=) f.pronamespace) OPERATOR(pg_catalog.=) 1 \
                   FROM pg_catalog.pg_proc f WHERE f.oid OPERATOR(pg_catalog.=) p), false) \
         FROM pg_catalog.to_regprocedure($1) p"
    }

    /// The PostgreSQL functions in `schema` (quoted) over the entries
    /// table there, each as its signature (for
    /// [`routine_usable`](Self::routine_usable)), its body as the
    /// database keeps it, and the statement that makes it.
    pub(super) fn functions_in(&self, schema: &str) -> Vec<(String, String, String)> {
        if self.backend != Backend::Postgres {
            return Vec::new();
        }
        let table = format!("{schema}.\"{}\"", self.tables.name);
        let release = format!("{schema}.\"{}\"", self.tables.release);
        let grant = format!("{schema}.\"{}\"", self.tables.grant);
        vec![
            (
                format!("{release}(text, text, text)"),
                self.release_body(&table),
                self.release_routine(&release, &table),
            ),
            (
                format!("{grant}(text, bigint, text, text, bigint, text, text, text, text)"),
                self.grant_body(&table),
                self.grant_routine(&grant, &table),
            ),
        ]
    }

    /// The stored routines as `schema()` gives them, for tables created by
    /// hand: in the configured schema, or (none configured) in the schema
    /// that creates the tables.
    pub(super) fn routines(&self) -> Vec<String> {
        if self.backend != Backend::Postgres {
            return Vec::new();
        }
        let name = |function: &str| match &self.tables.schema {
            Some(schema) => format!("\"{schema}\".\"{function}\""),
            None => format!("\"{function}\""),
        };
        let table = &self.tables.entries;
        vec![
            self.release_routine(&name(&self.tables.release), table),
            self.grant_routine(&name(&self.tables.grant), table),
        ]
    }

    /// The statement that makes (or replaces: same name, same version,
    /// same rules) the grant `grant` of a free resource over the entries
    /// table `entries`.
    ///
    /// Its first statement inserts the resource's row where there is none
    /// (nobody holds the resource or waits for it: their rows exist only
    /// beside it), waiting for a call that is creating or deleting it.
    /// Only then, with a snapshot of its own, does it read the epoch
    /// marker: a reset of the table that the insert waited for (every row
    /// deleted, the marker among them) is seen, and the grant refused for
    /// the new epoch's quarantine, where a single statement, whose
    /// snapshot predates the wait, granted at once.
    fn grant_routine(&self, grant: &str, entries: &str) -> String {
        format!(
            "CREATE OR REPLACE FUNCTION {grant}(p_name text, p_quarantine bigint, p_uid text, \
             p_mode text, p_validity bigint, p_ticket text, p_channel text, p_owner text, \
             p_source text) RETURNS integer LANGUAGE plpgsql \
             SET search_path = pg_catalog, pg_temp AS $ql${}$ql$",
            self.grant_body(entries)
        )
    }

    /// The body of the grant over `entries`, as PostgreSQL keeps it.
    pub(super) fn grant_body(&self, entries: &str) -> String {
        let now = self.now_ms();
        let started = super::dialect::PG_STARTED;
        format!(
            "\n\
             DECLARE\n  \
               now_ms bigint;\n\
             BEGIN\n  \
               INSERT INTO {entries} (name, uid, kind) VALUES (p_name, '', 'r')\n    \
                 ON CONFLICT (name, uid, kind) DO NOTHING;\n  \
               IF NOT FOUND THEN\n    \
                 RETURN 0;\n  \
               END IF;\n  \
               now_ms := {now};\n  \
               INSERT INTO {entries} (name, uid, kind, mode, deadline, granted, ticket, channel, owner, source)\n    \
                 SELECT p_name, p_uid, 'h', p_mode, now_ms + p_validity, now_ms, p_ticket, p_channel, p_owner, p_source\n    \
                 FROM {entries} m WHERE m.name = '' AND m.uid = '' AND m.kind = 'e'\n      \
                   AND m.ticket = CAST(CAST(m.tableoid AS oid) AS text) || '/' || {started}\n      \
                   AND m.deadline <= now_ms - p_quarantine;\n  \
               IF NOT FOUND THEN\n    \
                 DELETE FROM {entries} WHERE name = p_name AND uid = '' AND kind = 'r';\n    \
                 RETURN -1;\n  \
               END IF;\n  \
               RETURN 1;\n\
             END\n\
             "
        )
    }

    /// The statement that makes (or replaces: same name, same version,
    /// same rules) the release `release` over the entries table `entries`.
    ///
    /// The release runs as one transaction of several statements, each
    /// with a snapshot of its own (a volatile function under read
    /// committed), in the order of the full transaction: the upsert takes
    /// the resource's row lock (waiting for a call that holds it, or that
    /// is creating or deleting the row), and the read after it sees
    /// everything that call committed. So it is serialized with every other
    /// call on the resource, as the full transaction is, and it decides
    /// alone only what needs no turn passed on: no place in line, no
    /// expired row. It deletes the resource's row only with its last
    /// holder, so a resource with no row still has no holders or places.
    fn release_routine(&self, release: &str, entries: &str) -> String {
        format!(
            "CREATE OR REPLACE FUNCTION {release}(p_name text, p_uid text, p_mode text) \
             RETURNS integer LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp \
             AS $ql${}$ql$",
            self.release_body(entries)
        )
    }

    /// The body of the release over `entries`, as PostgreSQL keeps it
    /// (`pg_proc.prosrc`): a function of this name whose body differs is
    /// not one this locker made for its tables, and is not called.
    pub(super) fn release_body(&self, entries: &str) -> String {
        let now = self.now_ms();
        format!(
            "\n\
             DECLARE\n  \
               now_ms bigint;\n  \
               held boolean;\n  \
               others bigint;\n  \
               unusual bigint;\n\
             BEGIN\n  \
               INSERT INTO {entries} (name, uid, kind) VALUES (p_name, '', 'r')\n    \
                 ON CONFLICT (name, uid, kind) DO UPDATE SET kind = 'r';\n  \
               now_ms := {now};\n  \
               SELECT coalesce(bool_or(kind = 'h' AND uid = p_uid AND mode = p_mode), false),\n         \
                      count(*) FILTER (WHERE kind = 'h' AND uid <> p_uid),\n         \
                      count(*) FILTER (WHERE kind = 'q' OR (kind = 'h'\n           \
                        AND (deadline <= now_ms OR (uid = p_uid AND mode <> p_mode))))\n    \
                 INTO held, others, unusual\n    \
                 FROM {entries} WHERE name = p_name;\n  \
               IF unusual > 0 THEN\n    \
                 RETURN -1;\n  \
               END IF;\n  \
               IF held OR others = 0 THEN\n    \
                 DELETE FROM {entries} WHERE name = p_name\n      \
                   AND ((held AND uid = p_uid AND kind = 'h') OR (others = 0 AND uid = '' AND kind = 'r'));\n  \
               END IF;\n  \
               RETURN CASE WHEN held THEN 1 ELSE 0 END;\n\
             END\n\
             "
        )
    }

    /// Where the MySQL procedures live, as SQL: the configured schema, or
    /// the connection's database (where the tables are made then too).
    pub(super) fn mysql_schema(&self) -> String {
        match &self.tables.schema {
            Some(schema) => format!("'{schema}'"),
            None => "DATABASE()".to_owned(),
        }
    }

    /// The MySQL procedures' names, grant and release, unquoted: the
    /// PostgreSQL names followed by which letters of the prefix are
    /// capitals (a bit each, in hex). MySQL compares routine names without
    /// case but table names (on Linux) with it, so the prefixes `pc_` and
    /// `PC_` have tables of their own; their procedures must not be one.
    fn mysql_names(&self) -> (String, String) {
        let capitals = self
            .tables
            .prefix
            .bytes()
            .enumerate()
            .filter(|(_, b)| b.is_ascii_uppercase())
            .fold(0u64, |mask, (i, _)| mask | (1 << i));
        (
            format!("{}_{capitals:x}", self.tables.grant),
            format!("{}_{capitals:x}", self.tables.release),
        )
    }

    /// A MySQL procedure's name, quoted, in the tables' schema.
    fn mysql_routine(&self, name: &str) -> String {
        match &self.tables.schema {
            Some(schema) => format!("`{schema}`.`{name}`"),
            None => format!("`{name}`"),
        }
    }

    /// The MySQL doorbell procedure's name, unquoted (see `doorbell.rs`):
    /// named as the grant and release are, capitals included.
    fn mysql_ring_name(&self) -> String {
        let (grant, _) = self.mysql_names();
        // `<prefix>grant_v1_<capitals>` → `<prefix>ring_v1_<capitals>`.
        let suffix = &grant[self.tables.prefix.len() + "grant".len()..];
        format!("{}ring{suffix}", self.tables.prefix)
    }

    /// Whether this version's MySQL doorbell procedure exists, with this
    /// version's body, that this user may run: 1 when it does. Binds the
    /// body ([`mysql_ring_body`](Self::mysql_ring_body)).
    pub(super) fn mysql_ring_found(&self) -> String {
        format!(
            "SELECT COUNT(*) FROM information_schema.ROUTINES WHERE ROUTINE_SCHEMA = {} \
             AND ROUTINE_TYPE = 'PROCEDURE' AND SECURITY_TYPE = 'INVOKER' \
             AND BINARY DEFINER = BINARY CURRENT_USER() \
             AND ROUTINE_NAME = '{}' AND BINARY ROUTINE_DEFINITION = BINARY ?",
            self.mysql_schema(),
            self.mysql_ring_name()
        )
    }

    /// The doorbell procedure's body, as the server keeps it.
    pub(super) fn mysql_ring_body(&self) -> String {
        body_of(&self.mysql_ring()[1])
    }

    /// The grant's and the release's bodies, as the server keeps them.
    pub(super) fn mysql_bodies(&self) -> (String, String) {
        let statements = self.mysql_routines();
        (body_of(&statements[1]), body_of(&statements[3]))
    }

    /// The call of the MySQL doorbell procedure: the text of the sleep to
    /// end. Answers 1 when it ended one, else 0.
    pub(super) fn mysql_ring_call(&self) -> String {
        format!("CALL {}(?)", self.mysql_routine(&self.mysql_ring_name()))
    }

    /// The statements that make the MySQL doorbell procedure: it finds the
    /// sleep whose text is `p_text` in the process list and ends it with
    /// `KILL QUERY`, both on the server that runs the call (one statement
    /// from the client: behind a proxy or during a switchover, a look-up
    /// and a kill sent apart could reach two servers, and end another
    /// thread of the same id). Only an exact text of a doorbell's sleep
    /// matches, which only a doorbell's connection runs.
    pub(super) fn mysql_ring(&self) -> Vec<String> {
        if self.backend != Backend::MySql {
            return Vec::new();
        }
        let ring = self.mysql_routine(&self.mysql_ring_name());
        vec![
            format!("DROP PROCEDURE IF EXISTS {ring}"),
            format!(
                "CREATE PROCEDURE {ring}(IN p_text VARBINARY(512))\n\
                 SQL SECURITY INVOKER\n\
                 BEGIN\n  \
                   DECLARE v_id BIGINT DEFAULT NULL;\n  \
                   SET v_id = (SELECT ID FROM information_schema.PROCESSLIST\n    \
                     WHERE COMMAND = 'Query' AND INFO = p_text \
                     AND LEFT(INFO, {}) = '{DOORBELL_SLEEP}' LIMIT 1);\n  \
                   IF v_id IS NOT NULL THEN\n    \
                     KILL QUERY v_id;\n  \
                   END IF;\n  \
                   SELECT IF(v_id IS NULL, 0, 1) AS answer;\n\
                 END",
                DOORBELL_SLEEP.len()
            ),
        ]
    }

    /// How many of this version's MySQL procedures exist, each with this
    /// version's body and invoker's rights, that this user can see (it
    /// sees those it may execute): two when both are there. Binds the
    /// grant's body, then the release's ([`mysql_bodies`](Self::mysql_bodies)).
    ///
    /// By name alone, a procedure another user made (one who may create
    /// routines in the database, where none was, or alter them) would be
    /// run with the locker's rights, and might be this body over other
    /// parameters: only one this user made (its definer) with this body,
    /// compared byte for byte (the column's collation ignores case), is
    /// ours. Procedures made by another user (by hand, from `schema()`)
    /// are made again when this user may, else not used.
    pub(super) fn mysql_routines_found(&self) -> String {
        let (grant, release) = self.mysql_names();
        format!(
            "SELECT COUNT(*) FROM information_schema.ROUTINES WHERE ROUTINE_SCHEMA = {} \
             AND ROUTINE_TYPE = 'PROCEDURE' AND SECURITY_TYPE = 'INVOKER' \
             AND BINARY DEFINER = BINARY CURRENT_USER() \
             AND ((ROUTINE_NAME = '{grant}' AND BINARY ROUTINE_DEFINITION = BINARY ?) \
               OR (ROUTINE_NAME = '{release}' AND BINARY ROUTINE_DEFINITION = BINARY ?))",
            self.mysql_schema(),
        )
    }

    /// The call of the MySQL grant of a free resource: name, quarantine
    /// ms (0 for none), uid, mode, validity ms, ticket, channel, owner,
    /// source (the order of [`fast_grant`](Self::fast_grant)), and when the
    /// server last started, ms. Answers 1 (granted), or 0 or -1: the call
    /// takes the full transaction.
    pub(super) fn mysql_grant_call(&self) -> String {
        format!(
            "CALL {}(?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            self.mysql_routine(&self.mysql_names().0)
        )
    }

    /// The call of the MySQL release: name, uid, mode; answers as the
    /// PostgreSQL function does.
    pub(super) fn mysql_release_call(&self) -> String {
        format!(
            "CALL {}(?, ?, ?)",
            self.mysql_routine(&self.mysql_names().1)
        )
    }

    /// The statements that make this version's MySQL procedures (each
    /// dropped first: MySQL has no `CREATE OR REPLACE PROCEDURE`, and a
    /// procedure of this name is one of this version, with these rules).
    ///
    /// Both run as one transaction of several statements under read
    /// committed (the session's), as the full transaction does: the
    /// grant's `INSERT IGNORE` of the resource's row succeeds only where
    /// there was none, so nobody holds or waits for the resource (their
    /// rows exist only beside it), and it waits for a call that is
    /// deleting the row; then it checks the epoch as the full transaction
    /// does (the marker names this table on this server, and neither its
    /// epoch nor the server's start is within the quarantine) and writes
    /// the holder. The release's upsert takes the resource's row lock, and
    /// each read after it sees what the previous owner committed. `SQL
    /// SECURITY INVOKER`: they act with the caller's rights, never their
    /// maker's. Unqualified table names in a routine name its own
    /// database, which is the tables' own.
    pub(super) fn mysql_routines(&self) -> Vec<String> {
        if self.backend != Backend::MySql {
            return Vec::new();
        }
        let entries = &self.tables.entries;
        let now = self.now_ms();
        let identity = self.identity(false);
        let (grant, release) = self.mysql_names();
        let (grant, release) = (self.mysql_routine(&grant), self.mysql_routine(&release));
        vec![
            format!("DROP PROCEDURE IF EXISTS {grant}"),
            format!(
                "CREATE PROCEDURE {grant}(IN p_name VARBINARY(1024), IN p_quarantine BIGINT, \
                 IN p_uid VARBINARY(255), IN p_mode VARBINARY(1), IN p_validity BIGINT, \
                 IN p_ticket VARBINARY(64), IN p_channel VARBINARY(128), \
                 IN p_owner VARBINARY(1024), IN p_source VARBINARY(1024), IN p_started BIGINT)\n\
                 SQL SECURITY INVOKER\n\
                 proc: BEGIN\n  \
                   DECLARE v_now BIGINT;\n  \
                   DECLARE v_since BIGINT DEFAULT NULL;\n  \
                   DECLARE v_marker VARBINARY(255) DEFAULT NULL;\n  \
                   DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;\n  \
                   START TRANSACTION;\n  \
                   INSERT IGNORE INTO {entries} (name, uid, kind) VALUES (p_name, '', 'r');\n  \
                   IF ROW_COUNT() = 0 THEN\n    \
                     ROLLBACK;\n    \
                     SELECT 0 AS answer;\n    \
                     LEAVE proc;\n  \
                   END IF;\n  \
                   SET v_now = {now};\n  \
                   SELECT deadline, ticket INTO v_since, v_marker FROM {entries}\n    \
                     WHERE name = '' AND uid = '' AND kind = 'e';\n  \
                   IF v_marker IS NULL OR v_marker <> {identity}\n     \
                      OR v_since > v_now - p_quarantine OR p_started > v_now - p_quarantine THEN\n    \
                     ROLLBACK;\n    \
                     SELECT -1 AS answer;\n    \
                     LEAVE proc;\n  \
                   END IF;\n  \
                   INSERT INTO {entries} (name, uid, kind, mode, deadline, granted, ticket, channel, owner, source)\n    \
                     VALUES (p_name, p_uid, 'h', p_mode, v_now + p_validity, v_now, p_ticket, p_channel, p_owner, p_source);\n  \
                   COMMIT;\n  \
                   SELECT 1 AS answer;\n\
                 END"
            ),
            format!("DROP PROCEDURE IF EXISTS {release}"),
            format!(
                "CREATE PROCEDURE {release}(IN p_name VARBINARY(1024), IN p_uid VARBINARY(255), \
                 IN p_mode VARBINARY(1))\n\
                 SQL SECURITY INVOKER\n\
                 proc: BEGIN\n  \
                   DECLARE v_now BIGINT;\n  \
                   DECLARE v_held BIGINT;\n  \
                   DECLARE v_others BIGINT;\n  \
                   DECLARE v_unusual BIGINT;\n  \
                   DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;\n  \
                   START TRANSACTION;\n  \
                   INSERT INTO {entries} (name, uid, kind) VALUES (p_name, '', 'r')\n    \
                     ON DUPLICATE KEY UPDATE kind = 'r';\n  \
                   SET v_now = {now};\n  \
                   SELECT COALESCE(SUM(uid = p_uid AND kind = 'h' AND mode = p_mode), 0),\n         \
                          COALESCE(SUM(uid <> p_uid AND kind = 'h'), 0),\n         \
                          COALESCE(SUM(kind = 'q' OR deadline <= v_now\n           \
                            OR (uid = p_uid AND kind = 'h' AND mode <> p_mode)), 0)\n    \
                     INTO v_held, v_others, v_unusual\n    \
                     FROM {entries} WHERE name = p_name AND kind IN ('h', 'q');\n  \
                   IF v_unusual > 0 THEN\n    \
                     COMMIT;\n    \
                     SELECT -1 AS answer;\n    \
                     LEAVE proc;\n  \
                   END IF;\n  \
                   IF v_held > 0 THEN\n    \
                     DELETE FROM {entries} WHERE name = p_name AND uid = p_uid AND kind = 'h';\n  \
                   END IF;\n  \
                   IF v_others = 0 THEN\n    \
                     DELETE FROM {entries} WHERE name = p_name AND uid = '' AND kind = 'r';\n  \
                   END IF;\n  \
                   COMMIT;\n  \
                   SELECT IF(v_held > 0, 1, 0) AS answer;\n\
                 END"
            ),
        ]
    }
}
