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

/// The bundle's skills directory: each `skills/NAME.md` is written to the run's workspace as
/// `.claude/skills/NAME.md` when the run starts (docs/language.md "Bundles").
pub const SKILLS_DIR: &str = "skills";

/// The prompts of the bundle whose `main.bot` is `main`, or C916 diagnostics (at 1:1 of
/// `main.bot`) for the files that cannot be read. No `prompts/` directory: none.
pub(crate) fn prompts(main: &Path) -> (Vec<BundlePrompt>, Vec<Diagnostic>) {
    md_files(main, PROMPTS_DIR, true)
}

/// The skills of the bundle whose `main.bot` is `main` (`skills/*.md`, by the same rules as
/// its prompts; the name is the file name without `.md`). A subdirectory (upstream's folder
/// skills) is C916: it is not read yet, and a skill silently missing would change what an
/// agent finds.
pub(crate) fn skills(main: &Path) -> (Vec<BundlePrompt>, Vec<Diagnostic>) {
    md_files(main, SKILLS_DIR, false)
}

/// The `.md` files of `DIR/sub`, read beneath `DIR`. `names_only`: skip a file whose stem is not
/// a name (a prompt must be referable); otherwise any stem without `/`, `.`-start or control
/// characters is kept, and a subdirectory is C916.
fn md_files(main: &Path, sub: &str, names_only: bool) -> (Vec<BundlePrompt>, Vec<Diagnostic>) {
    let mut out = Vec::new();
    let mut diags = Vec::new();
    let Some(dir) = main.parent() else {
        return (out, diags);
    };
    let here = Span::new(1, 1, 1);
    let fail = |message: String| Diagnostic::new(Code::C916, here, message);
    let listed = dir.join(sub);
    match std::fs::symlink_metadata(&listed) {
        Err(_) => return (out, diags),
        Ok(meta) if meta.file_type().is_symlink() => {
            diags.push(fail(format!(
                "bundle {sub}/ is a symbolic link; it must be a directory of the bundle"
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
            diags.push(fail(format!("bundle {sub}/: {e}")));
            return (out, diags);
        }
    };
    let kind = if names_only { "prompt" } else { "skill" };
    let mut names: Vec<String> = Vec::new();
    for entry in entries.flatten() {
        let Ok(file) = entry.file_name().into_string() else {
            continue;
        };
        if !names_only && !file.starts_with('.') && entry.file_type().is_ok_and(|t| t.is_dir()) {
            diags.push(fail(format!(
                "bundle {sub}/{file} is a directory; only {sub}/NAME.md files are read"
            )));
            continue;
        }
        let Some(stem) = file.strip_suffix(".md") else {
            continue;
        };
        // A prompt's stem must be a name to be referenced (`system: helper`); a skill's must be
        // one plain file name.
        if names_only && !is_name(stem) {
            continue;
        }
        if !names_only
            && (stem.is_empty() || stem.starts_with('.') || stem.chars().any(char::is_control))
        {
            continue;
        }
        names.push(file);
        if names.len() > MAX_PROMPTS {
            diags.push(fail(format!(
                "bundle {sub}/ has more than {MAX_PROMPTS} {kind} files"
            )));
            return (Vec::new(), diags);
        }
    }
    names.sort();
    for file in names {
        let relative = Path::new(sub).join(&file);
        let bytes = match root.read(&relative, MAX_PROMPT_BYTES) {
            Ok(bytes) => bytes,
            Err(e) => {
                diags.push(fail(format!("bundle {kind} {sub}/{file}: {e}")));
                continue;
            }
        };
        let Ok(text) = String::from_utf8(bytes) else {
            diags.push(fail(format!("bundle {kind} {sub}/{file} is not UTF-8")));
            continue;
        };
        // A skill is copied as it is; a prompt's line ends and trailing blank space are tidied.
        let text = if names_only {
            text.replace("\r\n", "\n").trim_end().to_owned()
        } else {
            text
        };
        out.push(BundlePrompt {
            name: file.trim_end_matches(".md").to_owned(),
            text,
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

/// The manifest file names, in the order upstream tries them.
pub const MANIFEST_FILES: [&str; 2] = ["manifest.yaml", "manifest.yml"];
/// The most bytes of a manifest.
pub const MAX_MANIFEST_BYTES: u64 = 64 * 1024;
/// The manifest schema this build reads.
const MANIFEST_SCHEMA: i64 = 1;
/// The keys upstream's manifest has (it refuses any other); only the first four are kept, the
/// rest are documentation for other tools (the catalogue's display, its launchers, the build
/// floor `requires`).
const MANIFEST_KEYS: [&str; 16] = [
    "name",
    "version",
    "description",
    "author",
    "schema_version",
    "compat",
    "attachments",
    "triggers",
    "capabilities",
    "display_name",
    "icon",
    "enabled",
    "when_to_use",
    "invocations",
    "requires",
    "changelog",
];

/// The keys whose value may be nested (lists, maps): accepted and skipped.
const MANIFEST_NESTED: [&str; 7] = [
    "compat",
    "attachments",
    "triggers",
    "capabilities",
    "invocations",
    "requires",
    "changelog",
];

/// The bundle's `manifest.yaml` (or `.yml`), read beneath the bundle like its prompts; `None`
/// when it has none. A manifest that cannot be read, has a key upstream does not know, or a
/// `schema_version` other than 1 is C916.
pub(crate) fn manifest(main: &Path) -> (Option<crate::ir::Manifest>, Vec<Diagnostic>) {
    let here = Span::new(1, 1, 1);
    let fail = |message: String| vec![Diagnostic::new(Code::C916, here, message)];
    let Some(dir) = main.parent() else {
        return (None, Vec::new());
    };
    let Some(file) = MANIFEST_FILES
        .into_iter()
        .find(|f| std::fs::symlink_metadata(dir.join(f)).is_ok())
    else {
        return (None, Vec::new());
    };
    let bytes = match iterion_repofile::RepoRoot::open(dir)
        .and_then(|root| root.read(Path::new(file), MAX_MANIFEST_BYTES))
    {
        Ok(bytes) => bytes,
        Err(e) => return (None, fail(format!("bundle {file}: {e}"))),
    };
    let Ok(text) = String::from_utf8(bytes) else {
        return (None, fail(format!("bundle {file} is not UTF-8")));
    };
    match parse_manifest(&text.replace("\r\n", "\n")) {
        Ok(m) => (Some(m), Vec::new()),
        Err(why) => (None, fail(format!("bundle {file}: {why}"))),
    }
}

/// The subset of YAML a manifest uses: top-level `key: value` lines, a value plain, quoted or a
/// `|` / `>` block; the nested content of the [`MANIFEST_NESTED`] keys is skipped.
pub(crate) fn parse_manifest(text: &str) -> Result<crate::ir::Manifest, String> {
    let mut m = crate::ir::Manifest::default();
    let lines: Vec<&str> = text.lines().collect();
    let mut seen: Vec<&str> = Vec::new();
    let mut i = 0;
    let blank = |l: &str| l.trim().is_empty() || l.trim_start().starts_with('#');
    while i < lines.len() {
        let line = lines[i];
        i += 1;
        if blank(line) || line == "---" {
            continue;
        }
        if line.starts_with([' ', '\t']) {
            return Err(format!("line {i}: unexpected indentation"));
        }
        let Some((key, rest)) = line.split_once(':') else {
            return Err(format!("line {i}: expected \"key: value\""));
        };
        let key = key.trim();
        if !MANIFEST_KEYS.contains(&key) {
            return Err(format!("line {i}: unknown key \"{key}\""));
        }
        if seen.contains(&key) {
            return Err(format!("line {i}: \"{key}\" given twice"));
        }
        seen.push(key);
        let rest = rest.trim();
        // The indented lines that belong to this key.
        let mut block: Vec<&str> = Vec::new();
        while i < lines.len() && (lines[i].starts_with([' ', '\t']) || lines[i].trim().is_empty()) {
            block.push(lines[i]);
            i += 1;
        }
        let value = if rest.starts_with('|') || rest.starts_with('>') {
            let indent = block
                .iter()
                .filter(|l| !l.trim().is_empty())
                .map(|l| l.len() - l.trim_start().len())
                .min()
                .unwrap_or(0);
            let body: Vec<&str> = block
                .iter()
                .map(|l| if l.len() >= indent { &l[indent..] } else { "" })
                .collect();
            let joined = if rest.starts_with('|') {
                body.join("\n")
            } else {
                body.join(" ")
            };
            joined.trim_end().to_owned()
        } else {
            let plain = rest.split(" #").next().unwrap_or("").trim();
            let unquoted = plain
                .strip_prefix('"')
                .and_then(|s| s.strip_suffix('"'))
                .or_else(|| plain.strip_prefix('\'').and_then(|s| s.strip_suffix('\'')))
                .unwrap_or(plain);
            if !block.iter().all(|l| blank(l)) && !MANIFEST_NESTED.contains(&key) {
                return Err(format!("\"{key}\" must be one value"));
            }
            unquoted.to_owned()
        };
        match key {
            "name" => m.name = value,
            "version" => m.version = value,
            "description" => m.description = value,
            "author" => m.author = value,
            "schema_version" => {
                let n: i64 = value
                    .parse()
                    .map_err(|_| format!("schema_version {value:?} is not an integer"))?;
                if n != MANIFEST_SCHEMA && n != 0 {
                    return Err(format!(
                        "schema_version {n} is not supported by this build (expected {MANIFEST_SCHEMA})"
                    ));
                }
            }
            _ => {}
        }
    }
    Ok(m)
}

/// C923 (warning): an agent's `skills:` entry that is not one of the bundle's `skills/NAME.md`
/// (`skills`, empty for a file that is not a bundle's `main.bot`). Every bundle skill reaches the
/// run's workspace whatever a node lists; a name the bundle does not ship reaches nothing.
pub(crate) fn check_node_skills(file: &ast::File, skills: &[&str], out: &mut Vec<Diagnostic>) {
    for decl in &file.decls {
        let ast::Decl::Node(node) = decl else {
            continue;
        };
        let ast::NodeBody::Agent(agent) = &node.body else {
            continue;
        };
        let Some(list) = &agent.delegate.skills else {
            continue;
        };
        for item in list
            .items
            .iter()
            .filter(|i| !skills.contains(&i.value.as_str()))
        {
            out.push(
                Diagnostic::new(
                    Code::C923,
                    item.span,
                    format!(
                        "skill \"{}\" is not in the bundle's {SKILLS_DIR}/; the node runs without it",
                        item.value
                    ),
                )
                .with_node(node.name.name.clone())
                .with_hint(format!(
                    "add {SKILLS_DIR}/{}.md beside main.bot, or remove it from skills",
                    item.value
                )),
            );
        }
    }
}
