//! `iterion logs RUN [--node N] [--stream stdout|stderr] [--follow] [--json]`: what the run's
//! nodes printed, as stored in `node_logs` (redacted, bounded per node execution and stream),
//! in the order it was recorded.
//!
//! Human form: `node │ line`, the node names padded to the widest seen so far, and a note
//! where a node's stream reached its bound. `--json`: one object a line, `{run_id, seq, ts,
//! node, stream, line}`, with `truncated: true` on the last line stored before the bound.
//! `--follow` prints new output as it is recorded, until the run is over ([`follow::Watch`]).
use iterion_store::{LogStream, NodeLog, NodeLogQuery};
use serde_json::json;

use crate::args::{LogsArgs, StreamArg};
use crate::commands::follow::{self, Watch};
use crate::commands::{Failure, open_store};
use crate::exit::Exit;

/// Runs the command.
pub async fn run(args: LogsArgs, env: &iterion_vocab::Environment) -> Exit {
    match logs(args, env).await {
        Ok(()) => Exit::Success,
        Err(failure) => failure.report(),
    }
}

async fn logs(args: LogsArgs, env: &iterion_vocab::Environment) -> Result<(), Failure> {
    let (_, store) = open_store(env).await?;
    let run_id = crate::commands::runs::resolve(store.as_ref(), &args.run_id).await?;
    follow::existing(&store, &run_id).await?;
    let mut query = NodeLogQuery {
        node: args.node.clone(),
        stream: args.stream.map(|s| match s {
            StreamArg::Stdout => LogStream::Stdout,
            StreamArg::Stderr => LogStream::Stderr,
        }),
        ..NodeLogQuery::default()
    };
    let mut printer = Printer {
        json: args.json,
        width: 0,
    };
    let mut watch = Watch::default();
    loop {
        let over = !args.follow || watch.over(&store, &run_id).await?;
        // Page until this read is drained.
        loop {
            let chunks = store
                .node_logs(&run_id, &query)
                .await
                .map_err(Failure::failed)?;
            let full = chunks.len() >= query.limit;
            for chunk in &chunks {
                query.after_seq = chunk.seq;
                printer.chunk(chunk);
            }
            if !full {
                break;
            }
        }
        if over {
            return Ok(());
        }
        tokio::time::sleep(follow::POLL).await;
    }
}

struct Printer {
    json: bool,
    width: usize,
}

impl Printer {
    fn chunk(&mut self, chunk: &NodeLog) {
        let lines: Vec<&str> = if chunk.text.is_empty() {
            Vec::new()
        } else {
            chunk.lines().collect()
        };
        if self.json {
            let last = lines.len().saturating_sub(1);
            for (i, line) in lines.iter().enumerate() {
                let mut object = json!({
                    "run_id": chunk.run_id.as_str(),
                    "seq": chunk.seq,
                    "ts": chunk.ts,
                    "node": chunk.node,
                    "stream": chunk.stream,
                    "line": line,
                });
                if chunk.truncated && i == last {
                    object["truncated"] = json!(true);
                }
                crate::output::outln!("{object}");
            }
            if chunk.truncated && lines.is_empty() {
                let object = json!({"run_id": chunk.run_id.as_str(), "seq": chunk.seq,
                    "ts": chunk.ts, "node": chunk.node, "stream": chunk.stream, "truncated": true});
                crate::output::outln!("{object}");
            }
            return;
        }
        self.width = self.width.max(chunk.node.chars().count());
        let node = crate::terminal::terminal_safe(&chunk.node);
        for line in &lines {
            crate::output::outln!(
                "{node:<width$} │ {}",
                crate::terminal::terminal_safe(line),
                width = self.width
            );
        }
        if chunk.truncated {
            crate::output::outln!(
                "{node:<width$} │ … [{} truncated here: the rest of this execution's output was not stored]",
                chunk.stream,
                width = self.width
            );
        }
    }
}
