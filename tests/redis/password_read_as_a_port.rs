//! A Redis URL whose password starts with digits and holds an unencoded
//! `?` or `#` (`redis://default:31415?Secret@cache:6379`): the URL parser
//! reads the user name as the host and the password's digits as the port.
//! `endpoint()`, `Debug` and errors name the node by `host:port` only, and
//! a password never appears in them (docs/redis.md), so none may show a
//! piece of that password. No server is needed: the locker is only made.
#![cfg(feature = "redis")]

use quorum_lock::redis::{RedisConfig, RedisLocker};
use quorum_lock::NetLocker;

#[test]
fn a_password_with_a_question_mark_or_hash_shows_no_piece_in_endpoint_or_debug() {
    let mut shown = Vec::new();
    for (url, piece) in [
        ("redis://default:31415?Secret@cache.internal:6379", "31415"),
        ("redis://default:27182#Secret@cache.internal:6379", "27182"),
        ("rediss://app:16180?Tail@cache.internal:6380/0", "16180"),
    ] {
        match RedisLocker::new(url, RedisConfig::default()) {
            Ok(locker) => {
                let endpoint = locker.endpoint();
                if endpoint.contains(piece) {
                    shown.push(format!("{url}: endpoint() is {endpoint:?}"));
                }
                let debug = format!("{locker:?}");
                if debug.contains(piece) {
                    shown.push(format!("{url}: Debug is {debug}"));
                }
            }
            Err(err) => {
                if err.to_string().contains(piece) {
                    shown.push(format!("{url}: the error is {err}"));
                }
            }
        }
    }
    assert!(shown.is_empty(), "pieces of passwords shown: {shown:#?}");
}
