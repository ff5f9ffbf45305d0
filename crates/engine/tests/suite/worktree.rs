//! `worktree: auto` (§7.6) on temporary git repositories.

use std::path::Path;
use std::process::Command;

use iterion_engine::{WorktreeLanding, create_worktree, workspace_root, worktree_branch};
use pretty_assertions::assert_eq;

/// The test's edge: the git commands inherit this process's environment, so they run without
/// its `GIT_*` variables, as the CLI's engine runs without its own.
fn host() -> iterion_vocab::Environment {
    iterion_vocab::Environment::from_process()
}

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// A repository with one commit (`a.txt`) and an ignored `*.log`.
fn repo() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    git(p, &["init", "-q", "-b", "main"]);
    git(p, &["config", "user.name", "Test"]);
    git(p, &["config", "user.email", "test@example.com"]);
    std::fs::write(p.join("a.txt"), "one\n").unwrap();
    std::fs::write(p.join(".gitignore"), "*.log\n").unwrap();
    git(p, &["add", "-A"]);
    git(p, &["commit", "-q", "-m", "init"]);
    dir
}

#[tokio::test]
async fn changes_land_on_a_new_branch_and_the_worktree_is_removed() {
    let repo = repo();
    let home = tempfile::tempdir().unwrap();
    let sub = repo.path().join("sub");
    std::fs::create_dir(&sub).unwrap();
    // Uncommitted changes in the user's checkout are not carried over.
    std::fs::write(repo.path().join("a.txt"), "dirty\n").unwrap();

    let wt = create_worktree(home.path(), "r1", &sub, &host())
        .await
        .unwrap();
    assert_eq!(wt.path(), home.path().join("worktrees/r1"));
    assert_eq!(
        std::fs::read_to_string(wt.path().join("a.txt")).unwrap(),
        "one\n"
    );
    std::fs::write(wt.path().join("a.txt"), "two\n").unwrap();
    std::fs::write(wt.path().join("new.txt"), "new\n").unwrap();
    std::fs::write(wt.path().join("noise.log"), "ignored\n").unwrap();
    let path = wt.path().to_owned();

    let landing = wt.finish_done("fix_tests", "r1").await.unwrap();
    let branch = worktree_branch("fix_tests", "r1");
    let WorktreeLanding::Branch { name, commit } = landing else {
        panic!("expected a branch, got {landing:?}");
    };
    assert_eq!(
        (
            name.as_str(),
            git(repo.path(), &["rev-parse", &branch]),
            git(repo.path(), &["log", "-1", "--format=%s", &branch]),
            git(repo.path(), &["show", "--name-only", "--format=", &branch]),
            git(repo.path(), &["rev-parse", "--abbrev-ref", "HEAD"]),
            path.exists(),
        ),
        (
            "iterion/fix_tests/r1",
            commit,
            "iterion run r1".to_owned(),
            "a.txt\nnew.txt".to_owned(),
            "main".to_owned(),
            false,
        )
    );
    assert_eq!(
        std::fs::read_to_string(repo.path().join("a.txt")).unwrap(),
        "dirty\n",
        "the user's checkout is untouched"
    );
}

#[tokio::test]
async fn nothing_changed_means_no_branch() {
    let repo = repo();
    let home = tempfile::tempdir().unwrap();
    let wt = create_worktree(home.path(), "r2", repo.path(), &host())
        .await
        .unwrap();
    std::fs::write(wt.path().join("only.log"), "ignored\n").unwrap();
    let path = wt.path().to_owned();
    assert_eq!(
        wt.finish_done("w", "r2").await.unwrap(),
        WorktreeLanding::Unchanged
    );
    assert_eq!(
        (
            git(repo.path(), &["branch", "--list", "iterion/*"]),
            path.exists()
        ),
        (String::new(), false)
    );
}

#[tokio::test]
async fn on_failure_the_worktree_is_kept_and_can_be_reopened() {
    let repo = repo();
    let home = tempfile::tempdir().unwrap();
    let wt = create_worktree(home.path(), "r3", repo.path(), &host())
        .await
        .unwrap();
    std::fs::write(wt.path().join("half.txt"), "work in progress\n").unwrap();
    let kept = wt.clone().keep();
    assert_eq!(
        (kept.exists(), kept.join("half.txt").exists()),
        (true, true)
    );
    let again = iterion_engine::RunWorktree::reopen(&kept, &host())
        .await
        .unwrap();
    assert_eq!(again, wt);
}

#[tokio::test]
async fn no_repository_or_no_commit_is_refused() {
    let home = tempfile::tempdir().unwrap();
    let plain = tempfile::tempdir().unwrap();
    let err = create_worktree(home.path(), "r", plain.path(), &host())
        .await
        .unwrap_err();
    assert_eq!(err.code(), "WORKTREE_NO_REPOSITORY");

    let empty = tempfile::tempdir().unwrap();
    git(empty.path(), &["init", "-q"]);
    let err = create_worktree(home.path(), "r", empty.path(), &host())
        .await
        .unwrap_err();
    assert_eq!(err.code(), "WORKTREE_NO_COMMIT");
    assert!(
        err.to_string()
            .contains("commit first or set worktree: none")
    );
}

#[tokio::test]
async fn the_unsandboxed_workspace_is_the_repository_root_or_the_directory() {
    let repo = repo();
    let sub = repo.path().join("deep");
    std::fs::create_dir(&sub).unwrap();
    let plain = tempfile::tempdir().unwrap();
    assert_eq!(
        (
            workspace_root(&sub, &host()).await.canonicalize().unwrap(),
            workspace_root(plain.path(), &host()).await
        ),
        (repo.path().canonicalize().unwrap(), plain.path().to_owned())
    );
}

/// A script that records that it ran (in `marker`) and exits 0 (a filter passes its input on).
fn marker_script(dir: &Path, name: &str, marker: &Path) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join(name);
    std::fs::write(
        &path,
        format!(
            "#!/bin/sh\necho {name} >> '{}'\ncat 2>/dev/null\nexit 0\n",
            marker.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

/// Plants in `repo`'s `.git` (what a trusted `worktree: auto` sandbox can write: the bind is
/// read-write) every way git has to run a command: hooks, fsmonitor, pager, editor, a clean,
/// smudge and process filter, a diff driver and textconv, an ssh command, and an include that
/// sets them again. Returns the marker file every one of them appends to.
fn plant_everything(repo: &Path, scripts: &Path) -> std::path::PathBuf {
    let marker = scripts.join("ran");
    let hooks = repo.join(".git/hooks");
    std::fs::create_dir_all(&hooks).unwrap();
    for hook in [
        "pre-commit",
        "post-commit",
        "commit-msg",
        "post-checkout",
        "reference-transaction",
        "post-index-change",
        "pre-auto-gc",
    ] {
        marker_script(&hooks, hook, &marker);
    }
    let evil = marker_script(scripts, "evil", &marker);
    let evil = evil.display();
    for (key, value) in [
        ("core.fsmonitor", evil.to_string()),
        ("core.pager", evil.to_string()),
        ("core.editor", evil.to_string()),
        ("core.sshCommand", evil.to_string()),
        ("filter.evil.clean", evil.to_string()),
        ("filter.evil.smudge", evil.to_string()),
        ("filter.evil.process", evil.to_string()),
        ("filter.evil.required", "true".to_owned()),
        ("diff.evil.textconv", evil.to_string()),
        ("diff.evil.command", evil.to_string()),
        ("gc.auto", "1".to_owned()),
    ] {
        git(repo, &["config", key, &value]);
    }
    let include = scripts.join("included.cfg");
    std::fs::write(
        &include,
        format!("[core]\n\tfsmonitor = {evil}\n[filter \"other\"]\n\tclean = {evil}\n"),
    )
    .unwrap();
    git(
        repo,
        &["config", "include.path", &include.display().to_string()],
    );
    marker
}

#[tokio::test]
async fn attack_planted_hooks_filters_fsmonitor_and_pager_never_run_on_the_host() {
    let repo = repo();
    let scripts = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    // The attributes are committed, so the checkout of the worktree would smudge through them.
    std::fs::write(
        repo.path().join(".gitattributes"),
        "* filter=evil diff=evil\n*.txt filter=other\n",
    )
    .unwrap();
    git(repo.path(), &["add", "-A"]);
    git(repo.path(), &["commit", "-q", "-m", "attributes"]);
    let marker = plant_everything(repo.path(), scripts.path());

    let wt = create_worktree(home.path(), "r9", repo.path(), &host())
        .await
        .unwrap();
    std::fs::write(wt.path().join("a.txt"), "changed by the run\n").unwrap();
    std::fs::write(wt.path().join("b.txt"), "new\n").unwrap();
    let landing = wt.finish_done("w", "r9").await.unwrap();
    let WorktreeLanding::Branch { name, .. } = landing else {
        panic!("expected a branch, got {landing:?}");
    };
    assert!(
        !marker.exists(),
        "a planted command ran on the host: {}",
        std::fs::read_to_string(&marker).unwrap_or_default()
    );
    // The content is the bytes the run wrote: no clean filter touched it.
    let out = Command::new("git")
        .arg("-C")
        .arg(repo.path())
        .args(["cat-file", "blob", &format!("{name}:a.txt")])
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "changed by the run\n");
    assert!(
        !marker.exists(),
        "reading the branch back ran nothing either"
    );
}

#[tokio::test]
async fn attack_no_spelling_of_dot_git_and_no_symlinked_gitmodules_is_landed() {
    let repo = repo();
    let home = tempfile::tempdir().unwrap();
    let wt = create_worktree(home.path(), "r10", repo.path(), &host())
        .await
        .unwrap();
    for dir in [".GIT/hooks", ".git./hooks", "git~1/hooks", "sub/.Git/hooks"] {
        std::fs::create_dir_all(wt.path().join(dir)).unwrap();
        std::fs::write(wt.path().join(dir).join("post-checkout"), "#!/bin/sh\n").unwrap();
    }
    std::os::unix::fs::symlink("/etc/passwd", wt.path().join(".gitmodules")).unwrap();
    std::fs::write(wt.path().join("kept.txt"), "kept\n").unwrap();
    let WorktreeLanding::Branch { name, .. } = wt.finish_done("w", "r10").await.unwrap() else {
        panic!("expected a branch");
    };
    let files = git(repo.path(), &["ls-tree", "-r", "--name-only", &name]);
    assert_eq!(files, ".gitignore\na.txt\nkept.txt", "{files}");
}

#[tokio::test]
async fn attack_hostile_names_links_and_specials_land_as_data_and_nothing_is_followed() {
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;
    let repo = repo();
    let home = tempfile::tempdir().unwrap();
    let wt = create_worktree(home.path(), "r11", repo.path(), &host())
        .await
        .unwrap();
    let p = wt.path().to_owned();
    for name in [
        &b"new\nline"[..],
        b"quo\"te",
        b"back\\slash",
        b"-dash",
        b"M 100644 inline x",
        b"\xff\xfe-not-utf8",
    ] {
        std::fs::write(p.join(OsStr::from_bytes(name)), "x").unwrap();
    }
    std::os::unix::fs::symlink("/etc", p.join("etc-link")).unwrap();
    std::os::unix::fs::symlink("loop", p.join("loop")).unwrap();
    nix::unistd::mkfifo(
        &p.join("fifo"),
        nix::sys::stat::Mode::from_bits_truncate(0o644),
    )
    .unwrap();
    let mut deep = p.join("d");
    for _ in 0..40 {
        deep = deep.join("d");
    }
    std::fs::create_dir_all(&deep).unwrap();
    std::fs::write(deep.join("leaf"), "leaf").unwrap();
    let WorktreeLanding::Branch { name, .. } = wt.finish_done("w", "r11").await.unwrap() else {
        panic!("expected a branch");
    };
    let out = Command::new("git")
        .arg("-C")
        .arg(repo.path())
        .args(["ls-tree", "-r", "-z", &name])
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .unwrap();
    let entries: Vec<(String, Vec<u8>)> = out
        .stdout
        .split(|b| *b == 0)
        .filter(|r| !r.is_empty())
        .map(|r| {
            let tab = r.iter().position(|b| *b == b'\t').unwrap();
            let mode = String::from_utf8_lossy(&r[..6]).into_owned();
            (mode, r[tab + 1..].to_vec())
        })
        .collect();
    let has = |mode: &str, path: &[u8]| entries.iter().any(|(m, p)| m == mode && p == path);
    for name in [
        &b"new\nline"[..],
        b"quo\"te",
        b"back\\slash",
        b"-dash",
        b"M 100644 inline x",
        b"\xff\xfe-not-utf8",
    ] {
        assert!(
            has("100644", name),
            "{:?} missing: {entries:?}",
            String::from_utf8_lossy(name)
        );
    }
    assert!(has("120000", b"etc-link"), "{entries:?}");
    assert!(has("120000", b"loop"), "{entries:?}");
    assert!(!entries.iter().any(|(_, p)| p == b"fifo"));
    assert!(!entries.iter().any(|(_, p)| p.starts_with(b"etc-link/")));
    assert!(entries.iter().any(|(_, p)| p.ends_with(b"/leaf")));
}
