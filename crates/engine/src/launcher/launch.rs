//! What a launch needs before any run exists (DSL.md §3.1, §3.2, §7.5): the `--var` values typed
//! against the workflow's declarations, the secrets expanded from the host environment, the
//! workflow source's hash, and the launch flags ([`LaunchOptions`]) with the sandbox settings
//! they make ([`settings_from_env`]).
//!
//! The vars, secrets and hash are pure — the environment comes in as a lookup closure;
//! [`settings_from_env`] reads the sandbox variables of the environment it is given. Every refusal
//! is a [`LaunchError`] whose message names the knob to turn. The CLI turns a `LaunchError` into
//! exit code 2 with nothing written to the store.

use crate::sandbox::host_services::UntrustedHostServices;
use std::collections::BTreeSet;
use std::path::PathBuf;

use iterion_dsl::ir::Workflow;
use iterion_dsl::template::expand_host;
use iterion_sandbox::{HostState, SandboxFlag, sandbox_override_from_env};
use iterion_vocab::Environment;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::records::secrets::ResolvedSecret;
use crate::sandbox::resolve::SandboxSettings;

/// Why a launch was refused before a run existed (exit 2, nothing in the store).
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    /// A `--var` argument is not `NAME=VALUE`.
    #[error("--var {arg:?}: expected NAME=VALUE")]
    MalformedVar {
        /// The argument as given.
        arg: String,
    },
    /// `--var` names a var the workflow does not declare.
    #[error("--var {name}: the workflow declares no var {name:?} (declared: {declared})")]
    UnknownVar {
        /// The name given.
        name: String,
        /// The declared names, comma-separated (or `none`).
        declared: String,
    },
    /// `--preset` names a preset the workflow does not declare.
    #[error("--preset {name}: the workflow declares no preset {name:?} (declared: {declared})")]
    UnknownPreset {
        /// The name given.
        name: String,
        /// The declared names, comma-separated (or `none`).
        declared: String,
    },
    /// The same var was given twice.
    #[error("--var {name} is given more than once")]
    DuplicateVar {
        /// The name.
        name: String,
    },
    /// A `--var` value does not parse as the var's type.
    #[error("--var {name}={value:?}: {name} is a {ty}, and {value:?} {why}")]
    BadVarValue {
        /// The var.
        name: String,
        /// Its declared type.
        ty: &'static str,
        /// The value given.
        value: String,
        /// What was expected.
        why: &'static str,
    },
    /// A var's value (`--var`, a preset or its default) is outside its `[enum: …]`.
    #[error(
        "var {name} is {value:?}, which is not one of its enum values: {allowed}; pass --var {name}=VALUE with one of them"
    )]
    VarNotInEnum {
        /// The var.
        name: String,
        /// The value it got.
        value: String,
        /// The enum values, comma-separated.
        allowed: String,
    },
    /// A var without a default was not supplied.
    #[error("var {name} ({ty}) has no default; pass --var {name}=VALUE")]
    MissingVar {
        /// The var.
        name: String,
        /// Its type.
        ty: &'static str,
    },
    /// A required secret expanded to nothing.
    #[error(
        "secret {name} is required and its value {value:?} expanded to nothing; set {variable} in the environment (or mark the secret optional: true)"
    )]
    MissingSecret {
        /// The secret.
        name: String,
        /// Its `value` as written.
        value: String,
        /// The host variable to set (the first `${…}` of the value).
        variable: String,
    },
    /// A secret's `value` has a malformed `${…}` (normally caught by C004).
    #[error("secret {name}: {message}")]
    BadSecretValue {
        /// The secret.
        name: String,
        /// What is wrong.
        message: String,
    },
    /// An operator variable or flag holds a value outside its grammar.
    #[error("{message}")]
    InvalidSetting {
        /// The message, naming the variable or flag.
        message: String,
    },
    /// A bad `--allow-host`, or one an untrusted run may not have.
    #[error(transparent)]
    HostService(#[from] crate::sandbox::host_services::HostServiceError),
    /// `worktree: auto` without a repository or commit.
    #[error(transparent)]
    Worktree(#[from] crate::sandbox::worktree::WorktreeError),
    /// The workflow's `budget:` does not resolve.
    #[error(transparent)]
    Budget(#[from] crate::executor::budget::BudgetError),
    /// An agent node's model cannot be reached: unknown provider, missing key or base URL
    /// (SANDBOX.md §13.1b).
    #[error(transparent)]
    Model(#[from] iterion_agent::provider::RouteError),
    /// A `--attach` the workflow's `attachments:` refuses (docs/language.md "Attachments").
    #[error(transparent)]
    Attachment(#[from] crate::sandbox::attachments::AttachmentError),
}

impl LaunchError {
    /// A stable code for JSON output.
    pub fn code(&self) -> &'static str {
        match self {
            LaunchError::MalformedVar { .. }
            | LaunchError::UnknownVar { .. }
            | LaunchError::UnknownPreset { .. }
            | LaunchError::DuplicateVar { .. }
            | LaunchError::BadVarValue { .. }
            | LaunchError::VarNotInEnum { .. }
            | LaunchError::MissingVar { .. } => "VAR_INVALID",
            LaunchError::MissingSecret { .. } | LaunchError::BadSecretValue { .. } => {
                "SECRET_UNRESOLVED"
            }
            LaunchError::InvalidSetting { .. } | LaunchError::HostService(_) => "SETTING_INVALID",
            LaunchError::Worktree(e) => e.code(),
            LaunchError::Budget(e) => e.code(),
            LaunchError::Model(_) => "MODEL_UNRESOLVED",
            LaunchError::Attachment(e) => e.code(),
        }
    }
}

/// `sha256:<hex>` of the workflow source bytes (`runs.workflow_hash`, `run_started.workflow_hash`).
pub fn workflow_hash(source: &[u8]) -> String {
    let digest = Sha256::digest(source);
    let mut out = String::with_capacity(7 + 64);
    out.push_str("sha256:");
    for byte in digest {
        out.push_str(&format!("{byte:02x}"));
    }
    out
}

/// [`workflow_hash`] of the workflow file at `path` (holding `bytes`) and every fragment it
/// imports (docs/language.md "Imports"), so a fragment edited under a parked run is a source
/// change. The same as [`workflow_hash`] for a file that imports nothing.
pub fn workflow_hash_at(path: &std::path::Path, bytes: &[u8]) -> String {
    let fragments = iterion_dsl::fragments(bytes, path);
    if fragments.is_empty() {
        return workflow_hash(bytes);
    }
    let mut unit = bytes.to_vec();
    for fragment in fragments {
        // Each fragment framed by its path and length: no two units share an input.
        unit.extend_from_slice(b"\0import\0");
        unit.extend_from_slice(fragment.path.as_bytes());
        unit.extend_from_slice(format!("\0{}\0", fragment.text.len()).as_bytes());
        unit.extend_from_slice(fragment.text.as_bytes());
    }
    workflow_hash(&unit)
}

/// Types the `--var NAME=VALUE` arguments against the workflow's vars and fills in defaults
/// (DSL.md §3.1). Returns every declared var with its value.
///
/// # Errors
///
/// A malformed argument, an unknown or repeated name, a value that does not parse as the var's
/// type, or a required var left out.
pub fn resolve_vars(wf: &Workflow, args: &[String]) -> Result<Map<String, Value>, LaunchError> {
    resolve_vars_in(&wf.vars, args)
}

/// [`resolve_vars`] with a named preset of the workflow's `presets:` applied first: its values
/// replace the vars' defaults, and `--var` still overrides them (docs/language.md "Presets").
///
/// # Errors
///
/// [`LaunchError::UnknownPreset`] for a name the workflow does not declare; then as
/// [`resolve_vars`].
pub fn resolve_vars_with_preset(
    wf: &Workflow,
    preset: Option<&str>,
    args: &[String],
) -> Result<Map<String, Value>, LaunchError> {
    let Some(name) = preset else {
        return resolve_vars(wf, args);
    };
    let Some(values) = wf.presets.get(name) else {
        let declared: Vec<&str> = wf.presets.keys().map(String::as_str).collect();
        return Err(LaunchError::UnknownPreset {
            name: name.to_owned(),
            declared: if declared.is_empty() {
                "none".to_owned()
            } else {
                declared.join(", ")
            },
        });
    };
    let mut vars = wf.vars.clone();
    for var in &mut vars {
        if let Some(value) = values.get(&var.name) {
            var.default = Some(value.clone());
        }
    }
    resolve_vars_in(&vars, args)
}

fn resolve_vars_in(
    declared_vars: &[iterion_dsl::ir::Var],
    args: &[String],
) -> Result<Map<String, Value>, LaunchError> {
    let mut given: Map<String, Value> = Map::new();
    let mut seen = BTreeSet::new();
    for arg in args {
        let Some((name, raw)) = arg.split_once('=') else {
            return Err(LaunchError::MalformedVar { arg: arg.clone() });
        };
        let name = name.trim();
        let Some(var) = declared_vars.iter().find(|v| v.name == name) else {
            let declared: Vec<&str> = declared_vars.iter().map(|v| v.name.as_str()).collect();
            return Err(LaunchError::UnknownVar {
                name: name.to_owned(),
                declared: if declared.is_empty() {
                    "none".to_owned()
                } else {
                    declared.join(", ")
                },
            });
        };
        if !seen.insert(name.to_owned()) {
            return Err(LaunchError::DuplicateVar {
                name: name.to_owned(),
            });
        }
        let value = var
            .ty
            .parse_value(raw)
            .map_err(|why| LaunchError::BadVarValue {
                name: name.to_owned(),
                ty: var.ty.as_str(),
                value: raw.to_owned(),
                why,
            })?;
        given.insert(name.to_owned(), value);
    }
    let mut vars = Map::new();
    for var in declared_vars {
        let value = match (given.remove(&var.name), &var.default) {
            (Some(value), _) => value,
            (None, Some(default)) => default.clone(),
            (None, None) => {
                return Err(LaunchError::MissingVar {
                    name: var.name.clone(),
                    ty: var.ty.as_str(),
                });
            }
        };
        if let (Some(allowed), Some(text)) = (&var.enum_values, value.as_str())
            && !allowed.iter().any(|a| a == text)
        {
            return Err(LaunchError::VarNotInEnum {
                name: var.name.clone(),
                value: text.to_owned(),
                allowed: allowed.join(", "),
            });
        }
        vars.insert(var.name.clone(), value);
    }
    Ok(vars)
}

/// Expands each secret's `value` against the host environment (DSL.md §4.3, §7.5). Returns the
/// resolved secrets (the unresolved optional ones are left out: they are not delivered).
///
/// # Errors
///
/// [`LaunchError::MissingSecret`] naming the variable when a required secret comes out empty.
pub fn resolve_secrets(
    wf: &Workflow,
    lookup: impl Fn(&str) -> Option<String>,
) -> Result<Vec<ResolvedSecret>, LaunchError> {
    let mut out = Vec::new();
    for secret in &wf.secrets {
        let value =
            expand_host(&secret.value, &lookup).map_err(|e| LaunchError::BadSecretValue {
                name: secret.name.clone(),
                message: e.to_string(),
            })?;
        if value.is_empty() {
            if secret.optional {
                continue;
            }
            return Err(LaunchError::MissingSecret {
                name: secret.name.clone(),
                value: secret.value.clone(),
                variable: first_variable(&secret.value).unwrap_or_else(|| secret.name.clone()),
            });
        }
        out.push(ResolvedSecret::new(secret.name.clone(), value));
    }
    Ok(out)
}

/// The first `${NAME…}` variable in `text`.
fn first_variable(text: &str) -> Option<String> {
    let start = text.find("${")? + 2;
    let name: String = text[start..]
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect();
    (!name.is_empty()).then_some(name)
}

/// The launch flags that shape the sandbox; kept on the run so `iterion resume` asks the same
/// question again.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LaunchOptions {
    /// `--sandbox auto|none`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<SandboxFlag>,
    /// `--sandbox-host-state auto|none`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_state: Option<HostState>,
    /// `--sandbox-default-image REF`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_image: Option<String>,
    /// The operator env overlay (SANDBOX.md §7.8): `--sandbox-env K=V` over the file named by
    /// `ITERION_SANDBOX_ENV_FILE`, already merged and validated by the entry point. Empty by
    /// default. Kept with the other flags so a resume applies the same overlay.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub sandbox_env: std::collections::BTreeMap<String, String>,
    /// The directory `iterion run` was started in (the workspace's anchor).
    #[serde(default)]
    pub cwd: PathBuf,
    /// `--allow-host NAME[:PORT]`: services on this machine the sandbox may reach through its
    /// proxy ([`crate::HostService`]). Kept so a resume reaches the same ones.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow_hosts: Vec<crate::sandbox::host_services::HostService>,
    /// `--dangerously-allow-host-untrusted`: whether an untrusted run may have them.
    #[serde(default, skip_serializing_if = "UntrustedHostServices::is_refused")]
    pub allow_hosts_untrusted: UntrustedHostServices,
    /// `--attach NAME=PATH`: staged before the run exists, copied once it does. Never kept on
    /// the run: a resume reads the copies.
    #[serde(skip)]
    pub attachments: Vec<crate::sandbox::attachments::AttachmentSource>,
}

/// The sandbox settings of a launch: the flags, the variables (read from `env`), the installed
/// default.
///
/// # Errors
///
/// [`LaunchError::InvalidSetting`] naming `ITERION_SANDBOX_OVERRIDE` or
/// `ITERION_SANDBOX_HOST_STATE` when it holds something other than `auto` or `none`, or
/// `ITERION_SANDBOX_UPSTREAM_CA` when it names a file that is not a PEM file of certificates.
pub(crate) fn settings_from_env(
    global: Option<SandboxFlag>,
    launch: &LaunchOptions,
    env: &Environment,
) -> Result<(SandboxSettings, Option<SandboxFlag>), LaunchError> {
    let invalid = |e: iterion_sandbox::Error| LaunchError::InvalidSetting {
        message: e.to_string(),
    };
    let override_env = sandbox_override_from_env(env).map_err(invalid)?;
    let host_state_env = iterion_sandbox::host_state_from_env(env).map_err(invalid)?;
    // A bad extra upstream CA is bad input, refused before any run exists (the proxy loads
    // the file again when it starts: crate::sandbox::egress).
    crate::sandbox::egress::upstream_roots_from_env(env).map_err(|e| {
        LaunchError::InvalidSetting {
            message: e.to_string(),
        }
    })?;
    let settings = SandboxSettings {
        cli_flag: launch.sandbox,
        override_env,
        global,
        host_state_cli: launch.host_state.unwrap_or_default(),
        host_state_env,
        default_image: iterion_sandbox::default_image_from_env(
            env,
            launch.default_image.as_deref(),
        ),
    };
    Ok((settings, override_env))
}

#[cfg(test)]
#[path = "launch_tests.rs"]
mod tests;
