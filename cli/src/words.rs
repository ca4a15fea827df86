//! How the command line quotes what it was given, such as a lock name in
//! an error: on one line and within a sane length whatever it contains.

/// The most characters of a name quoted in a message.
const NAME_SHOWN: usize = 64;

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

#[cfg(test)]
mod tests {
    use super::*;

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
}
