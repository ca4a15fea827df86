//! Redis nodes as lockers (features `redis` and `testing`), against real
//! `redis-server` processes that each test starts on a free loopback port
//! (skipped, saying why, when `redis-server` is not installed, unless
//! `QUORUM_LOCK_REQUIRE_REDIS` is set).

#[cfg(feature = "testing")]
#[path = "../harness/mod.rs"]
mod harness;
#[cfg(all(feature = "redis", feature = "testing"))]
#[path = "../common/ports.rs"]
mod ports;
#[cfg(all(feature = "redis", feature = "testing"))]
#[path = "../redis_support/mod.rs"]
mod redis_support;
#[cfg(all(feature = "redis", feature = "testing"))]
#[path = "../common/six_workers_on_two_permits.rs"]
mod six_workers_on_two_permits;

#[cfg(all(feature = "redis", feature = "testing"))]
mod fake_redis;
#[path = "../log_capture/mod.rs"]
mod log_capture;

mod a_redis_peer_quoting_the_password;
mod election;
mod fastpath;
mod faults;
mod fencing;
mod hostile_run_id_reaches_logs_escaped;
mod hostile_server_connection_checks_in_client_logs;
mod hostile_server_reconnects_in_client_logs;
mod hostile_server_text;
mod locker;
mod node;
mod password_read_as_a_port;
mod safety;
mod semaphore;
mod waiting;
