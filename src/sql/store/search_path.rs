//! PostgreSQL with no schema configured: which schema a locker's
//! connections use. Each is kept, as the pool opens it, on the schema where
//! this process's first connection found the entries table (see
//! [`pin_search_path`]), so the transaction and the stored routines act on
//! one table.

/// Keeps a new PostgreSQL connection of a locker with no schema configured
/// on one schema (`SET search_path`): the one where this process's first
/// connection found the entries table `table` on its search path (or, none
/// holding it yet, its first schema, where the setup makes it). Every
/// connection of the process so uses one table, and the stored routines,
/// which name that schema, act on it too. A search path on which more than
/// one schema holds the table is refused: which of them other processes of
/// the application use cannot be known, and two tables would be two
/// writers on one name.
pub(super) async fn pin_search_path(
    conn: &mut sqlx::AnyConnection,
    table: &str,
    pin: &std::sync::OnceLock<String>,
) -> Result<(), sqlx::Error> {
    let holding: Vec<String> = sqlx::query_scalar(
        "SELECT CAST(n.nspname AS text) FROM pg_catalog.pg_class c \
         JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace \
         WHERE c.relname OPERATOR(pg_catalog.=) $1 AND n.nspname OPERATOR(pg_catalog.=) ANY (pg_catalog.current_schemas(false)) \
         ORDER BY pg_catalog.array_position(pg_catalog.current_schemas(false), n.nspname)",
    )
    .bind(table)
    .fetch_all(&mut *conn)
    .await?;
    if holding.len() > 1 {
        return Err(sqlx::Error::Configuration(Box::new(Ambiguous(format!(
            "the table {table} is in more than one schema on the search path ({}): which one \
             every process of the application uses cannot be known; set SqlConfig::schema",
            // Names the database gave: escaped, for the driver's log too.
            crate::locker::escape_peer_text(&holding.join(", "))
        )))));
    }
    let schema = match holding.into_iter().next() {
        Some(schema) => schema,
        None => {
            sqlx::query_scalar::<_, String>("SELECT CAST(pg_catalog.current_schema() AS text)")
                .fetch_one(&mut *conn)
                .await?
        }
    };
    let pinned = pin.get_or_init(|| schema);
    // The name goes as a bound value, not in the statement's text: the
    // driver logs statements, and a name the database chose may hold line
    // breaks or escape sequences (a hostile server's, or a role's).
    sqlx::query("SELECT pg_catalog.set_config('search_path', $1, false)")
        .bind(format!("\"{}\"", pinned.replace('"', "\"\"")))
        .execute(&mut *conn)
        .await?;
    Ok(())
}

/// A refusal of a search path that could lead to two tables.
#[derive(Debug)]
pub(super) struct Ambiguous(pub(super) String);

impl std::fmt::Display for Ambiguous {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Ambiguous {}

tokio::task_local! {
    /// The call (`Store::bounded`) whose task is opening a connection: the
    /// pool runs `after_connect` within the poll of the call that asked
    /// for the connection, so a refusal found there reaches that call.
    pub(super) static REFUSED_NOW: std::sync::Arc<RefusedNow>;
}

/// A refusal that trying again cannot change, told to the call that met it
/// while the pool would go on trying until its timeout.
#[derive(Default)]
pub(super) struct RefusedNow {
    reason: std::sync::OnceLock<String>,
    told: tokio::sync::Notify,
}

impl RefusedNow {
    /// The refusal, once one is met.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: the reason stays until it is read.
    pub(super) async fn told(&self) -> String {
        loop {
            // Registered before the check: a refusal in between wakes it.
            let told = self.told.notified();
            if let Some(reason) = self.reason.get() {
                return reason.clone();
            }
            told.await;
        }
    }
}

/// Tells the call under way on this task, if any, that its connection was
/// refused for `reason`.
pub(super) fn refuse_this_call(reason: &str) {
    // Outside a call (the pool's own upkeep) no one waits on the refusal.
    let _ = REFUSED_NOW.try_with(|refused| {
        let _ = refused.reason.set(reason.to_owned());
        refused.told.notify_waiters();
    });
}
