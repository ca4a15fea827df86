//! A value that holds a password (`password@host`, which the command line
//! treats as a URL typed without its scheme) given to a duration flag: the
//! usage error quotes the value without its password, and must not show a
//! piece of it either. The duration parser's own message quotes the
//! letters after the leading number as an unknown time unit.

use std::time::Duration;

use crate::support::{cli, Scratch};

const LIMIT: Duration = Duration::from_secs(20);

#[test]
fn a_password_given_to_a_duration_flag_never_shows_in_the_usage_error() {
    let dir = Scratch::new("duration-errors-show-no-password");
    let mut shown = Vec::new();
    for args in [
        vec!["run", "--timeout", "7Hunter2Secret@cache", "--", "true"],
        vec!["status", "--interval", "2Hunter2Secret@cache:6379"],
        vec!["lock", "--validity", "3Hunter2Secret@cache", "job"],
    ] {
        let done = cli(&dir, &args, &[], LIMIT);
        assert_eq!(done.code, Some(2), "{args:?}: {done:?}");
        for (stream, text) in [("stdout", &done.stdout), ("stderr", &done.stderr)] {
            if let Some(line) = text.lines().find(|l| l.contains("Hunter")) {
                shown.push(format!("{args:?}: {stream} shows the password: {line}"));
            }
        }
    }
    assert!(shown.is_empty(), "{}", shown.join("\n"));
}
