//! Unit tests of the adoption rules (SANDBOX.md §14), input typing and the depth limit.
use std::sync::Arc;

use iterion_dsl::ir::Workflow;
use iterion_dsl::{CompileOptions, compile, compile_file};
use pretty_assertions::assert_eq;
use serde_json::json;

use super::*;
use crate::executor::child_runs::InlineChildRuns;
use crate::executor::execution::Execution;
use crate::records::secrets::Redactor;
use crate::records::sink::{EventSink, MemoryEventSink};
use crate::sandbox::active::SharedSandbox;

/// A child workflow: a tool, with `extra` spliced into the workflow block and `node_extra` into
/// an agent node (when given).
fn child(workflow_extra: &str, agent: Option<&str>) -> Workflow {
    let agent_decl = agent.map_or_else(String::new, |interaction| {
        format!(
            "agent ask:\n  model: \"anthropic/claude-x\"\n  user: \"hi\"\n  interaction: {interaction}\n\n"
        )
    });
    let next = if agent.is_some() { "ask" } else { "done" };
    let tail = if agent.is_some() {
        "  ask -> done\n"
    } else {
        ""
    };
    let src = format!(
        "tool t:\n  command: `true`\n\n{agent_decl}workflow c:\n  entry: t\n{workflow_extra}  t -> {next}\n{tail}"
    );
    let compiled = compile(src.as_bytes(), &CompileOptions::default());
    match compiled.workflow {
        Some(wf) => wf,
        None => panic!("child does not compile: {:#?}\n{src}", compiled.diagnostics),
    }
}

#[test]
fn the_adoption_rules_apply_in_order() {
    let image = "  sandbox:\n    image: \"alpine:3\"\n";
    let auto = "  sandbox: auto\n";
    let env = "  sandbox:\n    mode: auto\n    env:\n      A: \"1\"\n";
    let refused = |m: &str| AdoptionDecision::Refused {
        message: m.to_owned(),
    };
    // (case, child, copy_based, scratch_in_container, decision)
    let mut cases: Vec<(&str, Workflow, bool, bool, AdoptionDecision)> = vec![
        (
            "plain child adopts",
            child("", None),
            false,
            false,
            AdoptionDecision::Adopt,
        ),
        (
            "plain child adopts copy-based",
            child("", None),
            true,
            true,
            AdoptionDecision::Adopt,
        ),
        (
            "sandbox: auto alone is no declaration",
            child(auto, None),
            true,
            false,
            AdoptionDecision::Adopt,
        ),
        (
            "declaring child under bind-mount is honoured",
            child(env, None),
            false,
            false,
            AdoptionDecision::Declined {
                fields: vec!["env".to_owned()],
            },
        ),
        (
            "declaring child under copy-based is refused",
            child(image, None),
            true,
            false,
            refused(
                "subbot sub declares sandbox fields [image] but its parent's kubernetes sandbox \
                 is copy-based",
            ),
        ),
        (
            "rule 1 before rule 2",
            child(env, Some("ask")),
            true,
            false,
            refused(
                "subbot sub declares sandbox fields [env] but its parent's kubernetes sandbox is \
                 copy-based",
            ),
        ),
        (
            "pausing child under copy-based is refused",
            child("", Some("ask")),
            true,
            false,
            refused(
                "subbot sub can pause at node \"ask\" but its parent's kubernetes sandbox is \
                 copy-based",
            ),
        ),
        (
            "pausing child with scratch in the container is refused",
            child("", Some("ask")),
            false,
            true,
            refused(
                "subbot sub can pause at node \"ask\" but its parent's scratch lives in the \
                 container",
            ),
        ),
        (
            "pausing child under bind-mount adopts",
            child("", Some("ask")),
            false,
            false,
            AdoptionDecision::Adopt,
        ),
        (
            "interaction none does not pause",
            child("", Some("none")),
            true,
            true,
            AdoptionDecision::Adopt,
        ),
    ];
    // A node's own block counts, named `<node>.<field>` (it is never honoured, but it says the
    // child expects a sandbox of its own).
    let node_level = {
        let src = "agent ask:\n  model: \"anthropic/claude-x\"\n  user: \"hi\"\n  \
                   interaction: none\n  sandbox:\n    image: \"alpine:3\"\n\n\
                   workflow c:\n  entry: ask\n  ask -> done\n";
        compile(src.as_bytes(), &CompileOptions::default())
            .workflow
            .expect("compiles")
    };
    cases.push((
        "a node-level declaration is refused under copy-based",
        node_level,
        true,
        false,
        refused(
            "subbot sub declares sandbox fields [ask.image] but its parent's kubernetes sandbox \
             is copy-based",
        ),
    ));
    for (name, wf, copy, scratch, want) in cases {
        assert_eq!(
            should_adopt("sub", &wf, "kubernetes", copy, scratch),
            want,
            "{name}"
        );
    }
}

#[test]
fn inputs_are_typed_as_the_child_declares() {
    assert_eq!(typed(ValueType::Int, &json!("42")), Some(json!(42)));
    assert_eq!(typed(ValueType::Int, &json!(42)), Some(json!(42)));
    assert_eq!(typed(ValueType::Int, &json!("x")), None);
    assert_eq!(typed(ValueType::Bool, &json!("true")), Some(json!(true)));
    assert_eq!(typed(ValueType::String, &json!(3)), None);
    assert_eq!(
        typed(ValueType::StringList, &json!("[\"a\"]")),
        Some(json!(["a"]))
    );
    assert_eq!(
        typed(ValueType::Json, &json!({"k": 1})),
        Some(json!({"k": 1}))
    );
}

#[tokio::test]
async fn a_child_beyond_the_depth_limit_fails_subbot_depth_exceeded() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("p.iter"),
        "subbot sub:\n  source: \"c.iter\"\n\nworkflow p:\n  entry: sub\n  sub -> done\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("c.iter"),
        "tool t:\n  command: `touch ran.txt`\n\nworkflow c:\n  entry: t\n  t -> done\n",
    )
    .unwrap();
    let compiled = compile_file(&dir.path().join("p.iter"), &CompileOptions::default()).unwrap();
    let wf = compiled.workflow.expect("compiles");
    let sandbox = crate::sandbox::host::host_sandbox("run-1", dir.path())
        .await
        .unwrap();
    let events = MemoryEventSink::new();
    let sink: Arc<dyn EventSink> = Arc::new(events.clone());
    // A run that is itself a child at the deepest allowed level.
    let report = Execution::new(&wf, "run-1", sandbox.as_ref(), sink.clone())
        .workdir(dir.path().display().to_string())
        .nested(ir::MAX_SUBBOT_DEPTH, Arc::new(Redactor::new(&[])))
        .child_runs(
            Arc::new(InlineChildRuns::new(sink)),
            SharedSandbox::default(),
        )
        .run()
        .await
        .unwrap();
    assert_eq!(
        report.outcome.failure_code,
        Some(FailureCode::SubbotDepthExceeded)
    );
    assert_eq!(report.outcome.status, OutcomeStatus::Failed);
    assert!(!dir.path().join("ran.txt").exists(), "the child never ran");
}

#[test]
fn only_a_child_that_adopted_a_copy_based_sandbox_is_pinned_to_it() {
    let ev = |adopted: bool, copy: bool| {
        (
            "sandbox_shared",
            json!({"adopted": adopted, "copy_based": copy, "parent_run": "p-1"}),
        )
    };
    let check = |events: Vec<(&str, serde_json::Value)>| {
        adopted_in_copy_based_parent(events.iter().map(|(k, v)| (*k, v)))
    };
    assert_eq!(check(vec![ev(true, true)]), Some("p-1".to_owned()));
    assert_eq!(check(vec![ev(true, false)]), None);
    assert_eq!(check(vec![ev(false, true)]), None);
    assert_eq!(check(vec![]), None);
    // The last one counts: a forced resume gave it a sandbox of its own.
    let forced = (
        "sandbox_shared",
        json!({"adopted": false, "forced": true, "parent_run": "p-1"}),
    );
    assert_eq!(check(vec![ev(true, true), forced]), None);
}

#[test]
fn adoption_warns_about_what_the_child_does_not_get() {
    let compiled = |src: &str| {
        compile(src.as_bytes(), &CompileOptions::default())
            .workflow
            .unwrap_or_else(|| panic!("does not compile:\n{src}"))
    };
    let secrets = "secrets:\n  cert:\n    value: \"pem\"\n    as: file\n  tok:\n    value: \"t\"\n    hosts: [\"api.example.com\"]\n\n";
    let asker =
        "agent ask:\n  model: \"anthropic/claude-x\"\n  user: \"hi\"\n  interaction: ask\n\n";
    let child = compiled(&format!(
        "{secrets}{asker}workflow c:\n  entry: ask\n  ask -> done\n"
    ));
    let bare_parent =
        compiled("tool t:\n  command: `true`\n\nworkflow p:\n  entry: t\n  t -> done\n");
    let same_parent = compiled(&format!(
        "{secrets}tool t:\n  command: `true`\n\nworkflow p:\n  entry: t\n  t -> done\n"
    ));
    let adoption = |ask_user_inherited: bool| Adoption {
        driver: "docker".into(),
        workspace: "/workspace".into(),
        parent_run: "p".into(),
        copy_based: false,
        files_written_through: false,
        file_secrets_declared: true,
        devbox_declared: false,
        ask_user_inherited,
    };
    let devbox = std::path::Path::new("/w/bots/devbox.json");
    assert_eq!(
        adoption_warnings("sub", &bare_parent, &child, &adoption(false), Some(devbox)),
        [
            "subbot sub: file secrets [cert] are not materialised in the adopted sandbox (only \
             the parent's own are); declare them in the parent",
            "subbot sub: secrets [tok] are not the parent's, so the parent's proxy does not \
             deliver them; their placeholders stay as they are",
            "subbot sub: node \"ask\" can ask the operator, but the parent's sandbox has no \
             ask-user listener to inherit",
            "subbot sub: /w/bots/devbox.json is not provisioned in the adopted sandbox (the \
             parent's sandbox was provisioned before the child ran)",
        ]
    );
    // The parent declares the same secrets and has an ask-user path: nothing to say.
    assert_eq!(
        adoption_warnings("sub", &same_parent, &child, &adoption(true), None),
        Vec::<String>::new()
    );
}
