//! [`Attempt`]: everything one attempt of a run needs, whether it launches, resumes, is drained
//! by a fleet worker or is a subbot child with a sandbox of its own — prepared one way
//! ([`Attempt::prepare`]), then, for a resume or a redelivery, told what it continues
//! ([`Attempt::continuing`]) and, for a subbot child, how it stands towards its parent's sandbox
//! ([`Attempt::shared`]).

use iterion_agent::provider::Routes;
use iterion_dsl::ir::Workflow;
use iterion_sandbox::SandboxFlag;
use iterion_store::Run;
use serde_json::{Map, Value};

use crate::executor::checkpoint::Checkpoint;
use crate::launcher::launch::LaunchOptions;
use crate::records::sandbox_events::SandboxShared;
use crate::records::secrets::ResolvedSecret;
use crate::sandbox::resolve::SandboxSettings;
use iterion_vocab::FailureCode;

/// Everything one attempt needs.
pub(crate) struct Attempt {
    pub run: Run,
    pub holder: String,
    pub workflow: Workflow,
    pub vars: Map<String, Value>,
    pub secrets: Vec<ResolvedSecret>,
    pub settings: SandboxSettings,
    pub override_env: Option<SandboxFlag>,
    pub launch: LaunchOptions,
    pub checkpoint: Option<Checkpoint>,
    pub resumed: bool,
    /// Every agent node's model, resolved at launch.
    pub routes: Routes,
    /// `iterion resume --answer`.
    pub answer: Option<String>,
    /// Recorded right after `run_started`: a resume `--from` an earlier node.
    pub rewound: Option<crate::records::events::RunRewound>,
    /// Recorded right after `run_started`: how a subbot child stands towards its parent's
    /// sandbox (SANDBOX.md §14: declined, or a forced resume).
    pub shared: Option<SandboxShared>,
    /// A resume of a `failed_resumable` run: the failure it had before the reopen, which a
    /// refused admission puts back (SANDBOX.md §10, "a refused resume leaves the status as it
    /// was"). `None` for a launch.
    pub prior_failure: Option<(FailureCode, String)>,
    /// A launch's attachments, checked and open: copied into the run's attachments dir once
    /// admitted. `None` for a resume (the copies are already there).
    pub attachments: Option<crate::sandbox::attachments::Staged>,
}

/// What an attempt runs: the workflow and its resolved inputs.
pub(crate) struct Inputs {
    /// The compiled workflow.
    pub workflow: Workflow,
    /// Every var with its value.
    pub vars: Map<String, Value>,
    /// The resolved secrets.
    pub secrets: Vec<ResolvedSecret>,
    /// Every agent node's model.
    pub routes: Routes,
}

impl Inputs {
    /// The inputs of a recorded run (a resume, a claimed run): its vars as recorded.
    pub(crate) fn recorded(
        run: &Run,
        workflow: Workflow,
        secrets: Vec<ResolvedSecret>,
        routes: Routes,
    ) -> Inputs {
        Inputs {
            workflow,
            vars: run.vars.clone(),
            secrets,
            routes,
        }
    }
}

/// What an attempt continues: a resumed run's checkpoint and answer, or a redelivered run's
/// checkpoint. The default continues nothing.
#[derive(Default)]
pub(crate) struct Continuation {
    /// Where the earlier attempt stood.
    pub checkpoint: Option<Checkpoint>,
    /// Whether `run_started` says `resumed`.
    pub resumed: bool,
    /// `iterion resume --answer`.
    pub answer: Option<String>,
    /// The failure the run had before it was reopened (see [`Attempt::prior_failure`]).
    pub prior_failure: Option<(FailureCode, String)>,
    /// `iterion resume --from`: where the checkpoint was moved back to.
    pub rewound: Option<crate::records::events::RunRewound>,
}

impl Attempt {
    /// A fresh attempt of `run`, whose lease `holder` holds: `inputs` run with the launch flags
    /// `launch` and the sandbox settings and override they made (`settings_from_env`, or the
    /// parent's for a subbot child). It continues nothing and shares nothing.
    pub(crate) fn prepare(
        run: Run,
        holder: String,
        inputs: Inputs,
        launch: LaunchOptions,
        (settings, override_env): (SandboxSettings, Option<SandboxFlag>),
    ) -> Attempt {
        let Inputs {
            workflow,
            vars,
            secrets,
            routes,
        } = inputs;
        Attempt {
            run,
            holder,
            workflow,
            vars,
            secrets,
            settings,
            override_env,
            launch,
            checkpoint: None,
            resumed: false,
            routes,
            answer: None,
            rewound: None,
            shared: None,
            prior_failure: None,
            attachments: None,
        }
    }

    /// This attempt continues an earlier one.
    pub(crate) fn continuing(self, continuation: Continuation) -> Attempt {
        let Continuation {
            checkpoint,
            resumed,
            answer,
            prior_failure,
            rewound,
        } = continuation;
        Attempt {
            checkpoint,
            resumed,
            answer,
            prior_failure,
            rewound,
            ..self
        }
    }

    /// This attempt records `shared` right after `run_started` (a subbot child that declined its
    /// parent's sandbox, or a forced resume of one that adopted it).
    pub(crate) fn shared(self, shared: Option<SandboxShared>) -> Attempt {
        Attempt { shared, ..self }
    }
}
