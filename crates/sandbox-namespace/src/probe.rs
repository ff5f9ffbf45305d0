//! Whether user namespaces are usable here, and if not why and what to do (issue 18: `iterion
//! sandbox doctor`). The sysctls are read as values and judged by a pure function.

use std::path::Path;

use serde::Serialize;

/// The facts the judgement reads; `None` = the file is absent on this kernel.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct UsernsFacts {
    /// `/proc/sys/kernel/unprivileged_userns_clone` (Debian and Ubuntu kernels).
    pub unprivileged_userns_clone: Option<String>,
    /// `/proc/sys/user/max_user_namespaces`.
    pub max_user_namespaces: Option<String>,
    /// `/proc/sys/kernel/apparmor_restrict_unprivileged_userns` (Ubuntu 23.10+).
    pub apparmor_restrict_unprivileged_userns: Option<String>,
    /// Whether the engine runs as root (the sysctls that gate unprivileged users do not apply).
    pub root: bool,
    /// What a trial `unshare` of the sandbox's namespaces answered: `None` = it worked.
    pub trial_error: Option<String>,
    /// Whether the namespace driver applies resource limits here and how, or why not
    /// ([`CgroupSupport::describe`](crate::cgroup::CgroupSupport::describe)); `None` = unread.
    pub cgroup: Option<String>,
}

/// The verdict: usable or not, each finding, and the remedy when not.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct UsernsReport {
    /// Whether the namespace driver can start a sandbox here.
    pub usable: bool,
    /// One line per fact read (`max_user_namespaces = 0`, …).
    pub findings: Vec<String>,
    /// What to run to make it usable, when it is not.
    pub remedy: Option<String>,
    /// Whether the driver applies the operator's resource limits (`ITERION_SANDBOX_MEMORY`,
    /// `ITERION_SANDBOX_CPUS`, `ITERION_SANDBOX_PIDS`) here, how (cgroup v1 or v2, where), or
    /// why not with the remedy ([`crate::cgroup::CgroupSupport::describe`]).
    pub resource_limits: String,
}

/// Reads the facts (the sysctls and a trial `unshare` in a child).
pub fn read_userns_facts() -> UsernsFacts {
    let read = |path: &str| {
        std::fs::read_to_string(Path::new(path))
            .ok()
            .map(|v| v.trim().to_owned())
    };
    UsernsFacts {
        unprivileged_userns_clone: read("/proc/sys/kernel/unprivileged_userns_clone"),
        max_user_namespaces: read("/proc/sys/user/max_user_namespaces"),
        apparmor_restrict_unprivileged_userns: read(
            "/proc/sys/kernel/apparmor_restrict_unprivileged_userns",
        ),
        root: nix::unistd::geteuid().is_root(),
        trial_error: crate::init::probe_unshare()
            .err()
            .map(|e| e.desc().to_owned()),
        cgroup: Some(crate::cgroup::support().describe()),
    }
}

/// Judges the facts. Pure. The trial decides `usable`; the sysctls explain a failure and
/// name its remedy (the first one that is set against us).
pub fn judge_userns(facts: &UsernsFacts) -> UsernsReport {
    let mut findings = Vec::new();
    let mut remedies = Vec::new();
    let mut note = |name: &str, value: &Option<String>| {
        findings.push(format!(
            "{name} = {}",
            value.as_deref().unwrap_or("(absent)")
        ));
    };
    note(
        "kernel.unprivileged_userns_clone",
        &facts.unprivileged_userns_clone,
    );
    note("user.max_user_namespaces", &facts.max_user_namespaces);
    note(
        "kernel.apparmor_restrict_unprivileged_userns",
        &facts.apparmor_restrict_unprivileged_userns,
    );
    if facts.max_user_namespaces.as_deref() == Some("0") {
        remedies.push("sudo sysctl -w user.max_user_namespaces=15000".to_owned());
    }
    if !facts.root {
        if facts.unprivileged_userns_clone.as_deref() == Some("0") {
            remedies.push("sudo sysctl -w kernel.unprivileged_userns_clone=1".to_owned());
        }
        if facts.apparmor_restrict_unprivileged_userns.as_deref() == Some("1") {
            remedies.push(
                "sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0 (or an AppArmor profile granting `userns,` to the iterion binary)"
                    .to_owned(),
            );
        }
    }
    match &facts.trial_error {
        None => findings.push(
            "trial unshare of user, mount, pid, net, ipc, uts and cgroup namespaces: ok".to_owned(),
        ),
        Some(error) => findings.push(format!("trial unshare: {error}")),
    }
    let usable = facts.trial_error.is_none();
    let remedy = (!usable).then(|| {
        if remedies.is_empty() {
            "user namespaces are refused here (a container without them, a seccomp profile, a kernel built without CONFIG_USER_NS); run where they are allowed, or use docker or podman".to_owned()
        } else {
            remedies.join("; ")
        }
    });
    UsernsReport {
        usable,
        findings,
        remedy,
        resource_limits: facts
            .cgroup
            .clone()
            .unwrap_or_else(|| "unknown (the cgroup state was not read)".to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn a_refused_unshare_names_each_sysctl_set_against_it() {
        let facts = UsernsFacts {
            unprivileged_userns_clone: Some("0".to_owned()),
            max_user_namespaces: Some("0".to_owned()),
            apparmor_restrict_unprivileged_userns: Some("1".to_owned()),
            root: false,
            trial_error: Some("Operation not permitted".to_owned()),
            cgroup: Some("cgroup v1 (no unified cgroup v2 hierarchy at /sys/fs/cgroup)".to_owned()),
        };
        let report = judge_userns(&facts);
        assert_eq!(report.usable, false);
        assert_eq!(
            report.remedy.unwrap(),
            "sudo sysctl -w user.max_user_namespaces=15000; sudo sysctl -w kernel.unprivileged_userns_clone=1; sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0 (or an AppArmor profile granting `userns,` to the iterion binary)"
        );
    }

    #[test]
    fn a_working_trial_is_usable_whatever_the_sysctls_say() {
        let facts = UsernsFacts {
            apparmor_restrict_unprivileged_userns: Some("1".to_owned()),
            root: true,
            ..UsernsFacts::default()
        };
        let report = judge_userns(&facts);
        assert_eq!((report.usable, report.remedy), (true, None));
    }

    #[test]
    fn the_report_says_whether_limits_apply_and_why_not() {
        let facts = UsernsFacts {
            cgroup: Some(
                crate::cgroup::CgroupSupport::Refused(
                    "cgroup v2: the engine's cgroup /sys/fs/cgroup/x is not delegated to it".into(),
                )
                .describe(),
            ),
            ..UsernsFacts::default()
        };
        assert_eq!(
            judge_userns(&facts).resource_limits,
            "NOT applied: cgroup v2: the engine's cgroup /sys/fs/cgroup/x is not delegated to it"
        );
    }
}
