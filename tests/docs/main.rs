//! Checks the repository's Markdown documents (std only, nothing fetched):
//!
//! * every relative link `[text](path)`, `[text](path#anchor)` and
//!   reference definition `[label]: path` names a file or folder that
//!   exists, inside the repository;
//! * every `#anchor`, in the same document or in another `.md` file,
//!   matches a heading there, by GitHub's rules for heading ids;
//! * no document names a path of a developer's machine (`/work/...`,
//!   `/root/...`, `/home/...`), not even in a code block. `/tmp/...` is
//!   allowed: it is the same on every machine.
//!
//! External links (`http:`, `https:`, `mailto:`) are not fetched. Links in
//! code blocks and code spans are not links and are not checked. Every
//! failure names the file, the line and the link.

use std::collections::HashMap;
use std::fs;
use std::path::{Component, Path, PathBuf};

/// Folders never walked: build output, version control, and the raw output
/// of benchmark runs (dated folders under `benches/results/`).
fn skipped(dir: &Path, root: &Path) -> bool {
    let name = dir.file_name().and_then(|n| n.to_str()).unwrap_or("");
    if name == "target" || name.starts_with('.') || name == "node_modules" {
        return true;
    }
    let rel = dir.strip_prefix(root).unwrap_or(dir);
    let parent_is_results = rel.parent() == Some(Path::new("benches/results"));
    parent_is_results && is_dated(name)
}

/// `2026-11-24` and the like.
fn is_dated(name: &str) -> bool {
    let b = name.as_bytes();
    b.len() >= 10
        && b[..4].iter().all(u8::is_ascii_digit)
        && b[4] == b'-'
        && b[5..7].iter().all(u8::is_ascii_digit)
        && b[7] == b'-'
        && b[8..10].iter().all(u8::is_ascii_digit)
}

fn markdown_files(dir: &Path, root: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<_> = entries.filter_map(Result::ok).map(|e| e.path()).collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            if !skipped(&path, root) {
                markdown_files(&path, root, out);
            }
        } else if path.extension().and_then(|e| e.to_str()) == Some("md") {
            out.push(path);
        }
    }
}

/// One Markdown line with what a checker needs: its number, whether it is
/// inside a fenced code block, and its text with code spans blanked out.
struct Line<'a> {
    number: usize,
    raw: &'a str,
    in_code: bool,
    prose: String,
}

fn lines(text: &str) -> Vec<Line<'_>> {
    let mut out = Vec::new();
    let mut fence: Option<(char, usize)> = None;
    for (i, raw) in text.lines().enumerate() {
        let trimmed = raw.trim_start();
        let marker = trimmed.chars().next().filter(|c| *c == '`' || *c == '~');
        let run = marker.map_or(0, |m| trimmed.chars().take_while(|c| *c == m).count());
        match (fence, marker) {
            (None, Some(m)) if run >= 3 => {
                fence = Some((m, run));
                out.push(Line {
                    number: i + 1,
                    raw,
                    in_code: true,
                    prose: String::new(),
                });
                continue;
            }
            (Some((m, n)), Some(c))
                if c == m && run >= n && trimmed.trim_end().chars().all(|x| x == m) =>
            {
                fence = None;
                out.push(Line {
                    number: i + 1,
                    raw,
                    in_code: true,
                    prose: String::new(),
                });
                continue;
            }
            _ => {}
        }
        let in_code = fence.is_some();
        let prose = if in_code {
            String::new()
        } else {
            blank_code_spans(raw)
        };
        out.push(Line {
            number: i + 1,
            raw,
            in_code,
            prose,
        });
    }
    out
}

/// Replaces every code span (`` `...` ``, with any number of backticks) by
/// spaces, so that what it contains is not read as a link.
fn blank_code_spans(line: &str) -> String {
    let chars: Vec<char> = line.chars().collect();
    let mut out = String::with_capacity(line.len());
    let mut i = 0;
    while i < chars.len() {
        if chars[i] != '`' {
            out.push(chars[i]);
            i += 1;
            continue;
        }
        let run = chars[i..].iter().take_while(|c| **c == '`').count();
        // Find the closing run of exactly the same length.
        let mut j = i + run;
        let mut close = None;
        while j < chars.len() {
            if chars[j] == '`' {
                let r = chars[j..].iter().take_while(|c| **c == '`').count();
                if r == run {
                    close = Some(j);
                    break;
                }
                j += r;
            } else {
                j += 1;
            }
        }
        match close {
            Some(j) => {
                out.push_str(&" ".repeat(j + run - i));
                i = j + run;
            }
            None => {
                // An unmatched run is literal text.
                out.push_str(&"`".repeat(run));
                i += run;
            }
        }
    }
    out
}

/// The link targets on one line of prose: inline links and images
/// `[..](target "title")`, and reference definitions `[label]: target`.
fn link_targets(prose: &str) -> Vec<String> {
    let mut targets = Vec::new();
    let trimmed = prose.trim_start();
    if trimmed.starts_with('[')
        && prose.len() - trimmed.len() <= 3
        && let Some(end) = trimmed.find("]:")
        && !trimmed[1..end].contains(']')
        && let Some(target) = trimmed[end + 2..].split_whitespace().next()
    {
        targets.push(target.trim_matches(|c| c == '<' || c == '>').to_string());
    }
    let bytes = prose.as_bytes();
    let mut from = 0;
    while let Some(pos) = prose[from..].find("](") {
        let start = from + pos + 2;
        // The target ends at the parenthesis that balances the opening one.
        let mut depth = 1;
        let mut end = None;
        for (k, &b) in bytes.iter().enumerate().skip(start) {
            match b {
                b'(' => depth += 1,
                b')' => {
                    depth -= 1;
                    if depth == 0 {
                        end = Some(k);
                        break;
                    }
                }
                _ => {}
            }
        }
        let Some(end) = end else { break };
        let inside = prose[start..end].trim();
        let target = if let Some(rest) = inside.strip_prefix('<') {
            rest.split('>').next().unwrap_or("")
        } else {
            inside.split_whitespace().next().unwrap_or("")
        };
        targets.push(target.to_string());
        from = end + 1;
    }
    targets
}

fn is_external(target: &str) -> bool {
    // A scheme: letters, digits, '+', '-', '.' before a ':' ("https:", "mailto:").
    match target.find(':') {
        Some(colon) if colon > 0 => target[..colon]
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '+' || c == '-' || c == '.'),
        _ => false,
    }
}

/// GitHub's id for a heading: the text as rendered (code spans, emphasis
/// and link targets gone), lower-cased, each space a `-`, and everything
/// that is not a letter, a digit, `-` or `_` dropped.
fn slug(heading: &str) -> String {
    let mut text = String::new();
    // Keep a link's text, drop its target.
    let mut rest = heading;
    while let Some(open) = rest.find("](") {
        text.push_str(&rest[..open]);
        match rest[open..].find(')') {
            Some(close) => rest = &rest[open + close + 1..],
            None => {
                rest = "";
            }
        }
    }
    text.push_str(rest);
    text.chars()
        .filter(|c| *c != '`' && *c != '*' && *c != '[' && *c != ']')
        .flat_map(char::to_lowercase)
        .filter_map(|c| match c {
            ' ' => Some('-'),
            '-' | '_' => Some(c),
            c if c.is_alphanumeric() => Some(c),
            _ => None,
        })
        .collect()
}

/// The ids a document's headings (and explicit `<a name>`/`id` anchors)
/// get, with GitHub's `-1`, `-2` suffixes for repeated headings.
fn anchors(text: &str) -> Vec<String> {
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut out = Vec::new();
    for line in lines(text) {
        if line.in_code {
            continue;
        }
        let trimmed = line.raw.trim_start();
        if line.raw.len() - trimmed.len() <= 3 && trimmed.starts_with('#') {
            let level = trimmed.chars().take_while(|c| *c == '#').count();
            let after = &trimmed[level..];
            if level <= 6 && (after.is_empty() || after.starts_with(' ')) {
                let title = after.trim().trim_end_matches('#').trim_end();
                let base = slug(title);
                let n = seen.entry(base.clone()).or_insert(0);
                out.push(if *n == 0 {
                    base.clone()
                } else {
                    format!("{base}-{n}")
                });
                *n += 1;
            }
        }
        for key in ["name=\"", "id=\""] {
            let mut from = 0;
            while let Some(p) = line.raw[from..].find(key) {
                let start = from + p + key.len();
                if let Some(len) = line.raw[start..].find('"') {
                    out.push(line.raw[start..start + len].to_string());
                }
                from = start;
            }
        }
    }
    out
}

/// `/work/...`, `/root/...`, `/home/...` where a path starts (not inside a
/// URL or a longer path).
fn machine_paths(line: &str) -> Vec<String> {
    let mut found = Vec::new();
    for prefix in ["/work", "/root", "/home"] {
        let mut from = 0;
        while let Some(p) = line[from..].find(prefix) {
            let at = from + p;
            let before = line[..at].chars().next_back();
            let after = line[at + prefix.len()..].chars().next();
            let starts_path = match before {
                None => true,
                Some(c) => !(c.is_alphanumeric() || "._~-/".contains(c)),
            };
            let ends_name = match after {
                None => true,
                Some(c) => c == '/' || c.is_whitespace() || "`'\")],:;".contains(c),
            };
            if starts_path && ends_name {
                let end = line[at..]
                    .find(|c: char| c.is_whitespace() || "`'\")],;".contains(c))
                    .map_or(line.len(), |e| at + e);
                found.push(line[at..end].trim_end_matches(['.', ',', ':']).to_string());
            }
            from = at + prefix.len();
        }
    }
    found
}

/// Resolves `target` (without its `#anchor`) against the document at
/// `file`; `None` when it leaves the repository.
fn resolve(root: &Path, file: &Path, target: &str) -> Option<PathBuf> {
    let base = if target.starts_with('/') {
        root.to_path_buf()
    } else {
        file.parent()?.to_path_buf()
    };
    let mut path = base;
    for part in Path::new(target.trim_start_matches('/')).components() {
        match part {
            Component::ParentDir => {
                let popped = path.pop();
                if !popped || !path.starts_with(root) {
                    return None;
                }
            }
            Component::Normal(p) => path.push(p),
            _ => {}
        }
    }
    path.starts_with(root).then_some(path)
}

/// Decodes `%20` and the like, as a browser does before asking for a file.
fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && bytes[i + 1].is_ascii_hexdigit()
            && bytes[i + 2].is_ascii_hexdigit()
        {
            let hex = |b: u8| (b as char).to_digit(16).unwrap_or(0) as u8;
            out.push(hex(bytes[i + 1]) * 16 + hex(bytes[i + 2]));
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Every problem in the documents under `root`, one line each:
/// `file:line: what is wrong`.
fn check(root: &Path) -> Vec<String> {
    let mut files = Vec::new();
    markdown_files(root, root, &mut files);
    let mut anchor_cache: HashMap<PathBuf, Vec<String>> = HashMap::new();
    let mut problems = Vec::new();
    for file in &files {
        let text = match fs::read_to_string(file) {
            Ok(t) => t,
            Err(e) => {
                problems.push(format!("{}: cannot read: {e}", file.display()));
                continue;
            }
        };
        let shown = file
            .strip_prefix(root)
            .unwrap_or(file)
            .display()
            .to_string();
        for line in lines(&text) {
            for path in machine_paths(line.raw) {
                problems.push(format!(
                    "{shown}:{}: a path of a developer's machine: {path}",
                    line.number
                ));
            }
            if line.in_code {
                continue;
            }
            for target in link_targets(&line.prose) {
                if target.is_empty() || is_external(&target) {
                    continue;
                }
                let (path_part, anchor) = match target.split_once('#') {
                    Some((p, a)) => (p, Some(a)),
                    None => (target.as_str(), None),
                };
                let path_part = percent_decode(path_part);
                let resolved = if path_part.is_empty() {
                    Some(file.clone())
                } else {
                    resolve(root, file, &path_part)
                };
                let Some(resolved) = resolved else {
                    problems.push(format!(
                        "{shown}:{}: broken link ({target}): it leads out of the repository",
                        line.number
                    ));
                    continue;
                };
                if !resolved.exists() {
                    problems.push(format!(
                        "{shown}:{}: broken link ({target}): no such file or folder",
                        line.number
                    ));
                    continue;
                }
                let Some(anchor) = anchor else { continue };
                if resolved.extension().and_then(|e| e.to_str()) != Some("md") {
                    continue; // anchors into source files are line numbers and the like
                }
                let ids = anchor_cache.entry(resolved.clone()).or_insert_with(|| {
                    fs::read_to_string(&resolved)
                        .map(|t| anchors(&t))
                        .unwrap_or_default()
                });
                let wanted = percent_decode(anchor).to_lowercase();
                if !ids.contains(&wanted) {
                    problems.push(format!(
                        "{shown}:{}: broken link ({target}): no heading with the id #{anchor}",
                        line.number
                    ));
                }
            }
        }
    }
    problems
}

#[test]
fn every_document_link_resolves_and_no_machine_path_appears() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let problems = check(root);
    assert!(
        problems.is_empty(),
        "{} problem(s) in the Markdown documents:\n{}",
        problems.len(),
        problems.join("\n")
    );
}

#[test]
fn the_checker_finds_what_it_is_for() {
    let dir = std::env::temp_dir().join(format!("quorum-lock-docs-check-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(dir.join("docs")).unwrap();
    fs::create_dir_all(dir.join("benches/results/2026-01-01")).unwrap();
    fs::write(
        dir.join("README.md"),
        "# Front page\n\
         \n\
         See [the guide](docs/guide.md), [its setup](docs/guide.md#set-it-up-fast),\n\
         [a typo](docs/gide.md) and [a bad anchor](docs/guide.md#nowhere).\n\
         [Here](#front-page), [gone](#missing), [ext](https://example.com/x#y).\n\
         `[not a link](nowhere.md)`\n\
         [folder](docs/) [outside](../elsewhere.md)\n\
         [ref]: docs/missing.md\n\
         ```sh\n\
         cat [in code](nowhere.md) /tmp/ok\n\
         cd /home/someone/repo\n\
         ```\n",
    )
    .unwrap();
    fs::write(
        dir.join("docs/guide.md"),
        "# Guide\n\n## Set it up, fast!\n\n## `Dsync` and [links](../README.md)\n\n## Repeat\n\n## Repeat\n\n\
         [back](../README.md#front-page) [dup](#repeat-1) [code](#dsync-and-links) built in /work/x.\n",
    )
    .unwrap();
    // Raw output in a dated folder is not checked.
    fs::write(
        dir.join("benches/results/2026-01-01/out.md"),
        "[x](missing.md) /root/x\n",
    )
    .unwrap();

    let problems = check(&dir);
    let _ = fs::remove_dir_all(&dir);
    let expect = [
        "README.md:4: broken link (docs/gide.md): no such file or folder",
        "README.md:4: broken link (docs/guide.md#nowhere): no heading with the id #nowhere",
        "README.md:5: broken link (#missing): no heading with the id #missing",
        "README.md:7: broken link (../elsewhere.md): it leads out of the repository",
        "README.md:8: broken link (docs/missing.md): no such file or folder",
        "README.md:11: a path of a developer's machine: /home/someone/repo",
        "docs/guide.md:11: a path of a developer's machine: /work/x",
    ];
    assert_eq!(problems, expect, "got:\n{}", problems.join("\n"));
}

#[test]
fn slugs_follow_github() {
    assert_eq!(
        slug("Ours against Redis, Redlock, etcd and dsync"),
        "ours-against-redis-redlock-etcd-and-dsync"
    );
    assert_eq!(
        slug("Metrics (feature `metrics`)"),
        "metrics-feature-metrics"
    );
    assert_eq!(
        slug("Restart safety: issue #21 (2026-11-25)"),
        "restart-safety-issue-21-2026-11-25"
    );
    assert_eq!(
        slug("How it differs from dsync, on purpose"),
        "how-it-differs-from-dsync-on-purpose"
    );
    assert_eq!(
        slug("Waiting in line: push vs poll"),
        "waiting-in-line-push-vs-poll"
    );
    assert_eq!(slug("`quorum-lock run`"), "quorum-lock-run");
    assert_eq!(slug("TLS"), "tls");
    assert_eq!(slug("snake_case stays"), "snake_case-stays");
}

/// Places in `text` that name an internal issue ("issue #21", "issue 22",
/// "issues #10") or a review round's test file ("review25.rs"): the
/// documents speak to users, who know neither.
fn internal_references(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let lower = line.to_ascii_lowercase();
        for word in ["issue #", "issue ", "issues #"] {
            let mut from = 0;
            while let Some(at) = lower[from..].find(word) {
                let after = &lower[from + at + word.len()..];
                if after.starts_with(|c: char| c.is_ascii_digit()) {
                    out.push((i + 1, line.trim().to_string()));
                }
                from += at + word.len();
            }
        }
        if let Some(at) = lower.find("review") {
            let after = &lower[at + "review".len()..];
            if after.starts_with(|c: char| c.is_ascii_digit()) {
                out.push((i + 1, line.trim().to_string()));
            }
        }
    }
    out.dedup();
    out
}

#[test]
fn the_readme_is_a_front_page_and_no_document_names_an_internal_issue() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = fs::read_to_string(root.join("README.md")).expect("README.md");
    let count = readme.lines().count();
    assert!(
        count <= 300,
        "README.md has {count} lines; it is a front page of at most 300: move a recipe's details to its page under docs/"
    );
    let mut files = vec![
        root.join("README.md"),
        root.join("BENCHMARKS.md"),
        root.join("RELIABILITY.md"),
    ];
    markdown_files(&root.join("docs"), root, &mut files);
    let mut problems = Vec::new();
    for file in files {
        let text = fs::read_to_string(&file).expect("a document");
        let name = file
            .strip_prefix(root)
            .unwrap_or(&file)
            .display()
            .to_string();
        for (line, found) in internal_references(&text) {
            problems.push(format!("{name}:{line}: {found}"));
        }
    }
    assert!(
        problems.is_empty(),
        "documents name internal issues or review rounds; say what changed and why instead:\n{}",
        problems.join("\n")
    );
}

#[test]
fn internal_references_are_found_and_ordinary_words_are_not() {
    let text = "Before issue #21 it did.\nSee Issue 22.\nThe tests in review25.rs.\n\
                A lock server issues tokens; review the DDL; issue a lock.\n";
    let found: Vec<usize> = internal_references(text).iter().map(|(l, _)| *l).collect();
    assert_eq!(found, [1, 2, 3]);
}
