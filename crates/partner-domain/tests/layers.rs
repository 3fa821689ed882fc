//! The shape of the crate, checked mechanically (`cargo test -p partner-domain --test layers`):
//!
//! - no import circle between the top-level modules (`kernel`, `account`, `lead`, …): every
//!   `crate::<module>` path in code (comments and doc links are not imports) is an edge, and the
//!   graph must be acyclic;
//! - the kernel imports nothing from the rest of the crate;
//! - no file is over [`MAX_LINES`] lines of non-test code (a file's lines before its first
//!   `#[cfg(test)]` item; `tests.rs` files are test code), in this crate and in every crate of
//!   the workspace (`crates/*/src`).
//!
//! Run with `--nocapture` to print the module graph.

#![allow(clippy::expect_used, clippy::indexing_slicing)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// "About 800 lines": the limit on a file's non-test code.
const MAX_LINES: usize = 800;

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read_dir") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The top-level module a file belongs to: `src/lead/service.rs` → `lead`, `src/rate_limit.rs`
/// → `rate_limit`, `src/lib.rs` → `lib`.
fn module_of(src: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(src).expect("under src");
    let first = rel.components().next().expect("a component");
    let name = first.as_os_str().to_string_lossy();
    name.strip_suffix(".rs").unwrap_or(&name).to_owned()
}

/// The code of a line: nothing of a `//` comment (doc comments included).
fn code_of(line: &str) -> &str {
    let mut in_str = false;
    let bytes = line.as_bytes();
    let mut i = 0;
    while i + 1 < bytes.len() {
        match bytes[i] {
            b'"' => in_str = !in_str,
            b'\\' if in_str => i += 1,
            b'/' if !in_str && bytes[i + 1] == b'/' => return &line[..i],
            _ => {}
        }
        i += 1;
    }
    line
}

/// The top-level modules a line's code names through `crate::`, including grouped imports
/// (`use crate::{kernel::ids, lead};`).
fn targets(code: &str, out: &mut BTreeSet<String>) {
    let mut rest = code;
    while let Some(at) = rest.find("crate::") {
        let before = rest[..at].chars().next_back();
        rest = &rest[at + "crate::".len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue; // `partner_domain::crate…` cannot happen; `foo_crate::` is not ours
        }
        if let Some(group) = rest.strip_prefix('{') {
            let end = group.find('}').unwrap_or(group.len());
            for item in group[..end].split(',') {
                let name: String = item
                    .trim()
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                if !name.is_empty() {
                    out.insert(name);
                }
            }
        } else {
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() {
                out.insert(name);
            }
        }
    }
}

struct Crate {
    /// module → the modules it imports (itself excluded).
    graph: BTreeMap<String, BTreeSet<String>>,
    /// file → lines of non-test code.
    sizes: Vec<(PathBuf, usize)>,
}

fn read_crate() -> Crate {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut sizes = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).expect("read");
        let module = module_of(&src, &file);
        let edges = graph.entry(module.clone()).or_default();
        let mut found = BTreeSet::new();
        for line in text.lines() {
            targets(code_of(line), &mut found);
        }
        found.remove(&module);
        edges.extend(found);
        sizes.push((
            file.strip_prefix(&src).expect("under src").to_owned(),
            code_lines(&file),
        ));
    }
    Crate { graph, sizes }
}

/// A cycle of `graph`, if it has one (depth-first search, colours white/grey/black).
fn find_cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        done: &mut BTreeSet<String>,
        path: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|n| n == node) {
            let mut cycle = path[at..].to_vec();
            cycle.push(node.to_owned());
            return Some(cycle);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_owned());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(c) = visit(next, graph, done, path) {
                return Some(c);
            }
        }
        path.pop();
        done.insert(node.to_owned());
        None
    }
    let mut done = BTreeSet::new();
    for node in graph.keys() {
        if let Some(c) = visit(node, graph, &mut done, &mut Vec::new()) {
            return Some(c);
        }
    }
    None
}

#[test]
fn no_import_circle_between_top_level_modules() {
    let krate = read_crate();
    for (module, deps) in &krate.graph {
        println!(
            "{module} -> {}",
            deps.iter().cloned().collect::<Vec<_>>().join(", ")
        );
    }
    if let Some(cycle) = find_cycle(&krate.graph) {
        panic!("import circle: {}", cycle.join(" -> "));
    }
}

#[test]
fn the_kernel_imports_nothing_above_it() {
    let krate = read_crate();
    let deps = krate.graph.get("kernel").expect("a kernel module");
    assert!(deps.is_empty(), "kernel imports {deps:?}");
}

#[test]
fn no_file_is_over_the_line_limit() {
    let krate = read_crate();
    let over: Vec<_> = krate.sizes.iter().filter(|(_, n)| *n > MAX_LINES).collect();
    for (file, n) in &krate.sizes {
        println!("{n:5} {}", file.display());
    }
    assert!(
        over.is_empty(),
        "over {MAX_LINES} lines of non-test code: {over:?}"
    );
}

/// Lines of non-test code of a source file (see the crate doc).
fn code_lines(file: &Path) -> usize {
    if file.file_name().is_some_and(|n| n == "tests.rs") {
        return 0;
    }
    let text = std::fs::read_to_string(file).expect("read");
    text.lines()
        .take_while(|l| !l.starts_with("#[cfg(test)]"))
        .count()
}

#[test]
fn no_file_of_the_workspace_is_over_the_line_limit() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("crates/")
        .to_owned();
    let mut files = Vec::new();
    for entry in std::fs::read_dir(&crates).expect("read crates/") {
        let src = entry.expect("entry").path().join("src");
        if src.is_dir() {
            rust_files(&src, &mut files);
        }
    }
    assert!(files.len() > 50, "the workspace's sources are found");
    files.sort();
    let over: Vec<_> = files
        .iter()
        .map(|f| {
            (
                f.strip_prefix(&crates).expect("under crates/"),
                code_lines(f),
            )
        })
        .filter(|(_, n)| *n > MAX_LINES)
        .collect();
    assert!(
        over.is_empty(),
        "over {MAX_LINES} lines of non-test code: {over:?}"
    );
}

#[test]
fn the_checks_see_imports_and_circles() {
    let mut found = BTreeSet::new();
    targets(
        code_of(
            "use crate::{kernel::ids, lead}; let x = crate::order::f(\"//\"); // crate::webhook",
        ),
        &mut found,
    );
    let found: Vec<_> = found.into_iter().collect();
    assert_eq!(found, ["kernel", "lead", "order"]);
    let graph: BTreeMap<String, BTreeSet<String>> = [
        ("a", vec!["b"]),
        ("b", vec!["c"]),
        ("c", vec!["a"]),
        ("d", vec![]),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.into_iter().map(str::to_owned).collect()))
    .collect();
    assert_eq!(
        find_cycle(&graph).map(|c| c.join(" -> ")),
        Some("a -> b -> c -> a".to_owned())
    );
}
