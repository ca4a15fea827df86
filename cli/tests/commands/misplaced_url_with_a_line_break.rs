//! A node URL given where the command line takes no URL, whose password
//! holds a line break (as a value pasted from a file may): the usage error,
//! which clap spreads over lines and the command line joins into one, must
//! show no piece of the password, as for any other password.

use std::time::Duration;

use crate::support::{cli, Scratch};

const LIMIT: Duration = Duration::from_secs(20);

#[test]
fn a_usage_error_about_a_misplaced_url_shows_no_piece_of_a_password_with_a_line_break() {
    let dir = Scratch::new("misplaced-url-line-break");
    let mut shown = Vec::new();
    for (args, piece) in [
        (
            vec![
                "locks",
                "postgres://app:pw\nLineBreakSecret1 x@db.internal/locks",
            ],
            "LineBreakSecret1",
        ),
        (
            vec!["status", "redis://:pw\nLineBreakSecret2 x@cache:6379"],
            "LineBreakSecret2",
        ),
    ] {
        let done = cli(&dir, &args, &[], LIMIT);
        assert_ne!(done.code, Some(0), "{args:?}: {done:?}");
        for (stream, text) in [("stdout", &done.stdout), ("stderr", &done.stderr)] {
            if let Some(line) = text.lines().find(|l| l.contains(piece)) {
                shown.push(format!("{args:?}: {stream} shows {piece:?}: {line}"));
            }
        }
    }
    assert!(shown.is_empty(), "{shown:#?}");
}
