//! Tool placement (SANDBOX.md §13.3) and the permission policy the launcher hands the runner.
//!
//! [`sandbox_placement_of`] is one exhaustive table: the exact names first, then the MCP-family
//! shapes, and everything else — the empty name included — is [`Placement::Refused`] (fail
//! closed). The [`PermissionPolicy`] is the node's rules in their raw string form
//! (`allow <tool>` / `deny <tool>`), parsed the same way on both sides of the channel.

use serde_json::Value;

/// Where a tool executes under an active sandbox.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Placement {
    /// In the container; a missing local registration is fatal.
    Sandbox,
    /// On the host, proxied over `tool_call`.
    Launcher,
    /// Never under a sandbox.
    Refused,
}

/// Tools that execute in the container.
pub const SANDBOX_TOOLS: [&str; 18] = [
    "bash",
    "diagnostic_shell",
    "repl",
    "read_file",
    "write_file",
    "file_edit",
    "notebook_edit",
    "glob",
    "grep",
    "workspace_grep",
    "skill",
    "read_image",
    "web_fetch",
    "remote_trigger",
    "send_user_message",
    "sleep",
    "structured_output",
    "agent",
];

/// Tools proxied to the launcher (besides the MCP family).
pub const LAUNCHER_TOOLS: [&str; 29] = [
    "ask_user",
    "ask_user_async",
    "await_answers",
    "list_mcp_resources",
    "read_mcp_resource",
    "mcp_auth",
    "task_create",
    "task_get",
    "task_list",
    "task_output",
    "task_stop",
    "task_update",
    "run_task_packet",
    "team_create",
    "team_get",
    "team_list",
    "team_delete",
    "cron_create",
    "cron_get",
    "cron_list",
    "cron_delete",
    "todo_write",
    "enter_plan_mode",
    "exit_plan_mode",
    "privacy_filter",
    "privacy_unfilter",
    "config",
    "tool_search",
    "web_search",
];

/// Tools refused by name (every unclassified name is refused too).
pub const REFUSED_TOOLS: [&str; 12] = [
    "lsp",
    "screenshot",
    "computer_use",
    "worker_create",
    "worker_get",
    "worker_observe",
    "worker_observe_completion",
    "worker_resolve_trust",
    "worker_await_ready",
    "worker_send_prompt",
    "worker_restart",
    "worker_terminate",
];

/// The placement of `name` (§13.3): the exact table first, so `mcp_auth` is a builtin and
/// `mcp_bash` is not MCP; then the MCP family; else refused.
pub fn sandbox_placement_of(name: &str) -> Placement {
    if SANDBOX_TOOLS.contains(&name) {
        return Placement::Sandbox;
    }
    if LAUNCHER_TOOLS.contains(&name) {
        return Placement::Launcher;
    }
    if REFUSED_TOOLS.contains(&name) {
        return Placement::Refused;
    }
    if mcp_parts(name).is_some() {
        return Placement::Launcher;
    }
    Placement::Refused
}

/// `(server, tool)` of an MCP-family name: `mcp.<s>.<t>`, `mcp__<s>__<t>` or `mcp_<s>_<t>`,
/// with a non-empty server and tool.
pub fn mcp_parts(name: &str) -> Option<(&str, &str)> {
    let split = |rest: &'static str, sep: &'static str| {
        name.strip_prefix(rest)
            .and_then(|r| r.split_once(sep))
            .filter(|(s, t)| !s.is_empty() && !t.is_empty())
    };
    split("mcp.", ".")
        .or_else(|| split("mcp__", "__"))
        .or_else(|| {
            // `mcp_<s>_<t>`, but not `mcp__…`, which has its own shape.
            if name.starts_with("mcp__") {
                None
            } else {
                split("mcp_", "_")
            }
        })
}

/// The name a permission rule is matched on: `mcp_<s>_<t>` and `mcp__<s>__<t>` are the same tool.
fn canonical_tool(name: &str) -> String {
    if name.starts_with("mcp.") {
        return name.to_owned();
    }
    match mcp_parts(name) {
        Some((server, tool)) => format!("mcp__{server}__{tool}"),
        None => name.to_owned(),
    }
}

/// The node's permission rules.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PermissionPolicy {
    allow: Vec<String>,
    deny: Vec<String>,
}

/// A permission policy that does not parse.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("permission policy: {reason}")]
pub struct PolicyError {
    /// What is wrong.
    pub reason: String,
}

impl PermissionPolicy {
    /// A policy allowing exactly `tools`.
    pub fn allowing<'a>(tools: impl IntoIterator<Item = &'a str>) -> PermissionPolicy {
        PermissionPolicy {
            allow: tools.into_iter().map(canonical_tool).collect(),
            deny: Vec::new(),
        }
    }

    /// The raw string form (`allow <tool>` / `deny <tool>`), as the `permission_policy` data.
    pub fn to_raw(&self) -> Value {
        let rules: Vec<Value> = self
            .allow
            .iter()
            .map(|t| Value::String(format!("allow {t}")))
            .chain(self.deny.iter().map(|t| Value::String(format!("deny {t}"))))
            .collect();
        Value::Array(rules)
    }

    /// Parses the raw form: an array of `allow <tool>` / `deny <tool>` strings.
    ///
    /// # Errors
    ///
    /// [`PolicyError`] for anything else.
    pub fn parse(raw: &Value) -> Result<PermissionPolicy, PolicyError> {
        let Some(rules) = raw.as_array() else {
            return Err(PolicyError {
                reason: "expected an array of rule strings".to_owned(),
            });
        };
        let mut policy = PermissionPolicy::default();
        for rule in rules {
            let text = rule.as_str().ok_or_else(|| PolicyError {
                reason: format!("rule {rule} is not a string"),
            })?;
            let (verb, tool) = text.split_once(' ').ok_or_else(|| PolicyError {
                reason: format!("rule {text:?} is not `allow <tool>` or `deny <tool>`"),
            })?;
            let tool = tool.trim();
            if tool.is_empty() || tool.contains(char::is_whitespace) {
                return Err(PolicyError {
                    reason: format!("rule {text:?} names no single tool"),
                });
            }
            match verb {
                "allow" => policy.allow.push(canonical_tool(tool)),
                "deny" => policy.deny.push(canonical_tool(tool)),
                _ => {
                    return Err(PolicyError {
                        reason: format!("rule {text:?}: unknown verb {verb:?}"),
                    });
                }
            }
        }
        Ok(policy)
    }

    /// Whether `tool` may run: allowed, and not denied (an explicit deny wins).
    pub fn allows(&self, tool: &str) -> bool {
        let tool = canonical_tool(tool);
        !self.deny.contains(&tool) && self.allow.contains(&tool)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    #[test]
    fn every_listed_name_has_its_placement_and_the_rest_is_refused() {
        let mut got = Vec::new();
        for name in SANDBOX_TOOLS {
            got.push((name, sandbox_placement_of(name), Placement::Sandbox));
        }
        for name in LAUNCHER_TOOLS {
            got.push((name, sandbox_placement_of(name), Placement::Launcher));
        }
        for name in REFUSED_TOOLS {
            got.push((name, sandbox_placement_of(name), Placement::Refused));
        }
        for (name, expected) in [
            ("mcp__gh__search", Placement::Launcher),
            ("mcp_gh_search", Placement::Launcher),
            ("mcp.gh.search", Placement::Launcher),
            ("mcp_auth", Placement::Launcher),
            ("mcp_bash", Placement::Refused),
            ("mcp__gh__", Placement::Refused),
            ("mcp.gh", Placement::Refused),
            ("mcp__", Placement::Refused),
            ("", Placement::Refused),
            ("Bash", Placement::Refused),
            ("rm", Placement::Refused),
        ] {
            got.push((name, sandbox_placement_of(name), expected));
        }
        for (name, actual, expected) in got {
            assert_eq!(actual, expected, "{name:?}");
        }
    }

    #[test]
    fn the_policy_round_trips_matches_mcp_spellings_and_deny_wins() {
        let policy = PermissionPolicy::parse(&json!([
            "allow ask_user",
            "allow mcp_gh_search",
            "allow web_search",
            "deny web_search"
        ]))
        .unwrap();
        assert!(policy.allows("ask_user"));
        assert!(policy.allows("mcp__gh__search"));
        assert!(!policy.allows("web_search"));
        assert!(!policy.allows("bash"));
        assert_eq!(PermissionPolicy::parse(&policy.to_raw()).unwrap(), policy);
        for bad in [
            json!("allow x"),
            json!(["allow"]),
            json!(["permit x"]),
            json!([1]),
        ] {
            assert!(PermissionPolicy::parse(&bad).is_err(), "{bad}");
        }
    }
}
