//! Scenes that set what a whole process shares (`PGPASSWORD`,
//! `PGPASSFILE`, `HOME`) or that the process remembers for good (the
//! secrets it masks): each runs in a process of its own, this binary run
//! again with only that test (`in_own_process`), so one binary serves them
//! all.
#![cfg(feature = "postgres")]

use std::future::Future;
use std::process::Command;

#[path = "../sql_support/fake_postgres.rs"]
mod fake_postgres;
#[path = "../log_capture/mod.rs"]
mod log_capture;
#[path = "../common/ports.rs"]
mod ports;
#[path = "../sql_support/mod.rs"]
mod sql_support;

/// Writes `text` to `file`, readable by its owner only (as libpq requires
/// of a password file).
fn write_private(file: &std::path::Path, text: impl AsRef<[u8]>) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(file, text).expect("write the private file");
    std::fs::set_permissions(file, std::fs::Permissions::from_mode(0o600))
        .expect("make the file private");
}

/// Names the test a process of this binary was started to run alone.
const ALONE: &str = "QUORUM_LOCK_TEST_ALONE";

/// Runs `scene`, the scene of the test named as its `module` (each file
/// holds one test named as the file), in a process of its own: in the
/// process started for this test, runs it; otherwise starts this binary
/// again with only this test and fails, with its output, unless it passes.
fn in_own_process<F, Fut>(module: &str, scene: F)
where
    F: FnOnce() -> Fut,
    Fut: Future<Output = ()>,
{
    // libtest names a test by its path without the crate's name.
    let inner = module.split_once("::").map_or(module, |(_, inner)| inner);
    let test = inner.rsplit("::").next().unwrap_or(inner);
    let path = format!("{inner}::{test}");
    if std::env::var(ALONE).as_deref() == Ok(path.as_str()) {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime for the scene")
            .block_on(scene());
        return;
    }
    let exe = std::env::current_exe().expect("this test binary's path");
    let out = Command::new(exe)
        .args([path.as_str(), "--exact", "--nocapture", "--test-threads=1"])
        .env(ALONE, &path)
        .output()
        .expect("this test binary starts again");
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success() && said.contains("1 passed"),
        "{path}, run in a process of its own, failed ({}):\n{said}",
        out.status
    );
}

mod a_database_refusal_quoting_the_environments_password_does_not_show_it;
mod a_database_refusal_quoting_the_pgpass_files_password_does_not_show_it;
mod a_database_refusal_quoting_the_urls_password_does_not_show_it_beside_a_long_password_file;
mod a_malformed_password_file_line_the_driver_logs_is_not_logged_with_its_password;
mod a_password_file_longer_than_the_secrets_kept_does_not_show_its_first_password;
mod a_refusal_quoting_a_pgpass_password_above_a_latin1_comment_does_not_show_it;
mod a_refusal_quoting_a_pgpass_password_with_an_escaped_colon_does_not_show_it;
mod a_refusal_quoting_the_home_pgpass_password_behind_another_pgpassfile_does_not_show_it;
mod a_refusal_quoting_the_pgpass_password_for_a_url_with_a_capitalised_scheme_does_not_show_it;
mod a_url_without_a_password_hides_no_honest_words_of_the_database;
