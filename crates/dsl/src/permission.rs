//! The tool-permission gate (upstream's `permission:` with `allow` / `ask` / `deny` rule lists,
//! docs/language.md "Permissions"): which of a model's tool calls may run. Pure: the claw loop
//! calls [`Permission::decide`] before every call, in process and in the container's runner
//! alike, so the rules never enter the model's context and it cannot argue past them.
//!
//! Order: deny rules, then ask rules, then allow rules, then the mode (`deny` refuses, `ask`
//! would ask the operator — this release refuses those too, saying so). A rule is a tool name
//! (`Bash`, `Read`, `mcp__server__*`) or `Tool(pattern)`:
//!
//! - `Bash(prefix:*)` matches a command starting with `prefix`, `Bash(pattern)` with `*` a glob
//!   over the whole command, anything else the exact command. An **allow** or **ask** rule never
//!   matches a command holding a shell control character (`;`, `&`, `|`, `` ` ``, `$(`, `<`,
//!   `>`, a newline…), so `Bash(git status:*)` does not allow `git status; curl …`; a **deny**
//!   rule is tried on the whole command and on each of its pieces between those characters, so
//!   `Bash(rm -rf:*)` also refuses `echo hi && rm -rf /`.
//! - `Read` / `Write` / `Edit` patterns match the file path, lexically normalised (`a/../.env`
//!   is `.env`), as a glob; a pattern without `/` matches the file's name at any depth.
//! - `WebFetch(domain:HOST)` matches the URL's host or any subdomain; other patterns the URL.
//! - Any other `Tool(pattern)` matches the call's input as compact JSON, as a glob.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// `permission:` mode.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PermissionMode {
    /// No gate (the default).
    #[default]
    Off,
    /// Unmatched calls would go to the operator; refused here (fail closed).
    Ask,
    /// Unmatched calls are refused.
    Deny,
}

/// A node's effective gate: the mode and the three rule lists, as written.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Permission {
    /// The mode.
    pub mode: PermissionMode,
    /// Rules that let a call run.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow: Vec<String>,
    /// Rules that send a call to the operator.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ask: Vec<String>,
    /// Rules that refuse a call.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deny: Vec<String>,
}

/// What the gate says about one call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Run it.
    Allow,
    /// Refuse it; the text is the tool result the model reads.
    Deny(String),
}

/// Why a rule cannot be read (C055).
pub fn rule_problem(rule: &str) -> Option<&'static str> {
    let Some((name, pattern)) = split(rule) else {
        return Some("a rule is a tool name, or Tool(pattern)");
    };
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '*')
    {
        return Some("a rule is a tool name, or Tool(pattern)");
    }
    if pattern.is_some_and(str::is_empty) {
        return Some("Tool() needs a pattern");
    }
    None
}

/// `Name` or `Name(pattern)`; `None` when the parentheses do not close.
fn split(rule: &str) -> Option<(&str, Option<&str>)> {
    match rule.split_once('(') {
        None => Some((rule.trim(), None)),
        Some((name, rest)) => {
            let pattern = rest.strip_suffix(')')?;
            Some((name.trim(), Some(pattern)))
        }
    }
}

/// The rule-side name of a claw tool (upstream spells rules with Claude Code's tool names).
fn canonical(tool: &str) -> &str {
    match tool {
        "bash" | "shell" | "run_command" | "Bash" => "Bash",
        "read_file" | "Read" => "Read",
        "write_file" | "Write" => "Write",
        "edit_file" | "file_edit" | "patch" | "Edit" => "Edit",
        "glob" | "list_files" | "tree" | "Glob" => "Glob",
        "grep" | "search_codebase" | "Grep" => "Grep",
        "web_fetch" | "WebFetch" => "WebFetch",
        "web_search" | "WebSearch" => "WebSearch",
        other => other,
    }
}

/// The bytes that end one shell command and start another, or substitute one.
const SHELL_CONTROL: &[char] = &[';', '&', '|', '`', '<', '>', '\n', '\r', '$', '(', ')'];

impl Permission {
    /// Whether the gate does anything.
    pub fn is_on(&self) -> bool {
        self.mode != PermissionMode::Off
    }

    /// The decision for a call of `tool` with `input`. `ask_user` is never gated (it is how a
    /// node reaches the operator).
    pub fn decide(&self, tool: &str, input: &Value) -> Decision {
        if !self.is_on() || tool == "ask_user" {
            return Decision::Allow;
        }
        let name = canonical(tool);
        if let Some(rule) = self
            .deny
            .iter()
            .find(|r| matches(r, tool, name, input, Side::Deny))
        {
            return Decision::Deny(format!(
                "permission denied: the workflow's rule deny \"{rule}\" refuses this {name} call; do without it"
            ));
        }
        if let Some(rule) = self
            .ask
            .iter()
            .find(|r| matches(r, tool, name, input, Side::Allow))
        {
            return Decision::Deny(format!(
                "permission denied: the rule ask \"{rule}\" needs the operator's approval, which this run cannot ask for; do without it"
            ));
        }
        if self
            .allow
            .iter()
            .any(|r| matches(r, tool, name, input, Side::Allow))
        {
            return Decision::Allow;
        }
        let why = match self.mode {
            PermissionMode::Ask => "needs the operator's approval, which this run cannot ask for",
            _ => "is not allowed by the workflow's permission rules",
        };
        Decision::Deny(format!(
            "permission denied: this {name} call {why}; do without it"
        ))
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Side {
    Allow,
    Deny,
}

fn matches(rule: &str, tool: &str, name: &str, input: &Value, side: Side) -> bool {
    let Some((rule_name, pattern)) = split(rule) else {
        // An unreadable rule (C055) refuses everything it could mean on the deny side.
        return side == Side::Deny;
    };
    let named = if rule_name.contains('*') {
        glob(rule_name, name) || glob(rule_name, tool)
    } else {
        rule_name == name || rule_name == tool
    };
    if !named {
        return false;
    }
    let Some(pattern) = pattern else {
        return true;
    };
    let text = |key: &[&str]| {
        key.iter()
            .find_map(|k| input.get(*k).and_then(Value::as_str))
            .map(str::to_owned)
    };
    match name {
        "Bash" => {
            let Some(command) = text(&["command", "cmd"]) else {
                return side == Side::Deny;
            };
            command_matches(pattern, &command, side)
        }
        "Read" | "Write" | "Edit" => {
            let Some(path) = text(&["path", "file_path", "file"]) else {
                return side == Side::Deny;
            };
            path_matches(pattern, &normalise(&path))
        }
        "WebFetch" => {
            let Some(url) = text(&["url"]) else {
                return side == Side::Deny;
            };
            match pattern.strip_prefix("domain:") {
                Some(host) => host_of(&url).is_some_and(|h| {
                    let host = host.to_ascii_lowercase();
                    h == host || h.ends_with(&format!(".{host}"))
                }),
                None => glob(pattern, &url) || host_of(&url).is_some_and(|h| h == pattern),
            }
        }
        _ => glob(pattern, &serde_json::to_string(input).unwrap_or_default()),
    }
}

fn command_matches(pattern: &str, command: &str, side: Side) -> bool {
    let one = |cmd: &str| {
        let cmd = cmd.trim();
        match pattern.strip_suffix(":*") {
            Some(prefix) => {
                cmd == prefix || cmd.strip_prefix(prefix).is_some_and(|r| r.starts_with(' '))
            }
            None if pattern.contains('*') => glob(pattern, cmd),
            None => cmd == pattern,
        }
    };
    match side {
        // Allowing never reaches past one plain command.
        Side::Allow => !command.contains(SHELL_CONTROL) && one(command),
        Side::Deny => one(command) || command.split(SHELL_CONTROL).any(one),
    }
}

/// A path with `.` and `..` folded lexically, `\` read as `/`.
fn normalise(path: &str) -> String {
    let path = path.replace('\\', "/");
    let absolute = path.starts_with('/');
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            p => parts.push(p),
        }
    }
    let joined = parts.join("/");
    if absolute {
        format!("/{joined}")
    } else {
        joined
    }
}

fn path_matches(pattern: &str, path: &str) -> bool {
    if pattern.contains('/') {
        let pattern = pattern.trim_start_matches("./");
        glob(pattern, path)
    } else {
        path.rsplit('/')
            .next()
            .is_some_and(|name| glob(pattern, name))
            || path.split('/').any(|component| glob(pattern, component))
    }
}

fn host_of(url: &str) -> Option<String> {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let authority = rest.split(['/', '?', '#']).next()?;
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let host = host.split(':').next()?;
    (!host.is_empty()).then(|| host.to_ascii_lowercase())
}

/// `*` any run of characters but `/`, `**` any run at all, `?` one character but `/`; the rest
/// literal. Dynamic programming over (pattern, text) positions: linear in their product, which
/// both bounds keep small (a rule is the workflow's, a text the model's).
fn glob(pattern: &str, text: &str) -> bool {
    #[derive(Clone, Copy, PartialEq)]
    enum P {
        Star,
        Stars,
        One,
        Lit(char),
    }
    let mut pat = Vec::new();
    let mut chars = pattern.chars().take(256).peekable();
    while let Some(c) = chars.next() {
        pat.push(match c {
            '*' if chars.peek() == Some(&'*') => {
                chars.next();
                P::Stars
            }
            '*' => P::Star,
            '?' => P::One,
            c => P::Lit(c),
        });
    }
    let t: Vec<char> = text.chars().take(4096).collect();
    // ok[j]: pattern prefix of length i matches text prefix of length j.
    let mut ok = vec![false; t.len() + 1];
    ok[0] = true;
    for p in &pat {
        let mut next = vec![false; t.len() + 1];
        match p {
            P::Stars => {
                let mut any = false;
                for j in 0..=t.len() {
                    any |= ok[j];
                    next[j] = any;
                }
            }
            P::Star => {
                let mut run = false;
                for j in 0..=t.len() {
                    if j > 0 && t[j - 1] == '/' {
                        run = false;
                    }
                    run |= ok[j];
                    next[j] = run;
                }
            }
            P::One => {
                for j in 1..=t.len() {
                    next[j] = ok[j - 1] && t[j - 1] != '/';
                }
            }
            P::Lit(c) => {
                for j in 1..=t.len() {
                    next[j] = ok[j - 1] && t[j - 1] == *c;
                }
            }
        }
        ok = next;
    }
    ok[t.len()]
}

#[cfg(test)]
#[path = "permission_tests.rs"]
mod tests;
