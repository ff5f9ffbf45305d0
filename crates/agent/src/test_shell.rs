//! A [`Shell`] for this crate's tests: the command as a child process of the test, its output
//! copied into the sinks once it exits. The engine's tests run the real one (the noop driver's
//! host run).

use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use tokio::io::AsyncWriteExt;

use crate::shell::{Command, OpenShell, Shell, ShellError};

/// Runs commands as plain child processes.
pub struct ProcessShell;

#[async_trait]
impl Shell for ProcessShell {
    async fn exec(&self, command: Command<'_>) -> Result<i64, ShellError> {
        let Command {
            argv,
            env,
            workdir,
            mut stdout,
            mut stderr,
        } = command;
        let out = tokio::process::Command::new(&argv[0])
            .args(&argv[1..])
            .envs(env)
            .current_dir(workdir)
            .output()
            .await
            .map_err(ShellError::new)?;
        stdout.write_all(&out.stdout).await.unwrap();
        stderr.write_all(&out.stderr).await.unwrap();
        Ok(i64::from(out.status.code().unwrap_or(-1)))
    }
}

#[async_trait]
impl OpenShell for ProcessShell {
    async fn open(&self, _session: &str, _workdir: &Path) -> Result<Arc<dyn Shell>, ShellError> {
        Ok(Arc::new(ProcessShell))
    }
}
