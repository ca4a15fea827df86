//! A Redis password that starts with digits and holds an unencoded `?` or
//! `#` (`31415?Secret`): the URL parser reads the user name as the host
//! and the password's digits as the port. Messages name a Redis node by
//! the locker's `host:port`, so none may show a piece of that password.

use std::time::Duration;

use crate::support::{cli, Scratch};

const LIMIT: Duration = Duration::from_secs(20);

#[test]
fn a_redis_password_with_a_question_mark_or_hash_shows_no_piece_in_messages() {
    let dir = Scratch::new("redis-password-read-as-a-port");
    let mut shown = Vec::new();
    for (url, piece) in [
        ("redis://default:31415?Secret@127.0.0.1:1", "31415"),
        ("redis://default:27182#Secret@127.0.0.1:1", "27182"),
    ] {
        for args in [
            vec!["locks", "--redis", url, "--connect-timeout", "1s"],
            vec![
                "run",
                "--redis",
                url,
                "--connect-timeout",
                "1s",
                "--timeout",
                "1s",
                "job",
                "--",
                "true",
            ],
        ] {
            let done = cli(&dir, &args, &[], LIMIT);
            assert_ne!(done.code, Some(0), "{args:?}: {done:?}");
            for (stream, text) in [("stdout", &done.stdout), ("stderr", &done.stderr)] {
                if let Some(line) = text.lines().find(|l| l.contains(piece)) {
                    shown.push(format!(
                        "{url}: {stream} shows {piece:?}, the start of the password: {line}"
                    ));
                }
            }
        }
    }
    assert!(shown.is_empty(), "{shown:#?}");
}
