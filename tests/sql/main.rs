//! SQL databases as lockers: real PostgreSQL and MariaDB servers that each
//! test starts in a temporary directory on a free loopback port (skipped,
//! saying why, when the server is not installed, unless
//! `QUORUM_LOCK_REQUIRE_SQL` is set).

#[cfg(feature = "testing")]
#[path = "../harness/mod.rs"]
mod harness;
#[path = "../log_capture/mod.rs"]
mod log_capture;
#[path = "../common/ports.rs"]
mod ports;
#[path = "../sql_support/mod.rs"]
mod sql_support;

mod servers;

#[cfg(feature = "postgres")]
mod text_before_a_scheme_never_shows;

#[cfg(feature = "postgres")]
mod a_database_refusal_quoting_a_query_password_does_not_show_it;
#[cfg(feature = "postgres")]
mod a_database_refusal_quoting_a_url_password_with_tabs_does_not_show_it;
#[cfg(feature = "postgres")]
mod a_database_refusal_quoting_the_password_does_not_show_it;
#[cfg(feature = "postgres")]
mod a_database_refusal_to_make_the_stored_functions_reaches_the_log_escaped;
#[cfg(feature = "postgres")]
mod a_log_crate_logger_keeps_receiving_events_after_a_postgres_lockers_call;
#[cfg(feature = "postgres")]
mod a_password_a_postgres_server_quotes_back_is_not_logged_with_it;
#[cfg(feature = "postgres")]
mod a_search_path_refusal_naming_a_hostile_schema_reaches_the_log_escaped;
#[cfg(feature = "postgres")]
mod a_statement_naming_a_hostile_schema_reaches_the_log_escaped_whatever_it_holds;
#[cfg(feature = "postgres")]
#[path = "../sql_support/fake_postgres.rs"]
mod fake_postgres;

#[cfg(feature = "mysql")]
mod a_mysql_driver_error_quoting_the_password_after_the_login_is_not_logged_with_it;
#[cfg(feature = "mysql")]
mod a_mysql_refusal_after_the_login_reaches_the_log_escaped_and_cut;
#[cfg(feature = "mysql")]
mod a_refusal_of_a_connection_a_doorbell_ring_opens_is_not_logged_raw;
#[cfg(feature = "mysql")]
#[path = "../sql_support/fake_mysql.rs"]
mod fake_mysql;

#[cfg(all(feature = "postgres", feature = "mysql", feature = "testing"))]
mod a_connection_opened_before_the_pin_stays_on_the_search_path;
#[cfg(all(feature = "postgres", feature = "mysql", feature = "testing"))]
mod a_doorbell_procedure_replaced_by_another_user_runs_with_no_lockers_rights;
#[cfg(all(feature = "postgres", feature = "mysql", feature = "testing"))]
mod a_fence_table_another_role_made_first_is_reported_by_the_lockers;
#[cfg(all(feature = "postgres", feature = "mysql", feature = "testing"))]
mod a_fence_table_another_user_made_with_an_auto_increment_token_is_not_used;
#[cfg(all(feature = "postgres", feature = "mysql", feature = "testing"))]
mod a_grant_function_another_postgres_role_made_is_not_used;
#[cfg(all(feature = "postgres", feature = "mysql", feature = "testing"))]
mod a_grant_procedure_another_mariadb_user_planted_is_not_used;
#[cfg(all(feature = "postgres", feature = "mysql", feature = "testing"))]
mod a_grant_racing_a_reset_of_the_table_waits_out_the_quarantine;
#[cfg(all(feature = "postgres", feature = "mysql", feature = "testing"))]
mod a_hand_made_release_function_acts_on_its_own_schemas_table;
#[cfg(all(feature = "postgres", feature = "mysql", feature = "testing"))]
mod a_lock_table_another_user_made_in_another_shape_is_not_used;
#[cfg(all(feature = "postgres", feature = "mysql", feature = "testing"))]
mod a_mariadb_waiter_of_another_locker_is_woken_at_its_turn;
#[cfg(all(feature = "postgres", feature = "mysql", feature = "testing"))]
mod a_mariadb_waiter_on_two_names_polls_without_locking;
#[cfg(all(feature = "postgres", feature = "mysql", feature = "testing"))]
mod a_postgres_locker_without_its_listen_connection_still_grants;
#[cfg(all(feature = "postgres", feature = "mysql", feature = "testing"))]
mod a_refusal_of_a_search_path_is_not_told_for_a_database_that_is_down;
#[cfg(all(feature = "postgres", feature = "mysql", feature = "testing"))]
mod a_release_grants_its_lockers_own_waiter_in_its_own_transaction;
#[cfg(all(feature = "postgres", feature = "mysql", feature = "testing"))]
mod a_release_runs_on_the_tables_of_its_own_locker;
#[cfg(all(feature = "postgres", feature = "mysql", feature = "testing"))]
mod a_release_under_a_schema_reads_no_table_through_the_search_path;
#[cfg(all(feature = "postgres", feature = "mysql", feature = "testing"))]
mod a_schema_another_role_made_first_is_reported_by_the_lockers;
#[cfg(all(feature = "postgres", feature = "mysql", feature = "testing"))]
mod a_second_process_of_one_application_finds_the_table_its_first_is_pinned_to;
#[cfg(all(feature = "postgres", feature = "mysql", feature = "testing"))]
mod a_stopped_caller_on_mariadb_frees_its_rows;
#[cfg(all(feature = "postgres", feature = "mysql", feature = "testing"))]
mod a_table_appearing_earlier_on_the_search_path_splits_no_locker;
#[cfg(all(feature = "postgres", feature = "mysql", feature = "testing"))]
mod a_table_reset_on_every_call_is_logged_a_line_a_second;
#[cfg(all(feature = "postgres", feature = "mysql", feature = "testing"))]
mod a_user_with_the_documented_privileges_can_unlock;
#[cfg(all(feature = "postgres", feature = "mysql", feature = "testing"))]
mod an_entries_table_made_again_beside_a_fence_table_another_user_made_is_quarantined;
#[cfg(all(feature = "postgres", feature = "mysql", feature = "testing"))]
mod an_object_another_role_makes_in_public_does_not_run_in_the_lockers_queries;
#[cfg(all(feature = "postgres", feature = "mysql", feature = "testing"))]
mod an_operator_another_role_makes_in_the_lock_schema_does_not_move_the_lockers_clock;
#[cfg(all(feature = "postgres", feature = "mysql", feature = "testing"))]
mod an_overload_another_role_adds_beside_the_grant_function_does_not_stop_grants;
#[cfg(all(feature = "postgres", feature = "mysql", feature = "testing"))]
mod each_locker_gets_and_keeps_tables_of_its_own;
#[cfg(all(feature = "postgres", feature = "mysql", feature = "testing"))]
mod faults;
#[cfg(all(feature = "postgres", feature = "mysql", feature = "testing"))]
mod fencing_marks_restores_and_extremes;
#[cfg(all(feature = "postgres", feature = "mysql", feature = "testing"))]
mod kept_connections;
#[cfg(all(feature = "postgres", feature = "mysql", feature = "testing"))]
mod lock_tables_owned_by_another_role_are_reported_by_the_lockers;
#[cfg(all(feature = "postgres", feature = "mysql", feature = "testing"))]
mod locker;
#[cfg(all(feature = "postgres", feature = "mysql", feature = "testing"))]
mod mallory;
#[cfg(all(feature = "postgres", feature = "mysql", feature = "testing"))]
mod one_round_trip_calls_on_mariadb;
#[cfg(all(feature = "postgres", feature = "mysql", feature = "testing"))]
mod one_round_trip_releases_on_postgres;
#[cfg(all(feature = "postgres", feature = "mysql", feature = "testing"))]
mod one_statement_grants_and_epochs;
#[cfg(all(feature = "postgres", feature = "mysql", feature = "testing"))]
mod prefixes_differing_in_case_share_one_set_of_mariadb_procedures;
#[cfg(all(feature = "postgres", feature = "mysql", feature = "testing"))]
mod releases_on_mariadb_read_only_their_own_rows;
#[cfg(all(feature = "postgres", feature = "mysql", feature = "testing"))]
mod safety;
#[cfg(all(feature = "postgres", feature = "mysql", feature = "testing"))]
mod sql_shared;
#[cfg(all(feature = "postgres", feature = "mysql", feature = "testing"))]
mod tables_made_by_hand_keep_serving_a_locker_that_may_not_create;

#[cfg(all(feature = "postgres", feature = "mysql", feature = "testing"))]
pub use both::Servers;

#[cfg(all(feature = "postgres", feature = "mysql", feature = "testing"))]
mod both {
    use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
    use std::time::Duration;

    use quorum_lock::sql::SqlConfig;

    use crate::sql_support::{MariaServer, PgServer};

    /// One PostgreSQL and one MariaDB server for a test, stopped when it
    /// is dropped; each node of a test is its own pair of tables on one of
    /// them.
    pub struct Servers {
        pg_server: Mutex<PgServer>,
        maria_server: Mutex<MariaServer>,
        pub pg: String,
        pub maria: String,
    }

    fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
        mutex.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// How long one delete of [`Servers::try_reset`] waits for a row that
    /// a locker's call holds, and how long all its attempts may take: a
    /// call holds its rows for at most its timeout (2 s here), a
    /// transaction its client left idle for twice that.
    const RESET_LOCK_WAIT_S: u64 = 5;
    const RESET_WITHIN: Duration = Duration::from_secs(20);

    impl Servers {
        /// Both servers, or `None` (and a note) when one is not installed.
        pub fn start() -> Option<Arc<Servers>> {
            let pg = PgServer::start()?;
            let maria = MariaServer::start()?;
            Some(Arc::new(Servers {
                pg: pg.url(),
                maria: maria.url(),
                pg_server: Mutex::new(pg),
                maria_server: Mutex::new(maria),
            }))
        }

        pub fn pg_server(&self) -> MutexGuard<'_, PgServer> {
            lock(&self.pg_server)
        }

        pub fn maria_server(&self) -> MutexGuard<'_, MariaServer> {
            lock(&self.maria_server)
        }

        /// Runs `statement` on the server behind `url`, as its superuser.
        pub async fn run(self: &Arc<Self>, url: &str, statement: String) -> String {
            let failed = |e| panic!("{url}: {statement:?}: {e}");
            self.try_run(url, statement.clone())
                .await
                .unwrap_or_else(failed)
        }

        /// [`run`](Self::run), with the client tool's message as the error
        /// when the statement fails.
        pub async fn try_run(
            self: &Arc<Self>,
            url: &str,
            statement: String,
        ) -> Result<String, String> {
            let (this, pg) = (self.clone(), url.starts_with("postgres"));
            tokio::task::spawn_blocking(move || {
                if pg {
                    this.pg_server().try_psql(&statement)
                } else {
                    this.maria_server().try_sql(&statement)
                }
            })
            .await
            .expect("the client tool ran")
        }

        /// Deletes every row of the entries table `prefix` on `url`, epoch
        /// marker included: what a crash does to PostgreSQL's unlogged
        /// table, and what a failover or a restore can do. Panics when
        /// [`try_reset`](Self::try_reset) cannot.
        pub async fn reset(self: &Arc<Self>, url: &str, prefix: &str) {
            if let Err(e) = self.try_reset(url, prefix).await {
                panic!("{e}");
            }
        }

        /// [`reset`](Self::reset), or why it could not within
        /// [`RESET_WITHIN`].
        ///
        /// The delete locks every row, in its own order, while the
        /// lockers' calls lock a name's rows in theirs: the database may
        /// pick the delete as a deadlock's victim and roll it back whole,
        /// or the delete may wait for a call's rows. It waits at most
        /// [`RESET_LOCK_WAIT_S`] at a time and runs again, as an operator
        /// would; one that cannot get through in [`RESET_WITHIN`] says
        /// who held the rows (the server's open transactions), since only
        /// a call or a transaction left open past its bound could.
        pub async fn try_reset(self: &Arc<Self>, url: &str, prefix: &str) -> Result<(), String> {
            let pg = url.starts_with("postgres");
            let wait = if pg {
                format!("SET lock_timeout = '{RESET_LOCK_WAIT_S}s';")
            } else {
                format!("SET SESSION innodb_lock_wait_timeout = {RESET_LOCK_WAIT_S};")
            };
            let statement = format!("{wait} DELETE FROM {prefix}entries");
            let started = std::time::Instant::now();
            let mut attempts = 0;
            loop {
                attempts += 1;
                let e = match self.try_run(url, statement.clone()).await {
                    Ok(_) => return Ok(()),
                    Err(e) => e,
                };
                let lower = e.to_ascii_lowercase();
                let contended = lower.contains("deadlock")
                    || lower.contains("lock timeout")
                    || lower.contains("lock wait timeout");
                if contended && started.elapsed() < RESET_WITHIN {
                    continue;
                }
                let open = if pg {
                    "SELECT pid, state, now() - xact_start, left(query, 200) FROM pg_stat_activity \
                     WHERE xact_start IS NOT NULL AND pid <> pg_backend_pid()"
                } else {
                    "SELECT trx_mysql_thread_id, trx_state, trx_started, NOW(), trx_rows_locked, \
                     LEFT(trx_query, 200) FROM information_schema.innodb_trx"
                };
                let holders = self
                    .try_run(url, open.to_owned())
                    .await
                    .unwrap_or_else(|e| format!("(could not list them: {e})"));
                return Err(format!(
                    "{url}: {statement:?} failed after {attempts} attempts in {:?}: {e}\n\
                     the server's open transactions:\n{holders}",
                    started.elapsed()
                ));
            }
        }
    }

    /// A node's settings in these tests: short validity and call timeout.
    /// The call timeout is 2 s: 400 ms let the first calls of a server just
    /// started (the locker's setup among them) time out in CI, beside the
    /// release builds; a scene that times calls out on purpose sets its own.
    pub fn config(prefix: &str, validity: Duration, quarantine: Duration) -> SqlConfig {
        SqlConfig {
            table_prefix: prefix.to_owned(),
            validity,
            quarantine,
            call_timeout: Duration::from_secs(2),
            poll_interval: Duration::from_millis(20),
            ..SqlConfig::default()
        }
    }
}
