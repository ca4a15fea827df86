//! Whether the lock tables found are the ones this library makes, and
//! whom they trust: checked at each setup, before any lock is granted
//! from them.
//!
//! Invariants:
//! - a MySQL or MariaDB locker uses no table whose primary keys, columns
//!   (types, collations, nullability), engine or type (a system-versioned
//!   table keeps deleted rows) differ from `schema()`'s:
//!   a user that may only create tables there could make one first, and
//!   the lockers' calls rely on exact matches (a name stored as written,
//!   a holder's kind read back as written, one row per key);
//! - a PostgreSQL locker names, in a warning, every role other than its
//!   user that owns the lock tables or the schema that holds them: such a
//!   role can break any lock, and is trusted as docs/sql.md says.

use sqlx::pool::PoolConnection;
use sqlx::Any;

use super::Store;
use crate::locker::escape_peer_text;
use crate::sql::dialect::{MYSQL_ENTRY_COLUMNS, MYSQL_FENCE_COLUMNS};
use crate::Error;

impl Store {
    /// Refuses MySQL lock tables that are not as
    /// [`schema()`](crate::sql::schema) makes them: the primary keys
    /// ((name, uid, kind) for the entries, id for the fence), every
    /// column's type, collation and nullability, and the InnoDB engine
    /// (row locks and rollback). MySQL tables have no owner to trust or
    /// warn about.
    pub(super) async fn mysql_shape(&self, conn: &mut PoolConnection<Any>) -> Result<(), Error> {
        let tables = &self.dialect.tables;
        let keys: Vec<(String, String, String, i64)> =
            sqlx::query_as(&self.dialect.mysql_unique_keys())
                .fetch_all(&mut **conn)
                .await
                .map_err(|e| self.error(e))?;
        #[allow(clippy::type_complexity)]
        let columns: Vec<(
            String,
            String,
            String,
            String,
            String,
            String,
            String,
            String,
        )> = sqlx::query_as(&self.dialect.mysql_columns())
            .fetch_all(&mut **conn)
            .await
            .map_err(|e| self.error(e))?;
        let extras: Vec<String> = sqlx::query_scalar(&self.dialect.mysql_table_extras())
            .fetch_all(&mut **conn)
            .await
            .map_err(|e| self.error(e))?;
        if let Some(extra) = extras.first() {
            return Err(self.unavailable(format!(
                "refusing the lock tables: {} is not in quorum_lock::sql::schema()'s tables (a \
                 constraint or a partition changes what the lockers' writes do, so a locker \
                 could grant a held lock again; it was not made by this library: by hand, or \
                 first by another user that may create tables in the database); drop the \
                 tables and let a locker make them, or make them with the statements of schema()",
                escape_peer_text(extra)
            )));
        }
        let expected = [
            (
                &tables.entries,
                tables.name.as_str(),
                "name,uid,kind",
                &MYSQL_ENTRY_COLUMNS[..],
            ),
            (
                &tables.fence,
                tables.fence_name.as_str(),
                "id",
                &MYSQL_FENCE_COLUMNS[..],
            ),
        ];
        for (quoted, name, want_key, want_columns) in expected {
            let key_of = |index: &str| {
                keys.iter()
                    .filter(|(table, key, ..)| table == name && key == index)
                    .map(|(.., column, prefix)| match prefix {
                        0 => column.to_ascii_lowercase(),
                        n => format!("{}({n})", column.to_ascii_lowercase()),
                    })
                    .collect::<Vec<_>>()
                    .join(",")
            };
            let key = key_of("PRIMARY");
            // Any other unique key: the lockers' upserts and `INSERT
            // IGNORE`s take a conflict for their own row's.
            let other_unique = keys
                .iter()
                .find(|(table, key, ..)| table == name && key != "PRIMARY")
                .map(|(_, key, ..)| key.clone());
            let found: Vec<String> = columns
                .iter()
                .filter(|(table, ..)| table == name)
                .map(
                    |(_, column, kind, collation, nullable, _, default, extra)| {
                        column_shape(column, kind, collation, nullable, default, extra)
                    },
                )
                .collect();
            let engine_and_type = columns
                .iter()
                .find(|(table, ..)| table == name)
                .map(|(.., engine, _, _)| engine.to_ascii_lowercase())
                .unwrap_or_default();
            let (engine, table_type) = engine_and_type
                .split_once('/')
                .unwrap_or((engine_and_type.as_str(), ""));
            let want: Vec<String> = want_columns
                .iter()
                .map(|(column, kind, collation, nullable, default)| {
                    let default = default.map_or("NULL".to_owned(), |d| format!("'{d}'"));
                    column_shape(
                        column,
                        kind,
                        collation,
                        if *nullable { "YES" } else { "NO" },
                        &default,
                        "",
                    )
                })
                .collect();
            let differs = if let Some(other) = other_unique {
                Some(format!(
                    "it has a unique key besides its primary key ({})",
                    escape_peer_text(&format!("{other}: {}", key_of(&other)))
                ))
            } else if key != want_key {
                Some(match key.as_str() {
                    "" => "it has no primary key".to_owned(),
                    key => format!("its primary key is ({})", escape_peer_text(key)),
                })
            } else if found != want {
                let first = want
                    .iter()
                    .zip(found.iter().map(Some).chain(std::iter::repeat(None)))
                    .find(|(w, f)| Some(*w) != *f);
                Some(match first {
                    Some((w, Some(f))) => format!("its column {} is not {w}", escape_peer_text(f)),
                    Some((w, None)) => format!("it lacks the column {w}"),
                    None => format!(
                        "it has columns beyond schema()'s: {}",
                        escape_peer_text(&found[want.len()..].join(", "))
                    ),
                })
            } else if engine != "innodb" {
                Some(format!(
                    "its engine is {}, not InnoDB (row locks and rollback)",
                    escape_peer_text(engine)
                ))
            } else if table_type != "base table" {
                // A system-versioned table keeps every deleted row as
                // history: rows the lockers delete (releases, expiry)
                // stay, with each holder's uid, owner and source, and the
                // table grows without bound.
                Some(format!(
                    "it is a {} table, not a plain one (a system-versioned table keeps every \
                     deleted row)",
                    escape_peer_text(table_type)
                ))
            } else {
                None
            };
            if let Some(differs) = differs {
                return Err(self.unavailable(format!(
                    "refusing the lock table {quoted}: {differs}, as quorum_lock::sql::schema() \
                     makes it, so a locker could grant a held lock again (it was not made by \
                     this library: by hand, or first by another user that may create tables \
                     in the database); drop it and let a locker make it, or make it with the \
                     statements of schema()"
                )));
            }
        }
        Ok(())
    }

    /// Warns, by name, of every role other than this locker's user that
    /// owns a lock table (the fence table is made only when missing, so
    /// one another role made first is kept, with its triggers) or the
    /// schema that holds them (its owner may drop the tables and make its
    /// own in their place). A schema owned by a superuser or by the
    /// database's owner is not warned about: those roles may do as much
    /// anyway.
    pub(super) async fn warn_foreign_owners(
        &self,
        conn: &mut PoolConnection<Any>,
    ) -> Result<(), Error> {
        let owners: Vec<(String, String, String)> = sqlx::query_as(
            "SELECT 'table ' OPERATOR(pg_catalog.||) CAST(c.relname AS text), \
                    CAST(pg_catalog.pg_get_userbyid(c.relowner) AS text), CAST(current_user AS text) \
             FROM pg_catalog.pg_class c \
             WHERE c.oid OPERATOR(pg_catalog.=) pg_catalog.to_regclass($1) \
                OR c.oid OPERATOR(pg_catalog.=) pg_catalog.to_regclass($2) \
             UNION ALL \
             SELECT 'schema ' OPERATOR(pg_catalog.||) CAST(n.nspname AS text), \
                    CAST(pg_catalog.pg_get_userbyid(n.nspowner) AS text), CAST(current_user AS text) \
             FROM pg_catalog.pg_class c \
             JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace \
             WHERE c.oid OPERATOR(pg_catalog.=) pg_catalog.to_regclass($1) \
               AND n.nspowner OPERATOR(pg_catalog.<>) c.relowner \
               AND NOT coalesce((SELECT r.rolsuper FROM pg_catalog.pg_roles r \
                                 WHERE r.oid OPERATOR(pg_catalog.=) n.nspowner), false) \
               AND n.nspowner OPERATOR(pg_catalog.<>) coalesce((SELECT d.datdba \
                     FROM pg_catalog.pg_database d \
                     WHERE d.datname OPERATOR(pg_catalog.=) pg_catalog.current_database()), CAST(0 AS oid)) \
               AND pg_catalog.pg_get_userbyid(n.nspowner) OPERATOR(pg_catalog.<>) 'pg_database_owner' \
             ORDER BY 1",
        )
        .bind(self.dialect.tables.entries.as_str())
        .bind(self.dialect.tables.fence.as_str())
        .fetch_all(&mut **conn)
        .await
        .map_err(|e| self.error(e))?;
        for (what, owner, user) in owners.iter().filter(|(_, owner, user)| owner != user) {
            let (what, owner, user) = (
                escape_peer_text(what),
                escape_peer_text(owner),
                escape_peer_text(user),
            );
            tracing::warn!(locker = %self.endpoint,
                "the lock {what} is owned by the role {owner}, not by this locker's user {user}: \
                 that role can break any lock (it may replace the tables, and its triggers on \
                 them run with this user's rights), and the stored functions of the tables' \
                 owner are used; make sure it is one you trust (docs/sql.md, \"What it does not \
                 guarantee\")");
        }
        Ok(())
    }
}

/// One column as the check compares it: name, type (an integer's display
/// width dropped, which MariaDB shows and MySQL 8 does not; `unsigned` or
/// `zerofill` kept), collation, nullability, default (quoted, as MariaDB
/// shows it; `NULL` for none), and what else it is (`auto_increment`,
/// generated: none of the lockers' columns is).
fn column_shape(
    column: &str,
    kind: &str,
    collation: &str,
    nullable: &str,
    default: &str,
    extra: &str,
) -> String {
    let kind = kind.to_ascii_lowercase();
    let kind = match kind.split_once('(') {
        Some((base @ ("bigint" | "int"), rest)) => match rest.split_once(')') {
            Some((width, after)) if width.bytes().all(|b| b.is_ascii_digit()) => {
                format!("{base}{after}")
            }
            _ => kind.clone(),
        },
        _ => kind,
    };
    let null = if nullable.eq_ignore_ascii_case("YES") {
        "null"
    } else {
        "not null"
    };
    // MySQL 8 shows a default unquoted (and '' as nothing), MariaDB quoted.
    let default = match default {
        "NULL" => "NULL".to_owned(),
        d if d.len() >= 2 && d.starts_with('\'') && d.ends_with('\'') => d.to_owned(),
        d => format!("'{d}'"),
    };
    let collate = match collation {
        "" => String::new(),
        collation => format!(" collate {}", collation.to_ascii_lowercase()),
    };
    let extra = match extra.trim() {
        "" => String::new(),
        extra => format!(" {}", extra.to_ascii_lowercase()),
    };
    format!(
        "{} {kind}{collate} {null} default {default}{extra}",
        column.to_ascii_lowercase()
    )
}
