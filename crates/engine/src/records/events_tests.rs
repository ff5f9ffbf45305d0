//! Every event type with exactly the keys of SANDBOX.md §9.1 (and DSL.md §5 for the edge ones):
//! optional keys omitted when absent, never `null`, except `egress_enforced`.

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use super::*;
use crate::records::sandbox_events::*;

fn wire(event: &Event) -> Value {
    serde_json::to_value(event).unwrap()
}

fn assert_wire(event: Event, kind: &str, data: Value) {
    let want = json!({"type": kind, "data": data});
    assert_eq!(wire(&event), want, "{kind}");
    assert_eq!(event.kind(), kind);
    assert_eq!(event.data(), want["data"]);
    let back: Event = serde_json::from_value(want).unwrap();
    assert_eq!(back, event, "{kind} round-trips");
}

#[test]
fn run_node_and_edge_events_have_exactly_their_keys() {
    assert_wire(
        Event::RunStarted(RunStarted {
            workflow: "w".into(),
            workflow_hash: "h".into(),
            trust: "trusted".into(),
            resumed: false,
            parent_run: None,
            root_run: None,
        }),
        "run_started",
        json!({"workflow": "w", "workflow_hash": "h", "trust": "trusted", "resumed": false}),
    );
    assert_wire(
        Event::RunStarted(RunStarted {
            workflow: "w".into(),
            workflow_hash: "h".into(),
            trust: "untrusted".into(),
            resumed: true,
            parent_run: Some("p".into()),
            root_run: Some("r".into()),
        }),
        "run_started",
        json!({"workflow": "w", "workflow_hash": "h", "trust": "untrusted", "resumed": true, "parent_run": "p", "root_run": "r"}),
    );
    assert_wire(
        Event::RunRewound(RunRewound {
            node: "b".into(),
            dropped_outputs: vec!["b".into(), "c".into()],
        }),
        "run_rewound",
        json!({"node": "b", "dropped_outputs": ["b", "c"]}),
    );
    assert_wire(
        Event::NodeStarted(NodeStarted {
            node: "n".into(),
            kind: NodeKindLabel::Subbot,
            attempt: 2,
            branch: Some("b".into()),
        }),
        "node_started",
        json!({"node": "n", "kind": "subbot", "attempt": 2, "branch": "b"}),
    );
    assert_wire(
        Event::NodeFinished(NodeFinished {
            node: "n".into(),
            duration_ms: 5,
            output: json!({"a": 1}),
            usage: Some(Usage {
                input_tokens: 1,
                output_tokens: 2,
                cost_usd: None,
            }),
        }),
        "node_finished",
        json!({"node": "n", "duration_ms": 5, "output": {"a": 1}, "usage": {"input_tokens": 1, "output_tokens": 2}}),
    );
    assert_wire(
        Event::NodeFailed(NodeFailed {
            node: "n".into(),
            code: FailureCode::ExecutionFailed,
            message: "m".into(),
            exit_code: Some(3),
            stderr_tail: Some("e".into()),
            declared_code: None,
        }),
        "node_failed",
        json!({"node": "n", "code": "EXECUTION_FAILED", "message": "m", "exit_code": 3, "stderr_tail": "e"}),
    );
    assert_wire(
        Event::NodeFailed(NodeFailed {
            node: "n".into(),
            code: FailureCode::TemplateUnresolved,
            message: "m".into(),
            exit_code: None,
            stderr_tail: None,
            declared_code: None,
        }),
        "node_failed",
        json!({"node": "n", "code": "TEMPLATE_UNRESOLVED", "message": "m"}),
    );
    assert_wire(
        Event::EdgeSelected(EdgeSelected {
            from: "a".into(),
            to: "b".into(),
            condition: Some("not ok".into()),
            loop_: Some("l".into()),
            iteration: Some(1),
        }),
        "edge_selected",
        json!({"from": "a", "to": "b", "condition": "not ok", "loop": "l", "iteration": 1}),
    );
    assert_wire(
        Event::EdgeSelected(EdgeSelected {
            from: "a".into(),
            to: "done".into(),
            condition: None,
            loop_: None,
            iteration: None,
        }),
        "edge_selected",
        json!({"from": "a", "to": "done"}),
    );
    assert_wire(
        Event::LoopExhausted(LoopExhausted {
            from: "a".into(),
            to: "b".into(),
            loop_: "l".into(),
            max: 3,
        }),
        "loop_exhausted",
        json!({"from": "a", "to": "b", "loop": "l", "max": 3}),
    );
    assert_wire(
        Event::EdgeConditionError(EdgeConditionError {
            from: "a".into(),
            to: "b".into(),
            condition: "ok".into(),
            reason: "r".into(),
        }),
        "edge_condition_error",
        json!({"from": "a", "to": "b", "condition": "ok", "reason": "r"}),
    );
    assert_wire(
        Event::BudgetExceeded(BudgetExceeded {
            dimension: BudgetDimension::MaxDuration,
        }),
        "budget_exceeded",
        json!({"dimension": "max_duration"}),
    );
    assert_wire(
        Event::RunPaused(RunPaused {
            node: "n".into(),
            question: "q".into(),
            options: Some(vec!["y".into()]),
        }),
        "run_paused",
        json!({"node": "n", "question": "q", "options": ["y"]}),
    );
    assert_wire(
        Event::RunFinished(RunFinished {
            status: OutcomeStatus::Finished,
            duration_ms: 7,
        }),
        "run_finished",
        json!({"status": "finished", "duration_ms": 7}),
    );
    assert_wire(
        Event::RunFailed(RunFailed {
            error: "e".into(),
            phase: "post_create".into(),
            code: Some(FailureCode::SandboxSetupTimeout),
            resumable: Some(true),
        }),
        "run_failed",
        json!({"error": "e", "phase": "post_create", "code": "SANDBOX_SETUP_TIMEOUT", "resumable": true}),
    );
    assert_wire(
        Event::RunFailed(RunFailed {
            error: "e".into(),
            phase: "sandbox setup".into(),
            code: None,
            resumable: None,
        }),
        "run_failed",
        json!({"error": "e", "phase": "sandbox setup"}),
    );
    assert_wire(
        Event::RunCancelled(RunCancelled {
            reason: "r".into(),
            phase: "execution".into(),
        }),
        "run_cancelled",
        json!({"reason": "r", "phase": "execution"}),
    );
    assert_wire(
        Event::CancelRequested(CancelRequested {
            by: "studio".into(),
        }),
        "cancel_requested",
        json!({"by": "studio"}),
    );
}

#[test]
fn sandbox_skipped_has_three_shapes() {
    assert_wire(
        Event::SandboxSkipped(SandboxSkipped::degrade("default", "no driver", true)),
        "sandbox_skipped",
        json!({"mode": "auto", "source": "default", "reason": "no driver", "file_secrets_dropped": true}),
    );
    assert_wire(
        Event::SandboxSkipped(SandboxSkipped::refusal(
            "workflow sandbox: block",
            "no driver",
        )),
        "sandbox_skipped",
        json!({"mode": "inline", "source": "workflow sandbox: block", "reason": "no driver", "refused": true, "error_code": "SANDBOX_DRIVER_UNAVAILABLE"}),
    );
    assert_wire(
        Event::SandboxSkipped(SandboxSkipped::pinned_noop("auto", "cli flag --sandbox")),
        "sandbox_skipped",
        json!({"driver": "noop", "mode": "auto", "source": "cli flag --sandbox", "reason": PINNED_NOOP_REASON}),
    );
}

#[test]
fn sandbox_started_always_carries_egress_enforced() {
    let started = |egress_enforced, scheduling: Option<&str>| SandboxStarted {
        driver: "docker".into(),
        mode: "inline".into(),
        source: "workflow sandbox: block".into(),
        image: "alpine:3".into(),
        sandbox_id: "c1".into(),
        has_post_create: false,
        network_mode: "open".into(),
        network_source: "workflow".into(),
        proxy: false,
        tls_inspection: false,
        egress_enforced,
        transparent_egress: false,
        scheduling: scheduling.map(str::to_owned),
    };
    let base = json!({
        "driver": "docker", "mode": "inline", "source": "workflow sandbox: block",
        "image": "alpine:3", "sandbox_id": "c1", "has_post_create": false,
        "network_mode": "open", "network_source": "workflow", "proxy": false,
        "tls_inspection": false, "egress_enforced": null, "transparent_egress": false,
    });
    assert_wire(
        Event::SandboxStarted(started(None, None)),
        "sandbox_started",
        base.clone(),
    );
    let mut with = base;
    with["egress_enforced"] = json!(true);
    with["scheduling"] = json!("spread=hostname");
    assert_wire(
        Event::SandboxStarted(started(Some(true), Some("spread=hostname"))),
        "sandbox_started",
        with,
    );
}

#[test]
fn sandbox_shared_has_three_shapes() {
    assert_wire(
        Event::SandboxShared(SandboxShared::adopted(Adoption {
            driver: "docker".into(),
            workspace: "/ws".into(),
            parent_run: "p".into(),
            copy_based: false,
            files_written_through: true,
            file_secrets_declared: false,
            devbox_declared: false,
            ask_user_inherited: true,
        })),
        "sandbox_shared",
        json!({"adopted": true, "driver": "docker", "workspace": "/ws", "parent_run": "p",
               "copy_based": false, "files_written_through": true, "file_secrets_declared": false,
               "devbox_declared": false, "ask_user_inherited": true, "attachments_mounted": false}),
    );
    assert_wire(
        Event::SandboxShared(SandboxShared::declined(
            "docker",
            "p",
            vec!["image".into()],
            "own block",
        )),
        "sandbox_shared",
        json!({"adopted": false, "driver": "docker", "parent_run": "p", "declared": ["image"], "reason": "own block"}),
    );
    assert_wire(
        Event::SandboxShared(SandboxShared::forced("p", "forced resume")),
        "sandbox_shared",
        json!({"adopted": false, "forced": true, "parent_run": "p", "reason": "forced resume"}),
    );
}

#[test]
fn other_sandbox_events_have_exactly_their_keys() {
    let cases: Vec<(Event, &str, Value)> = vec![
        (
            Event::SandboxHostStateMounted(SandboxHostStateMounted {
                enabled: true,
                source: "default".into(),
                workspace_folder: Some("/workspace".into()),
                mounts: Some(vec!["/h:/c".into()]),
                skipped: Some(vec![SkippedMount {
                    path: "/x".into(),
                    reason: "absent".into(),
                }]),
                scratch: Some("/s:/t".into()),
            }),
            "sandbox_host_state_mounted",
            json!({"enabled": true, "source": "default", "workspace_folder": "/workspace",
                   "mounts": ["/h:/c"], "skipped": [{"path": "/x", "reason": "absent"}], "scratch": "/s:/t"}),
        ),
        (
            Event::SandboxHostStateMounted(SandboxHostStateMounted {
                enabled: false,
                source: "untrusted".into(),
                workspace_folder: None,
                mounts: None,
                skipped: None,
                scratch: None,
            }),
            "sandbox_host_state_mounted",
            json!({"enabled": false, "source": "untrusted"}),
        ),
        (
            Event::SandboxHostBindsDropped(SandboxHostBindsDropped {
                driver: "kubernetes".into(),
                dropped: vec!["/c".into()],
                withdrawn_env: vec!["K".into()],
                attachments_dir_cleared: true,
            }),
            "sandbox_host_binds_dropped",
            json!({"driver": "kubernetes", "dropped": ["/c"], "withdrawn_env": ["K"], "attachments_dir_cleared": true}),
        ),
        (
            Event::SandboxLimitsNotApplied(SandboxLimitsNotApplied {
                driver: "namespace".into(),
                limits: vec!["memory".into(), "pids".into()],
                reason: "no cgroup".into(),
            }),
            "sandbox_limits_not_applied",
            json!({"driver": "namespace", "limits": ["memory", "pids"], "reason": "no cgroup"}),
        ),
        (
            Event::SandboxAttachmentsCopied(SandboxAttachmentsCopied {
                target: "/t".into(),
                files: 2,
                bytes: 10,
                error: None,
                attachments: vec![],
            }),
            "sandbox_attachments_copied",
            json!({"target": "/t", "files": 2, "bytes": 10}),
        ),
        (
            Event::SandboxUserRemap(SandboxUserRemap {
                uid: 1000,
                gid: 1000,
                reason: "r".into(),
            }),
            "sandbox_user_remap",
            json!({"uid": 1000, "gid": 1000, "reason": "r"}),
        ),
        (
            Event::SandboxUidMismatchWarning(SandboxUidMismatchWarning {
                spec_user: "node".into(),
                host_uid: 1000,
            }),
            "sandbox_uid_mismatch_warning",
            json!({"spec_user": "node", "host_uid": 1000}),
        ),
        (
            Event::SandboxDevboxProvisioned(SandboxDevboxProvisioned {
                target: DevboxTarget::Host,
                sources: vec!["repo".into()],
                configs: vec!["devbox.json".into()],
                bin_dirs: vec![],
                path: "/bin".into(),
                skipped_sources: vec![],
                skipped_reasons: vec![],
                errors: Some(vec!["e".into()]),
                lock_kept: None,
            }),
            "sandbox_devbox_provisioned",
            json!({"target": "host", "sources": ["repo"], "configs": ["devbox.json"], "bin_dirs": [],
                   "path": "/bin", "skipped_sources": [], "skipped_reasons": [], "errors": ["e"]}),
        ),
        (
            Event::SandboxEnvDenied(SandboxEnvDenied {
                keys: vec!["LD_PRELOAD".into()],
                source: "devcontainer".into(),
                run_id: "r".into(),
            }),
            "sandbox_env_denied",
            json!({"keys": ["LD_PRELOAD"], "source": "devcontainer", "run_id": "r"}),
        ),
        (
            Event::SandboxImageEnvPlanted(SandboxImageEnvPlanted {
                image: "i".into(),
                keys: vec!["PATH".into()],
            }),
            "sandbox_image_env_planted",
            json!({"image": "i", "keys": ["PATH"]}),
        ),
        (
            Event::SandboxNetworkDefaulted(SandboxNetworkDefaulted::new("devcontainer", "r")),
            "sandbox_network_defaulted",
            json!({"mode": "allowlist", "preset": "iterion-default", "source": "devcontainer", "run_id": "r"}),
        ),
        (
            Event::SandboxClawRoutedViaRunner(SandboxClawRoutedViaRunner::default()),
            "sandbox_claw_routed_via_runner",
            json!({
                "reason": "claw routes execute inside the sandbox through iterion __claw-runner",
                "limitations_v1": [
                    "refused tools fail the node before the runner starts",
                    "launcher-placed tools execute on the host over tool_call",
                    "interaction: async is refused (CAPABILITY_UNSUPPORTED)",
                ],
            }),
        ),
        (
            Event::SandboxBuildStarted(SandboxBuildStarted {
                driver: "docker".into(),
                dockerfile: "Dockerfile".into(),
                context: ".".into(),
                network: "default".into(),
            }),
            "sandbox_build_started",
            json!({"driver": "docker", "dockerfile": "Dockerfile", "context": ".", "network": "default"}),
        ),
        (
            Event::SandboxBuildFinished(SandboxBuildFinished {
                driver: "docker".into(),
                target: "t".into(),
                duration_ms: 3,
            }),
            "sandbox_build_finished",
            json!({"driver": "docker", "target": "t", "duration_ms": 3}),
        ),
        (
            Event::SandboxBuildFailed(SandboxBuildFailed::new("docker", "boom")),
            "sandbox_build_failed",
            json!({"driver": "docker", "error": "boom"}),
        ),
        (
            Event::SandboxScratchBanked(SandboxScratchBanked {
                banked: false,
                empty: false,
                bytes: None,
                unknown: Some(true),
                reason: Some("gone".into()),
            }),
            "sandbox_scratch_banked",
            json!({"banked": false, "empty": false, "unknown": true, "reason": "gone"}),
        ),
        (
            Event::SandboxScratchRestored(SandboxScratchRestored {
                restored: true,
                bytes: Some(4),
                forced: false,
                stale: None,
                reason: None,
            }),
            "sandbox_scratch_restored",
            json!({"restored": true, "bytes": 4, "forced": false}),
        ),
        (
            Event::SandboxWorkspaceExportFailed(SandboxWorkspaceExportFailed {
                driver: "kubernetes".into(),
                error: "e".into(),
            }),
            "sandbox_workspace_export_failed",
            json!({"driver": "kubernetes", "error": "e"}),
        ),
        (
            Event::SandboxRunfilesDrainFailed(SandboxRunfilesDrainFailed {
                reason: DrainFailure::UnsafeMembers,
                declined: vec!["../x".into()],
                stale: true,
                error: None,
            }),
            "sandbox_runfiles_drain_failed",
            json!({"reason": "unsafe_members", "declined": ["../x"], "stale": true}),
        ),
        (
            Event::NetworkBlocked(NetworkBlocked {
                host: "evil.example".into(),
                reason: "policy denial".into(),
                run_id: "r".into(),
            }),
            "network_blocked",
            json!({"host": "evil.example", "reason": "policy denial", "run_id": "r"}),
        ),
    ];
    for (event, kind, data) in cases {
        assert_wire(event, kind, data);
    }
}

#[test]
fn a_build_error_is_clamped_to_4096_bytes() {
    let long = "é".repeat(3000);
    let got = SandboxBuildFailed::new("docker", &long);
    assert_eq!(
        (got.error.len(), long.starts_with(&got.error)),
        (4096, true)
    );
}

#[test]
fn agent_transcript_events_have_exactly_their_keys() {
    use crate::records::agent_events::*;
    assert_wire(
        Event::AgentTurn(AgentTurn {
            node: "fix".into(),
            backend: "claw".into(),
            turn: 1,
            model: None,
            stop_reason: Some("tool_use".into()),
            input_tokens: Some(12),
            output_tokens: None,
        }),
        "agent_turn",
        json!({"node": "fix", "backend": "claw", "turn": 1, "stop_reason": "tool_use",
               "input_tokens": 12}),
    );
    assert_wire(
        Event::AgentToolCall(AgentToolCall {
            node: "fix".into(),
            backend: "claude_code".into(),
            turn: 2,
            tool: "Bash".into(),
            input: r#"{"command":"ls"}"#.into(),
            result: None,
            is_error: false,
            exit_code: Some(0),
            duration_ms: None,
        }),
        "agent_tool_call",
        json!({"node": "fix", "backend": "claude_code", "turn": 2, "tool": "Bash",
               "input": "{\"command\":\"ls\"}", "is_error": false, "exit_code": 0}),
    );
}

#[test]
fn transcript_texts_are_bounded_on_a_char_boundary_with_a_note() {
    use crate::records::agent_events::*;
    assert_eq!(bound_transcript_text("short"), "short");
    let long = "é".repeat(TRANSCRIPT_TEXT_MAX);
    let cut = bound_transcript_text(&long);
    assert!(cut.len() < TRANSCRIPT_TEXT_MAX + 40, "{}", cut.len());
    assert!(cut.ends_with(&format!(
        "… [{} bytes cut]",
        long.len() - TRANSCRIPT_TEXT_MAX
    )));
}
