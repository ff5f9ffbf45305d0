//! The loader of one top-level compile: it reads each child file once and compiles each child
//! once per place it can be reused, so a file named by many subbot nodes (A names B twice, B
//! names C twice, … down to the depth limit) costs one compile instead of one per path to it.
//!
//! # What is cached, and why that is exact
//!
//! The cache never changes a diagnostic or the IR; it only skips work whose result is known.
//!
//! - **Bytes, by canonical path.** A file is read at most once per top-level compile, so a file
//!   that changes during the compile cannot be seen in two versions. A failed read is kept as
//!   well and reported under each spelling that names the file (the C910 text shows the path as
//!   resolved from the `source` value, as before).
//! - **Canonical paths, by the path as resolved.** Each path is canonicalised once, so all checks
//!   see one view of the symlinks.
//! - **Child outcomes, by (canonical path, directory, depth).** What a parent uses from a child
//!   compile is its [`Outcome`]: the cycle chain if there is one, or else the first error, or else
//!   the workflow. A child compile depends on its bytes (fixed by the canonical path), on the
//!   directory its own `source` values are resolved against, on the depth (the depth-8 check),
//!   and on the chain of ancestors, which is read in one place only: the C913 test "is this
//!   target's canonical path in the chain?". The chain's names appear only in C913 text.
//!
//!   The directory matters in two ways. Which files its `source` values reach depends only on
//!   its canonical path (`d/x` resolves as `realpath(d)/x`). But a C910 for an unreadable file
//!   shows the path as resolved from the directory *as written* (`./sub/../gone.iter`), and that
//!   text can travel up inside a parent's C910. So an outcome without errors (a workflow, or
//!   none: then no read failed anywhere below) is keyed by the canonical directory, and an
//!   outcome with an error by the directory as written.
//!
//!   An outcome with **no cycle** is stored with its *footprint*: every canonical path its
//!   compile tested against the chain, its children's included. It is reused for another chain
//!   of the same length only when no footprint path is in that chain. Proof: the new compile
//!   runs the same steps as the stored one as long as every chain test answers the same. A test
//!   at a descendant reached by the path `P` below this file asks whether `t` is in
//!   `chain ++ P`. It was not in `old ++ P` (no cycle), so `t` is not in `P`, and it is not in
//!   the new chain (which is disjoint from the footprint). The depth tests compare equal
//!   lengths. So every step is the same, and no C913 text (the only place names appear) is
//!   produced.
//!
//!   An outcome **with a cycle** depends on the chain's names (the C913 text is the chain), so
//!   it is not stored. Instead, a child compile stops at its first cycle: its parent reads only
//!   the cycle chain (the first one found, which the rest of the file cannot change) and drops
//!   the child's other diagnostics. The root file still checks every node, so all of its
//!   diagnostics are reported. Then, for a given file, directory and depth, a compile without a
//!   cycle happens once (a stored footprint that meets the chain means the compile finds a
//!   cycle, by the proof above), and each compile that finds a cycle starts at most one more
//!   compile that finds one, a level down. A cycle costs at most 8 compiles per subbot node of
//!   the root, not one per path.
//!
//! What is not shared:
//! - Outcomes with an error under different spellings of one directory (`./` at some levels, not
//!   at others) are compiled once per spelling.
//! - The IR nests each child's workflow in each subbot node that names it
//!   (`ir::SubbotNode::child`), so the output still holds one copy per path. The cache saves
//!   reading, parsing and checking, not the size of the IR.
use std::cell::RefCell;
use std::collections::{BTreeSet, HashMap};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use super::children::Children;
use crate::diag::Diagnostic;
use crate::ir;
use crate::load::{LoadError, ReadFailure, read_beneath, read_bounded};
use crate::options::{CompileOptions, Compiled};

/// Whether a session reuses what it has loaded (production always does).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Reuse {
    /// Read each file once, reuse child outcomes, stop a child at its first cycle.
    Cached,
    /// Read, canonicalise and compile at every subbot node and check every node of every file,
    /// as before the cache existed: the reference the cached compile is tested against.
    #[cfg(test)]
    Fresh,
}

/// What a parent uses from a child compile (DSL.md §3.9): in this order of precedence.
#[derive(Debug)]
pub(super) enum Outcome {
    /// A cycle was found in the child or below it: the chain text (`a -> b -> a`).
    Cycle(String),
    /// The child has errors: the first one, by position.
    Broken(Diagnostic),
    /// The child compiled but declares no workflow.
    NoWorkflow,
    /// The child's workflow, nested into the parent's IR.
    Compiled(Box<ir::Workflow>),
}

/// A child's outcome with the canonical paths its compile tested against the chain.
#[derive(Debug)]
pub(super) struct Visit {
    pub outcome: Outcome,
    pub footprint: BTreeSet<PathBuf>,
}

/// (canonical path of the file, its directory, depth = length of the child's chain).
type Key<Dir> = (PathBuf, Dir, usize);

/// A file's bytes, or why they could not be read.
type Read = Result<Rc<[u8]>, ReadFailure>;

/// The whole pipeline, handed in by the crate root: a child is compiled the way its parent is
/// (the root passes `compile_in`), without this loader naming the pipeline that calls it.
pub(crate) type CompileFn = fn(&[u8], &CompileOptions, Option<&Origin>) -> (Compiled, Children);

/// The state of one top-level compile, shared by every [`Origin`] below the root.
pub(crate) struct Session {
    reuse: Reuse,
    compile: CompileFn,
    canonical: RefCell<HashMap<OsString, PathBuf>>,
    files: RefCell<HashMap<PathBuf, Read>>,
    /// Outcomes without errors, by the canonical directory.
    clean: RefCell<HashMap<Key<PathBuf>, Rc<Visit>>>,
    /// Outcomes with an error (their text may show the directory), by the directory as written.
    broken: RefCell<HashMap<Key<OsString>, Rc<Visit>>>,
    #[cfg(test)]
    pub(super) stats: RefCell<Stats>,
}

/// What a session did, for tests: reads and compiles per canonical path.
#[cfg(test)]
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct Stats {
    pub reads: std::collections::BTreeMap<PathBuf, usize>,
    pub compiles: std::collections::BTreeMap<PathBuf, usize>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("reuse", &self.reuse)
            .finish_non_exhaustive()
    }
}

impl Session {
    pub(crate) fn new(reuse: Reuse, compile: CompileFn) -> Self {
        Session {
            reuse,
            compile,
            canonical: RefCell::default(),
            files: RefCell::default(),
            clean: RefCell::default(),
            broken: RefCell::default(),
            #[cfg(test)]
            stats: RefCell::default(),
        }
    }

    /// Whether a child compile may stop at its first cycle (see the module doc).
    pub(super) fn stops_children_at_a_cycle(&self) -> bool {
        self.reuse == Reuse::Cached
    }

    /// The canonical path of `path`, or `path` itself when it cannot be canonicalised (the load
    /// then reports why).
    pub(super) fn canonical(&self, path: &Path) -> PathBuf {
        let resolve = || std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
        if self.reuse != Reuse::Cached {
            return resolve();
        }
        self.canonical
            .borrow_mut()
            .entry(path.as_os_str().to_owned())
            .or_insert_with(resolve)
            .clone()
    }

    /// The bytes of the file at `path` (canonical path `canon`), read once per session: beneath
    /// the repository `repo` when the root file lies in one, else as a regular file.
    fn read(&self, path: &Path, canon: &Path, repo: Option<&Path>) -> Result<Rc<[u8]>, LoadError> {
        let read = || {
            #[cfg(test)]
            {
                *self
                    .stats
                    .borrow_mut()
                    .reads
                    .entry(canon.to_path_buf())
                    .or_default() += 1;
            }
            match repo {
                Some(root) => read_beneath(root, canon).map(Rc::from),
                None => read_bounded(path).map(Rc::from),
            }
        };
        if self.reuse != Reuse::Cached {
            return read().map_err(|failure| failure.into_error(path));
        }
        let mut files = self.files.borrow_mut();
        match files.entry(canon.to_path_buf()).or_insert_with(read) {
            Ok(bytes) => Ok(Rc::clone(bytes)),
            Err(failure) => Err(failure.error_at(path)),
        }
    }

    /// Loads and compiles the child at `path` (canonical `canon`, named `source`) below
    /// `parent`, or reuses an earlier compile that is known to give the same outcome. The caller
    /// has already ruled out a cycle at `canon` and a child past the depth limit.
    pub(super) fn visit(
        &self,
        parent: &Origin,
        path: &Path,
        canon: &Path,
        source: &str,
        opts: &CompileOptions,
    ) -> Result<Rc<Visit>, LoadError> {
        let origin = parent.child(path, canon, source);
        let depth = origin.chain.len();
        let clean_key = (canon.to_path_buf(), self.canonical(&origin.dir), depth);
        let broken_key = (
            canon.to_path_buf(),
            origin.dir.as_os_str().to_owned(),
            depth,
        );
        if self.reuse == Reuse::Cached {
            let stored = [
                self.clean.borrow().get(&clean_key).cloned(),
                self.broken.borrow().get(&broken_key).cloned(),
            ];
            for visit in stored.into_iter().flatten() {
                if !origin
                    .chain
                    .iter()
                    .any(|(p, _)| visit.footprint.contains(p))
                {
                    return Ok(visit);
                }
            }
        }
        let bytes = self.read(path, canon, origin.repo.as_deref())?;
        #[cfg(test)]
        {
            *self
                .stats
                .borrow_mut()
                .compiles
                .entry(canon.to_path_buf())
                .or_default() += 1;
        }
        let (compiled, children) = (self.compile)(&bytes, opts, Some(&origin));
        let outcome = match children.cycle {
            Some(chain) => Outcome::Cycle(chain),
            None => match compiled.diagnostics.into_iter().find(Diagnostic::is_error) {
                Some(first) => Outcome::Broken(first),
                None => compiled
                    .workflow
                    .map_or(Outcome::NoWorkflow, |w| Outcome::Compiled(Box::new(w))),
            },
        };
        let visit = Rc::new(Visit {
            outcome,
            footprint: children.footprint,
        });
        if self.reuse == Reuse::Cached {
            let stored = Rc::clone(&visit);
            match visit.outcome {
                Outcome::Cycle(_) => {}
                Outcome::Broken(_) => _ = self.broken.borrow_mut().insert(broken_key, stored),
                Outcome::NoWorkflow | Outcome::Compiled(_) => {
                    _ = self.clean.borrow_mut().insert(clean_key, stored)
                }
            }
        }
        Ok(visit)
    }
}

#[cfg(test)]
#[path = "session_tests.rs"]
mod tests;

/// Where a source came from: what loading its children needs (DSL.md §3.9).
#[derive(Clone, Debug)]
pub(crate) struct Origin {
    /// The directory `source` values are relative to.
    pub dir: PathBuf,
    /// The files from the root down to this one: canonical path and the name shown in C913.
    pub chain: Vec<(PathBuf, String)>,
    /// The canonical repository root of the root file, when it lies in one: every child must
    /// resolve beneath it (C915) and is read beneath it.
    pub repo: Option<PathBuf>,
    /// The loader of this top-level compile, shared by every origin below the root.
    pub(super) session: Rc<Session>,
}

impl Origin {
    /// The origin of a root file read from `path`, with a new session: children are read and
    /// compiled once per top-level compile.
    pub(crate) fn root(path: &Path, compile: CompileFn) -> Self {
        Self::root_with(path, Reuse::Cached, compile)
    }

    /// [`Self::root`] with the given reuse (tests compare against `Reuse::Fresh`).
    pub(crate) fn root_with(path: &Path, reuse: Reuse, compile: CompileFn) -> Self {
        let session = Rc::new(Session::new(reuse, compile));
        let dir = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let shown = path.file_name().map_or_else(
            || path.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        );
        let repo = repository_root_of(&dir);
        Origin {
            dir,
            chain: vec![(session.canonical(path), shown)],
            repo,
            session,
        }
    }

    /// The origin of the child at `path` (canonical path `canon`), shown as `source`.
    fn child(&self, path: &Path, canon: &Path, source: &str) -> Self {
        let mut chain = self.chain.clone();
        chain.push((canon.to_path_buf(), source.to_owned()));
        Origin {
            dir: path
                .parent()
                .map_or_else(|| self.dir.clone(), Path::to_path_buf),
            chain,
            repo: self.repo.clone(),
            session: Rc::clone(&self.session),
        }
    }

    /// What this origin's session has read and compiled so far (tests).
    #[cfg(test)]
    fn session_stats(&self) -> Stats {
        self.session.stats.borrow().clone()
    }
}

/// The repository a root file in `dir` belongs to (issue 15 item 15): the nearest ancestor of
/// `dir`'s canonical path holding a `.git` entry (a directory, or the file of a worktree), as
/// git finds it. `None` outside any repository.
fn repository_root_of(dir: &Path) -> Option<PathBuf> {
    let dir = std::fs::canonicalize(dir).ok()?;
    dir.ancestors()
        .find(|d| std::fs::symlink_metadata(d.join(".git")).is_ok())
        .map(Path::to_path_buf)
}
