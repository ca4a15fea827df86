//! The module dependency graph of a crate's sources, read from the files:
//! which module uses which, through `use crate::..` and `use super::..`
//! statements and `crate::a::b` and `super::a` paths written in code, comments and string
//! literals left out. Each path goes to the longest prefix that is a
//! module; a name the crate root brings in (`pub use a::b::Name;`) goes to
//! the module that defines it. The crate root and `#[cfg(test)]` modules
//! (inline ones and their files) are left out.
//!
//! Shared by the library's layering test and the command line's, so that
//! both crates are held to the same rule: no import circles.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// One module's source, as the graph reads it.
pub struct ModuleFile {
    /// Its path under the crate root: `lock::mutex`; empty for the root.
    pub module: String,
    /// Where it came from, for the report.
    pub file: String,
    pub source: String,
}

/// One import that makes an edge: the file and line, and the path written.
#[derive(Clone, Debug)]
pub struct Evidence {
    pub file: String,
    pub line: usize,
    pub path: String,
}

/// Module -> the modules it uses, with one import that shows each edge.
pub type Graph = BTreeMap<String, BTreeMap<String, Evidence>>;

/// Every `.rs` file under `src`, named by its module path: `src/a/b.rs`
/// and `src/a/b/mod.rs` are `a::b`; `root_file` (`lib.rs` or `main.rs`)
/// is the root, with the empty path.
pub fn read_crate(src: &Path, root_file: &str) -> Vec<ModuleFile> {
    let mut files = Vec::new();
    collect_rs(src, &mut files);
    files.sort();
    files
        .into_iter()
        .map(|path| {
            let relative = path
                .strip_prefix(src)
                .expect("a file under src")
                .to_string_lossy()
                .replace('\\', "/");
            let source = std::fs::read_to_string(&path)
                .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
            ModuleFile {
                module: module_path(&relative, root_file),
                file: relative,
                source,
            }
        })
        .collect()
}

fn collect_rs(dir: &Path, out: &mut Vec<PathBuf>) {
    let entries =
        std::fs::read_dir(dir).unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()));
    for entry in entries {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            collect_rs(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// `a/b.rs` and `a/b/mod.rs` -> `a::b`; the root file -> "".
pub fn module_path(relative: &str, root_file: &str) -> String {
    if relative == root_file {
        return String::new();
    }
    let stem = relative.trim_end_matches(".rs");
    let stem = stem.strip_suffix("/mod").unwrap_or(stem);
    stem.replace('/', "::")
}

/// The source with comments and the insides of string and character
/// literals blanked out, lines kept, so that what is left is code.
pub fn code_only(source: &str) -> String {
    let chars: Vec<char> = source.chars().collect();
    let mut out = String::with_capacity(source.len());
    let blank = |c: char| if c == '\n' { '\n' } else { ' ' };
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        let prev_ident = i > 0 && is_ident(chars[i - 1]);
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                out.push(' ');
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    depth += 1;
                    out.push_str("  ");
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    out.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    out.push(blank(chars[i]));
                    i += 1;
                }
            }
        } else if (c == 'r' || (c == 'b' && next == Some('r')))
            && !prev_ident
            && raw_start(&chars, i)
        {
            // r"..", r#".."#, br".."
            let mut j = i + if c == 'b' { 2 } else { 1 };
            let mut hashes = 0;
            while chars.get(j) == Some(&'#') {
                hashes += 1;
                j += 1;
            }
            j += 1; // the opening quote
            while j < chars.len() {
                if chars[j] == '"' && (1..=hashes).all(|k| chars.get(j + k) == Some(&'#')) {
                    j += 1 + hashes;
                    break;
                }
                j += 1;
            }
            out.extend(chars[i..j.min(chars.len())].iter().map(|&c| blank(c)));
            i = j;
        } else if c == '"' {
            out.push(' ');
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                if chars[i] == '\\' {
                    out.push(' ');
                    i += 1;
                }
                if i < chars.len() {
                    out.push(blank(chars[i]));
                    i += 1;
                }
            }
            out.push(' ');
            i += 1;
        } else if c == '\'' {
            // A character literal ('a', '\n', '\u{1F600}'), or a lifetime.
            let end = if next == Some('\\') {
                (i + 2..chars.len()).find(|&j| chars[j] == '\'')
            } else if chars.get(i + 2) == Some(&'\'') {
                Some(i + 2)
            } else {
                None
            };
            match end {
                Some(end) => {
                    out.extend(std::iter::repeat_n(' ', end + 1 - i));
                    i = end + 1;
                }
                None => {
                    out.push(c);
                    i += 1;
                }
            }
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

fn raw_start(chars: &[char], i: usize) -> bool {
    let mut j = i + if chars[i] == 'b' { 2 } else { 1 };
    while chars.get(j) == Some(&'#') {
        j += 1;
    }
    chars.get(j) == Some(&'"')
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

#[derive(Debug, Clone, PartialEq)]
struct Token {
    text: String,
    line: usize,
}

fn tokens(code: &str) -> Vec<Token> {
    let mut out = Vec::new();
    for (n, line) in code.lines().enumerate() {
        let chars: Vec<char> = line.chars().collect();
        let mut i = 0;
        while i < chars.len() {
            let c = chars[i];
            if c.is_whitespace() {
                i += 1;
            } else if is_ident(c) || c == '$' {
                let start = i;
                i += 1;
                while i < chars.len() && is_ident(chars[i]) {
                    i += 1;
                }
                let text: String = chars[start..i].iter().collect();
                // `$crate` in a macro is the crate.
                let text = if text == "$crate" {
                    "crate".into()
                } else {
                    text
                };
                out.push(Token { text, line: n + 1 });
            } else if c == ':' && chars.get(i + 1) == Some(&':') {
                out.push(Token {
                    text: "::".into(),
                    line: n + 1,
                });
                i += 2;
            } else {
                out.push(Token {
                    text: c.to_string(),
                    line: n + 1,
                });
                i += 1;
            }
        }
    }
    out
}

/// What one file says: the paths it uses (relative to where they are
/// written), the child modules it declares, and which of those are tests.
#[derive(Default, Debug)]
pub struct FileFacts {
    /// (inline module nesting, path as written, line)
    pub paths: Vec<(Vec<String>, String, usize)>,
    /// Child modules declared with `mod x;`, test ones included.
    pub children: BTreeSet<String>,
    /// Child modules declared `#[cfg(test)] mod x;`.
    pub test_children: BTreeSet<String>,
    /// Names the file's `use` statements bring in: alias -> path written.
    pub imported: Vec<(String, String)>,
}

/// Reads the facts of one file's code; the insides of `#[cfg(test)]`
/// inline modules are left out.
pub fn file_facts(source: &str) -> FileFacts {
    let toks = tokens(&code_only(source));
    let mut facts = FileFacts::default();
    // Inline modules we are in: (name, brace depth inside it, is a test).
    let mut inline: Vec<(String, usize, bool)> = Vec::new();
    let mut depth = 0usize;
    let mut pending_test = false;
    let mut i = 0;
    let in_test = |inline: &Vec<(String, usize, bool)>| inline.iter().any(|m| m.2);
    while i < toks.len() {
        let t = toks[i].text.as_str();
        match t {
            "#" => {
                // An attribute: `#[..]` or `#![..]`.
                let mut j = i + 1;
                if toks.get(j).is_some_and(|t| t.text == "!") {
                    j += 1;
                }
                if toks.get(j).is_some_and(|t| t.text == "[") {
                    let mut level = 0;
                    let start = j;
                    while j < toks.len() {
                        match toks[j].text.as_str() {
                            "[" => level += 1,
                            "]" => {
                                level -= 1;
                                if level == 0 {
                                    break;
                                }
                            }
                            _ => {}
                        }
                        j += 1;
                    }
                    let attr = &toks[start..j.min(toks.len())];
                    let is_cfg = attr.get(1).is_some_and(|t| t.text == "cfg");
                    // `cfg(test)`, `cfg(all(test, ..))`, not `cfg(not(test))`.
                    let has_test = attr.iter().any(|t| t.text == "test");
                    let has_not = attr.iter().any(|t| t.text == "not");
                    if is_cfg && has_test && !has_not {
                        pending_test = true;
                    }
                    i = j + 1;
                    continue;
                }
                i += 1;
            }
            "mod" => {
                let name = toks.get(i + 1).map(|t| t.text.clone()).unwrap_or_default();
                match toks.get(i + 2).map(|t| t.text.as_str()) {
                    Some(";") => {
                        if !in_test(&inline) && inline.is_empty() {
                            facts.children.insert(name.clone());
                            if pending_test {
                                facts.test_children.insert(name);
                            }
                        }
                        pending_test = false;
                        i += 3;
                    }
                    Some("{") => {
                        depth += 1;
                        inline.push((name, depth, pending_test));
                        pending_test = false;
                        i += 3;
                    }
                    _ => i += 1,
                }
            }
            "{" => {
                depth += 1;
                pending_test = false;
                i += 1;
            }
            "}" => {
                if inline.last().is_some_and(|m| m.1 == depth) {
                    inline.pop();
                }
                depth = depth.saturating_sub(1);
                pending_test = false;
                i += 1;
            }
            ";" => {
                pending_test = false;
                i += 1;
            }
            "use" => {
                let line = toks[i].line;
                let mut j = i + 1;
                let mut text = String::new();
                while j < toks.len() && toks[j].text != ";" {
                    let part = toks[j].text.as_str();
                    if part == "as" {
                        text.push_str(" as ");
                    } else {
                        text.push_str(part);
                    }
                    j += 1;
                }
                // A `#[cfg(test)] use` is test code, like a test module.
                if !in_test(&inline) && !pending_test {
                    let nesting: Vec<String> = inline.iter().map(|m| m.0.clone()).collect();
                    for (path, alias) in expand_use(&text) {
                        if inline.is_empty() {
                            facts.imported.push((alias, path.clone()));
                        }
                        // Edges come from `use crate::..` and `use super::..`;
                        // the root's own `use child::..` names its items.
                        if path.starts_with("crate::") || path.starts_with("super::") {
                            facts.paths.push((nesting.clone(), path, line));
                        }
                    }
                }
                pending_test = false;
                i = j + 1;
            }
            "crate" | "super" => {
                // `pub(in crate::a)` names a module without using it.
                let after_in = i > 0 && toks[i - 1].text == "in";
                let after_sep = i > 0 && toks[i - 1].text == "::";
                if toks.get(i + 1).is_some_and(|t| t.text == "::")
                    && !after_in
                    && !after_sep
                    && !in_test(&inline)
                {
                    let (path, end) = read_path(&toks, i);
                    let nesting: Vec<String> = inline.iter().map(|m| m.0.clone()).collect();
                    facts.paths.push((nesting, path, toks[i].line));
                    i = end;
                } else {
                    i += 1;
                }
            }
            _ => i += 1,
        }
    }
    facts
}

/// `a::b::c` from the tokens at `start`, and the index after it.
fn read_path(toks: &[Token], start: usize) -> (String, usize) {
    let mut path = toks[start].text.clone();
    let mut j = start + 1;
    while j + 1 < toks.len()
        && toks[j].text == "::"
        && is_ident(toks[j + 1].text.chars().next().unwrap_or(' '))
    {
        path.push_str("::");
        path.push_str(&toks[j + 1].text);
        j += 2;
    }
    (path, j)
}

/// Every path a `use` tree names, with the name it binds:
/// `a::{b, c::{d as e}}` names `a::b` (bound as `b`) and `a::c::d` (`e`).
pub fn expand_use(tree: &str) -> Vec<(String, String)> {
    let compact: String = tree
        .replace(" as ", "@")
        .chars()
        .filter(|c| !c.is_whitespace())
        .collect();
    let compact = compact.trim_start_matches("::").to_owned();
    let mut out = Vec::new();
    expand_into("", &compact, &mut out);
    out
}

fn expand_into(prefix: &str, tree: &str, out: &mut Vec<(String, String)>) {
    match tree.find('{') {
        None => {
            let mut parts = tree.splitn(2, '@');
            let path = format!("{prefix}{}", parts.next().unwrap_or(tree));
            // `a::{self}` is `a`.
            let path = path.strip_suffix("::self").unwrap_or(&path).to_owned();
            let alias = parts
                .next()
                .map(str::to_owned)
                .unwrap_or_else(|| path.rsplit("::").next().unwrap_or("").to_owned());
            if !path.is_empty() {
                out.push((path, alias));
            }
        }
        Some(open) => {
            let head = &tree[..open];
            let inner = &tree[open + 1..tree.len().saturating_sub(1).max(open + 1)];
            let mut level = 0;
            let mut start = 0;
            for (i, c) in inner.char_indices() {
                match c {
                    '{' => level += 1,
                    '}' => level -= 1,
                    ',' if level == 0 => {
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

/// The module graph of a crate's files: edges between modules other than
/// the root, test modules left out.
pub fn build_graph(files: &[ModuleFile]) -> Graph {
    let facts: Vec<FileFacts> = files.iter().map(|f| file_facts(&f.source)).collect();
    // Test modules: children declared `#[cfg(test)] mod x;`, and all under them.
    let mut test_modules = BTreeSet::new();
    for (file, facts) in files.iter().zip(&facts) {
        for child in &facts.test_children {
            test_modules.insert(join(&file.module, child));
        }
    }
    let is_test = |module: &str| {
        test_modules
            .iter()
            .any(|t| module == t || module.starts_with(&format!("{t}::")))
    };
    let modules: BTreeSet<String> = files.iter().map(|f| f.module.clone()).collect();
    let children: BTreeMap<&str, &BTreeSet<String>> = files
        .iter()
        .zip(&facts)
        .map(|(f, facts)| (f.module.as_str(), &facts.children))
        .collect();
    // Names the root brings in (re-exports, mostly): name -> absolute path.
    let mut root_names: BTreeMap<String, Vec<String>> = BTreeMap::new();
    if let Some(root) = files.iter().position(|f| f.module.is_empty()) {
        for (alias, path) in &facts[root].imported {
            if let Some(abs) = absolute(path, &[], "", &[], children.get("").copied()) {
                root_names.insert(alias.clone(), abs);
            }
        }
    }
    let mut graph = Graph::new();
    for (file, facts) in files.iter().zip(&facts) {
        if file.module.is_empty() || is_test(&file.module) {
            continue;
        }
        let own_children = children.get(file.module.as_str()).copied();
        let here: Vec<String> = file.module.split("::").map(str::to_owned).collect();
        let edges = graph.entry(file.module.clone()).or_default();
        for (nesting, path, line) in &facts.paths {
            let Some(abs) = absolute(path, &here, &file.module, nesting, own_children) else {
                continue;
            };
            let Some(target) = resolve(&abs, &modules, &root_names, 0) else {
                continue;
            };
            if target == file.module || target.is_empty() || is_test(&target) {
                continue;
            }
            edges.entry(target).or_insert_with(|| Evidence {
                file: file.file.clone(),
                line: *line,
                path: path.clone(),
            });
        }
    }
    graph
}

fn join(parent: &str, child: &str) -> String {
    if parent.is_empty() {
        child.to_owned()
    } else {
        format!("{parent}::{child}")
    }
}

/// The crate-absolute segments of `path` as written in module `here`
/// (inside the inline modules `nesting`), or `None` when it does not
/// start in this crate (`std::`, `tokio::`, a local name).
fn absolute(
    path: &str,
    here: &[String],
    module: &str,
    nesting: &[String],
    children: Option<&BTreeSet<String>>,
) -> Option<Vec<String>> {
    let segments: Vec<&str> = path.split("::").collect();
    let mut base: Vec<String> = if module.is_empty() {
        Vec::new()
    } else {
        here.to_vec()
    };
    base.extend(nesting.iter().cloned());
    let mut rest = &segments[..];
    match rest.first().copied() {
        Some("crate") => {
            base.clear();
            rest = &rest[1..];
        }
        Some("super") => {
            while rest.first() == Some(&"super") {
                base.pop()?;
                rest = &rest[1..];
            }
        }
        Some(first) => {
            // The root's `use child::..`, written without `crate::`.
            if !(module.is_empty() && children.is_some_and(|c| c.contains(first))) {
                return None;
            }
        }
        None => return None,
    }
    base.extend(rest.iter().map(|s| (*s).to_owned()));
    Some(base)
}

/// The module an absolute path lands in: its longest prefix that is a
/// module, or, for a name at the root, the module that name comes from.
fn resolve(
    abs: &[String],
    modules: &BTreeSet<String>,
    root_names: &BTreeMap<String, Vec<String>>,
    hops: usize,
) -> Option<String> {
    for len in (1..=abs.len()).rev() {
        let candidate = abs[..len].join("::");
        if modules.contains(&candidate) {
            return Some(candidate);
        }
    }
    let name = abs.first()?;
    let target = root_names.get(name)?;
    if hops > 4 || target.as_slice() == abs {
        return None;
    }
    let mut full = target.clone();
    full.extend(abs[1..].iter().cloned());
    resolve(&full, modules, root_names, hops + 1)
}

/// The strongly connected components of more than one module, each
/// sorted, in a stable order (Tarjan's algorithm).
pub fn cycles(graph: &Graph) -> Vec<Vec<String>> {
    struct State<'g> {
        graph: &'g Graph,
        index: BTreeMap<&'g str, usize>,
        low: BTreeMap<&'g str, usize>,
        stack: Vec<&'g str>,
        on_stack: BTreeSet<&'g str>,
        next: usize,
        out: Vec<Vec<String>>,
    }
    fn visit<'g>(s: &mut State<'g>, v: &'g str) {
        s.index.insert(v, s.next);
        s.low.insert(v, s.next);
        s.next += 1;
        s.stack.push(v);
        s.on_stack.insert(v);
        if let Some(edges) = s.graph.get(v) {
            for w in edges.keys() {
                let w = w.as_str();
                if !s.index.contains_key(w) {
                    visit(s, w);
                    let low = s.low[v].min(s.low[w]);
                    s.low.insert(v, low);
                } else if s.on_stack.contains(w) {
                    let low = s.low[v].min(s.index[w]);
                    s.low.insert(v, low);
                }
            }
        }
        if s.low[v] == s.index[v] {
            let mut component = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                component.push(w.to_owned());
                if w == v {
                    break;
                }
            }
            if component.len() > 1 {
                component.sort();
                s.out.push(component);
            }
        }
    }
    let mut state = State {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        next: 0,
        out: Vec::new(),
    };
    for v in graph.keys() {
        if !state.index.contains_key(v.as_str()) {
            visit(&mut state, v);
        }
    }
    state.out.sort();
    state.out
}

/// Each circle with the edges inside it and one import per edge.
pub fn report(graph: &Graph, cycles: &[Vec<String>]) -> String {
    let mut text = String::new();
    for component in cycles {
        text.push_str(&format!("circle: {}\n", component.join(", ")));
        for from in component {
            for (to, evidence) in &graph[from] {
                if component.contains(to) {
                    text.push_str(&format!(
                        "  {from} -> {to}: {} ({}:{})\n",
                        evidence.path, evidence.file, evidence.line
                    ));
                }
            }
        }
    }
    text
}

/// The circles of the crate whose sources are in `src`, as a report, or
/// an empty string when there are none.
pub fn check_crate(src: &Path, root_file: &str) -> (Graph, String) {
    let files = read_crate(src, root_file);
    assert!(
        files.len() > 1,
        "{}: found no modules; wrong directory?",
        src.display()
    );
    let graph = build_graph(&files);
    let found = cycles(&graph);
    let text = report(&graph, &found);
    (graph, text)
}

/// The files of the crate in `src` longer than `limit` lines, test modules
/// (`#[cfg(test)] mod x;` and all under them) left out, each with its count.
pub fn long_files(src: &Path, root_file: &str, limit: usize) -> Vec<(String, usize)> {
    let files = read_crate(src, root_file);
    let mut tests = BTreeSet::new();
    for file in &files {
        for child in file_facts(&file.source).test_children {
            tests.insert(join(&file.module, &child));
        }
    }
    files
        .iter()
        .filter(|f| {
            !tests
                .iter()
                .any(|t| f.module == *t || f.module.starts_with(&format!("{t}::")))
        })
        .map(|f| (f.file.clone(), f.source.lines().count()))
        .filter(|(_, lines)| *lines > limit)
        .collect()
}
