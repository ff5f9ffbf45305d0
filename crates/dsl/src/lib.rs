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
mod check;
pub mod diag;
pub mod expr;
pub mod ir;
mod lexer;
mod parser;
pub mod render;
mod source;
pub mod template;

pub use diag::{Code, Diagnostic, Severity};

/// The largest source the loader accepts (DSL.md §1.1); bigger is a [`LoadError::TooLarge`].
pub const MAX_SOURCE_BYTES: u64 = 10 * 1024 * 1024;

/// Inputs of the validator besides the file (DSL.md §8.3).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CompileOptions {
    /// The engine has the ask-user relay inside a sandbox (turns C136 off). Default `false`.
    pub ask_user_in_sandbox: bool,
}

/// The outcome of compiling one source text.
#[derive(Clone, Debug)]
pub struct Compiled {
    /// Every diagnostic, sorted by line, column, code (DSL.md §8.3).
    pub diagnostics: Vec<Diagnostic>,
    /// The lowered workflow, present exactly when no diagnostic is an error.
    pub workflow: Option<ir::Workflow>,
}

impl Compiled {
    /// Number of errors.
    pub fn error_count(&self) -> usize {
        self.diagnostics.iter().filter(|d| d.is_error()).count()
    }

    /// Number of warnings.
    pub fn warning_count(&self) -> usize {
        self.diagnostics.len() - self.error_count()
    }
}

/// Why a file could not be read (exit 2 in the CLI; no diagnostic, DSL.md §1.1).
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The repository-file reader refused it (issue 15 item 12): not a regular file (a FIFO,
    /// `/dev/stdin`), outside the repository, or not read in time. The message names the rule.
    #[error("cannot read {path}: {message}")]
    Refused {
        /// The path as given.
        path: String,
        /// The rule ([`iterion_repofile::RepoFileError::rule`]).
        rule: &'static str,
        /// The reader's message.
        message: String,
    },
    /// The file could not be opened or read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The path as given.
        path: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The file is over [`MAX_SOURCE_BYTES`].
    #[error("{path} is {size} bytes; the limit is {limit} bytes (10 MiB)")]
    TooLarge {
        /// The path as given.
        path: String,
        /// Its size in bytes.
        size: u64,
        /// The limit.
        limit: u64,
    },
}

impl LoadError {
    /// A stable code for machines.
    pub fn code(&self) -> &'static str {
        match self {
            LoadError::Io { .. } => "READ_FAILED",
            LoadError::TooLarge { .. } => "FILE_TOO_LARGE",
            LoadError::Refused { .. } => "FILE_REFUSED",
        }
    }
}

/// Reads a workflow file, refusing one over [`MAX_SOURCE_BYTES`] before reading it whole.
pub fn load(path: &std::path::Path) -> Result<Vec<u8>, LoadError> {
    read_bounded(path).map_err(|failure| failure.into_error(path))
}

/// Why a read failed, without the path: the subbot loader reads each file once (by canonical
/// path) and reports a failure under the spelling of each `source` that names it.
#[derive(Debug)]
pub(crate) enum ReadFailure {
    /// The file could not be opened or read.
    Io(std::io::Error),
    /// The file is over [`MAX_SOURCE_BYTES`]; `size` is what was seen.
    TooLarge {
        /// Its size in bytes.
        size: u64,
    },
    /// The repository-file reader refused it.
    Refused {
        /// The rule.
        rule: &'static str,
        /// The reader's message.
        message: String,
    },
}

impl ReadFailure {
    /// The [`LoadError`] for this failure when the file was named `path`.
    pub(crate) fn into_error(self, path: &std::path::Path) -> LoadError {
        let path = path.display().to_string();
        match self {
            ReadFailure::Io(source) => LoadError::Io { path, source },
            ReadFailure::TooLarge { size } => LoadError::TooLarge {
                path,
                size,
                limit: MAX_SOURCE_BYTES,
            },
            ReadFailure::Refused { rule, message } => LoadError::Refused {
                path,
                rule,
                message,
            },
        }
    }

    /// [`Self::into_error`] for a failure kept to be reported again: the copy of the I/O error
    /// has the same kind and the same text.
    pub(crate) fn error_at(&self, path: &std::path::Path) -> LoadError {
        let copy = match self {
            ReadFailure::Io(e) => ReadFailure::Io(e.raw_os_error().map_or_else(
                || std::io::Error::new(e.kind(), e.to_string()),
                std::io::Error::from_raw_os_error,
            )),
            ReadFailure::TooLarge { size } => ReadFailure::TooLarge { size: *size },
            ReadFailure::Refused { rule, message } => ReadFailure::Refused {
                rule,
                message: message.clone(),
            },
        };
        copy.into_error(path)
    }

    fn from_repo_file(error: iterion_repofile::RepoFileError, size: u64) -> ReadFailure {
        use iterion_repofile::RepoFileError as E;
        match error {
            E::TooLarge { .. } => ReadFailure::TooLarge {
                size: size.max(MAX_SOURCE_BYTES + 1),
            },
            E::Io { source, .. } => ReadFailure::Io(source),
            E::NotFound { .. } => {
                ReadFailure::Io(std::io::Error::from(std::io::ErrorKind::NotFound))
            }
            other @ (E::OutsideRepository { .. }
            | E::Symlink { .. }
            | E::NotRegular { .. }
            | E::TimedOut { .. }) => ReadFailure::Refused {
                rule: other.rule(),
                message: other.to_string(),
            },
        }
    }
}

/// [`load`] without the path in the error: a regular file (never a FIFO or a device, so the read
/// cannot block), at most [`MAX_SOURCE_BYTES`], within the reader's timeout.
pub(crate) fn read_bounded(path: &std::path::Path) -> Result<Vec<u8>, ReadFailure> {
    let size = precheck_size(path)?;
    iterion_repofile::read_regular(path, MAX_SOURCE_BYTES)
        .map_err(|e| ReadFailure::from_repo_file(e, size))
}

/// [`read_bounded`] of a file that must lie beneath the repository `root` (`canon` is its
/// canonical path): opened beneath the root, so a component swapped for a symlink after
/// canonicalisation cannot lead out (issue 15 items 12, 15).
pub(crate) fn read_beneath(
    root: &std::path::Path,
    canon: &std::path::Path,
) -> Result<Vec<u8>, ReadFailure> {
    let relative = iterion_repofile::relative_to(root, canon)
        .map_err(|e| ReadFailure::from_repo_file(e, 0))?;
    let size = precheck_size(canon)?;
    iterion_repofile::read_beneath(root, &relative, MAX_SOURCE_BYTES)
        .map_err(|e| ReadFailure::from_repo_file(e, size))
}

/// The size `stat` reports, refused early when over the limit (so the error shows it).
fn precheck_size(path: &std::path::Path) -> Result<u64, ReadFailure> {
    let size = std::fs::metadata(path).map_err(ReadFailure::Io)?.len();
    if size > MAX_SOURCE_BYTES {
        return Err(ReadFailure::TooLarge { size });
    }
    Ok(size)
}

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
pub fn compile_at(bytes: &[u8], path: &std::path::Path, opts: &CompileOptions) -> Compiled {
    let origin = check::Origin::root(path);
    compile_in(bytes, opts, Some(&origin)).0
}

/// The pipeline, with where the text came from (`None`: bytes without a file).
pub(crate) fn compile_in(
    bytes: &[u8],
    opts: &CompileOptions,
    origin: Option<&check::Origin>,
) -> (Compiled, check::Children) {
    let mut diagnostics = Vec::new();
    let text = match source::normalise(bytes) {
        Ok(text) => text,
        Err(d) => {
            let compiled = Compiled {
                diagnostics: vec![d],
                workflow: None,
            };
            return (compiled, check::Children::default());
        }
    };
    let (file, parse_diags) = parser::parse(&text);
    diagnostics.extend(parse_diags);
    let mut workflow = None;
    let mut children = check::Children::default();
    if diagnostics.is_empty() {
        let (diags, found) = check::run(&file, opts, origin);
        diagnostics.extend(diags);
        children = found;
        if !diagnostics.iter().any(Diagnostic::is_error) {
            workflow = ir::lower_with(&file, &children.compiled);
        }
    }
    diag::sort(&mut diagnostics);
    let compiled = Compiled {
        diagnostics,
        workflow,
    };
    (compiled, children)
}

/// Parses only (stage 2), for tools and tests: the tree and the parse-stage diagnostics.
pub fn parse(bytes: &[u8]) -> (ast::File, Vec<Diagnostic>) {
    match source::normalise(bytes) {
        Ok(text) => parser::parse(&text),
        Err(d) => (ast::File::default(), vec![d]),
    }
}
