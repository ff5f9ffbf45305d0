//! The terminal operator: answers an `interaction: ask` node's `ask_user` on an interactive
//! terminal (DSL.md §6.2). Without a terminal on both stdin and stderr, nobody is installed and
//! the run pauses (`paused`, exit 3) until `iterion resume RUN_ID --answer TEXT`.
use std::io::{BufRead, IsTerminal, Write};

use iterion_engine::Operator;

/// Asks on stderr, reads one line from stdin.
#[derive(Debug)]
pub struct TerminalOperator;

impl TerminalOperator {
    /// The operator, when stdin and stderr are both terminals.
    pub fn if_interactive() -> Option<TerminalOperator> {
        (std::io::stdin().is_terminal() && std::io::stderr().is_terminal())
            .then_some(TerminalOperator)
    }
}

#[iterion_engine::async_trait]
impl Operator for TerminalOperator {
    async fn ask(&self, node: &str, question: &str, options: &[String]) -> Option<String> {
        let prompt = if options.is_empty() {
            format!("\n[{node}] {question}\n> ")
        } else {
            format!(
                "\n[{node}] {question}\n  options: {}\n> ",
                options.join(" | ")
            )
        };
        tokio::task::spawn_blocking(move || {
            let mut err = std::io::stderr();
            // The question (and its options) may be a model's or a tool's words.
            let _ = err.write_all(crate::terminal::terminal_safe(&prompt).as_bytes());
            let _ = err.flush();
            let mut line = String::new();
            match std::io::stdin().lock().read_line(&mut line) {
                Ok(0) | Err(_) => None,
                Ok(_) => Some(line.trim_end_matches(['\r', '\n']).to_owned()),
            }
        })
        .await
        .ok()
        .flatten()
    }
}
