//! What a sandbox start is asked ([`StartCtx`]): the run's resolution, factory, ids, mount
//! inputs, secrets and sinks — everything `start::resolve_and_start_sandbox` and the steps it
//! calls (the mount plan, the untrusted copy) read about the run.

use std::sync::Arc;

use iterion_sandbox::{Factory, Progress, RunLog, Trust};

use crate::records::secrets::Redactor;
use crate::records::sink::EventSink;
use crate::sandbox::egress::EgressSecret;
use crate::sandbox::mounts;
use crate::sandbox::resolve::Resolved;

/// Everything `resolve_and_start_sandbox` needs about the run.
pub(crate) struct StartCtx<'a> {
    pub resolved: &'a Resolved,
    pub factory: &'a Factory,
    pub run_id: &'a str,
    pub store_id: &'a str,
    pub workflow: &'a str,
    pub trust: Trust,
    pub max_duration_seconds: u64,
    /// `--allow-host`: the host services the proxy lets through (`host_services`).
    pub host_services: Vec<crate::sandbox::host_services::HostService>,
    pub mount_inputs: mounts::MountInputs,
    pub file_secrets: bool,
    pub events: &'a dyn EventSink,
    /// The same sink, owned: the proxy's `network_blocked` events arrive from its own task.
    pub event_sink: Arc<dyn EventSink>,
    /// The resolved secrets with their hosts, for the proxy's rewriter (§6.10).
    pub egress_secrets: Vec<EgressSecret>,
    /// The delegate nodes' subscription logins (seed steps 14 and 17).
    pub forfaits: crate::sandbox::forfait::Forfaits,
    /// Some delegate node may ask the operator: bind the ask-user listener (seed step 18).
    pub ask_user: bool,
    /// The agent nodes' model provider hosts, implicitly allowed under an allowlist (§13.1b).
    pub model_hosts: Vec<String>,
    pub run_log: Arc<dyn RunLog>,
    /// The run's redactor: the proxy token is added to it once minted (issue 15 item 8).
    pub redactor: Arc<Redactor>,
    pub progress: &'a dyn Progress,
    /// A bundle's skills: an untrusted run's go into its copy (a trusted run's are in its
    /// workspace already).
    pub skills: &'a [iterion_dsl::ir::Skill],
}
