//! The floors of ARCHITECTURE.md held against the code: every `crate::X` path in
//! `src/` outside test code names a module on a lower floor, or one the same floor
//! lets it import (one way); every module of `src/` has a floor, and the floors here
//! are ARCHITECTURE.md's list. And every thread `src/` starts has a name, each in
//! ARCHITECTURE.md's list of threads. And no function is over 120 lines, no source
//! file over 900 (tests aside).

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

/// ARCHITECTURE.md's floors, lowest first.
const FLOORS: &[&[&str]] = &[
    &[
        "timefmt",
        "units",
        "backoff",
        "secret",
        "logging",
        "domain",
        "http_server",
        "alloc",
        "resident",
        "printable",
        "random",
        "version",
        "supervisor",
    ],
    &["runner", "meter", "metrics", "reconcile"],
    &["store"],
    &["github", "scaleset", "install", "sim", "selfupdate"],
    &[
        "coordinator",
        "daemon",
        "doctor",
        "service",
        "facts",
        "config_file",
    ],
    &["tui", "demo", "cli"],
];

/// The one-way orders inside a floor: a module may import those after it in its chain.
const ONE_WAY: &[&[&str]] = &[
    &["backoff", "timefmt"],
    &["secret", "timefmt"],
    &["logging", "timefmt"],
    &["logging", "printable"],
    &["domain", "timefmt"],
    &["http_server", "timefmt"],
    &["alloc", "timefmt"],
    &["metrics", "meter", "runner"],
    &["scaleset", "github"],
    &["install", "github"],
    &["sim", "install"],
    &["selfupdate", "install"],
    &["doctor", "daemon", "config_file", "facts", "coordinator"],
    &["cli", "demo", "tui"],
];

/// Imports that break the rule today, each named so it is mended rather than copied.
/// A listed import that no longer exists fails too, so the list only shrinks.
const KNOWN: &[(&str, &str, &str)] = &[];

fn floor_of(module: &str) -> Option<usize> {
    FLOORS.iter().position(|f| f.contains(&module))
}

fn may_import(from: &str, to: &str) -> bool {
    let (Some(a), Some(b)) = (floor_of(from), floor_of(to)) else {
        return false;
    };
    if b < a {
        return true;
    }
    b == a
        && ONE_WAY.iter().any(|chain| {
            let i = chain.iter().position(|m| *m == from);
            let j = chain.iter().position(|m| *m == to);
            matches!((i, j), (Some(i), Some(j)) if i < j)
        })
}

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

/// The files that only tests compile: `#[cfg(test)] mod x;`, with or without `#[path]`.
fn test_files(files: &[PathBuf]) -> BTreeSet<PathBuf> {
    let mut out = BTreeSet::new();
    for f in files {
        let lines: Vec<String> = fs::read_to_string(f)
            .unwrap()
            .lines()
            .map(|l| l.trim().to_string())
            .collect();
        let dir = f.parent().unwrap();
        for (i, l) in lines.iter().enumerate() {
            if l != "#[cfg(test)]" {
                continue;
            }
            let mut j = i + 1;
            let mut path = None;
            while let Some(attr) = lines.get(j).filter(|l| l.starts_with("#[")) {
                path = attr
                    .strip_prefix("#[path = \"")
                    .and_then(|p| p.strip_suffix("\"]"))
                    .map(str::to_string);
                j += 1;
            }
            let Some(name) = lines
                .get(j)
                .map(|l| {
                    l.trim_start_matches("pub(crate) ")
                        .trim_start_matches("pub ")
                })
                .and_then(|l| l.strip_prefix("mod "))
                .and_then(|l| l.strip_suffix(';'))
            else {
                continue;
            };
            let own = if f.ends_with("mod.rs") {
                dir.to_path_buf()
            } else {
                dir.join(f.file_stem().unwrap())
            };
            match path {
                Some(p) => {
                    out.insert(dir.join(p));
                }
                None => {
                    out.insert(own.join(format!("{name}.rs")));
                    out.insert(own.join(name).join("mod.rs"));
                }
            }
        }
    }
    out
}

/// The lines of `text` outside `#[cfg(test)]` items and comments.
fn product_lines(text: &str) -> Vec<&str> {
    outside_tests(text)
        .into_iter()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect()
}

/// The lines of `text` outside `#[cfg(test)]` items.
fn outside_tests(text: &str) -> Vec<&str> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        if lines[i].trim() != "#[cfg(test)]" {
            out.push(lines[i]);
            i += 1;
            continue;
        }
        // Skip the item: its attributes, then to its `;` or its closing brace.
        i += 1;
        while i < lines.len() && lines[i].trim().starts_with("#[") {
            i += 1;
        }
        let mut depth = 0i64;
        let mut opened = false;
        while i < lines.len() {
            let l = lines[i];
            depth += l.matches('{').count() as i64 - l.matches('}').count() as i64;
            opened |= l.contains('{');
            i += 1;
            if (!opened && l.trim_end().ends_with(';')) || (opened && depth <= 0) {
                break;
            }
        }
    }
    out
}

/// The top-level module a `crate::` path names (the logging macros are `logging`'s).
fn targets(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = line;
    while let Some(at) = rest.find("crate::") {
        let after = &rest[at + "crate::".len()..];
        let names: Vec<&str> = match after.strip_prefix('{') {
            Some(group) => group.split('}').next().unwrap().split(',').collect(),
            None => vec![after],
        };
        for n in names {
            let n = n.trim();
            let end = n
                .find(|c: char| !(c.is_alphanumeric() || c == '_'))
                .unwrap_or(n.len());
            let name = &n[..end];
            if name.starts_with("log_") {
                out.push("logging".to_string());
            } else if !name.is_empty() {
                out.push(name.to_string());
            }
        }
        rest = after;
    }
    out
}

/// The top-level module a file belongs to (`src/store/rows.rs` → `store`).
fn module_of(file: &Path) -> String {
    let rel = file.strip_prefix(src()).unwrap();
    let first = rel
        .components()
        .next()
        .unwrap()
        .as_os_str()
        .to_str()
        .unwrap();
    first.trim_end_matches(".rs").to_string()
}

/// Every `(file, from, to)` import of one top-level module by another.
fn imports() -> Vec<(String, String, String)> {
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    let tests = test_files(&files);
    let mut out = Vec::new();
    for f in &files {
        let from = module_of(f);
        if tests.contains(f) || from == "lib" || from == "main" {
            continue;
        }
        let text = fs::read_to_string(f).unwrap();
        let rel = f
            .strip_prefix(Path::new(env!("CARGO_MANIFEST_DIR")))
            .unwrap();
        for line in product_lines(&text) {
            for to in targets(line) {
                if to != from {
                    out.push((rel.display().to_string(), from.clone(), to));
                }
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

#[test]
fn every_module_has_a_floor() {
    let lib = fs::read_to_string(src().join("lib.rs")).unwrap();
    let declared: Vec<&str> = lib
        .lines()
        .filter_map(|l| l.strip_prefix("pub mod "))
        .map(|l| l.trim_end_matches(';'))
        .collect();
    assert!(declared.len() > 20, "lib.rs declares {declared:?}");
    let missing: Vec<&&str> = declared.iter().filter(|m| floor_of(m).is_none()).collect();
    assert!(missing.is_empty(), "modules with no floor: {missing:?}");
    let floored: Vec<&str> = FLOORS.iter().flat_map(|f| f.iter().copied()).collect();
    let stale: Vec<&&str> = floored.iter().filter(|m| !declared.contains(m)).collect();
    assert!(
        stale.is_empty(),
        "floors name modules lib.rs lacks: {stale:?}"
    );
}

#[test]
fn no_module_imports_one_above_it() {
    let all = imports();
    assert!(
        all.iter().any(|(_, f, t)| f == "daemon" && t == "store"),
        "the scan found no import of store by daemon: it reads nothing"
    );
    let bad: Vec<String> = all
        .iter()
        .filter(|(_, from, to)| !may_import(from, to))
        .filter(|(file, from, to)| !KNOWN.contains(&(file.as_str(), from.as_str(), to.as_str())))
        .map(|(file, from, to)| format!("{file}: {from} imports {to}"))
        .collect();
    assert!(
        bad.is_empty(),
        "imports against the floors:\n{}",
        bad.join("\n")
    );
}

#[test]
fn known_exceptions_still_exist() {
    let all = imports();
    for (file, from, to) in KNOWN {
        assert!(
            all.iter()
                .any(|(f, a, b)| f == file && a == from && b == to),
            "{file} no longer has {from} importing {to}: remove it from KNOWN"
        );
        assert!(
            !may_import(from, to),
            "{from} may import {to}: not an exception"
        );
    }
}

#[test]
fn the_daemons_pool_imports_nothing_of_what_holds_it() {
    let text = fs::read_to_string(src().join("daemon/shared/pool.rs")).unwrap();
    let bad: Vec<&str> = product_lines(&text)
        .into_iter()
        .filter(|l| {
            ["shared", "pool_link"]
                .iter()
                .any(|m| l.contains(&format!("{m}::")))
        })
        .collect();
    assert!(
        bad.is_empty(),
        "daemon::pool imports what stands on it: {bad:?}"
    );
}

#[test]
fn the_floors_are_architecture_mds() {
    let doc =
        fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("ARCHITECTURE.md")).unwrap();
    let start = doc
        .find("The floors of `src/`, lowest first:")
        .expect("the floors' list");
    let floors: Vec<Vec<String>> = doc[start..]
        .lines()
        .skip(1)
        .map(str::trim)
        .take_while(|l| !l.is_empty())
        .filter_map(|l| l.split_once(". ").filter(|(n, _)| n.parse::<u32>().is_ok()))
        .map(|(_, rest)| {
            let names = rest.split(':').next().unwrap();
            names
                .split(',')
                .map(|n| n.trim().trim_matches('`').to_string())
                .collect()
        })
        .collect();
    let ours: Vec<Vec<String>> = FLOORS
        .iter()
        .map(|f| f.iter().map(|m| m.to_string()).collect())
        .collect();
    assert_eq!(
        floors, ours,
        "ARCHITECTURE.md's floors and this file's differ"
    );
}

#[test]
fn the_scan_sees_paths_groups_and_macros_and_skips_tests() {
    assert_eq!(targets("use crate::store::Store;"), ["store"]);
    assert_eq!(
        targets("use crate::{log_info, domain::X};"),
        ["logging", "domain"]
    );
    assert_eq!(targets("let f = crate::doctor::free_bytes;"), ["doctor"]);
    let text = "use crate::a::X;\n// crate::b\n#[cfg(test)]\nmod tests {\n    use crate::c;\n}\n\
                #[cfg(test)]\nmod more;\nuse crate::d;\n";
    assert_eq!(product_lines(text), ["use crate::a::X;", "use crate::d;"]);
    assert!(may_import("daemon", "store") && !may_import("store", "daemon"));
    assert!(may_import("metrics", "runner") && !may_import("runner", "metrics"));
    // The pure plan stands on the ground floor only.
    assert!(!may_import("reconcile", "runner") && !may_import("reconcile", "meter"));
    assert!(may_import("reconcile", "units") && may_import("reconcile", "domain"));
    assert!(!may_import("daemon", "doctor") && !may_import("nowhere", "store"));
}

/// The files of `src/` as ARCHITECTURE.md's codemap names them, resolved to paths:
/// a heading naming one directory (`### \`daemon/\`: …`) is the base of every path
/// under it; elsewhere a path that starts with a top-level module is whole (a bare
/// file name only where no directory is in force); another path is relative to the bullet's base (its first
/// whole path's directory), and a bare file name to the directory a whole path or a
/// directory named last.
fn codemap_paths(doc: &str, top: &BTreeSet<String>) -> BTreeSet<String> {
    let start = doc.find("## Codemap").expect("a codemap");
    let end = doc[start..]
        .find("\n## ")
        .map_or(doc.len(), |i| start + i + 1);
    let mut out = BTreeSet::new();
    let mut section = String::new();
    let (mut base, mut dir) = (String::new(), String::new());
    for line in doc[start..end].lines() {
        let tokens: Vec<&str> = line
            .split('`')
            .skip(1)
            .step_by(2)
            .filter(|t| {
                (t.ends_with(".rs") || t.ends_with('/'))
                    && !t.starts_with(['/', '.'])
                    && t.chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "_/.".contains(c))
            })
            .collect();
        if line.starts_with("### Outside") {
            break;
        }
        if line.starts_with("### ") {
            let dirs: Vec<&&str> = tokens.iter().filter(|t| t.ends_with('/')).collect();
            section = match dirs.as_slice() {
                [one] => one.to_string(),
                _ => String::new(),
            };
            continue;
        }
        if line.starts_with("- ") {
            (base, dir) = (section.clone(), section.clone());
        }
        for t in tokens {
            let first = t
                .split('/')
                .next()
                .unwrap_or_default()
                .trim_end_matches(".rs");
            // Under a heading that names its directory, every path is relative to it;
            // elsewhere a bare file name is whole only where no directory is in force.
            let whole =
                section.is_empty() && top.contains(first) && (t.contains('/') || dir.is_empty());
            let path = if whole {
                t.to_string()
            } else if t.contains('/') {
                format!("{base}{t}")
            } else {
                format!("{dir}{t}")
            };
            if whole && base == section {
                base = path[..path.rfind('/').map_or(0, |i| i + 1)].to_string();
            }
            if path.ends_with('/') {
                dir = path;
            } else {
                if whole {
                    dir = path[..path.rfind('/').map_or(0, |i| i + 1)].to_string();
                }
                out.insert(path);
            }
        }
    }
    out
}

#[test]
fn the_codemap_names_every_module() {
    let doc =
        fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("ARCHITECTURE.md")).unwrap();
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    let names: Vec<String> = files
        .iter()
        .map(|f| {
            f.strip_prefix(src())
                .unwrap()
                .to_string_lossy()
                .replace('\\', "/")
        })
        .collect();
    let top: BTreeSet<String> = names
        .iter()
        .map(|n| {
            n.split('/')
                .next()
                .unwrap()
                .trim_end_matches(".rs")
                .to_string()
        })
        .collect();
    let named = codemap_paths(&doc, &top);
    let missing: Vec<&String> = names.iter().filter(|n| !named.contains(*n)).collect();
    assert!(
        missing.is_empty(),
        "ARCHITECTURE.md's codemap does not name: {missing:?}"
    );
    let gone: Vec<&String> = named.iter().filter(|n| !names.contains(n)).collect();
    assert!(
        gone.is_empty(),
        "ARCHITECTURE.md's codemap names files that are gone: {gone:?}"
    );
}

/// A thread name as a pattern: each `{…}` of a `format!` and each `<…>` of the
/// document is one `*`.
fn name_pattern(name: &str) -> String {
    let mut out = String::new();
    let mut depth = 0;
    for c in name.chars() {
        match c {
            '{' | '<' => {
                if depth == 0 {
                    out.push('*');
                }
                depth += 1;
            }
            '}' | '>' => depth -= 1,
            _ if depth == 0 => out.push(c),
            _ => {}
        }
    }
    out
}

/// The first string literal at the start of `s` (after `format!(` if there).
fn literal(s: &str) -> Option<&str> {
    let s = s.trim_start();
    let s = s.strip_prefix("format!(").unwrap_or(s).trim_start();
    let s = s.strip_prefix('"')?;
    Some(&s[..s.find('"')?])
}

/// The name given to each thread `src/` starts outside test code, as a pattern, with
/// the file; and each start that gives none (`thread::spawn`, a bare scoped `spawn`,
/// a `Builder` with no `.name`).
fn spawned_threads() -> (Vec<(String, String)>, Vec<String>) {
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    let tests = test_files(&files);
    let (mut named, mut unnamed) = (Vec::new(), Vec::new());
    for f in files.iter().filter(|f| !tests.contains(*f)) {
        let text = product_lines(&fs::read_to_string(f).unwrap()).join("\n");
        let rel = f.strip_prefix(src()).unwrap().display().to_string();
        for (at, _) in text.match_indices("thread::spawn(") {
            unnamed.push(format!("{rel}: thread::spawn at byte {at}"));
        }
        for (at, _) in text.match_indices("s.spawn(") {
            if !text[..at].ends_with(|c: char| c.is_alphanumeric() || c == '_') {
                unnamed.push(format!("{rel}: a scoped spawn at byte {at}"));
            }
        }
        for (at, _) in text.match_indices("thread::Builder::new()") {
            let chain = &text[at..];
            let chain = &chain[..chain.find(".spawn").unwrap_or(chain.len())];
            let Some(arg) = chain.split_once(".name(").map(|(_, a)| a) else {
                unnamed.push(format!("{rel}: a thread::Builder with no name"));
                continue;
            };
            // A literal, or a `let`/`const` of this file that holds one.
            let name = literal(arg).map(str::to_string).or_else(|| {
                let ident: String = arg
                    .trim_start()
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                [format!("let {ident} = "), format!("const {ident}: &str = ")]
                    .iter()
                    .find_map(|d| text.find(d.as_str()).map(|i| &text[i + d.len()..]))
                    .and_then(literal)
                    .map(str::to_string)
            });
            match name {
                Some(n) => named.push((name_pattern(&n), rel.clone())),
                None => unnamed.push(format!("{rel}: a thread name this test cannot read")),
            }
        }
    }
    (named, unnamed)
}

/// The names ARCHITECTURE.md's thread list gives, as patterns.
fn documented_threads() -> BTreeSet<String> {
    let doc =
        fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("ARCHITECTURE.md")).unwrap();
    let start = doc.find("this list of names.").expect("the thread list");
    let para = &doc[start..start + doc[start..].find("\n\n").unwrap()];
    para.split('`')
        .skip(1)
        .step_by(2)
        .map(name_pattern)
        .collect()
}

#[test]
fn every_thread_has_a_name_and_architecture_md_lists_each() {
    let (named, unnamed) = spawned_threads();
    assert!(
        named.iter().any(|(n, _)| n == "io:*:*") && named.iter().any(|(n, _)| n == "signals"),
        "the scan found none of the daemon's threads: {named:?}"
    );
    assert!(
        unnamed.is_empty(),
        "threads started without a name (ps -T shows them as the process):\n{}",
        unnamed.join("\n")
    );
    let listed = documented_threads();
    let missing: Vec<String> = named
        .iter()
        .filter(|(n, _)| !listed.contains(n))
        .map(|(n, f)| format!("{n} ({f})"))
        .collect();
    assert!(
        missing.is_empty(),
        "ARCHITECTURE.md's thread list lacks: {missing:?}"
    );
    let stale: Vec<&String> = listed
        .iter()
        .filter(|l| !named.iter().any(|(n, _)| n == *l))
        .collect();
    assert!(
        stale.is_empty(),
        "ARCHITECTURE.md lists threads src/ no longer starts: {stale:?}"
    );
}

#[test]
fn thread_names_read_as_patterns() {
    assert_eq!(name_pattern("io:{}:{}"), "io:*:*");
    assert_eq!(name_pattern("io:<target>:<n>"), "io:*:*");
    assert_eq!(name_pattern("coord-conn-{id}"), "coord-conn-*");
    assert_eq!(literal(r#"format!("scaleset:{}", p)"#), Some("scaleset:{}"));
    assert_eq!(literal(r#""metrics".into()"#), Some("metrics"));
    assert_eq!(literal("name)"), None);
}

#[test]
fn only_the_store_knows_sql() {
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    let tests = test_files(&files);
    let bad: Vec<String> = files
        .iter()
        .filter(|f| !tests.contains(*f) && module_of(f) != "store")
        .filter(|f| {
            product_lines(&fs::read_to_string(f).unwrap())
                .iter()
                .any(|l| l.contains("rusqlite"))
        })
        .map(|f| f.display().to_string())
        .collect();
    assert!(bad.is_empty(), "SQLite outside the store: {bad:?}");
}

/// The daemon's rooms, lowest first: a file of one may import from the rooms before
/// it, never after (`daemon/mod.rs` and the files at the top stand above them all).
const ROOMS: &[&str] = &["host", "shared", "feeds", "workers", "target_loop"];

/// The widest import circle allowed among the daemon's files.
const MAX_CIRCLE: usize = 5;

/// A daemon file's module path (`daemon/workers/io.rs` → `["daemon", "workers", "io"]`).
fn module_path(file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src()).unwrap();
    let mut out: Vec<String> = rel
        .components()
        .map(|c| {
            c.as_os_str()
                .to_str()
                .unwrap()
                .trim_end_matches(".rs")
                .to_string()
        })
        .collect();
    if out.last().is_some_and(|l| l == "mod") {
        out.pop();
    }
    out
}

/// The module a path written in `at` names, if it is one of `modules`: `crate::`,
/// `self::`, `super::` (any number) and a child of `at` resolve to the deepest module
/// the path walks through; an item named by `super::X` is its module's.
fn resolve(at: &[String], path: &[&str], modules: &BTreeSet<Vec<String>>) -> Option<Vec<String>> {
    let (mut base, mut rest) = match path.first() {
        Some(&"crate") => (Vec::new(), &path[1..]),
        Some(&"self") => (at.to_vec(), &path[1..]),
        Some(&"super") => {
            let mut b = at.to_vec();
            let mut r = path;
            while r.first() == Some(&"super") {
                b.pop();
                r = &r[1..];
            }
            (b, r)
        }
        Some(first) => {
            let mut child = at.to_vec();
            child.push(first.to_string());
            if !modules.contains(&child) {
                return None;
            }
            (at.to_vec(), path)
        }
        None => return None,
    };
    let mut best = modules.contains(&base).then(|| base.clone());
    while let Some((seg, more)) = rest.split_first() {
        base.push(seg.to_string());
        if !modules.contains(&base) {
            break;
        }
        best = Some(base.clone());
        rest = more;
    }
    best
}

/// The paths written in `text`: each `a::b::c`, and each item of a `a::{b, c::d}`
/// group as `a::b` and `a::c::d`.
fn paths_in(text: &str) -> Vec<Vec<String>> {
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    let mut out = Vec::new();
    let chars: Vec<char> = text.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        if !ident(chars[i]) || (i > 0 && (ident(chars[i - 1]) || chars[i - 1] == ':')) {
            i += 1;
            continue;
        }
        let mut segs = Vec::new();
        let mut j = i;
        loop {
            let s = j;
            while j < chars.len() && ident(chars[j]) {
                j += 1;
            }
            segs.push(chars[s..j].iter().collect::<String>());
            if chars.get(j) == Some(&':') && chars.get(j + 1) == Some(&':') {
                j += 2;
                if chars.get(j) == Some(&'{') {
                    let close = chars[j..]
                        .iter()
                        .position(|c| *c == '}')
                        .map_or(chars.len(), |p| j + p);
                    let group: String = chars[j + 1..close].iter().collect();
                    for item in group.split(',') {
                        let mut p = segs.clone();
                        p.extend(
                            item.trim()
                                .split("::")
                                .map(|s| s.split_whitespace().next().unwrap_or("").to_string())
                                .filter(|s| !s.is_empty() && s.chars().all(ident)),
                        );
                        out.push(p);
                    }
                    segs.clear();
                    j = close;
                    break;
                }
                if j < chars.len() && ident(chars[j]) {
                    continue;
                }
            }
            break;
        }
        if segs.len() > 1 {
            out.push(segs);
        }
        i = j.max(i + 1);
    }
    out
}

/// The daemon's files (outside test code) and which of them each imports.
fn daemon_graph() -> Vec<(Vec<String>, BTreeSet<Vec<String>>)> {
    let mut files = Vec::new();
    rust_files(&src().join("daemon"), &mut files);
    let tests = test_files(&files);
    files.retain(|f| !tests.contains(f));
    let modules: BTreeSet<Vec<String>> = files.iter().map(|f| module_path(f)).collect();
    files
        .iter()
        .map(|f| {
            let at = module_path(f);
            let mut text = product_lines(&fs::read_to_string(f).unwrap()).join("\n");
            // A visibility (`pub(in crate::daemon)`) names a module but imports nothing.
            while let Some(at) = text.find("pub(in ") {
                let end = text[at..].find(')').map_or(text.len(), |e| at + e + 1);
                text.replace_range(at..end, "pub");
            }
            let to = paths_in(&text)
                .iter()
                .filter_map(|p| {
                    let p: Vec<&str> = p.iter().map(String::as_str).collect();
                    resolve(&at, &p, &modules)
                })
                .filter(|m| *m != at && m.first().is_some_and(|d| d == "daemon"))
                .collect();
            (at, to)
        })
        .collect()
}

/// The strongly connected components of `graph`, each a set of files that reach
/// one another.
fn circles(graph: &[(Vec<String>, BTreeSet<Vec<String>>)]) -> Vec<BTreeSet<Vec<String>>> {
    let reach = |from: &Vec<String>| {
        let mut seen = BTreeSet::from([from.clone()]);
        let mut todo = vec![from.clone()];
        while let Some(m) = todo.pop() {
            for (_, to) in graph.iter().filter(|(a, _)| *a == m) {
                for t in to {
                    if seen.insert(t.clone()) {
                        todo.push(t.clone());
                    }
                }
            }
        }
        seen
    };
    let all: Vec<(Vec<String>, BTreeSet<Vec<String>>)> =
        graph.iter().map(|(m, _)| (m.clone(), reach(m))).collect();
    let mut out: Vec<BTreeSet<Vec<String>>> = Vec::new();
    for (m, r) in &all {
        if out.iter().any(|c| c.contains(m)) {
            continue;
        }
        let comp = all
            .iter()
            .filter(|(n, rn)| r.contains(n) && rn.contains(m))
            .map(|(n, _)| n.clone())
            .collect();
        out.push(comp);
    }
    out.sort_by_key(|c| std::cmp::Reverse(c.len()));
    out
}

/// Which room a daemon module is in: its position in [`ROOMS`], or one past them
/// for the files at the top.
fn room_of(m: &[String]) -> usize {
    m.get(1)
        .and_then(|r| ROOMS.iter().position(|x| x == r))
        .unwrap_or(ROOMS.len())
}

#[test]
fn the_daemons_rooms_import_one_way_and_no_circle_is_wide() {
    let graph = daemon_graph();
    let name = |m: &Vec<String>| m.join("::");
    let edge = |a: &str, b: &str| {
        graph
            .iter()
            .any(|(m, to)| name(m) == a && to.iter().any(|t| name(t) == b))
    };
    assert!(
        edge("daemon::workers::io", "daemon::shared")
            && edge("daemon::target_loop", "daemon::workers::io"),
        "the scan found none of the daemon's imports"
    );
    let against: Vec<String> = graph
        .iter()
        .flat_map(|(m, to)| to.iter().map(move |t| (m, t)))
        .filter(|(m, t)| room_of(t) > room_of(m))
        .map(|(m, t)| format!("{} imports {}", name(m), name(t)))
        .collect();
    assert!(
        against.is_empty(),
        "imports against the rooms' order {ROOMS:?}:\n{}",
        against.join("\n")
    );
    let widest = circles(&graph).into_iter().next().unwrap_or_default();
    assert!(
        widest.len() <= MAX_CIRCLE,
        "{} daemon files import each other in one circle: {:?}",
        widest.len(),
        widest.iter().map(name).collect::<Vec<_>>()
    );
}

#[test]
fn the_daemon_scan_resolves_paths_and_finds_circles() {
    let modules: BTreeSet<Vec<String>> = [
        "daemon",
        "daemon::host",
        "daemon::host::facts",
        "daemon::workers",
        "daemon::workers::io",
    ]
    .iter()
    .map(|m| m.split("::").map(str::to_string).collect())
    .collect();
    let v = |s: &str| s.split("::").map(str::to_string).collect::<Vec<_>>();
    let at = v("daemon::workers::io");
    assert_eq!(
        resolve(
            &at,
            &["super", "super", "host", "facts", "HostFacts"],
            &modules
        ),
        Some(v("daemon::host::facts"))
    );
    assert_eq!(
        resolve(&at, &["crate", "daemon", "DaemonError"], &modules),
        Some(v("daemon"))
    );
    assert_eq!(
        resolve(&at, &["super", "Thing"], &modules),
        Some(v("daemon::workers"))
    );
    assert_eq!(
        resolve(&v("daemon"), &["host", "facts", "lock"], &modules),
        Some(v("daemon::host::facts"))
    );
    assert_eq!(resolve(&at, &["std", "io", "Error"], &modules), None);
    assert_eq!(
        paths_in("use super::{facts::lock, disk_watch};\nlet x = crate::daemon::run(o);"),
        [
            v("super::facts::lock"),
            v("super::disk_watch"),
            v("crate::daemon::run")
        ]
    );
    let g = |e: &[(&str, &[&str])]| -> Vec<(Vec<String>, BTreeSet<Vec<String>>)> {
        e.iter()
            .map(|(a, to)| (v(a), to.iter().map(|t| v(t)).collect()))
            .collect()
    };
    let c = circles(&g(&[
        ("a", &["b"]),
        ("b", &["c"]),
        ("c", &["a", "d"]),
        ("d", &[]),
    ]));
    assert_eq!(c[0].len(), 3);
    assert_eq!(c.len(), 2);
    assert_eq!(room_of(&v("daemon::host::facts")), 0);
    assert_eq!(room_of(&v("daemon::main_loop")), ROOMS.len());
}

/// What the CLI and the TUI may name of the daemon: its entry and its default
/// cadences. What it publishes they read through `facts` and the store.
const DAEMON_ENTRY: &[&str] = &[
    "run",
    "DaemonOptions",
    "DaemonError",
    "Stopped",
    "FITNESS_EVERY",
    "UPKEEP_EVERY",
    "RUNNER_CHECK_EVERY",
];

/// Each name a `daemon::` path in `text` reaches (a group's each item).
fn daemon_names(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (at, _) in text.match_indices("daemon::") {
        let before = &text[..at];
        // `daemon::` as a path of its own or under `crate::`, not another module's
        // child named `daemon` (the CLI's `opts::daemon::…` constants, also imported
        // by that name as the table does).
        if before.ends_with(|c: char| c.is_alphanumeric() || c == '_')
            || (before.ends_with("::") && !before.ends_with("crate::"))
            || (!before.ends_with("crate::") && imports_opts_daemon(text))
        {
            continue;
        }
        let after = &text[at + "daemon::".len()..];
        let items: Vec<&str> = match after.strip_prefix('{') {
            Some(group) => group.split('}').next().unwrap().split(',').collect(),
            None => vec![after],
        };
        for item in items {
            let item = item.trim();
            let end = item
                .find(|c: char| !(c.is_alphanumeric() || c == '_'))
                .unwrap_or(item.len());
            if end > 0 {
                out.push(item[..end].to_string());
            }
        }
    }
    out
}

/// The longest a function may be, and a source file (test code aside).
const MAX_FN_LINES: usize = 120;
const MAX_FILE_LINES: usize = 900;

/// Each function of `lines` (rustfmt's layout: its body closes at its own indent), as
/// its name, first line (from 1) and length in lines.
fn functions(lines: &[&str]) -> Vec<(String, usize, usize)> {
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let indent = &line[..line.len() - line.trim_start().len()];
        let mut rest = line.trim_start();
        for word in [
            "pub(crate) ",
            "pub(super) ",
            "pub ",
            "const ",
            "async ",
            "unsafe ",
        ] {
            rest = rest.strip_prefix(word).unwrap_or(rest);
        }
        let rest = rest
            .strip_prefix("pub(in ")
            .map_or(rest, |r| r.split_once(") ").map_or(r, |(_, after)| after));
        let Some(name) = rest.strip_prefix("fn ").map(|r| {
            r.split(|c: char| !c.is_alphanumeric() && c != '_')
                .next()
                .unwrap()
        }) else {
            continue;
        };
        // A declaration without a body (a trait's) ends with `;` before any `{`, and a
        // body on one line closes on it.
        let opens = lines[i..]
            .iter()
            .map(|l| l.trim_end())
            .find(|l| l.ends_with('{') || l.ends_with(';') || l.ends_with('}'));
        if !opens.is_some_and(|l| l.ends_with('{')) {
            continue;
        }
        let close = format!("{indent}}}");
        if let Some(end) = lines[i..].iter().position(|l| l.trim_end() == close) {
            out.push((name.to_string(), i + 1, end + 1));
        }
    }
    out
}

/// Whether `text` imports the CLI's `opts::daemon` module (the `daemon` command's
/// option constants) by the name `daemon`.
fn imports_opts_daemon(text: &str) -> bool {
    text.match_indices("opts::{").any(|(at, _)| {
        let group = text[at + "opts::{".len()..].split('}').next().unwrap_or("");
        group.split(',').any(|m| m.trim() == "daemon")
    })
}

#[test]
fn the_cli_and_tui_reach_the_daemon_only_through_its_entry() {
    assert_eq!(
        daemon_names(
            "use crate::daemon::{DaemonError, host::lock};\nx(crate::daemon::run(o), opts::daemon::LOG_LEVEL)"
        ),
        ["DaemonError", "host", "run"]
    );
    let mut files = Vec::new();
    rust_files(&src().join("cli"), &mut files);
    rust_files(&src().join("tui"), &mut files);
    let tests = test_files(&files);
    let mut entry = 0;
    let mut bad = Vec::new();
    for f in files.iter().filter(|f| !tests.contains(*f)) {
        let text = product_lines(&fs::read_to_string(f).unwrap()).join("\n");
        for name in daemon_names(&text) {
            if DAEMON_ENTRY.contains(&name.as_str()) {
                entry += 1;
            } else {
                bad.push(format!("{}: daemon::{name}", f.display()));
            }
        }
    }
    assert!(entry > 0, "the scan found no use of the daemon's entry");
    assert!(
        bad.is_empty(),
        "the CLI reaches into the daemon's modules (read what it publishes, `facts` or the store):\n{}",
        bad.join("\n")
    );
}

#[test]
fn no_function_is_over_120_lines_and_no_source_file_over_900() {
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    let tests = test_files(&files);
    let mut over = Vec::new();
    for f in files.iter().filter(|f| !tests.contains(*f)) {
        let text = fs::read_to_string(f).unwrap();
        let lines = outside_tests(&text);
        let name = f.strip_prefix(src()).unwrap().display();
        if lines.len() > MAX_FILE_LINES {
            over.push(format!("{name}: {} lines", lines.len()));
        }
        for (func, at, len) in functions(&lines) {
            if len > MAX_FN_LINES {
                over.push(format!("{name}:{at} fn {func}: {len} lines"));
            }
        }
    }
    assert!(
        over.is_empty(),
        "over {MAX_FN_LINES} lines a function or {MAX_FILE_LINES} a file:\n{}",
        over.join("\n")
    );
}

#[test]
fn functions_are_measured_from_their_line_to_their_closing_brace() {
    let text = "impl X {\n    pub(super) fn a(\n        x: u8,\n    ) -> u8 {\n        x\n    }\n    fn decl(&self);\n}\nfn b() {}\nconst fn c() {\n}\n";
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        functions(&lines),
        vec![("a".to_string(), 2, 5), ("c".to_string(), 10, 2)],
        "a body on one line closes on it and is not counted"
    );
}
