//! `iterion validate FILE [--json]` (DSL.md §8.2–§8.3).
use iterion_dsl::{CompileOptions, render};
use serde_json::json;

use crate::{args::ValidateArgs, exit::Exit};

/// The engine's ask-user capability as the validator sees it (DSL.md §8.3): `true` since
/// `ask_user` reaches the host from inside a sandbox over the runner channel (SANDBOX.md §13.3),
/// so C136 no longer fires.
pub const ASK_USER_IN_SANDBOX: bool = true;

/// Runs the command.
pub fn run(args: &ValidateArgs) -> Exit {
    let file = iterion_dsl::workflow_file(&args.file);
    let shown = file.display().to_string();
    let bytes = match iterion_dsl::load(&file) {
        Ok(b) => b,
        Err(e) => {
            if args.json {
                let doc =
                    json!({"file": shown, "error": {"code": e.code(), "message": e.to_string()}});
                crate::output::outln!("{doc}");
            } else {
                crate::output::errln!("error: {}", crate::terminal::terminal_safe(&e.to_string()));
            }
            return Exit::BadInput;
        }
    };
    let opts = CompileOptions {
        ask_user_in_sandbox: ASK_USER_IN_SANDBOX,
    };
    let compiled = iterion_dsl::compile_at(&bytes, &file, &opts);
    if args.json {
        crate::output::outln!("{}", render::json(&shown, &compiled.diagnostics));
    } else {
        crate::output::out!(
            "{}",
            crate::terminal::diagnostics(&shown, &bytes, &compiled)
        );
    }
    if compiled.error_count() > 0 {
        Exit::Failed
    } else {
        Exit::Success
    }
}
