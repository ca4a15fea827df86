//! Lock, semaphore and election names on the command line: a long one is
//! named by its length (and its first characters), not echoed in full, and
//! one with a control character is refused, saying which and where.

use std::time::Duration;

use crate::support::{cli, Scratch, Server};

const LIMIT: Duration = Duration::from_secs(20);

#[test]
fn long_names_are_quoted_short_and_control_characters_are_refused() {
    let dir = Scratch::new("edges-names");
    let server = Server::start(&dir, &["--no-quarantine"]);
    let list = server.addr.to_string();
    let token = dir.token();
    let long = "n".repeat(5000);
    let run = |extra: &[&str], name: &str| {
        let mut args = vec!["run", "--nodes", &list, "--token-file", &token];
        args.extend_from_slice(extra);
        args.extend([name, "--", "true"]);
        cli(&dir, &args, &[], LIMIT)
    };
    let elect = |name: &str| {
        cli(
            &dir,
            &[
                "elect",
                "--nodes",
                &list,
                "--token-file",
                &token,
                name,
                "v",
                "--",
                "true",
            ],
            &[],
            LIMIT,
        )
    };

    // `run` names the name by its length; `elect` quotes its start too.
    for (what, refused) in [
        ("lock", run(&[], &long)),
        ("semaphore", run(&["--permits", "2"], &long)),
        ("election", elect(&long)),
    ] {
        assert_eq!(refused.code, Some(2), "{what}: {refused:?}");
        assert!(refused.stderr.contains("bytes"), "{what}: {refused:?}");
        assert!(
            refused.stderr.len() < 600,
            "{what}: the name in full: {refused:?}"
        );
    }
    let quoted = format!("'{}…' (5000 bytes)", "n".repeat(64));
    assert!(elect(&long).stderr.contains(&quoted));

    for (what, refused) in [
        ("lock", run(&[], "job\n1")),
        ("semaphore", run(&["--permits", "2"], "job\n1")),
        ("election", elect("job\n1")),
    ] {
        assert_eq!(refused.code, Some(2), "{what}: {refused:?}");
        assert_eq!(refused.stderr.lines().count(), 1, "{what}: {refused:?}");
        for words in [
            "job\\n1",
            "U+000A (line feed) at byte",
            "control characters",
        ] {
            assert!(
                refused.stderr.contains(words),
                "{what}: {words:?}: {refused:?}"
            );
        }
    }
    let escape = run(&[], "\u{1b}[2Jcleared");
    assert_eq!(escape.code, Some(2), "{escape:?}");
    assert!(!escape.stderr.contains('\u{1b}'), "{escape:?}");
    assert!(
        escape.stderr.contains("U+001B (escape) at byte 0"),
        "{escape:?}"
    );
}
