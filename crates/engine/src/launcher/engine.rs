//! [`Engine`]: launches and resumes runs end to end (ARCHITECTURE.md §2, the seed's steps 1–21
//! that this release has): the global default, the launch checks, the run record, admission,
//! workspace setup, `resolve_and_start_sandbox`, the executor, teardown, the final record.
//!
//! An `Engine` is built once per process. Built with [`Engine::new`] it is *neutral*: a workflow
//! that configures no sandbox runs unsandboxed. A product entry point installs the global default
//! with [`Engine::with_sandbox_default`] (the CLI: `ITERION_SANDBOX_DEFAULT`, else `auto`).
//!
//! The engine never reads the process environment: it reads the [`Environment`] it is given
//! ([`Engine::with_environment`]; the CLI hands it `Environment::from_process()`), empty by
//! default. Every knob, secret, route, budget and driver setting a run reads comes from there.

use std::path::PathBuf;
use std::sync::Arc;

use iterion_dsl::ir::Workflow;
use iterion_sandbox::{FactoryOptions, Registry, SandboxFlag, Trust};
use iterion_store::{RunId, RunStatus, Store};
use iterion_vocab::Environment;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

use crate::launcher::admission::AdmissionError;
use crate::launcher::launch::{LaunchError, LaunchOptions};
use crate::launcher::setup::PreflightSetup;
use crate::records::secrets::ResolvedSecret;

/// The engine: a store, the driver registry and the installed defaults.
pub struct Engine {
    pub(crate) store: Arc<dyn Store>,
    pub(crate) iterion_home: PathBuf,
    /// `None`: the product registry over `environment` ([`Engine::registry`]).
    pub(crate) registry: Option<Registry>,
    pub(crate) factory_options: FactoryOptions,
    pub(crate) sandbox_default: Option<SandboxFlag>,
    pub(crate) engine_binary: Option<PathBuf>,
    pub(crate) operator: Option<Arc<dyn crate::executor::agent::operator::Operator>>,
    pub(crate) environment: Environment,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("store", &self.store)
            .field("iterion_home", &self.iterion_home)
            .field("sandbox_default", &self.sandbox_default)
            .finish_non_exhaustive()
    }
}

impl Engine {
    /// A neutral engine over `store`, keeping run files under `iterion_home`, selecting drivers
    /// from the local registry (docker, podman, noop).
    ///
    /// Its environment is empty: the engine never reads the process's. An embedder installs the
    /// one its runs should see with [`Engine::with_environment`] (the CLI passes
    /// `Environment::from_process()`, taken once in `main`).
    pub fn new(store: Arc<dyn Store>, iterion_home: impl Into<PathBuf>) -> Engine {
        Engine {
            store,
            iterion_home: iterion_home.into(),
            registry: None,
            factory_options: FactoryOptions::default(),
            sandbox_default: None,
            engine_binary: None,
            operator: None,
            environment: Environment::empty(),
        }
    }

    /// The environment the engine reads — knobs, secrets, model routes, budgets, the product
    /// registry's driver settings, and what a host run does itself (`PATH`,
    /// `ITERION_REPO_DEVBOX`, SANDBOX.md §15). Default: empty (an entry point passes its
    /// snapshot; the engine never reads the process's).
    #[must_use]
    pub fn with_environment(mut self, environment: Environment) -> Engine {
        self.environment = environment;
        self
    }

    /// Installs the global default (SANDBOX.md §2.1 tier 5). Default: none (neutral).
    #[must_use]
    pub fn with_sandbox_default(mut self, default: SandboxFlag) -> Engine {
        self.sandbox_default = Some(default);
        self
    }

    /// The engine binary bound into sandboxes when `ITERION_BIN` is unset (SANDBOX.md §8.4).
    /// Default: none (then a sandboxed run needs `ITERION_BIN`).
    #[must_use]
    pub fn with_engine_binary(mut self, path: impl Into<PathBuf>) -> Engine {
        self.engine_binary = Some(path.into());
        self
    }

    /// Who answers an `interaction: ask` node's `ask_user` at once (the CLI: the terminal, when
    /// it is interactive). Default: nobody, and the run pauses until `iterion resume RUN_ID
    /// --answer TEXT`.
    #[must_use]
    pub fn with_operator(
        mut self,
        operator: Arc<dyn crate::executor::agent::operator::Operator>,
    ) -> Engine {
        self.operator = Some(operator);
        self
    }

    /// The driver registry. Default: the product registry (docker, podman, kubernetes, noop),
    /// its settings read from the engine's environment.
    #[must_use]
    pub fn with_registry(mut self, registry: Registry) -> Engine {
        self.registry = Some(registry);
        self
    }

    /// The registry runs select from: the installed one, else the product registry over the
    /// engine's environment.
    pub(crate) fn registry(&self) -> Registry {
        crate::sandbox::registry::registry_or_product(self.registry.as_ref(), &self.environment)
    }

    /// Factory options (host kind, pinned driver). Default: detect the host, walk its order.
    #[must_use]
    pub fn with_factory_options(mut self, options: FactoryOptions) -> Engine {
        self.factory_options = options;
        self
    }

    /// The store.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }
}

impl Engine {
    /// Installs a whole setup: registry, factory options, global default, engine binary and
    /// environment.
    #[must_use]
    pub fn with_preflight_setup(mut self, setup: PreflightSetup) -> Engine {
        self.registry = setup.registry;
        self.factory_options = setup.factory_options;
        self.sandbox_default = setup.sandbox_default;
        self.engine_binary = setup.engine_binary;
        self.environment = setup.environment;
        self
    }

    /// This engine's sandbox setup, for [`build_strict_report`](crate::build_strict_report) and [`preflight_sandbox`](crate::preflight_sandbox).
    pub fn preflight_setup(&self) -> PreflightSetup {
        PreflightSetup {
            registry: self.registry.clone(),
            factory_options: self.factory_options,
            sandbox_default: self.sandbox_default,
            engine_binary: self.engine_binary.clone(),
            environment: self.environment.clone(),
        }
    }
}

/// One `iterion run`: the compiled workflow, the resolved launch inputs, the flags.
#[derive(Clone, Debug)]
pub struct RunRequest {
    /// The compiled workflow.
    pub workflow: Workflow,
    /// `sha256:…` of its source ([`crate::workflow_hash`]).
    pub workflow_hash: String,
    /// The workflow file, as given.
    pub file_path: PathBuf,
    /// Every var with its value ([`crate::resolve_vars`]).
    pub vars: Map<String, Value>,
    /// The resolved secrets ([`crate::resolve_secrets`]).
    pub secrets: Vec<ResolvedSecret>,
    /// `--trust`.
    pub trust: Trust,
    /// The sandbox flags and the working directory.
    pub options: LaunchOptions,
}

impl RunRequest {
    /// The run record this request creates (`iterion run` adds its lease, `--submit` queues it).
    pub(crate) fn new_run(&self) -> iterion_store::NewRun {
        iterion_store::NewRun::new(
            self.workflow.name.clone(),
            self.workflow_hash.clone(),
            self.file_path.clone(),
        )
        .trust(self.trust)
        .vars(self.vars.clone())
    }
}

/// One `iterion resume`.
#[derive(Clone, Debug)]
pub struct ResumeRequest {
    /// The run to resume.
    pub run_id: String,
    /// Resume even though the workflow file changed since the run started.
    pub force: bool,
    /// The operator's answer to the question a `paused` run waits on (`--answer TEXT`).
    pub answer: Option<String>,
    /// Start again at this earlier node (`--from NODE`, [`Checkpoint::rewind_to`]) instead of
    /// where the run stopped.
    ///
    /// [`Checkpoint::rewind_to`]: crate::Checkpoint::rewind_to
    pub from: Option<String>,
}

/// How the caller stops a run: `interrupt` ends it `failed_resumable` / `INTERRUPTED` (Ctrl-C,
/// SIGTERM: the operator means to resume it), `cancel` ends it `cancelled` / `CANCELLED` unless an
/// interrupt came too (a subbot child's parent stopping sends both: the child stays resumable),
/// and `abandon` ends it `cancelled` whatever came before (the operator's second Ctrl-C). Either
/// way running commands are stopped and the sandbox is torn down.
#[derive(Clone, Debug, Default)]
pub struct RunControl {
    /// Cancels the run.
    pub cancel: CancellationToken,
    /// Interrupts the run.
    pub interrupt: CancellationToken,
    /// Cancels the run even after an interrupt.
    pub abandon: CancellationToken,
}

/// How a run ended.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RunSummary {
    /// The run id.
    pub run_id: String,
    /// The final status.
    pub status: RunStatus,
    /// The failure code, on `failed`, `failed_resumable` and `cancelled`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure_code: Option<String>,
    /// The workflow's own code, when one of its `fail NAME:` nodes ended the run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub declared_code: Option<String>,
    /// What went wrong, redacted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The output of the node that reached `done`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output: Option<Value>,
    /// The worktree kept by a failed `worktree: auto` run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub worktree: Option<PathBuf>,
    /// The branch a finished `worktree: auto` run's changes were committed on
    /// (`iterion/<workflow>/<run id>`); absent when nothing changed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub branch: Option<String>,
}

/// Why the engine could not run or resume a run.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// Refused before any run existed (exit 2).
    #[error(transparent)]
    Launch(#[from] LaunchError),
    /// A resume was refused; the run is left as it was (`RESUME_INVALID`).
    #[error("{message}")]
    ResumeRefused {
        /// Why, naming the knob.
        message: String,
    },
    /// A resume was refused because the scratch dir of the last attempt lived in its container
    /// and could not be banked (`SCRATCH_NOT_PORTABLE`, SANDBOX.md §8.3); `--force` resumes
    /// without it.
    #[error("{message}")]
    ScratchNotPortable {
        /// Why, naming the knob.
        message: String,
    },
    /// `--from NODE` names a node the run cannot start again at; the run is left as it was
    /// (`RESUME_INVALID`, exit 2).
    #[error(transparent)]
    ResumeFrom(#[from] crate::executor::checkpoint::RewindError),
    /// The admission decision could not be persisted.
    #[error(transparent)]
    Admission(#[from] AdmissionError),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] iterion_store::Error),
}

impl EngineError {
    /// A stable code.
    pub fn code(&self) -> &'static str {
        match self {
            EngineError::Launch(e) => e.code(),
            EngineError::ResumeRefused { .. } => iterion_vocab::FailureCode::ResumeInvalid.as_str(),
            EngineError::ResumeFrom(e) => e.code().as_str(),
            EngineError::ScratchNotPortable { .. } => {
                iterion_vocab::FailureCode::ScratchNotPortable.as_str()
            }
            EngineError::Admission(AdmissionError::Conflicted { .. }) => "ADMISSION_CONFLICTED",
            EngineError::Admission(AdmissionError::Store(e)) | EngineError::Store(e) => e.code(),
        }
    }
}

/// The run-record envelope kept in `runs.checkpoint`: the launch flags and the executor's
/// checkpoint (absent until the executor ran).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub(crate) struct RunEnvelope {
    pub launch: LaunchOptions,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub executor: Option<crate::executor::checkpoint::Checkpoint>,
}

impl RunEnvelope {
    pub(crate) fn from_value(value: Option<&Value>) -> RunEnvelope {
        value
            .and_then(|v| serde_json::from_value(v.clone()).ok())
            .unwrap_or_default()
    }

    pub(crate) fn to_value(&self) -> Option<Value> {
        serde_json::to_value(self).ok()
    }

    /// The recorded launch options, run from the current directory when none was recorded.
    pub(crate) fn launch_or_cwd(&self) -> LaunchOptions {
        let mut launch = self.launch.clone();
        if launch.cwd.as_os_str().is_empty() {
            launch.cwd = std::env::current_dir().unwrap_or_default();
        }
        launch
    }
}

/// The workflow a recorded run's file (`bytes`, read from `run.file_path`) compiles to now, for
/// `resume` and the runner; `None` when it has errors. `ask_user` is allowed in a sandbox: it
/// works there through the runner channel (SANDBOX.md §13.3).
pub(crate) fn compile_recorded(
    run: &iterion_store::Run,
    bytes: &[u8],
) -> Option<iterion_dsl::ir::Workflow> {
    let compiled = iterion_dsl::compile_at(
        bytes,
        &run.file_path,
        &iterion_dsl::CompileOptions {
            ask_user_in_sandbox: true,
        },
    );
    let clean = compiled.error_count() == 0;
    compiled.workflow.filter(|_| clean)
}

/// A fresh lease holder name for this process.
pub(crate) fn holder_name() -> String {
    format!("iterion-pid{}-{}", std::process::id(), RunId::generate())
}

/// Parses a run id given on the command line.
pub(crate) fn parse_run_id(text: &str) -> Result<RunId, EngineError> {
    RunId::parse(text).map_err(|e| EngineError::Store(e.into()))
}
