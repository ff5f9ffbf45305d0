use pretty_assertions::assert_eq;

use super::*;

#[test]
fn candidates_are_skipped_for_the_reasons_of_the_table() {
    let ws = Path::new("/work/repo");
    let dir = |p: &str| Found::Present {
        is_dir: true,
        canonical: PathBuf::from(p),
    };
    let file = |p: &str| Found::Present {
        is_dir: false,
        canonical: PathBuf::from(p),
    };
    let cache = |p: &str| Candidate {
        path: PathBuf::from(p),
        cache: true,
        read_only: false,
    };
    let state = |p: &str| Candidate {
        path: PathBuf::from(p),
        cache: false,
        read_only: false,
    };
    let store = Path::new("/h/.iterion");
    let got = vec![
        judge_candidate(&state("/h/.claude"), &Found::Missing, ws, store),
        judge_candidate(&cache("/h/.npm"), &file("/h/.npm"), ws, store),
        judge_candidate(&state("/work"), &dir("/work"), ws, store),
        judge_candidate(&state("/work/repo"), &dir("/work/repo"), ws, store),
        judge_candidate(
            &state("/work/repo/.iterion"),
            &dir("/work/repo/.iterion"),
            ws,
            store,
        ),
        // A tool-state path that is (a symlink to) the store, or contains it.
        judge_candidate(&state("/h/.claude"), &dir("/h/.iterion/runs"), ws, store),
        judge_candidate(&state("/h"), &dir("/h"), ws, store),
        judge_candidate(&state("/h/.gitconfig"), &file("/h/.gitconfig"), ws, store),
        judge_candidate(&cache("/h/.npm"), &dir("/h/.npm"), ws, store),
    ];
    assert_eq!(
        got,
        vec![
            Err("missing"),
            Err("not_a_directory"),
            Err("contains_workspace"),
            Err("contains_workspace"),
            Err("inside_workspace"),
            Err("store"),
            Err("store"),
            Ok(()),
            Ok(()),
        ]
    );
}

#[test]
fn the_candidate_list_follows_the_spec_order() {
    let got: Vec<String> = host_state_candidates(Some(Path::new("/h")))
        .into_iter()
        .map(|c| {
            format!(
                "{}{}{}",
                c.path.display(),
                if c.cache { " (cache)" } else { "" },
                if c.read_only { " (ro)" } else { "" }
            )
        })
        .collect();
    // No iterion home (the store is never bound); git config read-only (issue 15 item 5).
    assert_eq!(
        got,
        vec![
            "/h/.claude",
            "/h/.claude.json",
            "/h/.codex",
            "/h/.gitconfig (ro)",
            "/h/.cache/go-build (cache)",
            "/h/go/pkg/mod (cache)",
            "/h/.npm (cache)",
            "/h/.local/share/pnpm (cache)",
            "/h/.cache/yarn (cache)",
        ]
    );
}

#[test]
fn writable_home_covers_home_and_the_ancestors_of_bound_targets() {
    let home = Path::new("/home/ada");
    let bound = vec![
        PathBuf::from("/home/ada/go/pkg/mod"),
        PathBuf::from("/home/ada/.cache/yarn"),
        PathBuf::from("/home/ada/.gitconfig"),
        PathBuf::from("/srv/iterion"),
    ];
    assert_eq!(
        writable_home_tmpfs(home, &bound, 1000, 1000),
        vec![
            "/home/ada:uid=1000,gid=1000,mode=0755,exec",
            "/home/ada/go:uid=1000,gid=1000,mode=0755,exec",
            "/home/ada/.cache:uid=1000,gid=1000,mode=0755,exec",
            "/home/ada/go/pkg:uid=1000,gid=1000,mode=0755,exec",
        ]
    );
}

#[test]
fn git_config_pairs_append_to_the_sequence() {
    let mut env = BTreeMap::from([("GIT_CONFIG_COUNT".to_owned(), "1".to_owned())]);
    append_git_config(&mut env, "safe.directory", "/ws").unwrap();
    assert_eq!(
        env.get("GIT_CONFIG_KEY_1").map(String::as_str),
        Some("safe.directory")
    );
    assert_eq!(env.get("GIT_CONFIG_COUNT").map(String::as_str), Some("2"));
    let mut bad = BTreeMap::from([("GIT_CONFIG_COUNT".to_owned(), "x".to_owned())]);
    assert_eq!(
        append_git_config(&mut bad, "k", "v").unwrap_err().code,
        iterion_vocab::FailureCode::SandboxSetupFailed
    );
}

#[test]
fn a_linked_worktree_git_dir_names_the_repository_dot_git() {
    assert_eq!(
        worktree_common_git_dir(Path::new("/r/.git/worktrees/run-1")),
        Some(PathBuf::from("/r/.git"))
    );
    assert_eq!(worktree_common_git_dir(Path::new("/r/.git")), None);
    assert_eq!(worktree_common_git_dir(Path::new("/r/x/worktrees/a")), None);
}
