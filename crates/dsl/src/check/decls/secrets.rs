//! C090, C091, C092, C094 and C909: the `secrets:` block (DSL.md §3.2, §7.5).
use std::collections::HashMap;

use super::netrule;
use crate::{
    Code,
    ast::{SecretDef, StrLit},
    check::symbols::Symbols,
    diag::Diagnostic,
    ir,
};

/// Reports C090, C091, C092 and C094.
pub(super) fn check(syms: &Symbols<'_>, out: &mut Vec<Diagnostic>) {
    let mut first: HashMap<&str, &SecretDef> = HashMap::new();
    // Mount path → the secret that took it (first declarations only).
    let mut paths: HashMap<String, &str> = HashMap::new();
    for s in &syms.secret_list {
        let name = s.name.name.as_str();
        let duplicate = first.contains_key(name);
        if duplicate {
            out.push(Diagnostic::new(
                Code::C090,
                s.name.span,
                format!("secret \"{name}\" is already declared"),
            ));
        } else {
            first.insert(name, s);
        }
        if syms.vars.contains_key(name) {
            out.push(
                Diagnostic::new(
                    Code::C091,
                    s.name.span,
                    format!("secret \"{name}\" has the same name as a var"),
                )
                .with_hint("rename one of them: {{vars.…}} and {{secrets.…}} must not be confused"),
            );
        }
        let path = check_delivery(s, out);
        if let Some(hosts) = &s.hosts {
            for h in &hosts.items {
                if let Err(why) = netrule::check_hosts_entry(&h.value) {
                    out.push(Diagnostic::new(
                        Code::C092,
                        h.span,
                        format!(
                            "hosts entry \"{}\" must be a bare host or IP ({why})",
                            h.value
                        ),
                    ));
                }
            }
        }
        if let (false, Some(path)) = (duplicate, path) {
            if let Some(other) = paths.get(&path) {
                let anchor = s.mount_path.as_ref().map_or(s.name.span, |p| p.span);
                out.push(Diagnostic::new(
                    Code::C094,
                    anchor,
                    format!("mount_path \"{path}\" is already used by secret \"{other}\""),
                ));
            } else {
                paths.insert(path, name);
            }
        }
    }
}

/// Checks `as`, `mount_path` and `env` (C094). Returns the mount path of a well-formed file
/// secret, for the clash check.
fn check_delivery(s: &SecretDef, out: &mut Vec<Diagnostic>) -> Option<String> {
    let c094 = |lit: &StrLit, message: String| Diagnostic::new(Code::C094, lit.span, message);
    let is_file = ir::lower::secret_is_file(s);
    if let (None, Some(w)) = (is_file, &s.as_) {
        out.push(
            Diagnostic::new(
                Code::C094,
                w.span,
                format!("as must be value or file, found \"{}\"", w.text),
            )
            .with_hint("expected value or file"),
        );
    }
    let mut path_ok = true;
    if let Some(p) = &s.mount_path {
        if is_file == Some(false) {
            out.push(c094(p, "mount_path is only valid with as: file".into()));
            path_ok = false;
        } else if let Err(why) = mount_path_problem(&p.value) {
            out.push(c094(p, format!("mount_path {why}")));
            path_ok = false;
        }
    }
    if let Some(env) = &s.env {
        if is_file == Some(false) {
            out.push(
                c094(env, "env is only valid with as: file".into()).with_hint(
                    "a value secret is never in the container; add as: file to mount it",
                ),
            );
        } else if !is_env_name(&env.value) {
            out.push(c094(
                env,
                format!(
                    "env must match [A-Za-z_][A-Za-z0-9_]*, found \"{}\"",
                    env.value
                ),
            ));
        }
    }
    match (is_file, &s.mount_path) {
        (Some(true), Some(p)) if path_ok => Some(p.value.clone()),
        (Some(true), None) => Some(ir::default_secret_mount_path(&s.name.name)),
        _ => None,
    }
}

/// `[A-Za-z_][A-Za-z0-9_]*`.
fn is_env_name(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// The mount-path rules of DSL.md §3.2; the error completes `mount_path {why}`.
fn mount_path_problem(path: &str) -> Result<(), &'static str> {
    if !path.starts_with('/') {
        return Err("must be absolute");
    }
    if path == "/" {
        return Err("must not be /");
    }
    if path.chars().any(|c| c.is_control() || c == ',') {
        return Err("must not hold a control character or \",\"");
    }
    if path.ends_with('/')
        || path[1..]
            .split('/')
            .any(|c| c.is_empty() || c == "." || c == "..")
    {
        return Err("must be clean: no \".\" or \"..\" component, no \"//\", no trailing \"/\"");
    }
    let below_secrets = path
        .strip_prefix(ir::SECRETS_DIR)
        .is_some_and(|rest| rest.starts_with('/'));
    let under_iterion = path == "/run/iterion" || path.starts_with("/run/iterion/");
    if under_iterion && !below_secrets {
        return Err("must not be under /run/iterion, except below /run/iterion/secrets/");
    }
    Ok(())
}

/// Reports C909 on every secret the run can never deliver. `opted_out`: the workflow declares
/// `sandbox: none` (and that block passed C044).
pub(super) fn check_delivered(syms: &Symbols<'_>, opted_out: bool, out: &mut Vec<Diagnostic>) {
    for s in &syms.secret_list {
        let name = s.name.name.as_str();
        // The first declaration counts (C090 reports the others).
        if !syms.secrets.get(name).is_some_and(|f| std::ptr::eq(*f, *s)) {
            continue;
        }
        let reason = if opted_out {
            "workflow opts out of the sandbox"
        } else if ir::lower::secret_is_file(s) == Some(false)
            && s.hosts.as_ref().is_none_or(|h| h.items.is_empty())
        {
            "no hosts"
        } else {
            continue;
        };
        let hint = if opted_out {
            "secrets reach only a sandboxed run; remove sandbox: none"
        } else {
            "list the hosts it may travel to in hosts: [...], or deliver it with as: file"
        };
        out.push(
            Diagnostic::new(
                Code::C909,
                s.name.span,
                format!("secret \"{name}\" is never delivered: {reason}"),
            )
            .with_hint(hint),
        );
    }
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    #[test]
    fn mount_path_rules_follow_dsl_3_2() {
        let cases = [
            ("/run/iterion/secrets/key", Ok(())),
            ("/run/iterion/secrets/sub/key.pem", Ok(())),
            ("/etc/app/key.pem", Ok(())),
            ("keys/signing.pem", Err("must be absolute")),
            ("/", Err("must not be /")),
            ("/a,b", Err("must not hold a control character or \",\"")),
            ("/a\nb", Err("must not hold a control character or \",\"")),
            (
                "/a//b",
                Err("must be clean: no \".\" or \"..\" component, no \"//\", no trailing \"/\""),
            ),
            (
                "/a/./b",
                Err("must be clean: no \".\" or \"..\" component, no \"//\", no trailing \"/\""),
            ),
            (
                "/a/../b",
                Err("must be clean: no \".\" or \"..\" component, no \"//\", no trailing \"/\""),
            ),
            (
                "/a/",
                Err("must be clean: no \".\" or \"..\" component, no \"//\", no trailing \"/\""),
            ),
            (
                "/run/iterion",
                Err("must not be under /run/iterion, except below /run/iterion/secrets/"),
            ),
            (
                "/run/iterion/secrets",
                Err("must not be under /run/iterion, except below /run/iterion/secrets/"),
            ),
            (
                "/run/iterion/ca.pem",
                Err("must not be under /run/iterion, except below /run/iterion/secrets/"),
            ),
            ("/run/iterion-other/x", Ok(())),
        ];
        for (path, want) in cases {
            assert_eq!(mount_path_problem(path), want, "{path:?}");
        }
    }

    #[test]
    fn env_names_follow_the_ident_rule() {
        assert!(is_env_name("REGISTRY_TOKEN_FILE"));
        assert!(is_env_name("_x1"));
        assert!(!is_env_name(""));
        assert!(!is_env_name("1X"));
        assert!(!is_env_name("A-B"));
    }
}
