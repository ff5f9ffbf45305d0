//! iterion-dsl: the `.iter` front end — text → tokens → syntax tree → checks → `ir::Workflow`.
//!
//! The language is DSL.md's subset 1. The pipeline is staged so each stage can be tested and
//! fuzzed alone:
//!
//! 1. `source`: bytes → normalised text (BOM stripped, CRLF/CR → LF, E006 on invalid UTF-8).
//! 2. `lexer` + `parser`: text → [`ast::File`], reporting every parse-stage `E…` code. The parser
//!    reports the first error of each top-level declaration and resumes at the next line at
//!    indentation 0 (DSL.md §2.2).
//! 3. `check`: compile-stage `C…` codes, run only when stage 2 reported nothing.
//! 4. `ir`: a clean tree lowered into [`ir::Workflow`], the engine's input.
//!
//! Nothing here reads the environment, the network or the clock: `${…}` is expanded by the
//! engine at launch, never by the validator (DSL.md §4.3). No input panics or hangs the front end;
//! the fuzz target in `fuzz/` and the property tests hold it to that.
#![deny(missing_docs)]

pub mod ast;
mod bundle;
mod check;
mod converge;
pub mod diag;
pub mod expr;
mod import;
pub mod ir;
mod lexer;
mod load;
mod options;
mod parser;
pub mod permission;
pub mod render;
mod source;
pub mod template;

pub use diag::{Code, Diagnostic, Severity};
pub use import::{Fragment, MAX_FRAGMENTS, MAX_UNIT_BYTES};
pub use load::{BUNDLE_MAIN, LoadError, MAX_SOURCE_BYTES, load, workflow_file};
pub use options::{CompileOptions, Compiled};

/// Compiles one source text (DSL.md, whole pipeline).
///
/// Without a file there is no directory to resolve a subbot's `source` against: every subbot
/// node is then C910 ("cannot load a child without the parent's file path"). Use
/// [`compile_file`] for workflows with children.
pub fn compile(bytes: &[u8], opts: &CompileOptions) -> Compiled {
    compile_in(bytes, opts, None).0
}

/// Reads and compiles a workflow file; subbot children are loaded relative to its directory and
/// compiled with it (DSL.md §3.9). A root file that cannot be read is a [`LoadError`]; a child
/// that cannot be read is C910.
pub fn compile_file(path: &std::path::Path, opts: &CompileOptions) -> Result<Compiled, LoadError> {
    let bytes = load(path)?;
    Ok(compile_at(&bytes, path, opts))
}

/// Compiles `bytes` that were read from `path` (callers that keep the bytes, to hash or show
/// them): subbot children are loaded relative to `path`'s directory (DSL.md §3.9).
///
/// Each child file is read at most once per call. A child reached again at the same depth from
/// the same directory, with no cycle through it, is compiled once (`check/subbots/session.rs`
/// says why that is exact), so a file named by many subbot nodes costs one compile, not one per
/// path to it.
///
/// A bundle's `main.bot` (docs/language.md "Bundles") also gets the prompts of the `prompts/`
/// beside it; one that cannot be read is C916.
pub fn compile_at(bytes: &[u8], path: &std::path::Path, opts: &CompileOptions) -> Compiled {
    let origin = check::Origin::root(path, compile_in);
    let is_bundle = path.file_name() == Some(std::ffi::OsStr::new(BUNDLE_MAIN));
    let bundle = is_bundle.then(|| bundle::prompts(path));
    // Skills and the manifest: files beside `main.bot`, read by the same rules (C916).
    let (skills, mut failed) = if is_bundle {
        bundle::skills(path)
    } else {
        (Vec::new(), Vec::new())
    };
    let names: Vec<&str> = skills.iter().map(|s| s.name.as_str()).collect();
    let mut compiled = compile_with(bytes, opts, Some(&origin), bundle, &names).0;
    if is_bundle {
        let (manifest, mut bad_manifest) = bundle::manifest(path);
        failed.append(&mut bad_manifest);
        if failed.is_empty() {
            if let Some(wf) = compiled.workflow.as_mut() {
                wf.skills = skills
                    .into_iter()
                    .map(|s| ir::Skill {
                        name: s.name,
                        text: s.text,
                    })
                    .collect();
                wf.manifest = manifest;
            }
        } else {
            compiled.diagnostics.append(&mut failed);
            diag::sort(&mut compiled.diagnostics);
            compiled.workflow = None;
        }
    }
    compiled
}

pub use bundle::{MAX_PROMPT_BYTES, MAX_PROMPTS};

/// The pipeline, with where the text came from (`None`: bytes without a file).
pub(crate) fn compile_in(
    bytes: &[u8],
    opts: &CompileOptions,
    origin: Option<&check::Origin>,
) -> (Compiled, check::Children) {
    compile_with(bytes, opts, origin, None, &[])
}

/// [`compile_in`] with a bundle's prompts (and the C916 of the files that could not be read).
fn compile_with(
    bytes: &[u8],
    opts: &CompileOptions,
    origin: Option<&check::Origin>,
    bundle: Option<(Vec<bundle::BundlePrompt>, Vec<Diagnostic>)>,
    skills: &[&str],
) -> (Compiled, check::Children) {
    let mut diagnostics = Vec::new();
    let text = match source::normalise(bytes) {
        Ok(text) => text,
        Err(d) => {
            let compiled = Compiled {
                diagnostics: vec![d],
                workflow: None,
                fragments: Vec::new(),
            };
            return (compiled, check::Children::default());
        }
    };
    let path = origin.and_then(|o| Some(o.dir.join(o.chain.last()?.0.file_name()?)));
    let unit = import::expand(&text, path.as_deref());
    let (mut file, parse_diags) = parser::parse(&unit.text);
    diagnostics.extend(parse_diags);
    diagnostics.extend(unit.diagnostics.iter().cloned());
    let mut unread = Vec::new();
    if let Some((prompts, failed)) = bundle {
        bundle::add_to(&mut file, prompts);
        unread = failed;
    }
    let mut workflow = None;
    let mut children = check::Children::default();
    if diagnostics.is_empty() {
        converge::at_done(&mut file);
        let (diags, found) = check::run(&file, opts, origin);
        diagnostics.extend(diags);
        bundle::check_node_skills(&file, skills, &mut diagnostics);
        diagnostics.append(&mut unread);
        children = found;
        if !diagnostics.iter().any(Diagnostic::is_error) {
            workflow = ir::lower::lower_with(&file, &children.compiled);
        }
    }
    diagnostics.append(&mut unread);
    for d in &mut diagnostics {
        unit.place(d);
    }
    diag::sort(&mut diagnostics);
    let compiled = Compiled {
        diagnostics,
        workflow,
        fragments: unit.fragments,
    };
    (compiled, children)
}

/// The fragments the file at `path` (holding `bytes`) imports, as a compile reads them
/// (docs/language.md "Imports"); empty when it imports nothing or its text is not UTF-8. A
/// run's identity covers them (`iterion_engine::workflow_hash_at`).
pub fn fragments(bytes: &[u8], path: &std::path::Path) -> Vec<Fragment> {
    source::normalise(bytes)
        .map(|text| import::expand(&text, Some(path)).fragments)
        .unwrap_or_default()
}

/// Parses only (stage 2), for tools and tests: the tree and the parse-stage diagnostics.
pub fn parse(bytes: &[u8]) -> (ast::File, Vec<Diagnostic>) {
    match source::normalise(bytes) {
        Ok(text) => parser::parse(&text),
        Err(d) => (ast::File::default(), vec![d]),
    }
}
