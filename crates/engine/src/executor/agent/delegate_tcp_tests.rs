//! The ask-user listener over TCP — how a kubernetes pod reaches it, the pod sharing no run dir
//! with the engine — with the real `claude` CLI against the fake Messages server and the real
//! static `iterion __mcp-ask-user` (told `ITERION_ASK_USER_ADDR`): the model calls `ask_user`,
//! the run pauses with the CLI's session kept, and a resume with the answer continues that
//! session. A kubernetes API server cannot run here; the pod's side of this path is exercised
//! against the fake API server in `crates/sandbox-kubernetes/tests` (the "pod" runs its execs on
//! the host), and this test is the listener and both CLIs on the same loopback.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use iterion_test_support::fake_model::{Api, FakeModel, Reply};
use iterion_test_support::{delegate_clis_or_skip, static_iterion_or_skip};
use pretty_assertions::assert_eq;
use serde_json::json;

use crate::executor::agent::env::{AgentEnv, AgentPlace, AskChannel};
use crate::executor::execution::Execution;
use crate::records::secrets::Redactor;
use crate::records::sink::MemoryEventSink;
use crate::sandbox::ask_user::{AskUserListener, Reach};
use crate::sandbox::host::HostPath;
use iterion_vocab::OutcomeStatus;

const QUESTION: &str = "Which environment should I deploy to?";
const KEY: &str = "sk-ant-Hx3pQ8wM2nR6tV9yB4kL7cJ5";

const WORKFLOW: &str = "schema verdict:\n  answer: string\n\nprompt task:\n  Deploy the service.\n\n\
agent asker:\n  model: \"anthropic/claude-test\"\n  backend: claude_code\n  interaction: ask\n  user: task\n  output: verdict\n  tool_max_steps: 4\n\n\
workflow w:\n  entry: asker\n  asker -> done\n";

#[tokio::test]
async fn claude_code_asks_over_a_tcp_listener_pauses_and_resume_answers_in_its_session() {
    let Some(clis) = delegate_clis_or_skip("engine::delegate_tcp::claude_code") else {
        return;
    };
    let Some(iterion) = static_iterion_or_skip("engine::delegate_tcp::claude_code") else {
        return;
    };
    let compiled = iterion_dsl::compile(
        WORKFLOW.as_bytes(),
        &iterion_dsl::CompileOptions {
            ask_user_in_sandbox: true,
        },
    );
    let wf = compiled
        .workflow
        .unwrap_or_else(|| panic!("{:#?}", compiled.diagnostics));
    let fake = FakeModel::start(
        Api::Anthropic,
        vec![
            Reply::tool("mcp__iterion__ask_user", json!({"question": QUESTION})),
            Reply::text("{\"answer\": \"deploying to staging\"}"),
        ],
    );
    let env = iterion_vocab::Environment::from_pairs([
        ("ANTHROPIC_API_KEY", KEY.to_owned()),
        ("ITERION_ANTHROPIC_BASE_URL", fake.base_url()),
    ]);
    let routes =
        iterion_agent::provider::resolve_routes(&wf, &serde_json::Map::new(), |k| env.get(k))
            .unwrap();
    let workspace = tempfile::tempdir().unwrap();
    let host_path = HostPath {
        prefix: clis.display().to_string(),
        path: format!(
            "{}:{}",
            clis.display(),
            std::env::var("PATH").unwrap_or_default()
        ),
    };
    let run_id = "019300aa-bbbb-7ccc-8ddd-eeeeffff00aa";
    // Each attempt binds a listener of its own, as each attempt of a run does.
    let attempt = |answer: Option<&str>, checkpoint| {
        let (workspace, host_path, routes, wf, iterion) = (
            workspace.path().to_owned(),
            host_path.clone(),
            routes.clone(),
            &wf,
            iterion.clone(),
        );
        let answer = answer.map(str::to_owned);
        async move {
            let redactor = Arc::new(Redactor::default());
            let listener = Arc::new(
                AskUserListener::bind_tcp(
                    std::net::SocketAddr::from(([127, 0, 0, 1], 0)),
                    "127.0.0.1",
                    &redactor,
                    Arc::new(iterion_sandbox::NullRunLog),
                )
                .await
                .unwrap(),
            );
            assert!(
                matches!(listener.reach(), Reach::Tcp(_)),
                "{:?}",
                listener.reach()
            );
            let sandbox =
                crate::sandbox::host::host_sandbox_with_path(run_id, &workspace, Some(&host_path))
                    .await
                    .unwrap();
            let events = MemoryEventSink::new();
            let mut execution =
                Execution::new(wf, run_id, sandbox.as_ref(), Arc::new(events.clone()))
                    .workdir(workspace.display().to_string())
                    .redactor(Arc::clone(&redactor))
                    .agents(AgentEnv {
                        routes,
                        place: AgentPlace::InProcess {
                            workspace: workspace.clone(),
                            path: Some(host_path),
                        },
                        operator: None,
                        answer,
                        delegates: Default::default(),
                        forfaits: Default::default(),
                        ask_user: Some(AskChannel {
                            listener: Arc::clone(&listener),
                            command: iterion.display().to_string(),
                        }),
                    });
            if let Some(checkpoint) = checkpoint {
                execution = execution.resume_from(checkpoint);
            }
            let report = execution.run().await.unwrap();
            listener.shutdown().await;
            (report, events)
        }
    };
    let (paused, events) = attempt(None, None).await;
    assert_eq!(
        paused.outcome.status,
        OutcomeStatus::Paused,
        "{:#?}\n{:#?}",
        paused.outcome,
        events.events()
    );
    let asked = paused.checkpoint.paused.clone().unwrap();
    assert_eq!(asked.question.question, QUESTION);
    assert!(asked.delegate.is_some(), "the CLI's session is kept");
    assert_eq!(fake.requests().len(), 1);
    let (done, events) = attempt(Some("staging, not prod"), Some(paused.checkpoint)).await;
    assert_eq!(
        done.outcome.status,
        OutcomeStatus::Finished,
        "{:#?}\n{:#?}",
        done.outcome,
        events.events()
    );
    let requests = fake.requests();
    let last = requests.last().unwrap().body["messages"].to_string();
    assert!(
        last.contains(QUESTION) && last.contains("staging, not prod"),
        "{last}"
    );
}
