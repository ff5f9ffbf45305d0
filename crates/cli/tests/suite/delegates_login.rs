//! A subscription login the workflow names (upstream's `sandbox.env.CLAUDE_CONFIG_DIR`, with or
//! without the bind mount whose target it is): hostile input, resolved on the host only inside
//! the operator's allowed roots, never through a symlink out of them, a regular file of bounded
//! size, and never for an untrusted run. The positive case runs the real `claude` in docker.
use std::path::Path;

use iterion_test_support::fake_model::{Api, FakeModel, Reply};
use iterion_test_support::{DELEGATES_IMAGE, static_iterion_or_skip};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::suite::support::{Env, docker_or_skip, first, stderr_of};

const WORK_ACCESS: &str = "sk-ant-oat01-WorkProfileAccess-Vb7nQ2xL5";
const WORK_REFRESH: &str = "sk-ant-ort01-WorkProfileRefresh-Jd3kW8pZ1";
const STRAY_ACCESS: &str = "sk-ant-oat01-StrayLoginAccess-Tc4mR9yH2";
const PRIVATE_KEY: &str = "PRIVATE-KEY-MATERIAL-Yh5Gf2Kq8";

fn unix_now() -> i64 {
    i64::try_from(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs(),
    )
    .unwrap()
}

fn login(access: &str, refresh: &str) -> String {
    json!({"claudeAiOauth": {
        "accessToken": access, "refreshToken": refresh,
        "expiresAt": (unix_now() + 3600) * 1000, "scopes": ["user:inference"], "subscriptionType": "max"}})
    .to_string()
}

/// One claude_code node in a sandbox whose block carries `extra` (env, mounts).
fn workflow(extra: &str) -> String {
    format!(
        "agent a:\n  model: \"anthropic/claude-test\"\n  backend: claude_code\n  user: \"Hi.\"\n  tools: [bash]\n\n\
         workflow w:\n  entry: a\n  sandbox:\n    image: \"{DELEGATES_IMAGE}\"\n    network:\n      mode: allowlist\n      rules: [\"example.invalid\"]\n{extra}  a -> done\n"
    )
}

fn env_block(dir: &str) -> String {
    format!("    env:\n      CLAUDE_CONFIG_DIR: \"{dir}\"\n")
}

/// An operator home: `~/.claude` exists (an allowed root) with no login of its own, and
/// `~/.ssh` holds a private key and a perfectly valid login the operator never allowed.
fn hostile_home() -> tempfile::TempDir {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    std::fs::create_dir_all(h.join(".claude")).unwrap();
    std::fs::create_dir_all(h.join(".ssh")).unwrap();
    std::fs::write(h.join(".ssh/id_rsa"), PRIVATE_KEY).unwrap();
    std::fs::write(
        h.join(".ssh/.credentials.json"),
        login(STRAY_ACCESS, "sk-ant-ort01-stray"),
    )
    .unwrap();
    home
}

fn refused(name: &str, home: &Path, wf: &str, trust: &str, expect: &str) {
    let env = Env::new();
    env.write("w.iter", wf);
    let fake = FakeModel::start(Api::Anthropic, vec![Reply::text("never")]);
    let out = env
        .cmd()
        .args(["run", "w.iter", "--trust", trust])
        .env("HOME", home)
        .env_remove("ANTHROPIC_API_KEY")
        .env("ITERION_ANTHROPIC_BASE_URL", fake.base_url())
        .output()
        .unwrap();
    let run = env.only_run();
    let events = env.events(&run);
    let ended = first(&events, "run_failed").unwrap_or_else(|| panic!("{name}: {events:#?}"));
    assert_eq!(ended["code"], json!("SANDBOX_SETUP_FAILED"), "{name}");
    let message = ended["error"].as_str().unwrap();
    assert!(
        message.contains("sandbox.env.CLAUDE_CONFIG_DIR"),
        "{name}: the property is named: {message}"
    );
    assert!(message.contains(expect), "{name}: {message}");
    let records = format!(
        "{events:?}{:?}{}{}",
        env.logs(&run),
        String::from_utf8_lossy(&out.stdout),
        stderr_of(&out)
    );
    for secret in [PRIVATE_KEY, STRAY_ACCESS, WORK_ACCESS] {
        assert!(!records.contains(secret), "{name}: {secret} in the records");
    }
    assert_eq!(out.status.code(), Some(1), "{name}: {}", stderr_of(&out));
    assert!(first(&events, "sandbox_started").is_none(), "{name}");
    assert!(fake.requests().is_empty(), "{name}");
    assert_eq!(env.containers(), Vec::<String>::new(), "{name}");
}

/// Attacks: a stranger's workflow names a host file as the CLI's login. Each is refused before
/// anything is made, with `SANDBOX_SETUP_FAILED` naming the property, and nothing of the file
/// reaches the records, the model or a container.
#[test]
fn attack_a_workflow_named_login_outside_the_allowed_roots_is_refused_naming_the_property() {
    let home = hostile_home();
    let h = home.path();
    // A symlink in an allowed root pointing at the private key, and a symlinked directory.
    std::fs::create_dir_all(h.join(".claude/evil")).unwrap();
    std::os::unix::fs::symlink(
        h.join(".ssh/id_rsa"),
        h.join(".claude/evil/.credentials.json"),
    )
    .unwrap();
    std::os::unix::fs::symlink(h.join(".ssh"), h.join(".claude/dirlink")).unwrap();
    // A fifo (reading it would block the engine) and an oversized file, in the root.
    std::fs::create_dir_all(h.join(".claude/fifo")).unwrap();
    let made = std::process::Command::new("mkfifo")
        .arg(h.join(".claude/fifo/.credentials.json"))
        .status()
        .unwrap();
    assert!(made.success());
    std::fs::create_dir_all(h.join(".claude/big")).unwrap();
    std::fs::write(
        h.join(".claude/big/.credentials.json"),
        format!("{{\"pad\": \"{}\"}}", "x".repeat(300 * 1024)),
    )
    .unwrap();
    let cases = [
        (
            "a valid login outside the roots",
            env_block("${localEnv:HOME}/.ssh"),
            "outside the directories",
        ),
        (
            "a symlink out of the root",
            env_block("${localEnv:HOME}/.claude/evil"),
            "outside the directories",
        ),
        (
            "a symlinked directory",
            env_block("${localEnv:HOME}/.claude/dirlink"),
            "outside the directories",
        ),
        (
            "through the workflow's bind mount",
            format!(
                "{}    mounts: [\"type=bind,source=${{localEnv:HOME}}/.ssh,target=/home/devbox/.claude\"]\n",
                env_block("/home/devbox/.claude")
            ),
            "outside the directories",
        ),
        (
            "a fifo",
            env_block("${localEnv:HOME}/.claude/fifo"),
            "not a regular file",
        ),
        (
            "an oversized file",
            env_block("${localEnv:HOME}/.claude/big"),
            "larger than 256 KiB",
        ),
        (
            "a relative path",
            env_block("./creds"),
            "names no absolute host directory",
        ),
    ];
    for (name, extra, expect) in cases {
        refused(name, h, &workflow(&extra), "trusted", expect);
    }
}

/// An untrusted run gets no login its workflow names, even one inside an allowed root.
#[test]
fn attack_an_untrusted_run_gets_no_login_its_workflow_names() {
    let home = hostile_home();
    let h = home.path();
    std::fs::create_dir_all(h.join(".claude/work")).unwrap();
    std::fs::write(
        h.join(".claude/work/.credentials.json"),
        login(WORK_ACCESS, WORK_REFRESH),
    )
    .unwrap();
    refused(
        "untrusted",
        h,
        &workflow(&env_block("${localEnv:HOME}/.claude/work")),
        "untrusted",
        "an untrusted run may not use a login file its workflow names",
    );
}

/// Upstream's form: the workflow binds a login directory and points `CLAUDE_CONFIG_DIR` at the
/// bind's target. Inside a root the operator allowed (`ITERION_CREDENTIAL_ROOTS`), the login is
/// used as a per-run secret file (the proxy swaps its placeholder for the real token), and the
/// bind itself is not made (a bind of the operator's home would be refused by screening).
#[test]
fn docker_a_workflow_named_login_in_an_allowed_root_is_used_and_its_bind_is_not_made() {
    if !docker_or_skip("cli::delegates_login::docker_named_login") {
        return;
    }
    let Some(static_bin) = static_iterion_or_skip("cli::delegates_login::docker_named_login")
    else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    let work = home.path().join("profiles/work");
    std::fs::create_dir_all(&work).unwrap();
    std::fs::write(
        work.join(".credentials.json"),
        login(WORK_ACCESS, WORK_REFRESH),
    )
    .unwrap();
    let env = Env::new();
    env.write(
        "w.iter",
        &workflow(&format!(
            "{}    mounts: [\"type=bind,source=${{localEnv:HOME}}/profiles/work,target=/home/devbox/.claude\"]\n",
            env_block("/home/devbox/.claude")
        )),
    );
    let probe = "ls -A /home/devbox/.claude > bound.txt 2>&1; \
                 echo \"config=$CLAUDE_CONFIG_DIR\" > config.txt; \
                 cat \"$CLAUDE_CONFIG_DIR/.credentials.json\" >> config.txt";
    let fake = FakeModel::start(
        Api::Anthropic,
        vec![
            Reply::tool("Bash", json!({"command": probe, "description": "probe"})),
            Reply::text("done"),
        ],
    );
    let out = env
        .cmd()
        .args(["run", "w.iter"])
        .env("ITERION_BIN", &static_bin)
        .env("HOME", home.path())
        .env("ITERION_CREDENTIAL_ROOTS", home.path().join("profiles"))
        .env_remove("ANTHROPIC_API_KEY")
        .env("ITERION_ANTHROPIC_BASE_URL", fake.base_url())
        .timeout(std::time::Duration::from_secs(300))
        .output()
        .unwrap();
    let run = env.only_run();
    let events = env.events(&run);
    let logs = env.logs(&run);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}\n{events:#?}\n{logs:#?}",
        stderr_of(&out)
    );
    let requests = fake.requests();
    assert_eq!(requests.len(), 2);
    for r in &requests {
        assert_eq!(
            r.header("authorization"),
            Some(format!("Bearer {WORK_ACCESS}").as_str())
        );
    }
    let config = std::fs::read_to_string(env.path("config.txt")).unwrap();
    assert!(
        config.starts_with("config=/tmp/iterion-delegate/claude_code\n"),
        "{config}"
    );
    assert!(
        config.contains("__ITERION_SECRET_ITERION_FORFAIT_CLAUDE_CODE__"),
        "{config}"
    );
    assert!(
        !config.contains(WORK_ACCESS) && !config.contains(WORK_REFRESH),
        "{config}"
    );
    // The workflow's bind was not made: its target does not exist in the container.
    let bound = std::fs::read_to_string(env.path("bound.txt")).unwrap();
    assert!(bound.contains("No such file"), "{bound}");
    let records = format!("{events:?}{logs:?}");
    assert!(!records.contains(WORK_ACCESS) && !records.contains(WORK_REFRESH));
    let ran: Vec<&Value> = events
        .iter()
        .filter(|(k, _)| k == "node_finished")
        .map(|(_, v)| v)
        .collect();
    assert_eq!(ran.len(), 1);
    assert_eq!(env.containers(), Vec::<String>::new());
}

const PARENT_WITH_CHILD: &str = "agent first:\n  model: \"anthropic/claude-test\"\n  backend: claude_code\n  user: \"Hi.\"\n  tools: [bash]\n\n\
     subbot sub:\n  source: \"child.iter\"\n\n";

const CHILD: &str = "agent kid:\n  model: \"anthropic/claude-test\"\n  backend: claude_code\n  user: \"Child.\"\n  tools: [bash]\n\n\
     workflow child:\n  entry: kid\n  kid -> done\n";

fn parent_workflow(sandbox: &str) -> String {
    format!(
        "{PARENT_WITH_CHILD}workflow parent:\n  entry: first\n{sandbox}  first -> sub\n  sub -> done\n"
    )
}

fn sandbox_block() -> String {
    format!(
        "  sandbox:\n    image: \"{DELEGATES_IMAGE}\"\n    network:\n      mode: allowlist\n      rules: [\"example.invalid\"]\n"
    )
}

/// A keyless claude_code node of a subbot child, adopted into its parent's container, uses the
/// login its parent loaded and seeded: the same per-run config dir, the same placeholder the
/// parent's proxy swaps; nothing is read or seeded again for the child.
#[test]
fn docker_a_keyless_subbot_child_adopts_its_parents_login_in_the_parents_sandbox() {
    if !docker_or_skip("cli::delegates_login::docker_child_login") {
        return;
    }
    let Some(static_bin) = static_iterion_or_skip("cli::delegates_login::docker_child_login")
    else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(home.path().join(".claude")).unwrap();
    std::fs::write(
        home.path().join(".claude/.credentials.json"),
        login(WORK_ACCESS, WORK_REFRESH),
    )
    .unwrap();
    let env = Env::new();
    env.write("w.iter", &parent_workflow(&sandbox_block()));
    env.write("child.iter", CHILD);
    let probe = "echo \"config=$CLAUDE_CONFIG_DIR\" > kid.txt; \
                 cat \"$CLAUDE_CONFIG_DIR/.credentials.json\" >> kid.txt; \
                 env >> kid.txt";
    let fake = FakeModel::start(
        Api::Anthropic,
        vec![
            Reply::text("parent done"),
            Reply::tool("Bash", json!({"command": probe, "description": "probe"})),
            Reply::text("kid done"),
        ],
    );
    let out = env
        .cmd()
        .args(["run", "w.iter"])
        .env("ITERION_BIN", &static_bin)
        .env("HOME", home.path())
        .env_remove("ANTHROPIC_API_KEY")
        .env("ITERION_ANTHROPIC_BASE_URL", fake.base_url())
        .timeout(std::time::Duration::from_secs(300))
        .output()
        .unwrap();
    let runs = env.runs();
    let mut records = String::new();
    for run in &runs {
        records.push_str(&format!("{:?}{:?}", env.events(run), env.logs(run)));
    }
    assert_eq!(out.status.code(), Some(0), "{}\n{records}", stderr_of(&out));
    assert_eq!(runs.len(), 2, "the parent and its child");
    let requests = fake.requests();
    assert_eq!(requests.len(), 3, "{records}");
    for r in &requests {
        assert_eq!(
            r.header("authorization"),
            Some(format!("Bearer {WORK_ACCESS}").as_str())
        );
    }
    let kid = std::fs::read_to_string(env.path("kid.txt")).unwrap();
    assert!(
        kid.starts_with("config=/tmp/iterion-delegate/claude_code\n"),
        "the parent's seeded config dir: {kid}"
    );
    assert!(
        kid.contains("__ITERION_SECRET_ITERION_FORFAIT_CLAUDE_CODE__"),
        "{kid}"
    );
    assert!(
        kid.contains("HTTPS_PROXY="),
        "the child ran in the container: {kid}"
    );
    assert!(!kid.contains(WORK_ACCESS) && !kid.contains(WORK_REFRESH));
    assert!(!records.contains(WORK_ACCESS) && !records.contains(WORK_REFRESH));
    assert_eq!(env.containers(), Vec::<String>::new());
}

/// A child gets no login its parent did not load: the parent has no delegate node (so it loads
/// none), the operator's login is on disk, and the child's keyless claude_code node fails
/// naming the rule without any model call.
#[test]
fn attack_a_subbot_child_gets_no_login_its_parent_did_not_load() {
    let home = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(home.path().join(".claude")).unwrap();
    std::fs::write(
        home.path().join(".claude/.credentials.json"),
        login(WORK_ACCESS, WORK_REFRESH),
    )
    .unwrap();
    let env = Env::new();
    env.write(
        "w.iter",
        "tool start:\n  command: `true`\n\nsubbot sub:\n  source: \"child.iter\"\n\nworkflow parent:\n  entry: start\n  start -> sub\n  sub -> done\n",
    );
    env.write("child.iter", CHILD);
    let fake = FakeModel::start(Api::Anthropic, vec![Reply::text("never")]);
    let out = env
        .cmd()
        .args(["run", "w.iter", "--sandbox", "none"])
        .env("HOME", home.path())
        .env_remove("ANTHROPIC_API_KEY")
        .env("ITERION_ANTHROPIC_BASE_URL", fake.base_url())
        .output()
        .unwrap();
    assert_ne!(out.status.code(), Some(0));
    let runs = env.runs();
    let child = runs
        .iter()
        .find(|r| r.parent_run_id.is_some())
        .expect("the child's run");
    let events = env.events(child);
    let failed = first(&events, "node_failed").unwrap_or_else(|| panic!("{events:#?}"));
    let message = failed["message"].as_str().unwrap_or_default().to_owned();
    assert!(
        message.contains("uses the login its parent loaded"),
        "{failed:#?}"
    );
    assert!(fake.requests().is_empty());
}
