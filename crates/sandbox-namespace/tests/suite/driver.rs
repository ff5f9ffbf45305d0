//! The namespace driver against this kernel: a real sandbox per test, real commands in it.
//! These tests need user namespaces; where the kernel refuses them they fail (never skip):
//! `iterion sandbox doctor` says why.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use iterion_sandbox::{
    Driver, DriverConstructor, ExecOpts, NoProgress, RunInfo, SandboxRun, Spec, Trust,
};
use iterion_sandbox_namespace::NamespaceConstructor;
use iterion_vocab::Environment;

struct Fixture {
    _dirs: Vec<tempfile::TempDir>,
    workspace: PathBuf,
    run_dir: PathBuf,
    home: PathBuf,
}

fn fixture() -> Fixture {
    let workspace = tempfile::Builder::new()
        .prefix("nsws")
        .tempdir_in("/var/tmp")
        .unwrap();
    let run_dir = tempfile::Builder::new()
        .prefix("nsrun")
        .tempdir_in("/var/tmp")
        .unwrap();
    let home = tempfile::Builder::new()
        .prefix("nshome")
        .tempdir_in("/var/tmp")
        .unwrap();
    std::fs::write(workspace.path().join("hello.txt"), "hi").unwrap();
    std::fs::write(home.path().join("secret-in-home"), "s3cr3t").unwrap();
    Fixture {
        workspace: workspace.path().canonicalize().unwrap(),
        run_dir: run_dir.path().canonicalize().unwrap(),
        home: home.path().canonicalize().unwrap(),
        _dirs: vec![workspace, run_dir, home],
    }
}

fn env(fx: &Fixture) -> Environment {
    Environment::from_pairs([
        ("HOME", fx.home.to_str().unwrap()),
        ("ITERION_HOME", fx.home.join(".iterion").to_str().unwrap()),
    ])
}

async fn start(fx: &Fixture, spec: Spec, trust: Trust) -> Arc<dyn SandboxRun> {
    let driver = NamespaceConstructor::from_env(&env(fx))
        .construct()
        .await
        .expect("user namespaces must be usable here (see `iterion sandbox doctor`)");
    let prepared = driver.prepare(&spec, &NoProgress).await.unwrap();
    let mut info = RunInfo::new(
        "0199aaaa-bbbb-7ccc-8ddd-eeeeffff0000",
        "s1",
        &fx.workspace,
        &fx.run_dir,
    );
    info.trust = trust;
    Arc::from(driver.start(prepared, info).await.unwrap())
}

async fn sh(run: &dyn SandboxRun, script: &str) -> (i64, String, String) {
    let argv = ["sh", "-c", script].map(str::to_owned);
    let result = run.exec(&argv, ExecOpts::default()).await.unwrap();
    (
        result.exit_code,
        String::from_utf8_lossy(result.stdout.as_deref().unwrap_or_default()).into_owned(),
        String::from_utf8_lossy(result.stderr.as_deref().unwrap_or_default()).into_owned(),
    )
}

#[tokio::test]
async fn a_command_runs_in_the_workspace_and_its_exit_code_comes_back() {
    let fx = fixture();
    let run = start(&fx, Spec::default(), Trust::Trusted).await;
    let (code, out, _) = sh(run.as_ref(), "pwd; cat hello.txt; exit 7").await;
    assert_eq!((code, out), (7, format!("{}\nhi", fx.workspace.display())));
    run.cleanup().await.unwrap();
}

fn _unused(_: &Path) {}

#[tokio::test]
async fn debug_file_engine_mount() {
    let fx = fixture();
    std::fs::write(fx.home.join("gc"), "[user]").unwrap();
    let spec = Spec {
        engine_mounts: vec![iterion_sandbox::EngineMount {
            kind: iterion_sandbox::EngineMountKind::Bind,
            source: fx.home.join("gc").to_string_lossy().into_owned(),
            target: "/root/.gitconfig".to_owned(),
            read_only: true,
            purpose: "host-state".to_owned(),
        }],
        ..Spec::default()
    };
    let run = start(&fx, spec, Trust::Trusted).await;
    let (code, out, err) = sh(run.as_ref(), "cat /root/.gitconfig").await;
    assert_eq!((code, out.as_str(), err.as_str()), (0, "[user]", ""));
    run.cleanup().await.unwrap();
}
