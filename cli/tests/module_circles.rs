//! The command line's modules depend on each other in one direction only:
//! no module of `cli/src` is in an import circle, and no source file is
//! over 800 lines. The checker is the
//! library's (`tests/module_graph`), so both crates follow one rule.

#[path = "../../tests/module_graph/mod.rs"]
mod module_graph;

use std::path::Path;

#[test]
fn no_command_line_module_is_in_an_import_circle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let (graph, circles) = module_graph::check_crate(&src, "main.rs");
    // The parser reads the imports: `run` takes its lock through `target`.
    assert!(
        graph
            .get("run")
            .is_some_and(|edges| edges.contains_key("target")),
        "the graph misses run -> target; the parser is broken"
    );
    assert!(circles.is_empty(), "import circles:\n{circles}");
}

#[test]
fn no_command_line_source_file_is_over_800_lines() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let long = module_graph::long_files(&src, "main.rs", 800);
    assert!(
        long.is_empty(),
        "split these by concept (unit-test modules aside): {long:?}"
    );
    let everything = module_graph::long_files(&src, "main.rs", 0);
    assert!(everything.iter().any(|(f, _)| f == "nodes.rs"));
    assert!(!everything.iter().any(|(f, _)| f == "parser_properties.rs"));
}
