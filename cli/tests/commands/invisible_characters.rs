//! Listings show every invisible format character escaped, as docs/cli.md
//! promises ("a control character, a line or paragraph separator, a
//! bidirectional override or an invisible formatting character is written
//! as an escape"): a lock whose name or owner holds Unicode tag characters
//! (U+E0020 to U+E007F, general category Cf, drawn as nothing) or a
//! shorthand format control (U+1BCA0) must not look like another lock.

use std::time::Duration;

use crate::support::{cli, wait_until, Cli, Scratch, Server};

const LIMIT: Duration = Duration::from_secs(20);

/// Characters of general category Cf (format) that terminals draw as
/// nothing, outside the ranges the escaping covers today.
const INVISIBLE: [char; 4] = ['\u{e0062}', '\u{e0078}', '\u{e0001}', '\u{1bca0}'];

#[test]
fn listings_escape_invisible_format_characters_of_names_and_owners() {
    let dir = Scratch::new("invisible-characters");
    let server = Server::start(&dir, &["--no-quarantine"]);
    let node = server.addr.to_string();
    let token = dir.token();
    let admin = dir.admin();
    // Looks like "backup" held by "ops", but is another lock.
    let name: String = std::iter::once("backup".to_owned())
        .chain(INVISIBLE.iter().map(|c| c.to_string()))
        .collect();
    let owner = format!("ops{}", INVISIBLE[0]);
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

    for view in [&["locks"][..], &["locks", "--per-node"], &["status"]] {
        let mut args = view.to_vec();
        args.extend(["--nodes", &node, "--admin-token-file", &admin]);
        let shown = cli(&dir, &args, &[], LIMIT);
        assert_eq!(shown.code, Some(0), "{view:?}: {shown:?}");
        for c in INVISIBLE {
            assert!(
                !shown.stdout.contains(c),
                "{view:?}: stdout holds the invisible U+{:X} raw, so the lock reads as \
                 another: {:?}",
                u32::from(c),
                shown.stdout
            );
        }
        assert!(
            shown.stdout.contains("\\u{e0062}"),
            "{view:?}: the name's tag character is not shown escaped: {:?}",
            shown.stdout
        );
    }
    drop(holder);
}
