//! The SQL a `SqlLocker` sends, in each database's own words: table
//! definitions, the statements of one call, the server's clock and its
//! identity. Nothing here is assembled from input: names, uids, owners and
//! values are always bound parameters; only the table names (checked to be
//! plain identifiers when the locker is built) and the number of
//! placeholders vary.

use std::fmt::Write as _;

use crate::Error;

/// Which database a URL names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Backend {
    /// PostgreSQL 13 or later: `postgres://` or `postgresql://`.
    Postgres,
    /// MySQL 8 or MariaDB 10.6 or later: `mysql://` or `mariadb://`.
    MySql,
}

impl Backend {
    /// The backend a URL's scheme names, or `None` when it names no SQL
    /// database this build supports.
    ///
    /// ```
    /// use quorum_lock::sql::Backend;
    /// # #[cfg(feature = "postgres")]
    /// assert_eq!(Backend::of_url("postgres://db.internal/locks"), Some(Backend::Postgres));
    /// assert_eq!(Backend::of_url("redis://cache:6379"), None);
    /// assert_eq!(Backend::of_url("10.0.0.5:7001"), None);
    /// ```
    pub fn of_url(url: &str) -> Option<Backend> {
        let (scheme, _) = url.split_once("://")?;
        match scheme.to_ascii_lowercase().as_str() {
            "postgres" | "postgresql" if cfg!(feature = "postgres") => Some(Backend::Postgres),
            "mysql" | "mariadb" if cfg!(feature = "mysql") => Some(Backend::MySql),
            _ => None,
        }
    }

    /// The name people know the database by.
    pub fn name(self) -> &'static str {
        match self {
            Backend::Postgres => "PostgreSQL",
            Backend::MySql => "MySQL/MariaDB",
        }
    }
}

/// Where the locker's tables live: an optional schema (a database, on
/// MySQL) and the prefix of both table names.
#[derive(Debug, Clone)]
pub(super) struct Tables {
    /// `schema.prefixentries`, quoted: holders, places, resource rows and
    /// the epoch marker.
    pub entries: String,
    /// `schema.prefixfence`, quoted: the fencing high-water mark.
    pub fence: String,
    /// The prefix alone, for index names.
    pub prefix: String,
    /// The schema, unquoted.
    pub schema: Option<String>,
    /// The entries table's name, unquoted and unqualified.
    pub name: String,
    /// The fence table's name, unquoted and unqualified.
    pub fence_name: String,
    /// `prefixrelease_v1`, unquoted and unqualified: the one-round-trip
    /// release (PostgreSQL), which lives in the entries table's schema.
    pub release: String,
    /// `prefixgrant_v1`, unquoted and unqualified: the one-round-trip
    /// grant of a free resource.
    pub grant: String,
}

/// A MySQL column as the setup checks it: name, type (as
/// `information_schema` shows it, without integer display widths),
/// collation ("" for none), whether nullable, and its default (`None` for
/// none, or NULL).
pub(super) type MySqlColumn = (
    &'static str,
    &'static str,
    &'static str,
    bool,
    Option<&'static str>,
);

/// MySQL: the entries table's columns as [`Dialect::create_in`] makes
/// them, in order. The setup refuses a table of another shape.
pub(super) const MYSQL_ENTRY_COLUMNS: [MySqlColumn; 12] = [
    ("name", "varbinary(1024)", "", false, None),
    ("uid", "varbinary(255)", "", false, None),
    ("kind", "char(1)", "ascii_bin", false, None),
    ("mode", "char(1)", "ascii_bin", false, Some("")),
    ("deadline", "bigint", "", false, Some("0")),
    ("granted", "bigint", "", false, Some("0")),
    ("ticket", "varchar(64)", "ascii_bin", false, Some("")),
    ("channel", "varchar(128)", "ascii_bin", false, Some("")),
    ("owner", "varbinary(1024)", "", false, Some("")),
    ("source", "varbinary(1024)", "", false, Some("")),
    ("stamp", "varchar(40)", "ascii_bin", false, Some("")),
    ("value", "blob", "", true, None),
];

/// MySQL: the fence table's columns, as [`MYSQL_ENTRY_COLUMNS`].
pub(super) const MYSQL_FENCE_COLUMNS: [MySqlColumn; 2] = [
    ("id", "int", "", false, None),
    ("token", "bigint", "", false, None),
];

/// The version of the stored routines, part of their names: a library
/// that needs other rules calls routines of another name, made beside
/// the old ones, so lockers of two versions can share the tables while
/// an upgrade rolls out.
pub(super) const ROUTINES_VERSION: u32 = 2;

/// Longest table prefix: identifiers are at most 63 bytes on PostgreSQL
/// (64 on MySQL), and index names add up to 20.
const MAX_PREFIX_LEN: usize = 40;

/// Whether `text` is a plain identifier: ASCII letters, digits and `_`,
/// not starting with a digit. Only such names are put into SQL text.
pub(super) fn plain_identifier(text: &str) -> bool {
    text.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
        && !text.starts_with(|c: char| c.is_ascii_digit())
}

impl Tables {
    pub(super) fn new(
        backend: Backend,
        schema: Option<&str>,
        prefix: &str,
    ) -> Result<Tables, Error> {
        if prefix.len() > MAX_PREFIX_LEN || !plain_identifier(prefix) {
            return Err(Error::invalid(format!(
                "table prefix {prefix:?}: use at most {MAX_PREFIX_LEN} ASCII letters, digits \
                 and underscores, not starting with a digit (for example \"quorum_lock_\")"
            )));
        }
        if let Some(schema) = schema
            && (schema.is_empty() || schema.len() > 63 || !plain_identifier(schema))
        {
            return Err(Error::invalid(format!(
                "schema {schema:?}: use 1 to 63 ASCII letters, digits and underscores, \
                     not starting with a digit"
            )));
        }
        let quote = |name: &str| match backend {
            Backend::Postgres => format!("\"{name}\""),
            Backend::MySql => format!("`{name}`"),
        };
        let qualified = |table: &str| match schema {
            Some(schema) => format!("{}.{}", quote(schema), quote(table)),
            None => quote(table),
        };
        Ok(Tables {
            entries: qualified(&format!("{prefix}entries")),
            fence: qualified(&format!("{prefix}fence")),
            prefix: prefix.to_owned(),
            schema: schema.map(str::to_owned),
            name: format!("{prefix}entries"),
            fence_name: format!("{prefix}fence"),
            release: format!("{prefix}release_v{ROUTINES_VERSION}"),
            grant: format!("{prefix}grant_v{ROUTINES_VERSION}"),
        })
    }
}

/// The statements of one backend over one pair of tables.
#[derive(Debug, Clone)]
pub(super) struct Dialect {
    pub backend: Backend,
    pub tables: Tables,
}

/// When the PostgreSQL server started, µs since the epoch, as text.
pub(super) const PG_STARTED: &str =
    "CAST(CAST(extract(epoch from pg_postmaster_start_time()) OPERATOR(pg_catalog.*) 1000000 AS bigint) AS text)";

/// The columns every load reads, in this order (see `state::Row`).
const ROW_COLUMNS: &str = "name, uid, kind, mode, deadline, ticket, channel, stamp, value";

impl Dialect {
    /// The `n`th placeholder (from 1).
    fn p(&self, n: usize) -> String {
        match self.backend {
            Backend::Postgres => format!("${n}"),
            Backend::MySql => "?".to_owned(),
        }
    }

    /// `count` placeholders from `first`, comma separated.
    fn placeholders(&self, first: usize, count: usize) -> String {
        let mut out = String::new();
        for i in 0..count {
            if i > 0 {
                out.push_str(", ");
            }
            out.push_str(&self.p(first + i));
        }
        out
    }

    /// The server's clock in microseconds since the Unix epoch, read at
    /// the moment the statement runs (not when the transaction began).
    pub(super) fn now_us(&self) -> &'static str {
        match self.backend {
            // Operators named in pg_catalog: an operator of the same
            // name in a schema on the search path, over argument types
            // matching more exactly than pg_catalog's (numeric times
            // integer), would otherwise be chosen, and could move the clock
            // (any role that may create in such a schema can make one).
            Backend::Postgres => {
                "(extract(epoch from clock_timestamp()) OPERATOR(pg_catalog.*) 1000000)::bigint"
            }
            Backend::MySql => "CAST(UNIX_TIMESTAMP(SYSDATE(6)) * 1000000 AS SIGNED)",
        }
    }

    /// The server's clock in whole milliseconds, as an integer.
    pub(super) fn now_ms(&self) -> String {
        match self.backend {
            Backend::Postgres => format!("{} OPERATOR(pg_catalog./) 1000", self.now_us()),
            Backend::MySql => format!("{} DIV 1000", self.now_us()),
        }
    }

    /// Which table instance on which server answers, as the epoch marker
    /// records it: on PostgreSQL the entries table's OID (a table dropped
    /// and created again, by hand or by `pg_restore --clean`, has another
    /// one) and when the server started; on MySQL the `server_id`, which every replica must have of its
    /// own, and when the entries table was created (a dump restored into a
    /// running server creates it anew). `in_load` says whether the
    /// expression is evaluated over the entries table's rows.
    pub(super) fn identity(&self, in_load: bool) -> String {
        let Tables {
            entries,
            schema,
            name,
            ..
        } = &self.tables;
        match (self.backend, in_load) {
            // The OID alone repeats across clusters (a fresh one hands out
            // OIDs in the same order, so a dump restored into a new
            // cluster gets the old OID back); the postmaster's start, in
            // whole microseconds so that no session setting changes its
            // text, tells clusters and restarts apart.
            (Backend::Postgres, true) => {
                format!("CAST(CAST(tableoid AS oid) AS text) || '/' || {PG_STARTED}")
            }
            (Backend::Postgres, false) => {
                format!("CAST(CAST('{entries}' AS regclass) AS oid)::text || '/' || {PG_STARTED}")
            }
            (Backend::MySql, _) => {
                let schema = match schema {
                    Some(schema) => format!("'{schema}'"),
                    None => "DATABASE()".to_owned(),
                };
                format!(
                    "CONCAT(@@server_id, '/', COALESCE((SELECT UNIX_TIMESTAMP(CREATE_TIME) FROM \
                     information_schema.TABLES WHERE TABLE_SCHEMA = {schema} AND TABLE_NAME = '{name}'), ''))"
                )
            }
        }
    }

    /// Locks (creating where missing) the resource rows of `n` names, in
    /// the order given, which is sorted: every call locks in the same
    /// order, so two calls never wait for each other in a cycle.
    ///
    /// An upsert that writes the row on conflict takes its row lock on
    /// both databases whether the row was there or not, and waits for a
    /// transaction that is deleting it, then inserts it anew.
    pub(super) fn lock_resources(&self, n: usize) -> String {
        let t = &self.tables.entries;
        let mut sql = format!("INSERT INTO {t} (name, uid, kind) VALUES ");
        for i in 0..n {
            if i > 0 {
                sql.push_str(", ");
            }
            let _ = write!(sql, "({}, '', 'r')", self.p(i + 1));
        }
        match self.backend {
            Backend::Postgres => {
                sql.push_str(" ON CONFLICT (name, uid, kind) DO UPDATE SET kind = 'r'")
            }
            Backend::MySql => sql.push_str(" ON DUPLICATE KEY UPDATE kind = 'r'"),
        }
        sql
    }

    /// Every row of `n` names plus the epoch marker, each with the
    /// server's clock and identity. Run after [`lock_resources`]: the rows
    /// are then stable until the transaction ends, and a read-committed
    /// read sees every change committed before the row locks were won.
    pub(super) fn load(&self, n: usize) -> String {
        format!(
            "SELECT {ROW_COLUMNS}, {} AS now_us, {} AS ident FROM {} \
             WHERE name IN ({}) OR (name = '' AND uid = '' AND kind = 'e')",
            self.now_us(),
            self.identity(true),
            self.tables.entries,
            self.placeholders(1, n)
        )
    }

    /// Writes the epoch marker: the table's epoch began at `$1` (ms), its
    /// `deadline`, on the server `$2`, its `ticket`.
    pub(super) fn put_epoch(&self) -> String {
        let t = &self.tables.entries;
        match self.backend {
            Backend::Postgres => format!(
                "INSERT INTO {t} (name, uid, kind, deadline, ticket) VALUES ('', '', 'e', $1, $2) \
                 ON CONFLICT (name, uid, kind) DO UPDATE SET deadline = EXCLUDED.deadline, ticket = EXCLUDED.ticket"
            ),
            Backend::MySql => format!(
                "INSERT INTO {t} (name, uid, kind, deadline, ticket) VALUES ('', '', 'e', ?, ?) \
                 ON DUPLICATE KEY UPDATE deadline = VALUES(deadline), ticket = VALUES(ticket)"
            ),
        }
    }

    /// A holder's row: name, uid, mode, deadline, granted, ticket,
    /// channel, owner, source.
    pub(super) fn insert_holder(&self) -> String {
        format!(
            "INSERT INTO {} (name, uid, kind, mode, deadline, granted, ticket, channel, owner, source) \
             VALUES ({}, {}, 'h', {})",
            self.tables.entries,
            self.p(1),
            self.p(2),
            self.placeholders(3, 7)
        )
    }

    /// A place in line, new or renewed: name, uid, mode, deadline,
    /// ticket, channel.
    pub(super) fn put_place(&self) -> String {
        let t = &self.tables.entries;
        match self.backend {
            Backend::Postgres => format!(
                "INSERT INTO {t} (name, uid, kind, mode, deadline, ticket, channel) \
                 VALUES ($1, $2, 'q', $3, $4, $5, $6) ON CONFLICT (name, uid, kind) DO UPDATE \
                 SET mode = EXCLUDED.mode, deadline = EXCLUDED.deadline, ticket = EXCLUDED.ticket, channel = EXCLUDED.channel"
            ),
            Backend::MySql => format!(
                "INSERT INTO {t} (name, uid, kind, mode, deadline, ticket, channel) \
                 VALUES (?, ?, 'q', ?, ?, ?, ?) ON DUPLICATE KEY UPDATE \
                 mode = VALUES(mode), deadline = VALUES(deadline), ticket = VALUES(ticket), channel = VALUES(channel)"
            ),
        }
    }

    /// A holder's new deadline, ticket and channel: deadline, ticket,
    /// channel, name, uid.
    pub(super) fn renew(&self) -> String {
        format!(
            "UPDATE {} SET deadline = {}, ticket = {}, channel = {} \
             WHERE name = {} AND uid = {} AND kind = 'h'",
            self.tables.entries,
            self.p(1),
            self.p(2),
            self.p(3),
            self.p(4),
            self.p(5)
        )
    }

    /// A holder's proclamation: stamp, value, name, uid.
    pub(super) fn proclaim(&self) -> String {
        format!(
            "UPDATE {} SET stamp = {}, value = {} WHERE name = {} AND uid = {} AND kind = 'h'",
            self.tables.entries,
            self.p(1),
            self.p(2),
            self.p(3),
            self.p(4)
        )
    }

    /// Deletes `n` rows by (name, uid, kind), each by its primary key.
    ///
    /// Written as key equalities joined by `OR`, not as a row-constructor
    /// `IN`: MariaDB plans `(name, uid, kind) IN ((?, ?, ?))` with one
    /// tuple as a scan of the whole table, which reads (and waits for the
    /// row locks of) every other name's rows.
    pub(super) fn delete(&self, n: usize) -> String {
        let mut sql = format!("DELETE FROM {} WHERE ", self.tables.entries);
        for i in 0..n {
            if i > 0 {
                sql.push_str(" OR ");
            }
            let _ = write!(
                sql,
                "(name = {} AND uid = {} AND kind = {})",
                self.p(3 * i + 1),
                self.p(3 * i + 2),
                self.p(3 * i + 3)
            );
        }
        sql
    }

    /// Sends a notification at commit: channel, payload. PostgreSQL only.
    pub(super) fn notify(&self) -> &'static str {
        "SELECT pg_notify($1, $2)"
    }

    /// Every holder row, with the clock, for listings.
    pub(super) fn list(&self) -> String {
        format!(
            "SELECT name, uid, mode, owner, source, granted, deadline, {} AS now_us \
             FROM {} WHERE kind = 'h'",
            self.now_us(),
            self.tables.entries
        )
    }

    /// The names on which a uid holds or waits: uid.
    pub(super) fn names_of_uid(&self) -> String {
        format!(
            "SELECT DISTINCT name FROM {} WHERE uid = {} AND kind IN ('h', 'q')",
            self.tables.entries,
            self.p(1)
        )
    }

    /// Up to 100 names with an expired holder or place, for the sweeper.
    pub(super) fn expired_names(&self) -> String {
        format!(
            "SELECT DISTINCT name FROM {} WHERE kind IN ('h', 'q') AND deadline <= {} LIMIT 100",
            self.tables.entries,
            self.now_ms()
        )
    }

    /// The fencing high-water mark, locked.
    pub(super) fn read_mark(&self) -> String {
        format!(
            "SELECT token FROM {} WHERE id = 1 FOR UPDATE",
            self.tables.fence
        )
    }

    /// Raises the fencing high-water mark to a token, never lowers it:
    /// two first draws of a node that both found no row must not leave the
    /// lower token as the mark.
    pub(super) fn put_mark(&self) -> String {
        let f = &self.tables.fence;
        match self.backend {
            Backend::Postgres => format!(
                "INSERT INTO {f} (id, token) VALUES (1, $1) ON CONFLICT (id) DO UPDATE SET token = GREATEST({f}.token, EXCLUDED.token)"
            ),
            Backend::MySql => format!(
                "INSERT INTO {f} (id, token) VALUES (1, ?) ON DUPLICATE KEY UPDATE token = GREATEST(token, VALUES(token))"
            ),
        }
    }

    /// MySQL: the columns of the lock tables' unique keys (the primary
    /// key among them), a row each: the table's name, the key's, the
    /// column's, and the length of the prefix of it that is indexed (0 for
    /// the whole column), in each key's order.
    pub(super) fn mysql_unique_keys(&self) -> String {
        format!(
            "SELECT CONVERT(TABLE_NAME USING utf8mb4), CONVERT(INDEX_NAME USING utf8mb4), \
             CONVERT(COLUMN_NAME USING utf8mb4), CAST(COALESCE(SUB_PART, 0) AS SIGNED) \
             FROM information_schema.STATISTICS \
             WHERE TABLE_SCHEMA = {} AND NON_UNIQUE = 0 \
             AND BINARY TABLE_NAME IN (BINARY '{}', BINARY '{}') \
             ORDER BY TABLE_NAME, INDEX_NAME, SEQ_IN_INDEX",
            self.mysql_schema(),
            self.tables.name,
            self.tables.fence_name
        )
    }

    /// MySQL: the columns of both lock tables, a row each: the table's
    /// name, the column's, its type, its collation ('' for none), whether
    /// it may be null, the table's engine and type (`InnoDB/BASE TABLE`:
    /// MariaDB says `SYSTEM VERSIONED` for a table that keeps deleted rows
    /// as history, which neither the columns nor the keys show), the
    /// column's default (`NULL`
    /// for none), and what else it is (`auto_increment`, generated; '' for
    /// nothing); in the tables' order.
    pub(super) fn mysql_columns(&self) -> String {
        format!(
            "SELECT CONVERT(c.TABLE_NAME USING utf8mb4), CONVERT(c.COLUMN_NAME USING utf8mb4), \
             CONVERT(CAST(c.COLUMN_TYPE AS CHAR(255)) USING utf8mb4), CONVERT(COALESCE(c.COLLATION_NAME, '') USING utf8mb4), \
             CONVERT(c.IS_NULLABLE USING utf8mb4), \
             CONVERT(CONCAT(COALESCE(t.ENGINE, ''), '/', COALESCE(t.TABLE_TYPE, '')) USING utf8mb4), \
             CONVERT(CAST(COALESCE(c.COLUMN_DEFAULT, 'NULL') AS CHAR(255)) USING utf8mb4), \
             CONVERT(CAST(c.EXTRA AS CHAR(255)) USING utf8mb4) \
             FROM information_schema.COLUMNS c JOIN information_schema.TABLES t \
             ON t.TABLE_SCHEMA = c.TABLE_SCHEMA AND BINARY t.TABLE_NAME = BINARY c.TABLE_NAME \
             WHERE c.TABLE_SCHEMA = {} \
             AND BINARY c.TABLE_NAME IN (BINARY '{}', BINARY '{}') \
             ORDER BY c.TABLE_NAME, c.ORDINAL_POSITION",
            self.mysql_schema(),
            self.tables.name,
            self.tables.fence_name
        )
    }

    /// MySQL: what else the lock tables have that changes what a write
    /// does, a line each: constraints besides the primary key (checks,
    /// unique and foreign keys) and partitions. No row for tables as
    /// `schema()` makes them.
    pub(super) fn mysql_table_extras(&self) -> String {
        let (schema, entries, fence) = (
            self.mysql_schema(),
            &self.tables.name,
            &self.tables.fence_name,
        );
        format!(
            "SELECT CONVERT(CONCAT(TABLE_NAME, ': ', CASE CONSTRAINT_TYPE \
             WHEN 'UNIQUE' THEN 'unique key' WHEN 'FOREIGN KEY' THEN 'foreign key' \
             WHEN 'CHECK' THEN 'check constraint' ELSE CONSTRAINT_TYPE END, ' ', CONSTRAINT_NAME) \
             USING utf8mb4) FROM information_schema.TABLE_CONSTRAINTS \
             WHERE TABLE_SCHEMA = {schema} AND CONSTRAINT_TYPE <> 'PRIMARY KEY' \
             AND BINARY TABLE_NAME IN (BINARY '{entries}', BINARY '{fence}') \
             UNION ALL \
             SELECT CONVERT(CONCAT(TABLE_NAME, ': partition ', PARTITION_NAME) USING utf8mb4) \
             FROM information_schema.PARTITIONS WHERE TABLE_SCHEMA = {schema} \
             AND PARTITION_NAME IS NOT NULL \
             AND BINARY TABLE_NAME IN (BINARY '{entries}', BINARY '{fence}')"
        )
    }

    /// Whether the entries table exists: one row when it does.
    pub(super) fn table_exists(&self) -> String {
        format!("SELECT 1 FROM {} WHERE 1 = 0", self.tables.entries)
    }

    /// The statements that create the tables, in order, and write the
    /// first epoch marker. Run once, by whoever creates the entries
    /// table: `CREATE TABLE` without `IF NOT EXISTS` fails for everyone
    /// else, so only the creator writes a marker whose epoch began at 0
    /// (no quarantine: nothing was ever granted from a table that did not
    /// exist).
    pub(super) fn create(&self) -> Vec<String> {
        self.create_in(false)
    }

    /// [`create`](Self::create), for a table that this locker found before
    /// and found missing since (`again`): its epoch starts now whatever the
    /// fence table holds, since grants were made from the table dropped.
    pub(super) fn create_in(&self, again: bool) -> Vec<String> {
        let Tables {
            entries,
            fence,
            prefix,
            ..
        } = &self.tables;
        // The first epoch marker: epoch 0 (no quarantine) only when the
        // fence table holds no row yet, so that the entries table never
        // existed before; an entries table dropped and created again beside
        // the old fence table starts its epoch now, in quarantine.
        let now_ms = self.now_ms();
        let epoch = if again {
            now_ms.clone()
        } else {
            format!("CASE WHEN EXISTS (SELECT 1 FROM {fence}) THEN {now_ms} ELSE 0 END")
        };
        let marker = format!(
            "INSERT INTO {entries} (name, uid, kind, deadline, ticket) SELECT '', '', 'e', \
             {epoch}, {}",
            self.identity(false)
        );
        match self.backend {
            // UNLOGGED: no write-ahead log, so a commit waits for no disk
            // flush; after a crash, on a promoted replica, and in a
            // restored backup the table is empty, epoch marker included,
            // which is how the locker knows to quarantine.
            Backend::Postgres => vec![
                format!(
                    "CREATE UNLOGGED TABLE {entries} (\n  \
                     name text COLLATE \"C\" NOT NULL,\n  \
                     uid text COLLATE \"C\" NOT NULL,\n  \
                     kind text NOT NULL,\n  \
                     mode text NOT NULL DEFAULT '',\n  \
                     deadline bigint NOT NULL DEFAULT 0,\n  \
                     granted bigint NOT NULL DEFAULT 0,\n  \
                     ticket text NOT NULL DEFAULT '',\n  \
                     channel text NOT NULL DEFAULT '',\n  \
                     owner text NOT NULL DEFAULT '',\n  \
                     source text NOT NULL DEFAULT '',\n  \
                     stamp text NOT NULL DEFAULT '',\n  \
                     value bytea,\n  \
                     PRIMARY KEY (name, uid, kind)\n)"
                ),
                // Quoted, as the tables are: unquoted, PostgreSQL folds
                // them to lower case, and prefixes that differ only in
                // case would share them.
                format!(
                    "CREATE INDEX \"{prefix}entries_by_deadline\" ON {entries} (deadline) WHERE kind IN ('h', 'q')"
                ),
                format!("CREATE INDEX \"{prefix}entries_by_uid\" ON {entries} (uid) WHERE kind IN ('h', 'q')"),
                format!("CREATE TABLE IF NOT EXISTS {fence} (id int PRIMARY KEY, token bigint NOT NULL)"),
                marker,
                format!("INSERT INTO {fence} (id, token) VALUES (1, 0) ON CONFLICT (id) DO NOTHING"),
            ],
            Backend::MySql => vec![
                format!(
                    "CREATE TABLE {entries} (\n  \
                     name varbinary(1024) NOT NULL,\n  \
                     uid varbinary(255) NOT NULL,\n  \
                     kind char(1) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,\n  \
                     mode char(1) CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT '',\n  \
                     deadline bigint NOT NULL DEFAULT 0,\n  \
                     granted bigint NOT NULL DEFAULT 0,\n  \
                     ticket varchar(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT '',\n  \
                     channel varchar(128) CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT '',\n  \
                     owner varbinary(1024) NOT NULL DEFAULT '',\n  \
                     source varbinary(1024) NOT NULL DEFAULT '',\n  \
                     stamp varchar(40) CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT '',\n  \
                     value blob,\n  \
                     PRIMARY KEY (name, uid, kind),\n  \
                     KEY {prefix}entries_by_deadline (deadline),\n  \
                     KEY {prefix}entries_by_uid (uid)\n) ENGINE=InnoDB"
                ),
                format!(
                    "CREATE TABLE IF NOT EXISTS {fence} (id int PRIMARY KEY, token bigint NOT NULL) ENGINE=InnoDB"
                ),
                marker,
                format!("INSERT IGNORE INTO {fence} (id, token) VALUES (1, 0)"),
            ],
        }
    }

    /// What each connection runs first: read committed (each statement
    /// sees what was committed before it ran, so a load after the row
    /// locks were won sees the previous holder's writes), and a server-side
    /// bound on how long a statement, a lock wait and an idle transaction
    /// may last, so that a client that vanished mid-call cannot keep rows
    /// locked for longer than a call may take (an idle transaction: not on
    /// MySQL, which has no bound for it).
    pub(super) fn session_setup(&self, call_timeout_ms: u64) -> Vec<String> {
        // PostgreSQL takes at most i32::MAX ms (24.8 days) for these.
        let ms = call_timeout_ms.clamp(1, i32::MAX as u64 / 2);
        match self.backend {
            // No sequential scans: every statement of ours reaches rows by
            // a key. A lock table is often nearly empty when autovacuum
            // measures it, and a plan made then (a scan of the whole
            // table, cheapest on one page) stays cached in the session as
            // the table grows, until the next analyze.
            Backend::Postgres => vec![format!(
                "SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL READ COMMITTED; \
                 SET statement_timeout = {ms}; SET lock_timeout = {ms}; \
                 SET enable_seqscan = off; \
                 SET idle_in_transaction_session_timeout = {}",
                ms.saturating_mul(2)
            )],
            // UTC: `UNIX_TIMESTAMP` of a local time depends on the session's
            // zone, and a zone with daylight saving would make the clock
            // jump back an hour once a year.
            Backend::MySql => vec![
                "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED".to_owned(),
                "SET time_zone = '+00:00'".to_owned(),
                // MariaDB also ends a transaction left idle (its client
                // stopped or gone mid-call) after twice the call timeout,
                // as PostgreSQL's idle_in_transaction_session_timeout
                // does; MySQL, which has no such setting, reads the
                // `/*M!` comment as a comment.
                format!(
                    "SET SESSION innodb_lock_wait_timeout = {} \
                     /*M!100300 , idle_transaction_timeout = {} */",
                    ms.div_ceil(1000).max(1),
                    ms.saturating_mul(2).div_ceil(1000).max(1)
                ),
            ],
        }
    }

    /// The server's version, as text.
    pub(super) fn version(&self) -> &'static str {
        match self.backend {
            Backend::Postgres => "SELECT pg_catalog.current_setting('server_version_num') OPERATOR(pg_catalog.||) ' ' OPERATOR(pg_catalog.||) pg_catalog.version()",
            Backend::MySql => "SELECT VERSION()",
        }
    }

    /// How long the server has run, in whole seconds, and its clock in
    /// ms; MySQL only (see `store.rs`). `SHOW GLOBAL STATUS` answers on
    /// MySQL 8 and MariaDB alike. The start computed from them is at or
    /// after the true one, so a quarantine from it never ends early.
    pub(super) fn uptime(&self) -> Option<[&'static str; 2]> {
        match self.backend {
            Backend::Postgres => None,
            Backend::MySql => Some([
                "SHOW GLOBAL STATUS LIKE 'Uptime'",
                "SELECT CAST(UNIX_TIMESTAMP(SYSDATE(3)) * 1000 AS SIGNED)",
            ]),
        }
    }
}

/// The latest moment, in ms of the server's clock `now_ms`, at which a
/// server reporting `uptime_s` can have started. MySQL and MariaDB count
/// their uptime in whole seconds between two clocks that also tick in
/// whole seconds, so a server that started 10 ms ago may already say 1:
/// the start lies within a second either side of `now - uptime`. The
/// quarantine is counted from the latest start possible, so that it never
/// ends before the configured length after the real start.
pub(super) fn latest_start_ms(now_ms: i64, uptime_s: i64) -> i64 {
    now_ms.saturating_sub(uptime_s.saturating_sub(1).max(0).saturating_mul(1000))
}
