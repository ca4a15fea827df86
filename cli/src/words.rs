//! How the command line quotes what it was given: a lock name in an error,
//! and the command a lock is held for, which listings show as the lock's
//! source. Both stay on one line and within a sane length whatever they
//! contain.

use std::ffi::OsString;

/// The most characters of a name quoted in a message.
const NAME_SHOWN: usize = 64;

/// The most characters of a command line recorded as a lock's source:
/// room for a command and its main arguments, far below the 512 bytes a
/// lock server accepts (a character may take 4).
const COMMAND_SHOWN: usize = 120;

/// `name` quoted for a message: control characters escaped, and after
/// [`NAME_SHOWN`] characters cut, with the length in bytes.
pub fn shown(name: &str) -> String {
    let head: String = name.chars().take(NAME_SHOWN).collect();
    let head: String = head.escape_debug().collect();
    if name.chars().nth(NAME_SHOWN).is_some() {
        format!("'{head}…' ({} bytes)", name.len())
    } else {
        format!("'{head}'")
    }
}

/// What listings show as the source of the locks of `quorum-lock
/// SUBCOMMAND ... -- COMMAND`: `SUBCOMMAND: COMMAND`, its words quoted as
/// a shell would need them, control characters escaped, cut after
/// [`COMMAND_SHOWN`] characters; `SUBCOMMAND` alone without a command.
/// Instead of the code location the library records by default, which is
/// the same for every lock `run` takes.
pub fn source_of(subcommand: &str, command: &[OsString]) -> String {
    if command.is_empty() {
        return subcommand.to_owned();
    }
    let words: Vec<String> = command
        .iter()
        .map(|word| shell_word(&word.to_string_lossy()))
        .collect();
    let line = format!("{subcommand}: {}", words.join(" "));
    if line.chars().nth(COMMAND_SHOWN).is_some() {
        let head: String = line.chars().take(COMMAND_SHOWN).collect();
        format!("{head}…")
    } else {
        line
    }
}

/// `word` as a shell would need it: as it is when it has nothing a shell
/// treats specially, else in single quotes; control characters escaped
/// either way, so that the source stays on one line.
fn shell_word(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_alphanumeric() || "-_./:=@%+,".contains(c));
    let escaped: String = word
        .chars()
        .map(|c| {
            if c.is_control() {
                c.escape_debug().collect()
            } else {
                c.to_string()
            }
        })
        .collect();
    if plain {
        escaped
    } else {
        format!("'{}'", escaped.replace('\'', "'\\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(list: &[&str]) -> Vec<OsString> {
        list.iter().map(OsString::from).collect()
    }

    #[test]
    fn names_are_escaped_and_cut() {
        assert_eq!(shown("backup"), "'backup'");
        assert_eq!(shown("a\nb"), "'a\\nb'");
        let long = "n".repeat(5000);
        assert_eq!(
            shown(&long),
            format!("'{}…' (5000 bytes)", "n".repeat(NAME_SHOWN))
        );
    }

    #[test]
    fn the_source_is_the_command_line_quoted() {
        assert_eq!(
            source_of("run", &words(&["./backup.sh", "--full", "/var/lib/db"])),
            "run: ./backup.sh --full /var/lib/db"
        );
        assert_eq!(
            source_of("run", &words(&["sh", "-c", "exit 4; echo it's"])),
            "run: sh -c 'exit 4; echo it'\\''s'"
        );
        assert_eq!(
            source_of("elect", &words(&["a\nb", ""])),
            "elect: 'a\\nb' ''"
        );
        assert_eq!(source_of("lock", &[]), "lock");
        let long = source_of("run", &words(&[&"x".repeat(1000)]));
        assert_eq!(long.chars().count(), COMMAND_SHOWN + 1, "{long}");
        assert!(long.ends_with('…'), "{long}");
        assert!(long.len() <= 512);
    }
}
