//! Tool nodes (DSL.md §6.1): render, execute `bash -c` through the run's [`SandboxRun`], capture,
//! parse, check the schema. A `script:` tool runs its interpreter the same way, in the same
//! place: `sh -c` / `bash -c` with the script as one argv element, or `node -` / `python3 -` with
//! the script on stdin. The interpreter is one of a fixed list (the parser's allow-list), never
//! a word of the workflow's, and the script is never read by the host.
//!
//! There is one code path whether or not the run is sandboxed: the launcher hands the executor
//! the container's run, or the noop driver's host run.
//!
//! [`SandboxRun`]: iterion_sandbox::SandboxRun

use iterion_agent::text::tail_bytes;
use iterion_dsl::ir::{ScriptLanguage, ToolNode};
use iterion_dsl::template;
use iterion_sandbox::ExecOpts;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::executor::capture::Capture;
use crate::executor::ctx::{BranchCtx, Ctx};
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
    branch: Option<&BranchCtx>,
    token: &CancellationToken,
) -> Result<Value, Failure> {
    // 1. Render: one pass, shell words; an unresolved reference fails before anything runs.
    let parsed = match tool.script {
        Some(lang) => template::parse_script(&tool.command, lang.line_comment()),
        None => template::parse(&tool.command),
    };
    let rendered = ctx.with_view(input, branch, |view| match tool.script {
        Some(ScriptLanguage::Node | ScriptLanguage::Python) => {
            parsed.render_script(|r| view.resolve(r))
        }
        _ => parsed.render_command(|r| view.resolve(r)),
    });
    let command = rendered.map_err(|u| {
        Failure::new(
            FailureCode::TemplateUnresolved,
            format!("reference {} cannot be resolved", u.reference),
        )
    })?;
    let program = tool.script.map_or("bash", ScriptLanguage::program);
    let (argv, stdin) = script_argv(tool.script, command);
    ctx.logs.line(LogLine {
        node: node.to_owned(),
        stream: LogStream::System,
        text: ctx.redactor.redact(&match &stdin {
            None => format!("$ {}", argv.last().map_or("", String::as_str)),
            Some(script) => format!("$ {program} - <<script\n{script}\nscript"),
        }),
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
        stdin: stdin.map(|s| -> iterion_sandbox::ExecInput {
            Box::new(std::io::Cursor::new(s.into_bytes()))
        }),
        ..ExecOpts::default()
    };
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
        if (result.exit_code == 126 || result.exit_code == 127)
            && tool.script.is_some()
            && !program_starts(ctx, tool.script).await
        {
            return Err(Failure {
                exit_code: Some(127),
                stderr_tail,
                stdout_tail: non_empty(tail_bytes(&redacted_stdout, TAIL_BYTES)),
                ..Failure::new(
                    FailureCode::ExecutionFailed,
                    format!(
                        "{program} could not be started in the sandbox (exit 127): this script tool runs {program}, and the image has none in its PATH; use an image that has it, or install it in yours"
                    ),
                )
            });
        }
        if (result.exit_code == 126 || result.exit_code == 127)
            && tool.script.is_none()
            && !program_starts(ctx, None).await
        {
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

/// How a tool runs: a command is `bash -c COMMAND`; a shell script `sh|bash -c SCRIPT`; a node or
/// python script `node -` / `python3 -` with the script on stdin (no argv length limit, and the
/// script's own stdin is empty once it is read, as a command's is).
fn script_argv(script: Option<ScriptLanguage>, text: String) -> (Vec<String>, Option<String>) {
    match script {
        None => (vec!["bash".to_owned(), "-c".to_owned(), text], None),
        Some(lang @ (ScriptLanguage::Sh | ScriptLanguage::Bash)) => {
            (vec![lang.program().to_owned(), "-c".to_owned(), text], None)
        }
        Some(lang @ (ScriptLanguage::Node | ScriptLanguage::Python)) => {
            (vec![lang.program().to_owned(), "-".to_owned()], Some(text))
        }
    }
}

/// Whether the tool's program (`bash` for a command) starts in the run's sandbox: asked only
/// after a tool exited 126 or 127, to tell "the interpreter is missing" from the command's own
/// "not found" / "not executable".
async fn program_starts(ctx: &Ctx<'_>, script: Option<ScriptLanguage>) -> bool {
    let probe = match script {
        None | Some(ScriptLanguage::Bash) => "exit 0",
        Some(ScriptLanguage::Sh) => "exit 0",
        Some(ScriptLanguage::Node | ScriptLanguage::Python) => "",
    };
    let flag = match script {
        Some(ScriptLanguage::Node) => "-e",
        _ => "-c",
    };
    let program = script.map_or("bash", ScriptLanguage::program);
    let argv = [program.to_owned(), flag.to_owned(), probe.to_owned()];
    let opts = ExecOpts {
        workdir: ctx.workdir.clone(),
        ..ExecOpts::default()
    };
    matches!(ctx.sandbox.exec(&argv, opts).await, Ok(result) if result.exit_code == 0)
}

fn non_empty(s: &str) -> Option<String> {
    (!s.is_empty()).then(|| s.to_owned())
}
