//! The container-local scratch dir's bank (SANDBOX.md §8.3): when the scratch dir is not a bind
//! (host_state none, or a driver without host binds), what the run left in it would die with the
//! container. At teardown it is streamed out as a tar into
//! `<ITERION_HOME>/runs/<root run id>/scratch-bank.tar` (capped at 256 MiB, bounded by 2 min) and
//! `sandbox_scratch_banked` says what happened; when a later attempt of the same run starts (a
//! resume) and a bank exists, it is restored after Start (`sandbox_scratch_restored`).

use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use iterion_sandbox::{ExecOpts, SandboxRun};
use tokio::io::AsyncWrite;

use crate::records::sandbox_events::{SandboxScratchBanked, SandboxScratchRestored};

/// The largest bank kept.
pub(crate) const BANK_CAP_BYTES: u64 = 256 * 1024 * 1024;
/// The bound on banking (and on restoring).
pub(crate) const BANK_TIMEOUT: Duration = Duration::from_secs(120);
/// The bank's file name under `<ITERION_HOME>/runs/<root run id>/`.
pub(crate) const BANK_FILE: &str = "scratch-bank.tar";
/// The exit code of the bank script when the scratch dir holds nothing.
const EMPTY_EXIT: i64 = 4;

/// Where a run's scratch lives in the container and where its bank goes on the host.
#[derive(Clone, Debug)]
pub(crate) struct ScratchBank {
    /// The scratch dir in the container.
    pub scratch: String,
    /// `<ITERION_HOME>/runs/<root run id>/scratch-bank.tar`.
    pub bank: PathBuf,
}

impl ScratchBank {
    pub(crate) fn new(scratch: String, iterion_home: &Path, root_run_id: &str) -> ScratchBank {
        ScratchBank {
            scratch,
            bank: iterion_home.join("runs").join(root_run_id).join(BANK_FILE),
        }
    }
}

fn argv(script: &str, scratch: &str) -> Vec<String> {
    ["sh", "-c", script, "sh", scratch]
        .iter()
        .map(|s| (*s).to_owned())
        .collect()
}

/// A file writer that stops writing (but keeps accepting) past the cap, and says so.
struct CappedFile {
    file: tokio::fs::File,
    written: Arc<AtomicU64>,
    over: Arc<AtomicBool>,
}

impl AsyncWrite for CappedFile {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let written = self.written.load(Ordering::Relaxed);
        if self.over.load(Ordering::Relaxed) || written + buf.len() as u64 > BANK_CAP_BYTES {
            self.over.store(true, Ordering::Relaxed);
            return Poll::Ready(Ok(buf.len()));
        }
        let poll = Pin::new(&mut self.file).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = poll {
            self.written.fetch_add(n as u64, Ordering::Relaxed);
        }
        poll
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.file).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.file).poll_shutdown(cx)
    }
}

fn not_banked(reason: String, unknown: bool) -> SandboxScratchBanked {
    SandboxScratchBanked {
        banked: false,
        empty: false,
        bytes: None,
        unknown: unknown.then_some(true),
        reason: Some(reason),
    }
}

/// Banks the scratch dir of `run` (L15). Never fails the run: what went wrong is in the event.
pub(crate) async fn bank(run: &dyn SandboxRun, bank: &ScratchBank) -> SandboxScratchBanked {
    let Some(dir) = bank.bank.parent() else {
        return not_banked("no directory for the bank".to_owned(), false);
    };
    if let Err(e) = tokio::fs::create_dir_all(dir).await {
        return not_banked(format!("cannot create {}: {e}", dir.display()), false);
    }
    let partial = bank.bank.with_extension("tar.partial");
    let file = match tokio::fs::File::create(&partial).await {
        Ok(file) => file,
        Err(e) => return not_banked(format!("cannot write {}: {e}", partial.display()), false),
    };
    let written = Arc::new(AtomicU64::new(0));
    let over = Arc::new(AtomicBool::new(false));
    let opts = ExecOpts {
        stdout: Some(Box::new(CappedFile {
            file,
            written: Arc::clone(&written),
            over: Arc::clone(&over),
        })),
        ..ExecOpts::default()
    };
    // Exit 4: nothing to bank. `tar -C` keeps the paths relative.
    let script = format!(
        "[ -d \"$1\" ] || exit {EMPTY_EXIT}; [ -n \"$(ls -A \"$1\")\" ] || exit {EMPTY_EXIT}; exec tar -C \"$1\" -cf - ."
    );
    let outcome =
        tokio::time::timeout(BANK_TIMEOUT, run.exec(&argv(&script, &bank.scratch), opts)).await;
    let event = match outcome {
        Err(_) => not_banked(format!("not done within {BANK_TIMEOUT:?}"), false),
        Ok(Err(e)) => not_banked(format!("the container could not be asked: {e}"), true),
        Ok(Ok(result)) if result.exit_code == EMPTY_EXIT => SandboxScratchBanked {
            banked: false,
            empty: true,
            bytes: None,
            unknown: None,
            reason: None,
        },
        Ok(Ok(_)) if over.load(Ordering::Relaxed) => {
            not_banked(format!("over {} MiB", BANK_CAP_BYTES >> 20), false)
        }
        Ok(Ok(result)) if result.exit_code != 0 => not_banked(
            format!(
                "tar exited {}: {}",
                result.exit_code,
                String::from_utf8_lossy(result.stderr.as_deref().unwrap_or_default()).trim()
            ),
            false,
        ),
        Ok(Ok(_)) => match tokio::fs::rename(&partial, &bank.bank).await {
            Ok(()) => SandboxScratchBanked {
                banked: true,
                empty: false,
                bytes: Some(written.load(Ordering::Relaxed)),
                unknown: None,
                reason: None,
            },
            Err(e) => not_banked(format!("cannot keep the bank: {e}"), false),
        },
    };
    let _ = tokio::fs::remove_file(&partial).await;
    if !event.banked {
        // An older bank describes an older scratch: it must not be restored over this one.
        let _ = tokio::fs::remove_file(&bank.bank).await;
    }
    event
}

/// §8.3: why a resume must not go on without `--force` — the last attempt's scratch lived in its
/// container and was not banked though it held something — given the run's events (`(type,
/// data)` pairs), or `None`.
pub(crate) fn scratch_not_portable<'a>(
    run_id: &str,
    events: impl DoubleEndedIterator<Item = (&'a str, &'a serde_json::Value)>,
) -> Option<String> {
    let (_, last) = events
        .rev()
        .find(|(kind, _)| *kind == "sandbox_scratch_banked")?;
    let flag = |key: &str| last.get(key).and_then(serde_json::Value::as_bool);
    (flag("banked") == Some(false) && flag("empty") == Some(false)).then(|| {
        let reason = last
            .get("reason")
            .and_then(serde_json::Value::as_str)
            .unwrap_or("unknown");
        format!(
            "run {run_id} kept files in its container-local scratch dir that could not be banked ({reason}); a resume would start without them. Pass --force to resume anyway"
        )
    })
}

/// Restores a bank left by an earlier attempt of the run into the new container's scratch dir
/// (L12). `None` when there is no bank.
pub(crate) async fn restore(
    run: &dyn SandboxRun,
    bank: &ScratchBank,
) -> Option<SandboxScratchRestored> {
    let file = tokio::fs::File::open(&bank.bank).await.ok()?;
    let bytes = file.metadata().await.map(|m| m.len()).ok();
    let opts = ExecOpts {
        stdin: Some(Box::new(file)),
        ..ExecOpts::default()
    };
    let outcome = tokio::time::timeout(
        BANK_TIMEOUT,
        run.exec(
            &argv("mkdir -p \"$1\" && exec tar -C \"$1\" -xf -", &bank.scratch),
            opts,
        ),
    )
    .await;
    let reason = match outcome {
        Ok(Ok(result)) if result.exit_code == 0 => None,
        Ok(Ok(result)) => Some(format!(
            "tar exited {}: {}",
            result.exit_code,
            String::from_utf8_lossy(result.stderr.as_deref().unwrap_or_default()).trim()
        )),
        Ok(Err(e)) => Some(e.to_string()),
        Err(_) => Some(format!("not done within {BANK_TIMEOUT:?}")),
    };
    Some(SandboxScratchRestored {
        restored: reason.is_none(),
        bytes: reason.is_none().then_some(bytes).flatten(),
        forced: false,
        stale: None,
        reason,
    })
}

#[cfg(test)]
mod tests {
    use super::scratch_not_portable;
    use serde_json::{Value, json};

    fn verdict(events: &[(&str, Value)]) -> Option<String> {
        scratch_not_portable("r1", events.iter().map(|(k, v)| (*k, v)))
    }

    #[test]
    fn only_a_last_bank_that_failed_on_a_non_empty_scratch_refuses() {
        let failed = json!({"banked": false, "empty": false, "reason": "over 256 MiB"});
        let empty = json!({"banked": false, "empty": true});
        let banked = json!({"banked": true, "empty": false, "bytes": 10});
        assert_eq!(verdict(&[]), None);
        assert_eq!(verdict(&[("sandbox_scratch_banked", empty.clone())]), None);
        assert_eq!(verdict(&[("sandbox_scratch_banked", banked.clone())]), None);
        let refused = verdict(&[("sandbox_scratch_banked", failed.clone())]).unwrap();
        assert!(
            refused.contains("over 256 MiB") && refused.contains("--force"),
            "{refused}"
        );
        // The last bank decides: a later successful one clears an earlier failure.
        assert_eq!(
            verdict(&[
                ("sandbox_scratch_banked", failed.clone()),
                ("node_started", json!({})),
                ("sandbox_scratch_banked", banked),
            ]),
            None
        );
        assert!(
            verdict(&[
                ("sandbox_scratch_banked", empty),
                ("sandbox_scratch_banked", failed)
            ])
            .is_some()
        );
    }
}
