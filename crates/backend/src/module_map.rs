//! Keeps docs/architecture.md §2 true: its import table ("module | uses") must list, for
//! every top-level module of this crate, exactly the other modules its non-test code
//! names through `crate::`. A new import, or a module without a row, fails here with
//! the row to write, so the drawing never drifts from the code again.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

type ModuleMap = BTreeMap<String, BTreeSet<String>>;

const DOC: &str = "../../docs/architecture.md";

/// The table as written: each row's backticked module names, then what they use
/// ("nothing of the crate" is the empty set).
fn documented(doc: &str) -> ModuleMap {
    let mut map = ModuleMap::new();
    let rows = doc
        .lines()
        .skip_while(|line| !line.starts_with("| module | uses |"))
        .skip(2)
        .take_while(|line| line.starts_with('|'));
    for row in rows {
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        let (Some(modules), Some(uses)) = (cells.get(1), cells.get(2)) else {
            continue;
        };
        let uses = ticked(uses);
        for module in ticked(modules) {
            map.insert(module, uses.clone());
        }
    }
    map
}

fn ticked(cell: &str) -> BTreeSet<String> {
    cell.split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_owned)
        .collect()
}

/// What the code imports: every `crate::name` outside test code, per top-level module.
fn actual(src: &Path) -> ModuleMap {
    let mut files = Vec::new();
    collect(src, &mut files);
    files.sort();
    let sources: Vec<(PathBuf, String)> = files
        .into_iter()
        .map(|file| {
            let text = std::fs::read_to_string(&file).expect("read a source file");
            (file, text)
        })
        .collect();
    // Files of `#[cfg(test)] mod x;` declarations: `x.rs` or `x/` beside a `mod.rs`, under
    // `a/` for a declaration in `a.rs`.
    let mut test_only = Vec::new();
    for (file, text) in &sources {
        let dir = file.parent().expect("a file has a parent");
        let base = match file.file_name().and_then(|name| name.to_str()) {
            Some("mod.rs" | "lib.rs" | "main.rs") => dir.to_path_buf(),
            _ => dir.join(file.file_stem().expect("a stem")),
        };
        for name in without_tests(text).1 {
            test_only.push(base.join(format!("{name}.rs")));
            test_only.push(base.join(name));
        }
    }
    let mut map = ModuleMap::new();
    for (file, text) in &sources {
        if test_only.iter().any(|skip| file.starts_with(skip)) {
            continue;
        }
        let Some(top) = top_module(src, file) else {
            continue;
        };
        let entry = map.entry(top.clone()).or_default();
        for used in crate_paths(&without_tests(text).0) {
            if used != top {
                entry.insert(used);
            }
        }
    }
    map
}

fn collect(dir: &Path, files: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read a source dir") {
        let path = entry.expect("a dir entry").path();
        if path.is_dir() {
            collect(&path, files);
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            files.push(path);
        }
    }
}

/// `src/sessions/consumer.rs` → `sessions`; `lib.rs` and `main.rs` belong to none.
fn top_module(src: &Path, file: &Path) -> Option<String> {
    let relative = file.strip_prefix(src).ok()?;
    let first = relative.components().next()?.as_os_str().to_str()?;
    let name = first.strip_suffix(".rs").unwrap_or(first);
    (!matches!(name, "lib" | "main")).then(|| name.to_owned())
}

/// The text without `#[cfg(test)]` items, and the names of test-only `mod x;` files.
fn without_tests(text: &str) -> (String, Vec<String>) {
    let mut code = String::new();
    let mut test_modules = Vec::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        // Comments (doc links such as [`crate::config::Config`]) import nothing.
        if line.trim_start().starts_with("//") {
            continue;
        }
        if line.trim() != "#[cfg(test)]" {
            code.push_str(line);
            code.push('\n');
            continue;
        }
        let Some(item) = lines.next() else { break };
        let item = item.trim();
        if let Some(name) = item
            .strip_prefix("mod ")
            .or_else(|| item.strip_prefix("pub mod "))
            .or_else(|| item.strip_prefix("pub(crate) mod "))
            .and_then(|rest| rest.strip_suffix(';'))
        {
            test_modules.push(name.to_owned());
            continue;
        }
        // An inline item: skip to its closing brace (or its `;` for a one-liner).
        let mut depth = brace_delta(item);
        if depth == 0 && item.ends_with(';') {
            continue;
        }
        let mut opened = item.contains('{');
        for line in lines.by_ref() {
            depth += brace_delta(line);
            opened |= line.contains('{');
            if opened && depth <= 0 {
                break;
            }
        }
    }
    (code, test_modules)
}

fn brace_delta(line: &str) -> i32 {
    let opens = line.matches('{').count() as i32;
    let closes = line.matches('}').count() as i32;
    opens - closes
}

/// Every module named as `crate::name` or inside `crate::{a, b::c}`.
fn crate_paths(code: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    for (at, _) in code.match_indices("crate::") {
        let before = code[..at].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue; // `kandev_crate::…` or similar, not this crate
        }
        let rest = &code[at + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let end = group.find('}').unwrap_or(group.len());
            for part in group[..end].split(',') {
                if let Some(name) = identifier(part.trim()) {
                    found.insert(name);
                }
            }
        } else if let Some(name) = identifier(rest) {
            found.insert(name);
        }
    }
    found
}

fn identifier(text: &str) -> Option<String> {
    let name: String = text
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect();
    (!name.is_empty() && name != "self").then_some(name)
}

fn row(module: &str, uses: &BTreeSet<String>) -> String {
    let uses = if uses.is_empty() {
        "nothing of the crate".to_owned()
    } else {
        uses.iter()
            .map(|name| format!("`{name}`"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    format!("| `{module}` | {uses} |")
}

#[test]
fn the_import_table_in_the_architecture_doc_is_exact() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let doc = std::fs::read_to_string(root.join(DOC)).expect("docs/architecture.md");
    let documented = documented(&doc);
    let actual = actual(&root.join("src"));
    let wrong: Vec<String> = actual
        .iter()
        .filter(|(module, uses)| documented.get(*module) != Some(uses))
        .map(|(module, uses)| row(module, uses))
        .collect();
    let stale: Vec<&String> = documented
        .keys()
        .filter(|module| !actual.contains_key(*module))
        .collect();
    assert!(
        wrong.is_empty() && stale.is_empty(),
        "docs/architecture.md §2's import table is out of date.\nRows to write:\n{}\nRows of modules that no longer exist: {stale:?}",
        wrong.join("\n")
    );
}

#[test]
fn crate_paths_read_plain_and_grouped_imports() {
    let code = "use crate::store::Stores;\nuse crate::{model::Task, events};\nlet x = crate::metrics::x();\nuse kandev_crate::y;";
    let found: Vec<String> = crate_paths(code).into_iter().collect();
    assert_eq!(found, ["events", "metrics", "model", "store"]);
}

#[test]
fn test_items_are_not_imports() {
    let text = "use crate::a::X;\n/// See [`crate::d::W`].\n#[cfg(test)]\nmod tests {\n    use crate::b::Y;\n}\n#[cfg(test)]\nmod conformance;\n#[cfg(test)]\nuse crate::c::Z;\n";
    let (code, test_modules) = without_tests(text);
    assert_eq!(crate_paths(&code).into_iter().collect::<Vec<_>>(), ["a"]);
    assert_eq!(test_modules, ["conformance"]);
}
