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

/// A workflow of one tool node in `image`, with `network` lines under `sandbox:`.
fn in_image(image: &str, network: &str) -> String {
    format!(
        "tool t:\n  command: `echo hi`\n\nworkflow b:\n  entry: t\n  sandbox:\n    image: \"{image}\"\n{network}  t -> done\n"
    )
}

const ALLOWLIST: &str = "    network:\n      mode: allowlist\n      rules: [\"example.com\"]\n";

/// `sandbox doctor --strict FILE --json`: its exit code and the failed rows `(id, summary, hint)`.
fn strict_failures(
    env: &Env,
    file: &str,
    bin: &std::path::Path,
) -> (i32, Vec<(String, String, String)>) {
    let out = env
        .cmd()
        .args(["sandbox", "doctor", "--strict", file, "--json"])
        .env("ITERION_BIN", bin)
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            stderr_of(&out)
        )
    });
    let failed = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["status"] == "fail")
        .map(|c| {
            (
                c["id"].as_str().unwrap().to_owned(),
                c["summary"].as_str().unwrap().to_owned(),
                c["remediation"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    (out.status.code().unwrap(), failed)
}

/// The dynamically linked test build (`cargo build` links glibc).
fn dynamic_bin() -> std::path::PathBuf {
    let bin = assert_cmd::cargo::cargo_bin("iterion");
    assert_eq!(
        iterion_sandbox::link_kind_of(&bin),
        iterion_sandbox::LinkKind::Dynamic
    );
    bin
}

#[test]
fn docker_execfix_strict_doctor_fails_a_libc_less_image_behind_a_dynamic_engine_binary() {
    if !docker_or_skip("cli::execfix::strict_dynamic_binary") {
        return;
    }
    let env = Env::new();
    env.write(
        "bb.iter",
        &in_image(iterion_test_support::BUSYBOX_IMAGE, ALLOWLIST),
    );
    let (code, failed) = strict_failures(&env, "bb.iter", &dynamic_bin());
    assert_eq!(code, 1, "{failed:#?}");
    let (id, summary, hint) = &failed[0];
    assert_eq!(
        (failed.len(), id.as_str()),
        (1, "image-contents"),
        "{failed:#?}"
    );
    for want in [
        "has no bash",
        "would exit 127",
        "for the egress bridge, is dynamically linked",
        "lacks its loader /lib64/ld-linux-x86-64.so.2",
    ] {
        assert!(summary.contains(want), "{want:?} not in {summary}");
    }
    assert!(
        hint.contains("scripts/build-static.sh") && hint.contains("ITERION_BIN"),
        "{hint}"
    );
    assert!(hint.contains("an image with bash"), "{hint}");

    // The run itself names the file and the fix, not only the exec's ENOENT.
    let out = env
        .cmd()
        .args(["run", "bb.iter"])
        .env("ITERION_BIN", dynamic_bin())
        .output()
        .unwrap();
    let ended = env.only_run_ended(&out, 1);
    assert_eq!(
        ended.run.failure_code.as_deref(),
        Some("SANDBOX_SETUP_FAILED")
    );
    let stderr = stderr_of(&out);
    for want in [
        "egress bridge exited before ready",
        "is the engine binary",
        "not statically linked",
        "scripts/build-static.sh",
        "ITERION_BIN",
    ] {
        assert!(stderr.contains(want), "{want:?} not in {stderr}");
    }
    assert_eq!(env.containers(), Vec::<String>::new());
}

#[test]
fn docker_execfix_strict_doctor_passes_the_same_image_with_a_static_binary_but_not_without_bash() {
    if !docker_or_skip("cli::execfix::strict_static_binary") {
        return;
    }
    let Some(static_bin) =
        iterion_test_support::static_iterion_or_skip("cli::execfix::strict_static")
    else {
        return;
    };
    let env = Env::new();
    env.write(
        "bb.iter",
        &in_image(iterion_test_support::BUSYBOX_IMAGE, ALLOWLIST),
    );
    let (code, failed) = strict_failures(&env, "bb.iter", &static_bin);
    assert_eq!(code, 1, "{failed:#?}");
    assert_eq!(failed.len(), 1, "{failed:#?}");
    assert!(failed[0].1.contains("has no bash"), "{failed:#?}");
    assert!(!failed[0].1.contains("loader"), "{failed:#?}");
    // The image with bash and the dynamic binary on an open network: nothing fails.
    env.write("ok.iter", &in_image(IMAGE, ""));
    let (code, failed) = strict_failures(&env, "ok.iter", &dynamic_bin());
    assert_eq!((code, failed), (0, Vec::new()));
}

#[test]
fn docker_execfix_a_tool_in_an_image_without_bash_exits_127_naming_bash() {
    if !docker_or_skip("cli::execfix::no_bash_127") {
        return;
    }
    let env = Env::new();
    env.write(
        "nb.iter",
        &in_image(iterion_test_support::BUSYBOX_IMAGE, ""),
    );
    let out = env.cmd().args(["run", "nb.iter"]).output().unwrap();
    let ended = env.only_run_ended(&out, 1);
    let failed = first(&ended.events, "node_failed").expect("node_failed");
    assert_eq!(failed["exit_code"], 127, "{failed}");
    let stderr = stderr_of(&out);
    assert!(stderr.contains("(exit 127)"), "{stderr}");
    assert!(
        stderr.contains("this image has no bash in its PATH"),
        "{stderr}"
    );
    // The strict doctor says so before a run.
    let (code, failed) = strict_failures(&env, "nb.iter", &dynamic_bin());
    assert_eq!(code, 1);
    assert_eq!(failed.len(), 1, "{failed:#?}");
    assert_eq!(failed[0].0, "image-contents");
}

#[test]
fn docker_execfix_strict_doctor_and_the_run_name_an_image_that_cannot_be_pulled() {
    if !docker_or_skip("cli::execfix::image_typo") {
        return;
    }
    let env = Env::new();
    // A typo of the local test image: not local, and no registry serves it here.
    env.write("ty.iter", &in_image("iterion-test/debain:bookworm", ""));
    let (code, failed) = strict_failures(&env, "ty.iter", &dynamic_bin());
    assert_eq!(code, 1, "{failed:#?}");
    assert_eq!(failed.len(), 1, "{failed:#?}");
    let (id, summary, hint) = &failed[0];
    assert_eq!(id, "image-resolvable");
    assert!(summary.contains("is not present locally and"), "{summary}");
    assert!(summary.contains("is the name right?"), "{summary}");
    assert!(
        hint.contains("docker pull iterion-test/debain:bookworm"),
        "{hint}"
    );
    let out = env
        .cmd()
        .args(["run", "ty.iter"])
        .env("ITERION_SANDBOX_PULL_TIMEOUT", "20s")
        .output()
        .unwrap();
    env.only_run_ended(&out, 1);
    let stderr = stderr_of(&out);
    assert!(
        stderr.contains("image iterion-test/debain:bookworm is not present locally and could not be pulled: check its name"),
        "{stderr}"
    );
}
