//! Issue 19, items 2–6 of the walk-through, at the binary level: `sandbox: auto` outside a git
//! repository, the strict doctor against setups that fail, routers' input, Ctrl-C and
//! `resume --from`, and a named host service reached from an allowlisted sandbox.
use pretty_assertions::assert_eq;
use serde_json::Value;

use crate::suite::support::{Env, IMAGE, docker_or_skip, first, kinds, stderr_of};

/// An [`Env`] whose workspace is no git repository.
fn env_without_repository() -> Env {
    let env = Env::new();
    std::fs::remove_dir_all(env.path(".git")).unwrap();
    env
}

const WRITE_MARK: &str = "tool mark:\n  command: `test -f /.dockerenv && echo in-container > mark.txt; echo done`\n\nworkflow m:\n  entry: mark\n  mark -> done\n";

#[test]
fn docker_execfix_auto_without_a_repository_is_sandboxed_on_the_current_directory() {
    if !docker_or_skip("cli::execfix::auto_without_a_repository") {
        return;
    }
    let env = env_without_repository();
    env.write("m.iter", WRITE_MARK);
    let out = env
        .cmd()
        .args(["run", "m.iter", "--sandbox-default-image", IMAGE])
        .output()
        .unwrap();
    let ended = env.only_run_ended(&out, 0);
    let started = first(&ended.events, "sandbox_started").expect("sandboxed");
    assert_eq!(started["driver"], "docker", "{started}");
    assert!(
        !kinds(&ended.events).contains(&"sandbox_skipped"),
        "{:?}",
        kinds(&ended.events)
    );
    // The current directory was the workspace bound into the container.
    assert_eq!(
        std::fs::read_to_string(env.path("mark.txt"))
            .unwrap()
            .trim(),
        "in-container"
    );
}

#[test]
fn docker_execfix_auto_without_a_repository_untrusted_works_on_a_copy() {
    if !docker_or_skip("cli::execfix::auto_without_a_repository_untrusted") {
        return;
    }
    let Some(static_bin) =
        iterion_test_support::static_iterion_or_skip("cli::execfix::auto_untrusted")
    else {
        return;
    };
    let env = env_without_repository();
    env.write("m.iter", WRITE_MARK);
    let out = env
        .cmd()
        .args([
            "run",
            "m.iter",
            "--trust",
            "untrusted",
            "--sandbox-default-image",
            IMAGE,
        ])
        .env("ITERION_BIN", &static_bin)
        .output()
        .unwrap();
    let ended = env.only_run_ended(&out, 0);
    let started = first(&ended.events, "sandbox_started").expect("sandboxed");
    assert_eq!(started["egress_enforced"], true, "{started}");
    // The container worked on a copy: the directory itself is untouched.
    assert!(!env.path("mark.txt").exists());
}
