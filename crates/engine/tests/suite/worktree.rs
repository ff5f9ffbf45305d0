//! `worktree: auto` (§7.6) on temporary git repositories.

use std::path::Path;
use std::process::Command;

use iterion_engine::{WorktreeLanding, create_worktree, workspace_root, worktree_branch};
use pretty_assertions::assert_eq;

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

    let wt = create_worktree(home.path(), "r1", &sub).await.unwrap();
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
    let wt = create_worktree(home.path(), "r2", repo.path())
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
    let wt = create_worktree(home.path(), "r3", repo.path())
        .await
        .unwrap();
    std::fs::write(wt.path().join("half.txt"), "work in progress\n").unwrap();
    let kept = wt.clone().keep();
    assert_eq!(
        (kept.exists(), kept.join("half.txt").exists()),
        (true, true)
    );
    let again = iterion_engine::RunWorktree::reopen(&kept).await.unwrap();
    assert_eq!(again, wt);
}

#[tokio::test]
async fn no_repository_or_no_commit_is_refused() {
    let home = tempfile::tempdir().unwrap();
    let plain = tempfile::tempdir().unwrap();
    let err = create_worktree(home.path(), "r", plain.path())
        .await
        .unwrap_err();
    assert_eq!(err.code(), "WORKTREE_NO_REPOSITORY");

    let empty = tempfile::tempdir().unwrap();
    git(empty.path(), &["init", "-q"]);
    let err = create_worktree(home.path(), "r", empty.path())
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
            workspace_root(&sub).await.canonicalize().unwrap(),
            workspace_root(plain.path()).await
        ),
        (repo.path().canonicalize().unwrap(), plain.path().to_owned())
    );
}
