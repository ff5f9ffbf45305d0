//! `import "lib/nodes.bot"`: one program written across several files (docs/language.md
//! "Imports").
//!
//! The unit is the importing file and every fragment it reaches. Fragments are read beneath the
//! directory of the file compiled (the unit's root), never through a symbolic link, each once
//! however many files import it, and their text is appended to the main's: the parser and the
//! checks see one program. Each fragment keeps its own line numbers in what is reported: a
//! diagnostic on a fragment's line names the fragment ([`Unit::place`]).
//!
//! An import is an allow-list path: relative, `/`-separated plain names (no `..`, no `.`, no
//! empty component, no backslash or control character) ending in `.bot` or `.iter`, resolved
//! against the importing file's directory. Anything else, a fragment that cannot be read by the
//! bundle rules, a fragment whose `dsl:` profile differs from the main's, more than
//! [`MAX_FRAGMENTS`] files or more than [`MAX_UNIT_BYTES`] of text is C917.

use std::path::{Path, PathBuf};

use crate::{Code, Diagnostic, ast::Span, load::MAX_SOURCE_BYTES};

/// The most fragments one unit may import (every file it reaches, the main excluded).
pub const MAX_FRAGMENTS: usize = 64;

/// The most text one unit may hold, main and fragments together.
pub const MAX_UNIT_BYTES: usize = 16 * 1024 * 1024;

/// One fragment of a unit: its path relative to the unit's root (`/`-separated) and its text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fragment {
    /// The path relative to the directory of the file compiled, `/`-separated.
    pub path: String,
    /// Its normalised text.
    pub text: String,
}

/// A unit: the program text the parser reads and where each of its lines came from.
pub(crate) struct Unit {
    /// The main's text followed by each fragment's, import lines blanked.
    pub text: String,
    /// The fragments, in the order their text follows the main's.
    pub fragments: Vec<Fragment>,
    /// The first line (1-based) of each fragment in `text`, parallel to `fragments`.
    starts: Vec<u32>,
    /// C917 of the imports that could not be followed.
    pub diagnostics: Vec<Diagnostic>,
}

impl Unit {
    /// Moves `d` to the file its line is in: a line of a fragment becomes that fragment's line,
    /// with [`Diagnostic::file`] naming it.
    pub fn place(&self, d: &mut Diagnostic) {
        if d.file.is_some() {
            return;
        }
        let Some(i) = self.starts.iter().rposition(|&start| d.span.line >= start) else {
            return;
        };
        d.span.line -= self.starts[i] - 1;
        d.file = Some(self.fragments[i].path.clone());
    }
}

/// The `import` line's path, when `line` is one: `import "PATH"` at column 0, optionally
/// followed by blanks. Any other line starting with `import` is left to the parser (E001).
fn import_path(line: &str) -> Option<&str> {
    let rest = line.strip_prefix("import")?;
    let rest = rest
        .strip_prefix([' ', '\t'])?
        .trim_start_matches([' ', '\t']);
    let rest = rest.strip_prefix('"')?;
    let (path, after) = rest.split_once('"')?;
    after
        .trim_end_matches([' ', '\t'])
        .is_empty()
        .then_some(path)
}

/// The `dsl:` profile a text declares in its head (`None`: no header).
fn profile(text: &str) -> Option<&str> {
    let i = head(text).header?;
    text.split('\n').nth(i)?.strip_prefix("dsl:").map(str::trim)
}

/// `path` (an import as written) joined to `dir` (the importing file's directory relative to
/// the root, `""` for the root), or why it is refused.
fn resolve(dir: &str, path: &str) -> Result<String, String> {
    if !(path.ends_with(".bot") || path.ends_with(".iter")) {
        return Err(format!("import \"{path}\" must name a .bot or .iter file"));
    }
    let plain = |c: &str| {
        !c.is_empty()
            && c != "."
            && c != ".."
            && !c
                .chars()
                .any(|ch| ch == '\\' || ch == ':' || ch.is_control())
    };
    if path.starts_with('/') || !path.split('/').all(plain) {
        return Err(format!(
            "import \"{path}\" must be a relative path of plain names inside the bot's directory \
             (no leading /, no . or .. component)"
        ));
    }
    Ok(if dir.is_empty() {
        path.to_owned()
    } else {
        format!("{dir}/{path}")
    })
}

/// The head of `text`: the lines before its first declaration (blank lines, comments, the
/// `dsl:` header and import lines). Imports are read there only, so a line of a multi-line
/// string that looks like one (`import "./x.js"` in a script) is never taken for one.
struct Head<'t> {
    /// Each import line: (0-based index, path as written).
    imports: Vec<(usize, &'t str)>,
    /// The `dsl:` header's 0-based index.
    header: Option<usize>,
}

fn head(text: &str) -> Head<'_> {
    let mut out = Head {
        imports: Vec::new(),
        header: None,
    };
    for (i, l) in text.split('\n').enumerate() {
        if l.trim().is_empty() || l.starts_with('#') {
            continue;
        }
        if let Some(path) = import_path(l) {
            out.imports.push((i, path));
        } else if l.starts_with("dsl:") && out.header.is_none() && out.imports.is_empty() {
            out.header = Some(i);
        } else {
            break;
        }
    }
    out
}

/// Every import line of `text`'s head: (1-based line, path as written).
fn imports(text: &str) -> Vec<(u32, &str)> {
    head(text)
        .imports
        .into_iter()
        .filter_map(|(i, p)| Some((u32::try_from(i + 1).ok()?, p)))
        .collect()
}

/// `text` with its import lines (and, for a fragment, its `dsl:` header) blanked, so the parser
/// reads declarations only and every line keeps its number.
fn blanked(text: &str, fragment: bool) -> String {
    let head = head(text);
    let gone = |i: usize| {
        head.imports.iter().any(|&(at, _)| at == i) || (fragment && head.header == Some(i))
    };
    text.split('\n')
        .enumerate()
        .map(|(i, l)| if gone(i) { "" } else { l })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The unit of `text`, the file at `main` (`None`: text without a file, where an import is
/// C917).
pub(crate) fn expand(text: &str, main: Option<&Path>) -> Unit {
    let mut unit = Unit {
        text: blanked(text, false),
        fragments: Vec::new(),
        starts: Vec::new(),
        diagnostics: Vec::new(),
    };
    let first = imports(text);
    if first.is_empty() {
        return unit;
    }
    let main_name = main
        .and_then(Path::file_name)
        .and_then(|n| n.to_str())
        .map(str::to_owned);
    let root = main
        .and_then(Path::parent)
        .map(|d| {
            if d.as_os_str().is_empty() {
                Path::new(".")
            } else {
                d
            }
        })
        .map(iterion_repofile::RepoRoot::open);
    let main_profile = profile(text).map(str::to_owned);
    // (importer's index in `fragments`, or None for the main; line; path as written)
    let mut queue: std::collections::VecDeque<(Option<usize>, u32, String)> = first
        .into_iter()
        .map(|(line, p)| (None, line, p.to_owned()))
        .collect();
    let mut total = text.len();
    while let Some((from, line, path)) = queue.pop_front() {
        let span = Span::new(line, 1, 6);
        let file = from.map(|i| unit.fragments[i].path.clone());
        let mut fail = |message: String| {
            let mut d = Diagnostic::new(Code::C917, span, message);
            d.file = file.clone();
            unit.diagnostics.push(d);
        };
        let dir = file
            .as_deref()
            .and_then(|f| f.rsplit_once('/'))
            .map_or("", |(d, _)| d);
        let rel = match resolve(dir, &path) {
            Ok(rel) => rel,
            Err(message) => {
                fail(message);
                continue;
            }
        };
        if Some(&rel) == main_name.as_ref() || unit.fragments.iter().any(|f| f.path == rel) {
            continue;
        }
        let root = match &root {
            None => {
                fail(format!(
                    "import \"{path}\" needs the file's path: compile the file, not its text"
                ));
                continue;
            }
            Some(Err(e)) => {
                fail(format!("import \"{path}\": the bot's directory: {e}"));
                continue;
            }
            Some(Ok(root)) => root,
        };
        if unit.fragments.len() == MAX_FRAGMENTS {
            fail(format!(
                "import \"{path}\": a bot may import at most {MAX_FRAGMENTS} files"
            ));
            break;
        }
        let bytes = match root.read(&PathBuf::from(&rel), MAX_SOURCE_BYTES) {
            Ok(bytes) => bytes,
            Err(e) => {
                fail(format!("import \"{path}\": {e}"));
                continue;
            }
        };
        let text = match crate::source::normalise(&bytes) {
            Ok(text) => text,
            Err(_) => {
                fail(format!("import \"{path}\" ({rel}) is not UTF-8"));
                continue;
            }
        };
        total += text.len();
        if total > MAX_UNIT_BYTES {
            fail(format!(
                "import \"{path}\": the bot's files hold more than {} MiB together",
                MAX_UNIT_BYTES >> 20
            ));
            break;
        }
        let declared = profile(&text);
        if declared.is_some() && declared != main_profile.as_deref() {
            fail(format!(
                "import \"{path}\" ({rel}) declares dsl: {}, the importing bot {}",
                declared.unwrap_or_default(),
                main_profile
                    .as_deref()
                    .map_or("declares none".to_owned(), |p| format!("dsl: {p}"))
            ));
            continue;
        }
        let index = unit.fragments.len();
        for (line, p) in imports(&text) {
            queue.push_back((Some(index), line, p.to_owned()));
        }
        if !unit.text.ends_with('\n') {
            unit.text.push('\n');
        }
        let start = u32::try_from(unit.text.split('\n').count()).unwrap_or(u32::MAX);
        unit.text.push_str(&blanked(&text, true));
        unit.starts.push(start);
        unit.fragments.push(Fragment { path: rel, text });
    }
    unit
}

#[cfg(test)]
#[path = "import_tests.rs"]
mod tests;
