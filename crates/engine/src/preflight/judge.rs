//! The battery's judgements (SANDBOX.md §11.3), one function per check: what was found comes in
//! as values, a [`Check`] comes out. Nothing here probes, so every status of every check is
//! unit-tested without an engine; [`super::strict`] does the probing and calls these.

use crate::sandbox::engine_binary::STATIC_BUILD_REMEDY;
use iterion_netproxy::{compile, preset_rules};
use iterion_sandbox::{
    Capabilities, Error as SandboxError, LinkKind, NetworkPolicy, Spec, link_kind,
};
use iterion_sandbox_docker::{ApiError, EngineVersion, elf_problem, endpoint_is_local};

use super::report::{Check, CheckId, CheckStatus};

/// The remediation every engine-side failure shares.
const START_ENGINE: &str = "start Docker or Podman (or point DOCKER_HOST / CONTAINER_HOST at a live engine); --sandbox none runs on the host";

/// `driver-available`: what `driver_for_spec` answered. `relaxed` turns a failure into a warning:
/// an explicit `--target` names a host class this host's driver does not serve, or no driver
/// exists at all.
pub(crate) fn driver_available(
    answer: Result<&str, DriverMiss>,
    mode: &str,
    relaxed: bool,
) -> Check {
    let id = CheckId::DriverAvailable;
    match answer {
        Ok(driver) => Check::pass(
            id,
            format!("the {driver} driver would run this mode={mode} sandbox"),
        ),
        Err(miss) => {
            let status = if relaxed {
                CheckStatus::Warn
            } else {
                CheckStatus::Fail
            };
            let check = match miss {
                DriverMiss::Unavailable { obstacle, hint } => Check::fail(
                    id,
                    obstacle,
                    format!("{hint}, or pass --sandbox none to run on the host"),
                ),
                DriverMiss::Other(message) => Check::fail(id, message, START_ENGINE),
                DriverMiss::TimedOut(budget) => Check::fail(
                    id,
                    format!(
                        "driver selection did not finish within {budget}: an engine does not answer"
                    ),
                    format!("{START_ENGINE}; ITERION_SANDBOX_DOCTOR_TIMEOUT bounds each probe"),
                ),
            };
            check.with_status(status)
        }
    }
}

/// Why no driver came back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum DriverMiss {
    /// `Error::DriverUnavailable`: its obstacle and hint.
    Unavailable {
        /// `no container-runtime driver available (tried: …)`.
        obstacle: String,
        /// What to install or start.
        hint: String,
    },
    /// Any other selection error.
    Other(String),
    /// The selection outlived the doctor's budget (shown as given).
    TimedOut(String),
}

impl DriverMiss {
    pub(crate) fn of(error: &SandboxError) -> DriverMiss {
        if error.is_driver_unavailable() {
            DriverMiss::Unavailable {
                obstacle: error.obstacle(),
                hint: error.hint().unwrap_or_default().to_owned(),
            }
        } else {
            DriverMiss::Other(error.to_string())
        }
    }
}

/// `spec-valid`: `Spec::validate`.
pub(crate) fn spec_valid(spec: &Spec) -> Check {
    match spec.validate() {
        Ok(()) => Check::pass(CheckId::SpecValid, "the spec is well-formed"),
        Err(error) => Check::fail(
            CheckId::SpecValid,
            error.to_string(),
            "fix the named field of the workflow's sandbox: block (or the devcontainer)",
        ),
    }
}

/// `docker-daemon`: the engine that answered, or why none did.
pub(crate) fn docker_daemon(answer: Result<(&str, &EngineVersion), &str>) -> Check {
    let id = CheckId::DockerDaemon;
    match answer {
        Ok((endpoint, version)) if version.version.is_empty() => Check::fail(
            id,
            format!("{endpoint} answered without a server version"),
            START_ENGINE,
        ),
        Ok((endpoint, version)) => {
            let summary = format!(
                "{} {} (API {}) at {endpoint}",
                version.kind, version.version, version.api_version
            );
            if endpoint_is_local(endpoint) {
                Check::pass(id, summary)
            } else {
                Check::warn(
                    id,
                    format!("{summary}: not a unix socket or loopback TCP"),
                    "bind sources are host paths: the engine must see this host's filesystem (a remote daemon binds its own paths)",
                )
            }
        }
        Err(reason) => Check::fail(id, format!("no engine answered: {reason}"), START_ENGINE),
    }
}

/// `spec-safety`: the screening's verdict (`validate_spec_mounts`, and the workspace itself).
pub(crate) fn spec_safety(spec: &Spec, screened: Result<usize, &SandboxError>) -> Check {
    let id = CheckId::SpecSafety;
    match screened {
        Ok(mounts) => Check::pass(
            id,
            format!(
                "{mounts} mount(s), user {}, {} env pair(s) screened",
                spec.user.as_deref().unwrap_or("(image default)"),
                spec.env.len()
            ),
        ),
        Err(error) => Check::fail(
            id,
            error.to_string(),
            "remove the refused entry: engine sockets, credential directories, /proc, /sys, /dev, system paths and your home are never bound",
        ),
    }
}

/// What the engine said about the spec's image, for `image-resolvable`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum ImageFinding {
    /// The spec builds its image at run time.
    Built {
        /// The Dockerfile, relative to the workspace.
        dockerfile: String,
    },
    /// No image at all (an invalid spec; `spec-valid` says why).
    Missing,
    /// No engine answered, so nothing could be asked.
    NoEngine {
        /// The image.
        image: String,
    },
    /// The image is in the local cache.
    Present {
        /// The image.
        image: String,
    },
    /// Not in the local cache: what its registry answered (`GET /distribution`), and the
    /// fallback's answer when the spec has one.
    Absent {
        /// The image.
        image: String,
        /// The registry's answer for it.
        registry: Registry,
        /// The fallback image and its registry's answer.
        fallback: Option<(String, Registry)>,
    },
    /// Inspecting the local cache itself failed or timed out.
    InspectFailed {
        /// The image.
        image: String,
        /// Why.
        reason: String,
    },
}

/// A registry's answer, classified for `image-resolvable`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Registry {
    /// The manifest is there.
    Known,
    /// 404 / manifest unknown: the image does not exist.
    Unknown(String),
    /// 401/403: private, or a registry that hides what does not exist.
    Refused(String),
    /// Network, TLS, a timeout, or any other answer: nothing can be concluded.
    Unreachable(String),
}

impl Registry {
    /// Classifies the engine's answer to `GET /distribution/<ref>/json`.
    pub(crate) fn of(answer: &Result<(), ApiError>) -> Registry {
        match answer {
            Ok(()) => Registry::Known,
            Err(ApiError::NotFound { message }) => Registry::Unknown(message.clone()),
            Err(ApiError::Unauthorized { message }) => Registry::Refused(message.clone()),
            Err(other) => {
                let text = other.to_string();
                let lower = text.to_ascii_lowercase();
                if lower.contains("manifest unknown") || lower.contains("name unknown") {
                    Registry::Unknown(text)
                } else {
                    Registry::Unreachable(text)
                }
            }
        }
    }

    fn says_absent(&self) -> bool {
        matches!(self, Registry::Unknown(_) | Registry::Refused(_))
    }
}

/// `image-resolvable` (SANDBOX.md §11.3): a build passes; a local image passes; otherwise the
/// registry decides — unknown fails, refused or unreachable warns. When the image is unknown
/// or refused and the spec has a fallback (the built-in default), the fallback's answer decides,
/// as the driver would pull it instead (§4.3 step 3).
pub(crate) fn image_resolvable(finding: &ImageFinding) -> Check {
    let id = CheckId::ImageResolvable;
    let get_one = |image: &str| {
        format!(
            "pull it (docker pull {image}), or point --sandbox-default-image / ITERION_SANDBOX_DEFAULT_IMAGE (or the workflow's image:) at an image you have locally; `sudo scripts/build-default-image.sh` (as root) builds the default one without a registry"
        )
    };
    match finding {
        ImageFinding::Built { dockerfile } => {
            Check::pass(id, format!("built at run start from {dockerfile}"))
        }
        ImageFinding::Missing => Check::fail(
            id,
            "the spec names no image",
            "set image: (or build:) in the sandbox: block",
        ),
        ImageFinding::NoEngine { image } => Check::warn(
            id,
            format!("{image}: not checked, no engine answered"),
            START_ENGINE,
        ),
        ImageFinding::Present { image } => Check::pass(id, format!("{image} is present locally")),
        ImageFinding::InspectFailed { image, reason } => Check::warn(
            id,
            format!("{image}: the local cache could not be read: {reason}"),
            START_ENGINE,
        ),
        ImageFinding::Absent {
            image,
            registry,
            fallback,
        } => {
            if let (true, Some((fallback, answer))) = (registry.says_absent(), fallback) {
                let primary =
                    format!("{image} is not present locally and its registry does not offer it");
                return match answer {
                    Registry::Known => Check::pass(
                        id,
                        format!("{primary}; the fallback {fallback} will be pulled"),
                    ),
                    Registry::Unknown(why) => Check::fail(
                        id,
                        format!("{primary}, nor the fallback {fallback} ({why})"),
                        get_one(image),
                    ),
                    // The pull asks the same registry through the same engine: it fails too.
                    Registry::Refused(why) | Registry::Unreachable(why) => Check::fail(
                        id,
                        format!("{primary}; the fallback {fallback} could not be had ({why})"),
                        get_one(image),
                    ),
                };
            }
            match registry {
                Registry::Known => Check::pass(
                    id,
                    format!(
                        "{image} is not present locally; its registry has it (pulled at run start)"
                    ),
                ),
                Registry::Unknown(why) => Check::fail(
                    id,
                    format!(
                        "{image} is not present locally and its registry does not know it ({why})"
                    ),
                    get_one(image),
                ),
                // A run pulls through the same engine with the same credentials: what the
                // registry will not answer here, it will not serve at run start (issue 19).
                Registry::Refused(why) => Check::fail(
                    id,
                    format!(
                        "{image} is not present locally and its registry refused it ({why}); is the name right?"
                    ),
                    format!(
                        "log in to the registry (docker login), or {}",
                        get_one(image)
                    ),
                ),
                Registry::Unreachable(why) => Check::fail(
                    id,
                    format!(
                        "{image} is not present locally and cannot be pulled: its registry could not be reached ({why}); is the name right?"
                    ),
                    get_one(image),
                ),
            }
        }
    }
}

/// What the image lacks of what the run will exec in it, for `image-contents`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Lack {
    /// No `bash` in any directory of the image's `PATH` (the directories searched).
    Bash(Vec<String>),
    /// The loader the dynamically linked engine binary names.
    Loader {
        /// The host path of the binary bound at `/run/iterion/bin/iterion`.
        binary: String,
        /// Its `PT_INTERP`.
        loader: String,
        /// What execs it (the egress bridge, the agent runner).
        for_what: String,
    },
    /// A delegate node's CLI (`claude`, `codex`) in no directory of the image's `PATH`.
    Cli {
        /// The program.
        cli: &'static str,
        /// The directories searched.
        dirs: Vec<String>,
    },
}

/// `image-contents` (issue 19): the files a run execs in the image are there. A missing `bash`
/// (tool nodes run `bash -c`) or a missing loader of a dynamically linked engine binary fails,
/// since the run then fails at its first exec.
pub(crate) fn image_contents(image: &str, answer: Result<&[Lack], &str>) -> Check {
    let id = CheckId::ImageContents;
    let lacks = match answer {
        Ok(lacks) => lacks,
        Err(why) => {
            return Check::warn(
                id,
                format!("{image}: its files could not be checked ({why})"),
                START_ENGINE,
            );
        }
    };
    let Some(first) = lacks.first() else {
        return Check::pass(id, format!("{image} has what the run execs in it"));
    };
    let summary = lacks
        .iter()
        .map(|lack| match lack {
            Lack::Bash(dirs) => format!(
                "{image} has no bash (searched {}); tool nodes run `bash -c` and would exit 127",
                dirs.join(":")
            ),
            Lack::Loader {
                binary,
                loader,
                for_what,
            } => format!(
                "the engine binary {binary}, bound at /run/iterion/bin/iterion for {for_what}, is dynamically linked and {image} lacks its loader {loader}"
            ),
            Lack::Cli { cli, dirs } => format!(
                "{image} has no {cli} (searched {}); its delegate nodes would fail at their first run",
                dirs.join(":")
            ),
        })
        .collect::<Vec<_>>()
        .join("; ");
    let remedy = match (first, lacks.get(1)) {
        (Lack::Loader { .. }, None) => STATIC_BUILD_REMEDY.to_owned(),
        (Lack::Bash(_), None) => BASH_REMEDY.to_owned(),
        (Lack::Cli { .. }, None) => CLI_REMEDY.to_owned(),
        _ => lacks
            .iter()
            .map(|lack| match lack {
                Lack::Bash(_) => BASH_REMEDY,
                Lack::Loader { .. } => STATIC_BUILD_REMEDY,
                Lack::Cli { .. } => CLI_REMEDY,
            })
            .fold(Vec::<&str>::new(), |mut all, r| {
                if !all.contains(&r) {
                    all.push(r);
                }
                all
            })
            .join("; and "),
    };
    Check::fail(id, summary, remedy)
}

/// How to get a delegate CLI into the sandbox.
const CLI_REMEDY: &str = "use an image with the CLI (scripts/build-default-image.sh installs claude and codex), or install it in yours (npm install -g @anthropic-ai/claude-code @openai/codex)";

/// How to get a `bash` into the sandbox.
const BASH_REMEDY: &str = "use an image with bash (debian, ubuntu, or the default image), or install it in yours (apk add bash)";

/// What was read of the engine binary, for `engine-binary`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum BinaryFinding {
    /// Neither `ITERION_BIN` nor an installed binary.
    Unknown,
    /// The file could not be read (missing, a timeout).
    Unreadable {
        /// The path.
        path: String,
        /// Why.
        reason: String,
    },
    /// The file's first bytes (up to 1 MiB) and whether it is a regular executable file.
    Read {
        /// The path.
        path: String,
        /// Regular, with an execute bit.
        executable: bool,
        /// The first bytes.
        head: Vec<u8>,
    },
}

/// `engine-binary` (SANDBOX.md §11.3, §8.4): missing or not an executable ELF fails, a machine
/// that does not match `arch` (the image's, else the engine's) fails, dynamic linking warns.
pub(crate) fn engine_binary(finding: &BinaryFinding, arch: Option<(&str, &str)>) -> Check {
    let id = CheckId::EngineBinary;
    let static_build =
        "point ITERION_BIN at a static Linux build of iterion (scripts/build-static.sh)";
    match finding {
        BinaryFinding::Unknown => Check::fail(
            id,
            "engine binary unknown: ITERION_BIN is unset and no binary is installed",
            static_build,
        ),
        BinaryFinding::Unreadable { path, reason } => {
            Check::fail(id, format!("{path}: {reason}"), static_build)
        }
        BinaryFinding::Read {
            path,
            executable,
            head,
        } => {
            if !executable {
                return Check::fail(
                    id,
                    format!("{path}: not a regular executable file"),
                    static_build,
                );
            }
            let link = link_kind(head);
            if link == LinkKind::Unknown {
                return Check::fail(
                    id,
                    format!("{path}: not an ELF executable (a Linux build of iterion is needed)"),
                    static_build,
                );
            }
            if let Some((arch, whose)) = arch
                && let Some(problem) = elf_problem(head, arch)
            {
                return Check::fail(id, format!("{path}: {problem} ({whose})"), static_build);
            }
            let arch_note = arch.map_or(String::new(), |(arch, whose)| {
                format!(", matches {arch} ({whose})")
            });
            match link {
                LinkKind::Static => {
                    Check::pass(id, format!("{path}: statically linked{arch_note}"))
                }
                LinkKind::Dynamic | LinkKind::Unknown => Check::warn(
                    id,
                    format!(
                        "{path}: dynamically linked{arch_note}; it runs only in images with a compatible libc"
                    ),
                    static_build,
                ),
            }
        }
    }
}

/// `k8s-spec-compatible`: the kubernetes driver's own `validate_spec`, on the resolved spec with
/// no user default (SANDBOX.md §5.5: only the doctor and the pre-flight fail a spec without a
/// user).
pub(crate) fn k8s_spec_compatible(spec: &Spec) -> Check {
    let id = CheckId::K8sSpecCompatible;
    match iterion_sandbox::kubernetes_validate_spec(spec) {
        Ok(()) => Check::pass(
            id,
            format!(
                "image {}, user {}",
                spec.image_ref().unwrap_or_default(),
                spec.user.as_deref().unwrap_or_default()
            ),
        ),
        Err(error) => Check::fail(
            id,
            error.to_string(),
            "on kubernetes: a pre-built image (no build:), a numeric user (uid or uid:gid), host_state none",
        ),
    }
}

/// `k8s-context`: whether the API server answered. Its failure fails only when the selected
/// driver is kubernetes.
pub(crate) fn k8s_context(answer: Result<&str, &str>, kubernetes_selected: bool) -> Check {
    let id = CheckId::K8sContext;
    match answer {
        Ok(what) => Check::pass(id, what.to_owned()),
        Err(why) => {
            let check = Check::fail(
                id,
                format!("the kubernetes API did not answer: {why}"),
                "run inside a pod with a service account (in-cluster config, RBAC for pods, secrets and networkpolicies)",
            );
            if kubernetes_selected {
                check
            } else {
                check.with_status(CheckStatus::Warn)
            }
        }
    }
}

/// `k8s-scheduling-policy`: the §16.2 variables parse.
pub(crate) fn k8s_scheduling_policy(parsed: Result<String, &SandboxError>) -> Check {
    let id = CheckId::K8sSchedulingPolicy;
    match parsed {
        Ok(summary) => Check::pass(id, summary),
        Err(error) => Check::fail(
            id,
            error.to_string(),
            "fix the named ITERION_SANDBOX_K8S_* variable (SANDBOX.md §16.2)",
        ),
    }
}

/// `network-preset`: the named preset exists (only asked when one is named).
pub(crate) fn network_preset(name: &str) -> Check {
    let id = CheckId::NetworkPreset;
    match preset_rules(name) {
        Ok(rules) => Check::pass(id, format!("preset {name}: {} rule(s)", rules.len())),
        Err(error) => Check::fail(
            id,
            error.to_string(),
            "the only preset is iterion-default; list hosts under rules: instead",
        ),
    }
}

/// `network-allowlist-syntax`: the policy compiles (a known preset's rules first, then the
/// block's). The summary reads `mode=<m>, <n> rule(s)`, then, when there are rules, the port
/// rule (issue 15 item 10: a rule without `:port` allows 443 and 80 only) with the ports the
/// rules name, and the address rule (non-public addresses are refused whenever the proxy runs,
/// unless an IP/CIDR rule names them).
pub(crate) fn network_allowlist_syntax(policy: &NetworkPolicy) -> Check {
    let id = CheckId::NetworkAllowlistSyntax;
    let mut rules: Vec<&str> = policy
        .preset
        .as_deref()
        .and_then(|name| preset_rules(name).ok())
        .map(<[&str]>::to_vec)
        .unwrap_or_default();
    rules.extend(policy.rules.iter().map(String::as_str));
    let mode = policy.mode.as_str();
    match compile(mode, &rules) {
        Ok(compiled) => Check::pass(id, policy_summary(mode, &compiled)),
        Err(error) => Check::fail(
            id,
            format!("mode={mode}: {error}"),
            "fix the rule: a host, *.domain, **.domain, an IP or CIDR, optionally :port, ! to deny",
        ),
    }
}

/// What the doctor says a compiled policy enforces.
fn policy_summary(mode: &str, compiled: &iterion_netproxy::Policy) -> String {
    let rules = compiled.rules();
    let mut summary = format!("mode={mode}, {} rule(s)", rules.len());
    if rules.is_empty() {
        return summary;
    }
    let mut named: Vec<u16> = rules.iter().filter_map(|r| r.port).collect();
    named.sort_unstable();
    named.dedup();
    summary.push_str("; a rule without :port allows ports 443 and 80 only");
    if !named.is_empty() {
        let list: Vec<String> = named.iter().map(u16::to_string).collect();
        summary.push_str(&format!(" (ports named: {})", list.join(", ")));
    }
    summary.push_str("; non-public addresses are refused unless an IP/CIDR rule names them");
    summary
}

/// `driver-capabilities` (not for noop): build, mounts, user or post_create asked of a driver
/// that cannot.
pub(crate) fn driver_capabilities(spec: &Spec, driver: &str, caps: Capabilities) -> Check {
    let id = CheckId::DriverCapabilities;
    let asked = [
        ("build", spec.build.is_some(), caps.supports_build),
        ("mounts", !spec.mounts.is_empty(), caps.supports_mounts),
        ("user", spec.user.is_some(), caps.supports_remote_user),
        (
            "post_create",
            spec.post_create
                .as_deref()
                .is_some_and(|s| !s.trim().is_empty()),
            caps.supports_post_create,
        ),
    ];
    let requested: Vec<&str> = asked.iter().filter(|a| a.1).map(|a| a.0).collect();
    let missing: Vec<&str> = asked.iter().filter(|a| a.1 && !a.2).map(|a| a.0).collect();
    if missing.is_empty() {
        let what = if requested.is_empty() {
            "nothing special".to_owned()
        } else {
            requested.join(", ")
        };
        Check::pass(id, format!("{driver} supports what the spec asks ({what})"))
    } else {
        Check::fail(
            id,
            format!("the {driver} driver cannot honour: {}", missing.join(", ")),
            "drop those fields for this driver (kubernetes: pin a pre-built image instead of build:)",
        )
    }
}

/// The architecture the engine binary must match, and whose it is: the image's when inspected,
/// else the engine's.
pub(crate) fn binary_arch<'a>(
    image_arch: Option<&'a str>,
    engine_arch: Option<&'a str>,
) -> Option<(&'a str, &'static str)> {
    image_arch
        .filter(|a| !a.is_empty())
        .map(|a| (a, "the image's architecture"))
        .or_else(|| {
            engine_arch
                .filter(|a| !a.is_empty())
                .map(|a| (a, "the engine's architecture"))
        })
}

#[cfg(test)]
#[path = "judge_tests.rs"]
mod tests;
