//! The host "sandbox" of an unsandboxed run: the noop driver's run, so tool nodes keep one code
//! path (DSL.md §6.1, "Otherwise: a host process in the run workspace").
//!
//! The agent's `bash` runs through it too ([`SandboxShell`]): in the engine process for an
//! unsandboxed run, and in the runner (`iterion __claw-runner`, [`claw_runner_main`]) inside the
//! container, where the host *is* the sandbox.

use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use iterion_agent::mcp::{Pipes, Spawn};
use iterion_agent::shell::{Command, OpenShell, Shell, ShellError};
use iterion_sandbox::{
    Driver, ExecOpts, ExecResult, NoProgress, NoopDriver, RunInfo, SandboxRun, Spec,
};

/// A noop-driver run whose execs start in `workspace` with the iterion process's environment
/// (plus `ITERION_RUN_ID` / `ITERION_NODE_ID`, which the executor adds). It isolates nothing:
/// use it only when the run settled *unsandboxed* (opt-out or a degraded `auto`).
///
/// # Errors
///
/// The noop driver's own, which an empty spec never triggers.
pub async fn host_sandbox(
    run_id: &str,
    workspace: &Path,
) -> Result<Box<dyn SandboxRun>, iterion_sandbox::Error> {
    host_sandbox_with_path(run_id, workspace, None).await
}

/// The agent's [`Shell`] over a sandbox run: `bash` as an exec of that run.
pub(crate) struct SandboxShell(pub Arc<dyn SandboxRun>);

#[async_trait]
impl Shell for SandboxShell {
    async fn exec(&self, command: Command<'_>) -> Result<i64, ShellError> {
        let opts = ExecOpts {
            env: command.env,
            workdir: Some(command.workdir.display().to_string()),
            stdout: Some(Box::new(command.stdout)),
            stderr: Some(Box::new(command.stderr)),
            ..ExecOpts::default()
        };
        let result = self
            .0
            .exec(command.argv, opts)
            .await
            .map_err(ShellError::new)?;
        Ok(result.exit_code)
    }
}

/// The runner's shells: the noop driver's host run in the task's workdir.
pub(crate) struct HostShells;

#[async_trait]
impl OpenShell for HostShells {
    async fn open(&self, session: &str, workdir: &Path) -> Result<Arc<dyn Shell>, ShellError> {
        let run = host_sandbox(session, workdir)
            .await
            .map_err(ShellError::new)?;
        Ok(Arc::new(SandboxShell(Arc::from(run))))
    }
}

/// The runner's MCP server processes: children of the runner, so in the container the runner
/// runs in, never on the engine's host (docs/language.md "MCP servers"). Each is killed when its
/// client is dropped; its stderr is discarded.
pub(crate) struct RunnerSpawn;

#[async_trait]
impl Spawn for RunnerSpawn {
    async fn spawn(
        &self,
        argv: &[String],
        env: &[(String, String)],
        workdir: &Path,
    ) -> Result<Pipes, std::io::Error> {
        let Some((program, args)) = argv.split_first() else {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "empty command",
            ));
        };
        let mut child = tokio::process::Command::new(program)
            .args(args)
            .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .current_dir(workdir)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            return Err(std::io::Error::other("the server's pipes are missing"));
        };
        Ok(Pipes {
            stdin: Box::pin(stdin),
            stdout: Box::pin(stdout),
            guard: Box::new(std::sync::Mutex::new(child)),
        })
    }
}

/// `iterion __claw-runner`: the runner ([`iterion_agent::runner`]) over the process's
/// stdin/stdout, its `bash` and the node's MCP servers on this host (the container), reading
/// `env` (the container process's environment, taken once by its entry point); returns the exit
/// code.
pub async fn claw_runner_main(env: &iterion_vocab::Environment) -> i32 {
    iterion_agent::runner::claw_runner_main(&HostShells, &RunnerSpawn, env).await
}

/// The devbox `PATH` of a host run (SANDBOX.md §15, "No sandbox"): the profile bin dirs go
/// before the `PATH` of every command the host run spawns.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct HostPath {
    /// The bin dirs joined with `:`, repo first.
    pub prefix: String,
    /// `prefix:<host PATH>`, for a command that sets no `PATH` of its own.
    pub path: String,
}

impl HostPath {
    /// The `PATH` of a command whose own env has `own` (the last `PATH` it sets, if any).
    fn for_exec(&self, own: Option<&str>) -> String {
        match own.filter(|p| !p.is_empty()) {
            Some(own) => format!("{}:{own}", self.prefix),
            None => self.path.clone(),
        }
    }
}

/// [`host_sandbox`] whose execs get `path` before their `PATH`, when there is one.
pub(crate) async fn host_sandbox_with_path(
    run_id: &str,
    workspace: &Path,
    path: Option<&HostPath>,
) -> Result<Box<dyn SandboxRun>, iterion_sandbox::Error> {
    let prepared = NoopDriver.prepare(&Spec::default(), &NoProgress).await?;
    let run = NoopDriver
        .start(prepared, RunInfo::new(run_id, "", workspace, workspace))
        .await?;
    Ok(match path {
        Some(path) => Box::new(DevboxPathRun {
            inner: run,
            path: path.clone(),
        }),
        None => run,
    })
}

/// A host run that threads the devbox `PATH` into every exec.
struct DevboxPathRun {
    inner: Box<dyn SandboxRun>,
    path: HostPath,
}

#[async_trait]
impl SandboxRun for DevboxPathRun {
    fn driver(&self) -> &str {
        self.inner.driver()
    }

    fn id(&self) -> &str {
        self.inner.id()
    }

    fn egress_enforced(&self) -> Option<bool> {
        self.inner.egress_enforced()
    }

    async fn exec(
        &self,
        argv: &[String],
        mut opts: ExecOpts,
    ) -> Result<ExecResult, iterion_sandbox::Error> {
        let own = opts
            .env
            .iter()
            .rev()
            .find(|(k, _)| k == "PATH")
            .map(|(_, v)| v.clone());
        let path = self.path.for_exec(own.as_deref());
        opts.env.retain(|(k, _)| k != "PATH");
        opts.env.push(("PATH".to_owned(), path));
        self.inner.exec(argv, opts).await
    }

    async fn cleanup(&self) -> Result<(), iterion_sandbox::Error> {
        self.inner.cleanup().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[tokio::test]
    async fn the_devbox_path_leads_the_host_path_and_a_commands_own_path() {
        let dir = tempfile::tempdir().unwrap();
        let path = HostPath {
            prefix: "/ws/.devbox/nix/profile/default/bin".to_owned(),
            path: "/ws/.devbox/nix/profile/default/bin:/usr/bin:/bin".to_owned(),
        };
        let run = host_sandbox_with_path("r", dir.path(), Some(&path))
            .await
            .unwrap();
        let argv = [
            "/bin/sh".to_owned(),
            "-c".to_owned(),
            "printf %s \"$PATH\"".to_owned(),
        ];
        let plain = run.exec(&argv, ExecOpts::default()).await.unwrap();
        let own = run
            .exec(
                &argv,
                ExecOpts {
                    env: vec![("PATH".to_owned(), "/mine/bin:/bin".to_owned())],
                    ..ExecOpts::default()
                },
            )
            .await
            .unwrap();
        assert_eq!(
            (plain.stdout.as_deref(), own.stdout.as_deref()),
            (
                Some(path.path.as_bytes()),
                Some("/ws/.devbox/nix/profile/default/bin:/mine/bin:/bin".as_bytes())
            )
        );
    }
}
