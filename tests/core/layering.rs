//! The coordinator's modules depend on each other in one direction only:
//! each uses only what sits below it, so that what
//! every lock shares lives at the bottom and no import circle can return.

use std::path::Path;

/// Top to bottom, by module path under `src/`. A module may use the ones
/// after it, never those before.
const LAYERS: [(&str, &[&str]); 16] = [
    (
        "groups",
        &[
            "Groups",
            "GroupedMutex",
            "GroupedWriteGuard",
            "GroupedReadGuard",
        ],
    ),
    ("lock::dsync", &["Dsync", "DsyncBuilder"]),
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
    ("lock::mutex", &["DRWMutex"]),
    ("lock::wait_round", &[]),
    ("lock::round", &[]),
    ("lock::guard", &["WriteGuard", "ReadGuard"]),
    ("quorum::fence", &[]),
    ("lock::keeper", &[]),
    ("lock::refresh", &[]),
    ("lock::release", &[]),
    ("lock::wait_status", &["WaitStatus", "WaitReason"]),
    ("lock::acquisition", &[]),
    ("lock::coordinator", &[]),
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

/// Every path a `use` statement names, its groups expanded:
/// `use crate::a::{b, c::{d, e}};` names `crate::a::b`, `crate::a::c::d`
/// and `crate::a::c::e`.
fn expand(statement: &str) -> Vec<String> {
    let body = statement
        .trim_start_matches("pub(crate) ")
        .trim_start_matches("use ")
        .trim_end_matches(';');
    // `a as b` keeps `a`: the rename is marked before spaces go.
    let compact: String = body
        .replace(" as ", "@")
        .chars()
        .filter(|c| !c.is_whitespace())
        .collect();
    let mut out = Vec::new();
    expand_into("", &compact, &mut out);
    out
}

fn expand_into(prefix: &str, tree: &str, out: &mut Vec<String>) {
    match tree.find('{') {
        None => {
            let path = tree.split('@').next().unwrap_or(tree);
            out.push(format!("{prefix}{path}"));
        }
        Some(open) => {
            let head = &tree[..open];
            let inner = &tree[open + 1..tree.len() - 1];
            let mut depth = 0;
            let mut start = 0;
            for (i, c) in inner.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        expand_into(&format!("{prefix}{head}"), &inner[start..i], out);
                        start = i + 1;
                    }
                    _ => {}
                }
            }
            if start < inner.len() {
                expand_into(&format!("{prefix}{head}"), &inner[start..], out);
            }
        }
    }
}

/// Whether `import` reaches `module` (a path under `src/`), by its path or
/// by one of the `names` the crate root re-exports from it.
fn uses(import: &str, module: &str, names: &[&str]) -> bool {
    let module_path = format!("crate::{module}");
    expand(import).iter().any(|path| {
        let rest = path.strip_prefix(&module_path);
        let via_path = rest.is_some_and(|r| r.is_empty() || r.starts_with("::"));
        let via_root = path
            .strip_prefix("crate::")
            .is_some_and(|name| names.contains(&name));
        via_path || via_root
    })
}

/// The source of `module`: `src/{module}.rs`, or every file of the
/// directory `src/{module}/` joined.
fn module_source(src: &Path, module: &str) -> String {
    let module = module.replace("::", "/");
    let file = src.join(format!("{module}.rs"));
    if file.exists() {
        return std::fs::read_to_string(&file)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", file.display()));
    }
    let dir = src.join(&module);
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
            !imports.is_empty() || *module == "lock::coordinator",
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
    let imports = crate_imports(
        "use crate::lock::keeper::Keeper;\nuse crate::{\n    Error, WriteGuard,\n};\n\
         use crate::lock::{guard::Held, mutex::{DRWMutex as M}};\n",
    );
    assert!(uses(&imports[0], "lock::keeper", &[]));
    assert!(!uses(&imports[0], "lock::keep", &[]));
    assert!(uses(
        &imports[1],
        "lock::guard",
        &["WriteGuard", "ReadGuard"]
    ));
    assert!(!uses(
        &imports[1],
        "lock::dsync",
        &["Dsync", "DsyncBuilder"]
    ));
    assert!(uses(&imports[2], "lock::guard", &[]));
    assert!(uses(&imports[2], "lock::mutex", &[]));
    assert!(!uses(&imports[2], "lock::dsync", &[]));
    let renamed = crate_imports("use crate::{WriteGuard as Guard};\n");
    assert!(uses(&renamed[0], "lock::guard", &["WriteGuard"]));
}

#[path = "../module_graph/mod.rs"]
mod module_graph;

use module_graph::{build_graph, check_crate, cycles, long_files, report, ModuleFile};

#[test]
fn no_library_module_is_in_an_import_circle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let (graph, circles) = check_crate(&src, "lib.rs");
    // The parser reads the imports: a module far down is used from above.
    assert!(
        graph
            .get("lock::mutex")
            .is_some_and(|edges| edges.contains_key("lock::guard")),
        "the graph misses lock::mutex -> lock::guard; the parser is broken"
    );
    assert!(circles.is_empty(), "import circles:\n{circles}");
}

#[test]
fn no_library_source_file_is_over_800_lines() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let long = long_files(&src, "lib.rs", 800);
    assert!(
        long.is_empty(),
        "split these by concept (unit-test modules aside): {long:?}"
    );
    // Test modules are left out, not everything: a file over the limit
    // that is no test module is found.
    let everything = long_files(&src, "lib.rs", 0);
    assert!(everything.iter().any(|(f, _)| f == "local/table.rs"));
    assert!(!everything.iter().any(|(f, _)| f == "local/tests/queues.rs"));
}

fn planted(files: &[(&str, &str)]) -> Vec<ModuleFile> {
    files
        .iter()
        .map(|(file, source)| ModuleFile {
            module: module_graph::module_path(file, "lib.rs"),
            file: (*file).to_owned(),
            source: (*source).to_owned(),
        })
        .collect()
}

#[test]
fn the_circle_checker_finds_planted_circles_and_nothing_else() {
    let files = planted(&[
        (
            "lib.rs",
            "mod a;\nmod d;\nmod e;\nmod clean;\npub use d::{Dee as Renamed};\n",
        ),
        // a <-> a::inner: the parent names the child's type by its path,
        // the child uses the parent's.
        (
            "a/mod.rs",
            "mod inner;\npub struct Config;\nfn f() -> crate::a::inner::Thing { todo!() }\n",
        ),
        ("a/inner.rs", "use super::Config;\npub struct Thing;\n"),
        // d <-> e: through a root re-export one way, a path in code back.
        ("d.rs", "pub struct Dee;\nfn f() { crate::e::g(); }\n"),
        ("e.rs", "use crate::Renamed;\npub fn g() {}\n"),
        // Paths in comments, strings and test modules make no edges.
        (
            "clean.rs",
            "// crate::a::Config\nconst S: &str = \"crate::d::Dee\";\n\
             /* use crate::e::g; */\n\
             #[cfg(test)]\nmod tests {\n    use crate::a::Config;\n    use super::*;\n}\n\
             pub(in crate::d) fn h<'a>(x: &'a str) -> char { let _ = x; 'c' }\n",
        ),
    ]);
    let graph = build_graph(&files);
    let found = cycles(&graph);
    assert_eq!(
        found,
        vec![
            vec!["a".to_owned(), "a::inner".to_owned()],
            vec!["d".to_owned(), "e".to_owned()],
        ],
        "{}",
        report(&graph, &found)
    );
    assert!(graph["clean"].is_empty(), "{:?}", graph["clean"]);
    let text = report(&graph, &found);
    assert!(
        text.contains("a::inner -> a: super::Config (a/inner.rs:1)"),
        "{text}"
    );
    assert!(text.contains("e -> d: crate::Renamed (e.rs:1)"), "{text}");
    assert!(text.contains("d -> e: crate::e::g (d.rs:2)"), "{text}");
}
