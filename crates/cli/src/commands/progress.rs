//! Human progress of a run on stderr (ARCHITECTURE.md §4): the run id, the sandbox decision
//! (degraded runs say loudly that they are not isolated), one line per node, what each node
//! prints as it prints it (`node │ line`, unless `--quiet`), an edge condition that could not be
//! decided, an image-pull progress bar, and the run's end.
//!
//! Fan-out branches print at once: each line is written whole with its node's name, padded to
//! the widest name seen so far, so interleaved branches stay readable.
use std::collections::BTreeMap;
use std::sync::{Mutex, PoisonError};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use iterion_engine::{Event, LogLine, RunObserver};
use iterion_sandbox::PullProgress;

/// Draws a run's progress on stderr.
pub struct Progress {
    quiet_ids: bool,
    quiet_output: bool,
    pull: Mutex<Option<Pull>>,
    width: Mutex<usize>,
}

struct Pull {
    bar: ProgressBar,
    layers: BTreeMap<String, (u64, Option<u64>)>,
}

impl Progress {
    /// With `json`, the run id line is left out (stdout carries the JSON document; stderr still
    /// gets progress). With `quiet`, what nodes print is not shown (it is stored all the same).
    pub fn new(json: bool, quiet: bool) -> Progress {
        Progress {
            quiet_ids: json,
            quiet_output: quiet,
            pull: Mutex::new(None),
            width: Mutex::new(0),
        }
    }

    fn end_pull(&self) {
        if let Some(pull) = self
            .pull
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
        {
            pull.bar.finish_and_clear();
        }
    }

    /// Clears any bar still drawn.
    pub fn done(&self) {
        self.end_pull();
    }

    /// Every line the console shows passes [`crate::terminal::terminal_safe`]: its text comes
    /// from the run (messages, stderr tails, hostnames).
    fn say(&self, line: &str) {
        let line = crate::terminal::terminal_safe(line);
        let line = line.as_ref();
        match self
            .pull
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
        {
            Some(pull) => pull.bar.println(line),
            None => crate::output::errln!("{line}"),
        }
    }

    /// `node │ text`, the name padded to the widest seen so far.
    fn node_line(&self, node: &str, text: &str) -> String {
        let width = {
            let mut width = self.width.lock().unwrap_or_else(PoisonError::into_inner);
            *width = (*width).max(node.chars().count());
            *width
        };
        format!("{node:<width$} │ {text}")
    }
}

/// `⚙ bash: cargo test → exit 0 (950 ms)`: the call in one line, its input cut to 200 bytes.
fn tool_call_line(call: &iterion_engine::AgentToolCall) -> String {
    let input = serde_json::from_str::<serde_json::Value>(&call.input)
        .ok()
        .and_then(|v| v.get("command").and_then(|c| c.as_str()).map(str::to_owned))
        .unwrap_or_else(|| call.input.clone());
    let input = input.replace('\n', " ⏎ ");
    let mut cut = input.len().min(200);
    while !input.is_char_boundary(cut) {
        cut -= 1;
    }
    let more = if cut < input.len() { "…" } else { "" };
    let outcome = match (call.exit_code, call.is_error) {
        (Some(code), _) => format!(" → exit {code}"),
        (None, true) => " → error".to_owned(),
        (None, false) => String::new(),
    };
    let took = call
        .duration_ms
        .map(|ms| format!(" ({ms} ms)"))
        .unwrap_or_default();
    format!("⚙ {}: {}{more}{outcome}{took}", call.tool, &input[..cut])
}

fn text(value: &serde_json::Value, key: &str) -> String {
    value
        .get(key)
        .and_then(|v| v.as_str())
        .unwrap_or_default()
        .to_owned()
}

impl RunObserver for Progress {
    fn run_created(&self, run_id: &str) {
        if !self.quiet_ids {
            crate::output::errln!("run {run_id}");
        }
    }

    fn event(&self, event: &Event) {
        let data = event.data();
        let line = match event {
            Event::SandboxSkipped(skipped) if skipped.refused == Some(true) => format!(
                "Sandbox refused [SANDBOX_DRIVER_UNAVAILABLE]: {}",
                skipped.reason
            ),
            Event::SandboxSkipped(skipped) => format!(
                "Sandbox skipped — the run is NOT isolated: {}",
                skipped.reason
            ),
            Event::SandboxStarted(started) => {
                self.end_pull();
                let id: String = started.sandbox_id.chars().take(12).collect();
                format!(
                    "sandbox: {} container {id} from {} (mode {} from {}; network {})",
                    started.driver,
                    started.image,
                    started.mode,
                    started.source,
                    started.network_mode
                )
            }
            Event::SandboxBuildStarted(build) => {
                format!("sandbox: building {} ({})", build.dockerfile, build.context)
            }
            Event::RunRewound(rewound) => match rewound.dropped_outputs.as_slice() {
                [] => format!("resume --from {}: starting again there", rewound.node),
                dropped => format!(
                    "resume --from {}: starting again there; the outputs of {} are dropped and computed again",
                    rewound.node,
                    dropped.join(", ")
                ),
            },
            Event::NodeStarted(node) => format!("▸ {}", node.node),
            Event::NodeFinished(node) => format!("✓ {} ({} ms)", node.node, node.duration_ms),
            Event::NodeFailed(node) => {
                let exit = node
                    .exit_code
                    .map(|c| format!(" (exit {c})"))
                    .unwrap_or_default();
                format!("✗ {} [{}]{exit}: {}", node.node, node.code, node.message)
            }
            Event::RunFailed(_) => {
                self.end_pull();
                format!(
                    "run failed [{}] in {}: {}",
                    text(&data, "code"),
                    text(&data, "phase"),
                    text(&data, "error")
                )
            }
            Event::RunCancelled(cancelled) => {
                self.end_pull();
                format!("run cancelled: {}", cancelled.reason)
            }
            Event::RunFinished(finished) => format!("run finished in {} ms", finished.duration_ms),
            // What an agent did, beside what nodes print (hidden with them by --quiet).
            Event::AgentToolCall(_) if self.quiet_output => return,
            Event::AgentToolCall(call) => self.node_line(&call.node, &tool_call_line(call)),
            // The reason an edge was not taken: often why the run then failed.
            Event::EdgeConditionError(error) => format!(
                "⚠ edge {} -> {}: condition `{}` could not be decided: {}",
                error.from, error.to, error.condition, error.reason
            ),
            _ => return,
        };
        self.say(&line);
    }

    fn output(&self, line: &LogLine) {
        if self.quiet_output {
            return;
        }
        self.say(&self.node_line(&line.node, &line.text));
    }

    fn pull(&self, update: &PullProgress) {
        let mut guard = self.pull.lock().unwrap_or_else(PoisonError::into_inner);
        let pull = guard.get_or_insert_with(|| {
            let bar = ProgressBar::with_draw_target(Some(0), ProgressDrawTarget::stderr());
            let style =
                ProgressStyle::with_template("pulling image {bar:30} {bytes}/{total_bytes} {msg}")
                    .unwrap_or_else(|_| ProgressStyle::default_bar());
            bar.set_style(style);
            Pull {
                bar,
                layers: BTreeMap::new(),
            }
        });
        pull.layers
            .insert(update.layer.clone(), (update.current, update.total));
        let (done, total) = pull
            .layers
            .values()
            .fold((0, 0), |(d, t), (c, n)| (d + c, t + n.unwrap_or(0)));
        pull.bar.set_length(total.max(done));
        pull.bar.set_position(done);
        pull.bar.set_message(update.status.clone());
    }
}
