//! The coordinator's modules depend on each other in one direction only:
//! each uses only what sits below it, so that what
//! every lock shares lives at the bottom and no import circle can return.

use std::path::Path;

/// Top to bottom. A module may use the ones after it, never those before.
const LAYERS: [(&str, &[&str]); 15] = [
    ("dsync", &["Dsync", "DsyncBuilder"]),
    (
        "election",
        &[
            "Election",
            "Leadership",
            "Observer",
            "Leader",
            "ELECTION_PREFIX",
        ],
    ),
    (
        "semaphore",
        &[
            "Semaphore",
            "SemaphorePermit",
            "MAX_PERMITS",
            "SEMAPHORE_PREFIX",
        ],
    ),
    ("reentrant", &["Holder", "ReentrantGuard"]),
    ("mutex", &["DRWMutex"]),
    ("wait_round", &[]),
    ("round", &[]),
    ("guard", &["WriteGuard", "ReadGuard"]),
    ("fence", &[]),
    ("keeper", &[]),
    ("refresh", &[]),
    ("release", &[]),
    ("wait_status", &["WaitStatus", "WaitReason"]),
    ("acquisition", &[]),
    ("coordinator", &[]),
];

/// The `use crate::...` statements of a source file, joined per statement,
/// with comments left out.
fn crate_imports(source: &str) -> Vec<String> {
    let code: Vec<&str> = source
        .lines()
        .map(str::trim)
        .filter(|l| !l.starts_with("//"))
        .collect();
    let mut imports = Vec::new();
    let mut current: Option<String> = None;
    for line in code {
        if let Some(statement) = current.as_mut() {
            statement.push_str(line);
        } else if line.starts_with("use crate::") || line.starts_with("pub(crate) use crate::") {
            current = Some(line.to_owned());
        }
        if current.as_deref().is_some_and(|s| s.ends_with(';')) {
            imports.extend(current.take());
        }
    }
    imports
}

fn uses(import: &str, module: &str, names: &[&str]) -> bool {
    let words: Vec<&str> = import
        .split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .filter(|w| !w.is_empty())
        .collect();
    let via_path = words.windows(2).any(|w| w[0] == "crate" && w[1] == module);
    via_path || names.iter().any(|n| words.contains(n))
}

/// The source of `module`: `src/{module}.rs`, or every file of the
/// directory `src/{module}/` joined.
fn module_source(src: &Path, module: &str) -> String {
    let file = src.join(format!("{module}.rs"));
    if file.exists() {
        return std::fs::read_to_string(&file)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", file.display()));
    }
    let dir = src.join(module);
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .map(|entry| entry.expect("a directory entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "rs"))
        .collect();
    files.sort();
    files
        .iter()
        .map(|p| {
            std::fs::read_to_string(p)
                .unwrap_or_else(|e| panic!("cannot read {}: {e}", p.display()))
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn coordinator_modules_only_use_what_sits_below_them() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut breaches = Vec::new();
    for (depth, (module, _)) in LAYERS.iter().enumerate() {
        let imports = crate_imports(&module_source(&src, module));
        assert!(
            !imports.is_empty() || *module == "coordinator",
            "{module}: found no imports; the parser is broken"
        );
        for (higher, names) in &LAYERS[..depth] {
            for import in imports.iter().filter(|i| uses(i, higher, names)) {
                breaches.push(format!("{module} uses {higher}: {import}"));
            }
        }
    }
    assert!(
        breaches.is_empty(),
        "imports that point upwards:\n{}",
        breaches.join("\n")
    );
}

#[test]
fn the_checker_sees_an_upward_import() {
    let imports =
        crate_imports("use crate::keeper::Keeper;\nuse crate::{\n    Error, WriteGuard,\n};\n");
    assert!(uses(&imports[0], "keeper", &[]));
    assert!(uses(&imports[1], "guard", &["WriteGuard", "ReadGuard"]));
    assert!(!uses(&imports[1], "dsync", &["Dsync", "DsyncBuilder"]));
}
