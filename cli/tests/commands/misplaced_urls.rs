//! A node URL given where the command line takes no URL (its flag left
//! out, a flag mistyped): the usage error names what is wrong without
//! showing the password the URL carries, as every other message does;
//! also a password that holds a line break and a space (as a value pasted
//! from a file may), whose piece after the break was shown once clap's
//! lines were joined into one.

use std::time::Duration;

use crate::support::{cli, Scratch};

const LIMIT: Duration = Duration::from_secs(20);

#[test]
fn usage_errors_about_a_misplaced_node_url_show_no_password() {
    let dir = Scratch::new("misplaced-urls");
    let mut shown = Vec::new();
    for (args, secret) in [
        // `--nodes` left out.
        (
            vec!["locks", "postgres://app:LeftOutSecret1@db.internal/locks"],
            "LeftOutSecret1",
        ),
        (
            vec!["status", "redis://:LeftOutSecret2@cache:6379"],
            "LeftOutSecret2",
        ),
        (
            vec![
                "force-unlock",
                "--uid",
                "u",
                "mysql://app:LeftOutSecret3@db/locks",
            ],
            "LeftOutSecret3",
        ),
        // A mistyped flag with its value attached.
        (
            vec!["locks", "--ndoes=postgres://app:TypoSecret4@db/locks"],
            "TypoSecret4",
        ),
        // A line break and a space in the password.
        (
            vec![
                "locks",
                "postgres://app:pw\nLineBreakSecret5 x@db.internal/locks",
            ],
            "LineBreakSecret5",
        ),
        (
            vec!["status", "redis://:pw\nLineBreakSecret6 x@cache:6379"],
            "LineBreakSecret6",
        ),
    ] {
        let done = cli(&dir, &args, &[], LIMIT);
        assert_ne!(done.code, Some(0), "{args:?}: {done:?}");
        for (stream, text) in [("stdout", &done.stdout), ("stderr", &done.stderr)] {
            if let Some(line) = text.lines().find(|l| l.contains(secret)) {
                shown.push(format!("{args:?}: {stream} shows the password: {line}"));
            }
        }
    }
    assert!(shown.is_empty(), "{shown:#?}");
}
