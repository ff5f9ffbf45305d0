//! A bundle directory's `prompts/` (docs/language.md "Bundles"): `DIR/main.bot` with
//! `DIR/prompts/NAME.md` beside it makes `NAME` a prompt of the workflow, as upstream loads it —
//! unless `main.bot` declares a prompt of that name itself, which wins.
//!
//! A bundle may come from a stranger, so its files are read by the repository-file rules
//! (`iterion_repofile`): beneath the bundle directory (a symlink that leaves it, and `..`, are
//! refused), regular files only, each at most [`MAX_PROMPT_BYTES`], at most [`MAX_PROMPTS`] of
//! them. A file that breaks a rule is the error C916 and the workflow does not compile: a prompt
//! silently missing would change what the model is told.

use std::path::Path;

use crate::ast::{self, Decl, Ident, LineStart, Span, StrKind, StrLit};
use crate::diag::{Code, Diagnostic};

/// The most bytes of one prompt file.
pub const MAX_PROMPT_BYTES: u64 = 1024 * 1024;
/// The most prompt files a bundle may have.
pub const MAX_PROMPTS: usize = 256;
/// The bundle's prompts directory.
pub const PROMPTS_DIR: &str = "prompts";

/// One `prompts/NAME.md`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct BundlePrompt {
    pub name: String,
    pub text: String,
}

/// The prompts of the bundle whose `main.bot` is `main`, or C916 diagnostics (at 1:1 of
/// `main.bot`) for the files that cannot be read. No `prompts/` directory: none.
pub(crate) fn prompts(main: &Path) -> (Vec<BundlePrompt>, Vec<Diagnostic>) {
    let mut out = Vec::new();
    let mut diags = Vec::new();
    let Some(dir) = main.parent() else {
        return (out, diags);
    };
    let here = Span::new(1, 1, 1);
    let fail = |message: String| Diagnostic::new(Code::C916, here, message);
    let listed = dir.join(PROMPTS_DIR);
    match std::fs::symlink_metadata(&listed) {
        Err(_) => return (out, diags),
        Ok(meta) if meta.file_type().is_symlink() => {
            diags.push(fail(format!(
                "bundle {PROMPTS_DIR}/ is a symbolic link; it must be a directory of the bundle"
            )));
            return (out, diags);
        }
        Ok(meta) if !meta.is_dir() => return (out, diags),
        Ok(_) => {}
    }
    let root = match iterion_repofile::RepoRoot::open(dir) {
        Ok(root) => root,
        Err(e) => {
            diags.push(fail(format!("bundle {}: {e}", dir.display())));
            return (out, diags);
        }
    };
    let entries = match std::fs::read_dir(&listed) {
        Ok(entries) => entries,
        Err(e) => {
            diags.push(fail(format!("bundle {PROMPTS_DIR}/: {e}")));
            return (out, diags);
        }
    };
    let mut names: Vec<String> = Vec::new();
    for entry in entries.flatten() {
        let Ok(file) = entry.file_name().into_string() else {
            continue;
        };
        let Some(stem) = file.strip_suffix(".md") else {
            continue;
        };
        // Only a stem that is a name can be referenced (`system: helper`).
        if !is_name(stem) {
            continue;
        }
        names.push(file);
        if names.len() > MAX_PROMPTS {
            diags.push(fail(format!(
                "bundle {PROMPTS_DIR}/ has more than {MAX_PROMPTS} prompt files"
            )));
            return (Vec::new(), diags);
        }
    }
    names.sort();
    for file in names {
        let relative = Path::new(PROMPTS_DIR).join(&file);
        let bytes = match root.read(&relative, MAX_PROMPT_BYTES) {
            Ok(bytes) => bytes,
            Err(e) => {
                diags.push(fail(format!("bundle prompt {PROMPTS_DIR}/{file}: {e}")));
                continue;
            }
        };
        let Ok(text) = String::from_utf8(bytes) else {
            diags.push(fail(format!(
                "bundle prompt {PROMPTS_DIR}/{file} is not UTF-8"
            )));
            continue;
        };
        let text = text.replace("\r\n", "\n");
        out.push(BundlePrompt {
            name: file.trim_end_matches(".md").to_owned(),
            text: text.trim_end().to_owned(),
        });
    }
    (out, diags)
}

/// Adds each bundle prompt the file does not declare itself as a `prompt` declaration.
pub(crate) fn add_to(file: &mut ast::File, prompts: Vec<BundlePrompt>) {
    for p in prompts {
        let declared = file
            .decls
            .iter()
            .any(|d| matches!(d, Decl::Prompt(q) if q.name.name == p.name));
        if declared {
            continue;
        }
        let span = Span::new(1, 1, 1);
        file.decls.push(Decl::Prompt(ast::Prompt {
            name: Ident { name: p.name, span },
            body: StrLit {
                value: p.text,
                kind: StrKind::PromptBody,
                span,
                lines: vec![LineStart {
                    value_offset: 0,
                    line: 1,
                    col: 1,
                }],
            },
        }));
    }
}

fn is_name(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}
