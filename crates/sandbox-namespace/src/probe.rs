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
    /// The engine's cgroup as limits would need it ([`read_cgroup_state`]); `None` = unread.
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
        cgroup: Some(read_cgroup_state()),
    }
}

/// Where memory, pids and cpu limits could come from for a sandbox of this engine: `cgroup v1`
/// (no unified hierarchy), `cgroup v2, not delegated (…)` (the engine's own cgroup is not
/// writable by it), or `cgroup v2, delegated (controllers: …)`. Blocking (reads `/proc` and
/// `/sys/fs/cgroup`).
pub fn read_cgroup_state() -> String {
    let unified = Path::new("/sys/fs/cgroup/cgroup.controllers").exists();
    if !unified {
        // Hybrid (systemd's `unified` mount): a cgroup2 hierarchy exists, but a controller
        // lives in one hierarchy only, and memory, pids and cpu are bound to the v1 ones; a
        // second cgroup2 mount is the same hierarchy with the same controllers.
        let hybrid = std::fs::read_to_string("/sys/fs/cgroup/unified/cgroup.controllers").ok();
        return match hybrid {
            Some(controllers) => {
                let controllers = controllers.trim();
                let missing: Vec<&str> = ["memory", "pids", "cpu"]
                    .into_iter()
                    .filter(|c| !controllers.split_whitespace().any(|have| have == *c))
                    .collect();
                format!(
                    "cgroup v1 with a hybrid cgroup v2 at /sys/fs/cgroup/unified (controllers: {}); {} {} bound to the v1 hierarchies, and a controller serves one hierarchy only",
                    if controllers.is_empty() {
                        "none"
                    } else {
                        controllers
                    },
                    missing.join(", "),
                    if missing.len() == 1 { "is" } else { "are" },
                )
            }
            None => "cgroup v1 (no unified cgroup v2 hierarchy at /sys/fs/cgroup)".to_owned(),
        };
    }
    let own = std::fs::read_to_string("/proc/self/cgroup")
        .ok()
        .and_then(|text| {
            text.lines()
                .find_map(|line| line.strip_prefix("0::").map(str::to_owned))
        })
        .unwrap_or_else(|| "/".to_owned());
    let dir = Path::new("/sys/fs/cgroup").join(own.trim_start_matches('/'));
    let writable = nix::unistd::access(&dir, nix::unistd::AccessFlags::W_OK).is_ok();
    let controllers = std::fs::read_to_string(dir.join("cgroup.controllers"))
        .map(|c| c.trim().to_owned())
        .unwrap_or_default();
    if writable {
        format!(
            "cgroup v2, delegated at {} (controllers: {controllers})",
            dir.display()
        )
    } else {
        format!(
            "cgroup v2, not delegated ({} is not writable by the engine)",
            dir.display()
        )
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
    // Limits are reported, not applied: the driver sets no cgroup limit yet (docs/namespace.md).
    findings.push(format!(
        "cgroup limits (memory, pids, cpu): not applied by the namespace driver; {}; a sandboxed command is bounded by the host's own limits only",
        facts.cgroup.as_deref().unwrap_or("cgroup state not read")
    ));
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
    fn the_report_says_plainly_that_no_cgroup_limit_is_applied() {
        let facts = UsernsFacts {
            cgroup: Some(
                "cgroup v2, not delegated (/sys/fs/cgroup/x is not writable by the engine)"
                    .to_owned(),
            ),
            ..UsernsFacts::default()
        };
        assert_eq!(
            judge_userns(&facts).findings.last().map(String::as_str),
            Some(
                "cgroup limits (memory, pids, cpu): not applied by the namespace driver; cgroup v2, not delegated (/sys/fs/cgroup/x is not writable by the engine); a sandboxed command is bounded by the host's own limits only"
            )
        );
    }
}
