use std::sync::Arc;

use pretty_assertions::assert_eq;
use serde_json::json;

use super::*;

/// The tools, their errors as the text the model is given.
struct Tools(LocalTools);

impl Tools {
    async fn call(&self, name: &str, input: &Value) -> Result<String, String> {
        self.0.call(name, input).await.map_err(|e| e.to_string())
    }
}

async fn tools(dir: &Path) -> Tools {
    Tools(LocalTools::new(
        dir,
        Arc::new(crate::test_shell::ProcessShell),
        Vec::new(),
    ))
}

#[tokio::test]
async fn write_read_edit_round_trip_inside_the_workspace() {
    let dir = tempfile::tempdir().unwrap();
    let t = tools(dir.path()).await;
    let wrote = t
        .call(
            "write_file",
            &json!({"path": "a/b.txt", "content": "one two"}),
        )
        .await;
    assert_eq!(wrote, Ok("wrote 7 bytes to a/b.txt".to_owned()));
    let edited = t
        .call(
            "file_edit",
            &json!({"path": "a/b.txt", "old_string": "two", "new_string": "2"}),
        )
        .await;
    assert_eq!(edited, Ok("replaced 1 occurrence(s) in a/b.txt".to_owned()));
    assert_eq!(
        t.call("read_file", &json!({"path": "./a/b.txt"})).await,
        Ok("one 2".to_owned())
    );
    assert_eq!(
        t.call("glob", &json!({"pattern": "*.txt"})).await,
        Ok("a/b.txt".to_owned())
    );
    assert_eq!(
        t.call("grep", &json!({"pattern": "o.e"})).await,
        Ok("a/b.txt:1:one 2".to_owned())
    );
}

#[tokio::test]
async fn paths_that_leave_the_workspace_are_refused() {
    let outer = tempfile::tempdir().unwrap();
    let ws = outer.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    std::fs::write(outer.path().join("secret"), "s").unwrap();
    std::os::unix::fs::symlink(outer.path(), ws.join("link")).unwrap();
    let t = tools(&ws).await;
    for path in ["../secret", "/etc/passwd", "link/secret", "link/new.txt"] {
        let got = t
            .call("write_file", &json!({"path": path, "content": "x"}))
            .await;
        assert_eq!(
            got,
            Err(format!("path {path:?} resolves outside the workspace")),
            "{path}"
        );
    }
    assert_eq!(
        std::fs::read_to_string(outer.path().join("secret")).unwrap(),
        "s"
    );
}

#[tokio::test]
async fn bash_runs_in_the_workspace_and_its_output_is_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let t = tools(dir.path()).await;
    let out = t
        .call("bash", &json!({"command": "pwd; echo oops >&2; exit 3"}))
        .await
        .unwrap();
    let real = std::fs::canonicalize(dir.path()).unwrap();
    assert_eq!(
        out,
        format!(
            "exit code: 3\nstdout:\n{}\n\nstderr:\noops\n",
            real.display()
        )
    );
    let big = t
        .call(
            "bash",
            &json!({"command": "head -c 400000 /dev/zero | tr '\\0' a"}),
        )
        .await
        .unwrap();
    assert!(big.len() < TOOL_OUTPUT_MAX + 200, "{}", big.len());
    assert!(big.contains("bytes omitted]"));
}

#[tokio::test]
async fn file_edit_refuses_an_ambiguous_match_and_unknown_tools_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("f"), "x x").unwrap();
    let t = tools(dir.path()).await;
    assert_eq!(
        t.call(
            "file_edit",
            &json!({"path": "f", "old_string": "x", "new_string": "y"})
        )
        .await,
        Err("old_string occurs 2 times in f; make it unique or pass replace_all".to_owned())
    );
    assert_eq!(
        t.call("rm", &json!({})).await,
        Err("tool \"rm\" is not a workspace tool".to_owned())
    );
}

fn git(dir: &Path, args: &[&str]) {
    let ok = std::process::Command::new("git")
        .args([
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "-c",
            "commit.gpgsign=false",
        ])
        .args(args)
        .current_dir(dir)
        .status()
        .unwrap()
        .success();
    assert!(ok, "git {args:?}");
}

#[tokio::test]
async fn git_tools_show_changes_and_run_nothing_the_repository_configures() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    git(d, &["init", "-q"]);
    std::fs::write(d.join("a.txt"), "one\n").unwrap();
    std::fs::write(d.join(".gitattributes"), "*.txt diff=evil filter=evil\n").unwrap();
    git(d, &["add", "."]);
    // A signed commit (by a stand-in signer), so that a signature check would run gpg.program.
    let tools_dir = tempfile::tempdir().unwrap();
    let signer = tools_dir.path().join("signer");
    std::fs::write(
        &signer,
        "#!/bin/sh\ncat >/dev/null\necho '[GNUPG:] SIG_CREATED ' >&2\nprintf -- '-----BEGIN PGP SIGNATURE-----\\n\\nAAAA\\n-----END PGP SIGNATURE-----\\n'\n",
    )
    .unwrap();
    std::fs::set_permissions(&signer, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let signer_program = format!("gpg.program={}", signer.display());
    git(
        d,
        &[
            "-c",
            &signer_program,
            "-c",
            "user.signingkey=t",
            "commit",
            "-S",
            "-qm",
            "base",
        ],
    );
    std::fs::write(d.join("a.txt"), "two\n").unwrap();
    // A hostile repository: its config names programs git would run for status (fsmonitor),
    // for diff (an external diff and a textconv driver), as filters and as hooks.
    let marker = d.join("pwned");
    let run = format!("sh -c 'touch {}'", marker.display());
    // gpg.program is executed, not given to a shell: a script.
    let evil = tools_dir.path().join("evil");
    std::fs::write(&evil, format!("#!/bin/sh\ntouch {}\n", marker.display())).unwrap();
    std::fs::set_permissions(&evil, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let evil = evil.display().to_string();
    for (key, value) in [
        ("core.fsmonitor", run.as_str()),
        ("diff.external", run.as_str()),
        ("diff.evil.textconv", run.as_str()),
        ("diff.evil.command", run.as_str()),
        ("core.pager", run.as_str()),
        // A clean filter runs whenever git compares the working tree (no switch turns it off).
        ("filter.evil.clean", run.as_str()),
        ("filter.evil.process", run.as_str()),
        // git log checks signatures (running gpg.program) when the config asks it to.
        ("log.showSignature", "true"),
        ("gpg.program", evil.as_str()),
        ("format.pretty", "%G? %H"),
    ] {
        git(d, &["config", key, value]);
    }
    let t = tools(d).await;
    let status = t.call("git_status", &json!({})).await.unwrap();
    assert!(status.contains(" M a.txt"), "{status}");
    let diff = t.call("git_diff", &json!({"base": "HEAD"})).await.unwrap();
    assert!(diff.contains("-one") && diff.contains("+two"), "{diff}");
    let only = t.call("git_diff", &json!({"path": "a.txt"})).await.unwrap();
    assert!(only.contains("+two"), "{only}");
    let log = t.call("git_log", &json!({"max_count": 5})).await.unwrap();
    assert!(
        log.starts_with("commit ") && log.contains("Author: t <t@t>") && log.contains("    base"),
        "{log}"
    );
    let touching = t
        .call("git_log", &json!({"revision": "HEAD", "path": "a.txt"}))
        .await
        .unwrap();
    assert!(touching.contains("    base"), "{touching}");
    assert!(!marker.exists(), "a repository-configured program ran");
    for bad in [json!(0), json!(201), json!("5"), json!(-1)] {
        let err = t
            .call("git_log", &json!({"max_count": bad}))
            .await
            .unwrap_err();
        assert!(err.contains("max_count"), "{bad}: {err}");
    }
    let err = t
        .call("git_log", &json!({"revision": "--output=/tmp/x"}))
        .await
        .unwrap_err();
    assert!(err.contains("is not a revision name"), "{err}");
    // A base is a revision, never an option; a path stays inside the workspace.
    for bad in ["--output=/tmp/x", "-p", "a b", ""] {
        let err = t.call("git_diff", &json!({"base": bad})).await.unwrap_err();
        assert!(err.contains("is not a revision name"), "{bad}: {err}");
    }
    let err = t
        .call("git_diff", &json!({"path": "../outside"}))
        .await
        .unwrap_err();
    assert!(err.contains("outside the workspace"), "{err}");
}
