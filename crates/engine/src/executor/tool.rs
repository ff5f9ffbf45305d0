//! Tool nodes (DSL.md §6.1): render, execute `bash -c` through the run's [`SandboxRun`], capture,
//! parse, check the schema.
//!
//! There is one code path whether or not the run is sandboxed: the launcher hands the executor
//! the container's run, or the noop driver's host run.
//!
//! [`SandboxRun`]: iterion_sandbox::SandboxRun

use iterion_agent::text::tail_bytes;
use iterion_dsl::ir::ToolNode;
use iterion_dsl::template;
use iterion_sandbox::ExecOpts;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::executor::capture::Capture;
use crate::executor::ctx::Ctx;
use crate::executor::input::{View, loop_scope};
use crate::executor::outcome::{Failure, TAIL_BYTES};
use crate::executor::schema;
use crate::records::sink::LogLine;
use iterion_vocab::FailureCode;
use iterion_vocab::LogStream;

/// Runs tool node `node` on `input`. `token` stops it (the exec is dropped, which kills it).
pub(crate) async fn run(
    ctx: &Ctx<'_>,
    node: &str,
    tool: &ToolNode,
    input: &Value,
    token: &CancellationToken,
) -> Result<Value, Failure> {
    // 1. Render: one pass, shell words; an unresolved reference fails before anything runs.
    let rendered = {
        let state = ctx.lock_state();
        let loops = loop_scope(&ctx.graph, &state);
        let view = View {
            vars: &ctx.vars,
            input,
            outputs: &state.outputs,
            artifacts: &state.artifacts,
            loops: &loops,
            run_id: &ctx.run_id,
            secrets: &ctx.wf.secrets,
        };
        template::parse(&tool.command).render_command(|r| view.resolve(r))
    };
    let command = rendered.map_err(|u| {
        Failure::new(
            FailureCode::TemplateUnresolved,
            format!("reference {} cannot be resolved", u.reference),
        )
    })?;
    ctx.logs.line(LogLine {
        node: node.to_owned(),
        stream: LogStream::System,
        text: ctx.redactor.redact(&format!("$ {command}")),
    });

    // 2. Execute, racing the stop token.
    let stdout = Capture::stdout(node, ctx.logs.clone(), ctx.redactor.clone());
    let stderr = Capture::stderr(node, ctx.logs.clone(), ctx.redactor.clone());
    let opts = ExecOpts {
        env: vec![
            ("ITERION_RUN_ID".to_owned(), ctx.run_id.clone()),
            ("ITERION_NODE_ID".to_owned(), node.to_owned()),
        ],
        workdir: ctx.workdir.clone(),
        stdout: Some(stdout.writer()),
        stderr: Some(stderr.writer()),
        ..ExecOpts::default()
    };
    let argv = ["bash".to_owned(), "-c".to_owned(), command];
    let result = tokio::select! {
        biased;
        () = token.cancelled() => None,
        result = ctx.sandbox.exec(&argv, opts) => Some(result),
    };

    // 3. Capture.
    let out = stdout.finish();
    let err = stderr.finish();
    let Some(result) = result else {
        return Err(ctx.stopped());
    };
    let stderr_text = ctx.redactor.redact(&String::from_utf8_lossy(&err.bytes));
    let stderr_tail = non_empty(tail_bytes(&stderr_text, TAIL_BYTES));
    if out.overflowed {
        return Err(Failure {
            stderr_tail,
            ..Failure::new(
                FailureCode::ExecutionFailed,
                format!(
                    "stdout went over the {} MiB limit",
                    crate::executor::capture::STDOUT_CAP / (1024 * 1024)
                ),
            )
        });
    }
    let result = result.map_err(|e| {
        Failure::new(
            FailureCode::ExecutionFailed,
            format!("the command could not be executed: {e}"),
        )
    })?;
    let stdout_text = String::from_utf8_lossy(&out.bytes);

    // 4. Result.
    if result.exit_code != 0 {
        let redacted_stdout = ctx.redactor.redact(&stdout_text);
        if (result.exit_code == 126 || result.exit_code == 127) && !bash_starts(ctx).await {
            // The container runtime reports a missing program as 126 on some engines; the
            // language reference says 127, and the message names what is missing (issue 19).
            return Err(Failure {
                exit_code: Some(127),
                stderr_tail,
                stdout_tail: non_empty(tail_bytes(&redacted_stdout, TAIL_BYTES)),
                ..Failure::new(
                    FailureCode::ExecutionFailed,
                    "bash could not be started in the sandbox (exit 127): tool nodes run `bash -c`, and this image has no bash in its PATH; use an image with bash (debian, ubuntu, the default image) or install it in yours (apk add bash); iterion sandbox doctor --strict checks this before a run".to_owned(),
                )
            });
        }
        return Err(Failure {
            exit_code: Some(result.exit_code),
            stderr_tail,
            stdout_tail: non_empty(tail_bytes(&redacted_stdout, TAIL_BYTES)),
            ..Failure::new(
                FailureCode::ExecutionFailed,
                format!("command exited with status {}", result.exit_code),
            )
        });
    }
    let trimmed = stdout_text.trim();
    let output = match serde_json::from_str::<Value>(trimmed) {
        Ok(Value::Object(map)) => Value::Object(map),
        Ok(_) | Err(_) => json!({ "result": trimmed }),
    };
    match &tool.output {
        Some(name) => schema::conform_output(ctx.wf, name, output, "the output"),
        None => Ok(output),
    }
}

/// Whether `bash -c 'exit 0'` runs in the run's sandbox: asked only after a tool exited 126 or
/// 127, to tell "bash is missing" from the command's own "not found" / "not executable".
async fn bash_starts(ctx: &Ctx<'_>) -> bool {
    let argv = ["bash".to_owned(), "-c".to_owned(), "exit 0".to_owned()];
    let opts = ExecOpts {
        workdir: ctx.workdir.clone(),
        ..ExecOpts::default()
    };
    matches!(ctx.sandbox.exec(&argv, opts).await, Ok(result) if result.exit_code == 0)
}

fn non_empty(s: &str) -> Option<String> {
    (!s.is_empty()).then(|| s.to_owned())
}
