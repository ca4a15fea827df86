//! Text that comes from a lock server (owners, sources, uids and names in
//! listings, error replies, a handshake's rejection) reaches the terminal
//! escaped, whatever it holds: no escape sequence, bell, DEL, C1 control
//! or bidirectional override gets through raw, and a newline in it cannot
//! forge a row. JSON output keeps the text exact, with the same characters
//! written as `\uXXXX`.

use std::time::Duration;

use serde_json::Value;

use crate::support::hostile::{HostileServer, Welcome, HOSTILE};
use crate::support::{cli, Finished, Scratch};

const LIMIT: Duration = Duration::from_secs(20);

/// The first character of `text` a terminal would act on, other than the
/// newlines that end its lines.
fn raw_control(text: &str) -> Option<char> {
    text.chars().find(|&c| {
        (c.is_control() && c != '\n')
            || matches!(c, '\u{2028}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
    })
}

/// Asserts that neither stream of `run` holds a raw control character or
/// a line forged by a newline in the peer's text.
fn assert_safe(what: &str, run: &Finished) {
    for (stream, text) in [("stdout", &run.stdout), ("stderr", &run.stderr)] {
        if let Some(c) = raw_control(text) {
            panic!(
                "{what}: {stream} holds the raw character U+{:04X}: {text:?}",
                u32::from(c)
            );
        }
        for line in text.lines() {
            assert!(
                !line.trim_start().starts_with("forged-row")
                    && !line.trim_start().starts_with("second-forged-row"),
                "{what}: {stream} has a forged row: {text:?}"
            );
        }
    }
}

fn admin(dir: &Scratch, args: &[&str]) -> Finished {
    let admin = dir.admin();
    let mut all = args.to_vec();
    all.extend(["--admin-token-file", &admin]);
    cli(dir, &all, &[], LIMIT)
}

#[test]
fn listings_show_a_hostile_servers_text_escaped_on_one_row() {
    let dir = Scratch::new("peer-text-listings");
    let server = HostileServer::start(Welcome::Admin);
    let node = server.addr.to_string();

    for view in [&["locks"][..], &["locks", "--per-node"], &["status"]] {
        let mut args = view.to_vec();
        args.extend(["--nodes", &node]);
        let shown = admin(&dir, &args);
        assert_eq!(shown.code, Some(0), "{view:?}: {shown:?}");
        assert_safe(&format!("{view:?}"), &shown);
        // Still shown, escaped: nothing of it is dropped.
        for escaped in [
            "bob\\u{1b}]0;pwned\\u{7}\\u{1b}[2J\\u{7f}\\u{9b}31m\\u{202e}gpj.exe\\r\\nforged-row",
            "uid\\u{1b}]0;x\\u{7}",
            "src\\u{202e}\\nsecond-forged-row",
            "reports\\u{1b}[8m",
        ] {
            assert!(
                shown.stdout.contains(escaped),
                "{view:?}: {escaped:?} missing: {}",
                shown.stdout
            );
        }
    }
    // The merged listing: the header and the one lock, one row each.
    let listed = admin(&dir, &["locks", "--nodes", &node]);
    assert_eq!(listed.stdout.lines().count(), 2, "{}", listed.stdout);

    for command in ["locks", "status"] {
        let json = admin(&dir, &[command, "--nodes", &node, "--output", "json"]);
        assert_eq!(json.code, Some(0), "{command}: {json:?}");
        assert_safe(&format!("{command} --output json"), &json);
        // The text is exact once the JSON is read.
        let doc: Value = serde_json::from_str(&json.stdout).expect("one JSON document");
        let entry = match command {
            "locks" => &doc["locks"][0],
            _ => &doc["nodes"][0]["locks"][0],
        };
        assert_eq!(entry["owner"], HOSTILE, "{command}: {doc}");
        assert_eq!(entry["source"], "src\u{202e}\nsecond-forged-row");
    }
}

#[test]
fn errors_and_rejections_from_a_hostile_server_are_shown_escaped() {
    let dir = Scratch::new("peer-text-errors");
    let answering = HostileServer::start(Welcome::Admin);
    let rejecting = HostileServer::start(Welcome::Reject);
    let token = dir.token();

    // Every lock call is answered with an error holding the text.
    let node = answering.addr.to_string();
    let run = cli(
        &dir,
        &[
            "run",
            "--nodes",
            &node,
            "--token-file",
            &token,
            "-n",
            "job",
            "--",
            "true",
        ],
        &[],
        LIMIT,
    );
    assert_ne!(run.code, Some(0), "{run:?}");
    assert!(run.stderr.contains("\\u{1b}]0;pwned"), "{run:?}");
    assert_safe("run against a server that answers errors", &run);

    // The handshake is rejected with the text as the reason.
    let node = rejecting.addr.to_string();
    for command in [
        &["status", "--nodes", &node][..],
        &["locks", "--nodes", &node],
        &["status", "--health", "--nodes", &node],
    ] {
        let refused = admin(&dir, command);
        assert_ne!(refused.code, Some(0), "{command:?}: {refused:?}");
        // A rejection that is not about the token is the server out of
        // reach for now: its reason is in the status table (stdout), or
        // in the error.
        assert!(
            refused.stderr.contains("\\u{1b}]0;pwned")
                || refused.stdout.contains("\\u{1b}]0;pwned"),
            "{command:?}: the reason is not shown: {refused:?}"
        );
        assert_safe(&format!("{command:?} against a rejecting server"), &refused);
    }
    let run = cli(
        &dir,
        &[
            "run",
            "--nodes",
            &node,
            "--token-file",
            &token,
            "-n",
            "job",
            "--",
            "true",
        ],
        &[],
        LIMIT,
    );
    assert_ne!(run.code, Some(0), "{run:?}");
    assert_safe("run against a rejecting server", &run);
}
