//! A grant procedure another MariaDB user planted before any locker's
//! setup is never used, however close to this version's it looks: the same
//! body with its parameters' names swapped, a body equal but for the case
//! of one letter, or one made by an account named as the lockers' user but
//! for case.
//!
//! docs/sql.md ("One-round-trip calls"): "On MySQL and MariaDB a locker
//! uses a procedure only when the locker's user made it (its `DEFINER`),
//! with this version's body ... found otherwise (made by another user ...)
//! it is dropped and made again when this user may, else not used." What a
//! procedure does is also its parameter list (the body names the
//! parameters; the call passes them by position), and MariaDB compares
//! account names byte for byte (`'Quorum'` and `'quorum'` are two
//! accounts) while `information_schema` compares text without case.
//!
//! Every scene: mallory has `CREATE ROUTINE` on the database and nothing
//! else (no right to the lock table, no `ALTER ROUTINE`), and acts before
//! any locker's setup (the documented exception is a replacement after
//! it). She makes her grant procedure and the release as schema() gives
//! it, so that both are found; the lockers' user may see others' routines
//! (`SELECT` on `mysql.proc`), as docs/sql.md asks of a user that did not
//! make the procedures. Then one locker holds `res` and another tries it.

use std::time::Duration;

use quorum_lock::sql::{Backend, SqlConfig, SqlLocker};
use sqlx::Connection;

use crate::both::config;
use crate::sql_support::MariaServer;

/// Reproduces a past break: a MariaDB user who may only create routines plants the grant procedure with this version's body but its parameters' names in another order (the first and ninth, `p_name` and `p_source`); the setup compared the body alone, took it for ours, and a held lock was granted twice (the grant wrote its rows under the source).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grant_procedure_planted_with_this_versions_body_but_other_parameters_is_not_used() {
    scene("cp_", "mallory", Plant::SwappedParameters).await;
}

/// Reproduces a past break: a MariaDB user who may only create routines plants the grant procedure with a body that differs from this version's in the case of one letter (the holder written as kind 'H'); the setup's collated comparison took it for ours and a held lock was granted twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grant_procedure_planted_with_a_body_equal_but_for_case_is_not_used() {
    scene("cg_", "mallory", Plant::OneLettersCase).await;
}

/// Reproduces a past break: a MariaDB account whose name differs from the lockers' user only in case ('Quorum' beside 'quorum') plants the grant procedure with swapped parameter names; `DEFINER = CURRENT_USER()` compared under utf8mb3_general_ci, took her for the lockers' user, and a held lock was granted twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_procedure_of_a_user_named_as_ours_but_for_case_is_not_used() {
    scene("cq_", "Quorum", Plant::SwappedParameters).await;
}

/// How mallory's grant procedure differs from this version's.
#[derive(Clone, Copy, Debug)]
enum Plant {
    /// The same body and types; the first and ninth parameters' names
    /// swapped.
    SwappedParameters,
    /// One letter's case changed: the holder is written as kind 'H'.
    OneLettersCase,
}

impl Plant {
    fn apply(self, ours: &str) -> String {
        let planted = match self {
            Plant::SwappedParameters => {
                let (first, ninth) = (
                    "(IN p_name VARBINARY(1024),",
                    "IN p_source VARBINARY(1024), IN p_started",
                );
                assert!(
                    ours.contains(first) && ours.contains(ninth),
                    "control: the grant takes the name first and the source ninth"
                );
                ours.replace(first, "(IN p_source VARBINARY(1024),")
                    .replace(ninth, "IN p_name VARBINARY(1024), IN p_started")
            }
            Plant::OneLettersCase => {
                let holder_row = "VALUES (p_name, p_uid, 'h', p_mode";
                assert!(
                    ours.contains(holder_row),
                    "control: the grant writes a holder of kind 'h'"
                );
                ours.replace(holder_row, "VALUES (p_name, p_uid, 'H', p_mode")
            }
        };
        assert_ne!(planted, ours);
        planted
    }
}

/// Mallory, the account `account`, plants a grant procedure `plant` made
/// of this version's for the tables of `prefix`; a second locker must not
/// be granted `res` while the first holds it.
async fn scene(prefix: &str, account: &str, plant: Plant) {
    let Some(server) = MariaServer::start() else {
        return;
    };
    let settings = || SqlConfig {
        poll_interval: Duration::from_secs(30),
        ..config(prefix, Duration::from_secs(60), Duration::ZERO)
    };
    // This version's grant and release procedures, as schema() gives them.
    let statements = quorum_lock::sql::schema(Backend::MySql, &settings()).expect("the statements");
    let made = |name: &str| {
        statements
            .iter()
            .find(|s| s.starts_with(&format!("CREATE PROCEDURE `{prefix}{name}`")))
            .expect("a procedure's statement")
            .clone()
    };
    let (ours, release) = (made("grant_v2_0"), made("release_v2_0"));
    let planted = plant.apply(&ours);

    server.sql(&format!(
        "CREATE USER '{account}'@'127.0.0.1' IDENTIFIED BY 'mallory-pass';\n\
         GRANT CREATE ROUTINE ON quorum.* TO '{account}'@'127.0.0.1';\n\
         GRANT SELECT ON mysql.proc TO 'quorum'@'127.0.0.1';"
    ));
    sqlx::any::install_default_drivers();
    let mut mallory = sqlx::AnyConnection::connect(&server.url_as(account, "mallory-pass"))
        .await
        .expect("mallory connects");
    sqlx::raw_sql(&planted)
        .execute(&mut mallory)
        .await
        .expect("mallory makes the grant procedure before any locker (CREATE ROUTINE)");
    // The release as schema() gives it: both are found, none is made again.
    sqlx::raw_sql(&release)
        .execute(&mut mallory)
        .await
        .expect("mallory makes the release procedure (CREATE ROUTINE)");
    let _ = mallory.close().await;

    let node = |owner: &str| {
        let locker = SqlLocker::new(&server.url(), settings()).expect("a URL");
        crate::sql_shared::client_of(locker, owner)
    };
    let (holder, thief) = (node("holder"), node("thief"));
    let held = holder
        .rw_mutex(["res"])
        .expect("a name")
        .lock_timeout(Duration::from_secs(10))
        .await
        .expect("res held by the holder");
    let stolen = thief
        .rw_mutex(["res"])
        .expect("a name")
        .lock_timeout(Duration::from_millis(800))
        .await;
    let definer = server.sql(&format!(
        "SELECT DEFINER FROM information_schema.ROUTINES WHERE ROUTINE_SCHEMA = 'quorum' \
         AND ROUTINE_NAME = '{prefix}grant_v2_0';"
    ));
    let rows = server.sql(&format!(
        "SELECT GROUP_CONCAT(CONCAT(name, '/', kind) ORDER BY name, kind SEPARATOR ',') \
         FROM {prefix}entries WHERE kind <> 'e';"
    ));
    assert!(
        stolen.is_err(),
        "`res` was granted to a second holder while the first holds it: the grant procedure \
         '{account}'@'127.0.0.1' (CREATE ROUTINE only) made before the lockers' setup \
         ({plant:?}) was taken for theirs (the grant procedure's definer: {}; the table's \
         rows, name/kind: {})",
        definer.trim(),
        rows.trim()
    );
    held.unlock().await.expect("released");
}
