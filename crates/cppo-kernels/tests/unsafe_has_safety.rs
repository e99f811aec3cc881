//! Every `unsafe` in the workspace says why it is sound, and every crate without one forbids it.
//!
//! A source check over every crate's Rust files (src, tests, benches, build scripts): each `unsafe`
//! block, fn, impl or trait needs a comment with `SAFETY` (blocks, impls) or `# Safety` (fns) just
//! above it: in the nearest comment block, attributes between them allowed, with at most `MAX_GAP`
//! lines of code between (a statement spread over lines) and no other `unsafe` (each gives its own
//! reason). Clippy's `undocumented_unsafe_blocks` covers blocks only, and clippy is not part of
//! `cargo test`.

use std::fs;
use std::path::{Path, PathBuf};

/// Lines of code that may stand between an `unsafe` and the comment giving its reason.
const MAX_GAP: usize = 2;

const FORBID: &str = "#![forbid(unsafe_code)]";

/// The line's code: string and char literals emptied, the `//` comment cut off.
fn code(line: &str) -> String {
    let mut out = String::new();
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' => {
                out.push_str("\"\"");
                while let Some(s) = chars.next() {
                    match s {
                        '\\' => {
                            chars.next();
                        }
                        '"' => break,
                        _ => {}
                    }
                }
            }
            '\'' => {
                // A char literal ('x', '\n', '"'); otherwise a lifetime, kept as it is.
                let rest: String = chars.clone().take(3).collect();
                let skip = if rest.starts_with('\\') {
                    rest.find('\'').map_or(0, |i| i + 1).max(3)
                } else if rest.chars().nth(1) == Some('\'') {
                    2
                } else {
                    0
                };
                for _ in 0..skip {
                    chars.next();
                }
                out.push_str(if skip > 0 { "''" } else { "'" });
            }
            '/' if chars.peek() == Some(&'/') => break,
            _ => out.push(c),
        }
    }
    out
}

/// Whether the code holds an `unsafe` block, fn, impl or trait (not `unsafe_code`, not a fn-pointer
/// type such as `unsafe extern "C" fn(i32)`).
fn has_unsafe_site(code: &str) -> bool {
    let word = |c: char| c.is_alphanumeric() || c == '_';
    let mut from = 0;
    while let Some(at) = code[from..].find("unsafe").map(|i| i + from) {
        from = at + "unsafe".len();
        let before = code[..at].chars().next_back();
        let rest = &code[from..];
        if before.is_some_and(word) || rest.chars().next().is_some_and(word) {
            continue;
        }
        let rest = rest.trim_start();
        let rest = rest.strip_prefix("extern").map_or(rest, |r| {
            r.trim_start().trim_start_matches("\"\"").trim_start()
        });
        let pointer_type = rest
            .strip_prefix("fn")
            .is_some_and(|r| r.trim_start().starts_with('('));
        if !pointer_type {
            return true;
        }
    }
    false
}

/// The 1-based lines of `text` holding an `unsafe` with no SAFETY / `# Safety` comment just above.
fn unexplained(text: &str) -> Vec<usize> {
    let lines: Vec<&str> = text.lines().collect();
    let explains = |l: &str| l.contains("SAFETY") || l.contains("# Safety");
    let explained = |i: usize| {
        if explains(lines[i]) {
            return true;
        }
        let (mut gap, mut in_comment) = (0, false);
        for l in lines[..i].iter().rev().map(|l| l.trim()) {
            if l.starts_with("//") {
                if explains(l) {
                    return true;
                }
                in_comment = true;
            } else if l.starts_with("#[") {
                continue;
            } else if in_comment || has_unsafe_site(&code(l)) {
                return false;
            } else {
                gap += 1;
                if gap > MAX_GAP {
                    return false;
                }
            }
        }
        false
    };
    (0..lines.len())
        .filter(|&i| has_unsafe_site(&code(lines[i])) && !explained(i))
        .map(|i| i + 1)
        .collect()
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for path in entries.flatten().map(|e| e.path()) {
        if path.is_dir() {
            if path.file_name().is_some_and(|n| n != "target") {
                rust_files(&path, out);
            }
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

fn read(path: &Path) -> String {
    fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The workspace's crates (`crates/*` with a Cargo.toml).
fn crates() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("crates/");
    let mut dirs: Vec<PathBuf> = fs::read_dir(root)
        .expect("crates/")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.join("Cargo.toml").is_file())
        .collect();
    dirs.sort();
    dirs
}

#[test]
fn every_unsafe_has_its_safety_comment() {
    let (mut sites, mut missing) = (0, Vec::new());
    for krate in crates() {
        let mut files = Vec::new();
        rust_files(&krate, &mut files);
        for f in files {
            let text = read(&f);
            sites += text.lines().filter(|l| has_unsafe_site(&code(l))).count();
            missing.extend(
                unexplained(&text)
                    .into_iter()
                    .map(|n| format!("{}:{n}", f.display())),
            );
        }
    }
    assert!(
        sites > 0,
        "no `unsafe` found at all: is {} the workspace's crates folder?",
        env!("CARGO_MANIFEST_DIR")
    );
    assert!(
        missing.is_empty(),
        "`unsafe` without a SAFETY comment (or `# Safety` doc) just above:\n{}",
        missing.join("\n")
    );
}

#[test]
fn every_crate_without_unsafe_forbids_it() {
    let mut lacking = Vec::new();
    let mut checked = 0;
    for krate in crates() {
        let src = krate.join("src");
        let mut files = Vec::new();
        rust_files(&src, &mut files);
        if files
            .iter()
            .any(|f| read(f).lines().any(|l| has_unsafe_site(&code(l))))
        {
            continue;
        }
        let mut roots: Vec<PathBuf> = ["lib.rs", "main.rs"]
            .iter()
            .map(|r| src.join(r))
            .filter(|p| p.is_file())
            .collect();
        rust_files(&src.join("bin"), &mut roots);
        for root in roots {
            checked += 1;
            if !read(&root).lines().any(|l| l.trim() == FORBID) {
                lacking.push(root.display().to_string());
            }
        }
    }
    assert!(checked > 0, "no crate without `unsafe` found");
    assert!(
        lacking.is_empty(),
        "crate roots without `{FORBID}` although their crate has no `unsafe`:\n{}",
        lacking.join("\n")
    );
}

/// The check itself finds what it must and passes over what it must not.
#[test]
fn the_check_tells_explained_from_unexplained() {
    // One string per line, so that the workspace check reads them as strings.
    let text = [
        "fn f(p: *const u8) -> u8 {",
        "    // SAFETY: the caller's pointer.",
        "    let a = unsafe { *p };",
        "    #[allow(unsafe_code)]",
        "    let g: unsafe extern \"C\" fn(i32) = h; // a type, not a block",
        "    let s = \"unsafe { in a string }\";",
        "    let b = unsafe { *p };",
        "    a + b",
        "}",
        "/// Reads `p`.",
        "#[inline]",
        "unsafe fn r(p: *const u8) -> u8 { *p }",
        "/// Reads `p`.",
        "///",
        "/// # Safety",
        "/// `p` must be readable.",
        "#[inline]",
        "unsafe fn q(p: *const u8) -> u8 { *p }",
        "unsafe impl Send for X {}",
    ]
    .join("\n");
    assert_eq!(unexplained(&text), vec![7, 12, 19]);
    assert_eq!(code("let c = '\"'; // unsafe {").trim_end(), "let c = '';");
}
