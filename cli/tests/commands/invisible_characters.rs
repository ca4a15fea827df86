//! Listings must not let two different locks read alike. docs/cli.md
//! promises that "a control character, a line or paragraph separator, a
//! bidirectional override or an invisible formatting character is written
//! as an escape". The lockers accept such characters in names and owners,
//! so a lock named `backup` + an invisible character would show as a
//! second `backup` row unless it is escaped. Two kinds are checked:
//! - format characters (general category Cf) drawn as nothing: Unicode
//!   tag characters (U+E0020 to U+E007F) and a shorthand format control
//!   (U+1BCA0);
//! - "default ignorable" characters of other categories that terminals
//!   also draw as nothing: variation selectors (U+FE00 to U+FE0F, U+E0100
//!   to U+E01EF), the combining grapheme joiner (U+034F), the Mongolian
//!   free variation selectors (U+180B to U+180D) and the Hangul fillers
//!   (U+115F, U+3164).

use std::time::Duration;

use crate::support::{cli, wait_until, Cli, Scratch, Server};

const LIMIT: Duration = Duration::from_secs(20);

#[test]
fn listings_escape_invisible_format_characters_of_names_and_owners() {
    let shown = listings_of_a_lock_named_backup_with(
        "invisible-characters",
        &['\u{e0062}', '\u{e0078}', '\u{e0001}', '\u{1bca0}'],
    );
    for (view, stdout) in shown {
        assert!(
            stdout.contains("\\u{e0062}"),
            "{view}: the name's tag character is not shown escaped: {stdout:?}"
        );
    }
}

#[test]
fn listings_escape_invisible_variation_selectors_and_joiners_in_names_and_owners() {
    listings_of_a_lock_named_backup_with(
        "default-ignorable-characters",
        &['\u{fe0f}', '\u{34f}', '\u{e0100}', '\u{180b}', '\u{3164}'],
    );
}

/// Holds a lock that looks like "backup" held by "ops" but has `hidden`
/// after its name and the first of them after its owner; checks that
/// `locks`, `locks --per-node` and `status` list it with none of them raw,
/// and returns what each printed.
fn listings_of_a_lock_named_backup_with(test: &str, hidden: &[char]) -> Vec<(String, String)> {
    let dir = Scratch::new(test);
    let server = Server::start(&dir, &["--no-quarantine"]);
    let node = server.addr.to_string();
    let token = dir.token();
    let admin = dir.admin();
    let name: String = std::iter::once("backup".to_owned())
        .chain(hidden.iter().map(|c| c.to_string()))
        .collect();
    let owner = format!("ops{}", hidden[0]);
    let holder = Cli::spawn(
        &dir,
        &[
            "lock",
            "--nodes",
            &node,
            "--token-file",
            &token,
            "--owner",
            &owner,
            &name,
        ],
        &[],
    );
    wait_until(LIMIT, "the lock is granted", || {
        holder.stdout_so_far().contains("uid=")
    });

    let mut printed = Vec::new();
    for view in [&["locks"][..], &["locks", "--per-node"], &["status"]] {
        let mut args = view.to_vec();
        args.extend(["--nodes", &node, "--admin-token-file", &admin]);
        let shown = cli(&dir, &args, &[], LIMIT);
        assert_eq!(shown.code, Some(0), "{view:?}: {shown:?}");
        assert!(
            shown.stdout.contains("backup"),
            "{view:?}: the lock is not listed: {:?}",
            shown.stdout
        );
        for &c in hidden {
            assert!(
                !shown.stdout.contains(c),
                "{view:?}: stdout holds the invisible U+{:X} raw, so the lock reads as \
                 another: {:?}",
                u32::from(c),
                shown.stdout
            );
        }
        printed.push((format!("{view:?}"), shown.stdout));
    }
    drop(holder);
    printed
}
