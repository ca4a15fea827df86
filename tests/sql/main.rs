//! SQL databases as lockers: real PostgreSQL and MariaDB servers that each
//! test starts in a temporary directory on a free loopback port (skipped,
//! saying why, when the server is not installed, unless
//! `QUORUM_LOCK_REQUIRE_SQL` is set).

#[path = "../sql_support/mod.rs"]
mod sql_support;

mod servers;
