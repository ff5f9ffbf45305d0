//! The embedded namespace driver end to end (issue 18 items 1–2): with no container engine
//! reachable (`DOCKER_HOST` points at nothing, no podman socket under the test's runtime dir),
//! `sandbox: auto` runs in a sandbox the iterion binary sets up itself.
//!
//! These tests need user namespaces and nothing else: they fail (never skip) on a host that
//! refuses them, where `iterion sandbox doctor` names the sysctl to change.
use std::path::PathBuf;

use pretty_assertions::assert_eq;
use serde_json::json;

use crate::suite::egress::{runtime_dir, upstream};
use crate::suite::support::{Env, first, kinds, stderr_of};

/// `iterion run` with no engine reachable: docker's endpoint is a socket that does not exist,
/// podman's (under `XDG_RUNTIME_DIR`) likewise; the engine binary bound in is this build's.
fn no_engine(env: &Env, args: &[&str]) -> std::process::Output {
    let xdg = runtime_dir(env);
    env.cmd()
        .args(args)
        .env("DOCKER_HOST", "unix:///nonexistent/docker.sock")
        .env("XDG_RUNTIME_DIR", &xdg)
        .env("ITERION_BIN", iterion_binary())
        .env(
            "ITERION_SANDBOX_PROXY_HOSTS",
            "allowed.test=127.0.0.1,denied.test=127.0.0.1",
        )
        .env_remove("ITERION_SANDBOX_DRIVER")
        .output()
        .unwrap()
}

/// The binary under test: on this driver the host's root is the image, so the dynamic build
/// runs in the sandbox as it is.
fn iterion_binary() -> PathBuf {
    assert_cmd::cargo::cargo_bin("iterion")
}

fn stdout_line(logs: &[(String, String)], marker: &str) -> String {
    logs.iter()
        .find(|(s, l)| s == "stdout" && l.contains(marker))
        .map(|(_, l)| l.clone())
        .unwrap_or_else(|| panic!("no stdout line with {marker}: {logs:#?}"))
}

#[test]
fn with_no_engine_auto_and_an_allowlist_run_in_the_namespace_driver_and_the_policy_holds() {
    let env = Env::new();
    let port = upstream();
    let script = format!(
        "a=$(curl -s --max-time 10 http://allowed.test:{port}/hello); \
         d=$(curl -s -o /dev/null -w '%{{http_code}}' --max-time 10 http://denied.test:{port}/); \
         x=$(curl -s --max-time 3 --noproxy '*' http://127.0.0.1:{port}/direct || echo unreachable); \
         links=$(tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' ' | tr '\\n' ,); \
         procs=$(ls /proc | grep -c '^[0-9]*$'); \
         homes=$(ls -A /home | wc -l); test -e /root/.ssh && homes=ssh-visible; \
         w=$( (echo x > /usr/iterion-probe || echo x > /etc/iterion-probe || echo x > /var/tmp/iterion-probe) 2>/dev/null && echo wrote || echo refused); \
         echo ok > /tmp/t && echo ok > made-inside; \
         echo \"allowed=$a denied=$d direct=$x links=$links procs=$procs homes=$homes writes=$w\""
    );
    env.write(
        "ns.iter",
        &format!(
            "tool probe:\n  command: `{script}`\n\nworkflow ns:\n  entry: probe\n  sandbox:\n    mode: auto\n    network:\n      mode: allowlist\n      rules: [\"allowed.test:{port}\", \"127.0.0.1/32:{port}\"]\n  probe -> done\n"
        ),
    );
    let out = no_engine(&env, &["run", "ns.iter"]);
    let run = env.only_run();
    let events = env.events(&run);
    let logs = env.logs(&run);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}\n{events:#?}\n{logs:#?}",
        stderr_of(&out)
    );

    let started = first(&events, "sandbox_started").unwrap();
    assert_eq!(
        (
            &started["driver"],
            &started["image"],
            &started["network_mode"],
            &started["proxy"],
            &started["egress_enforced"]
        ),
        (
            &json!("namespace"),
            &json!("host-root"),
            &json!("allowlist"),
            &json!(true),
            &json!(true)
        )
    );
    assert!(
        first(&events, "sandbox_skipped").is_none(),
        "{:?}",
        kinds(&events)
    );

    let line = stdout_line(&logs, "allowed=");
    assert!(
        line.contains("allowed=upstream:GET_/hello_HTTP/1.1"),
        "{line}"
    );
    assert!(line.contains("denied=403"), "{line}");
    assert!(line.contains("direct=unreachable"), "{line}");
    assert!(line.contains("links=lo,"), "{line}");
    assert!(line.contains("homes=0"), "{line}");
    assert!(line.contains("writes=refused"), "{line}");
    let procs: u32 = line
        .split("procs=")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{line}"));
    // The init, the bridge, the shell and its pipeline: never the host's processes.
    assert!(procs <= 8, "{line}");
    assert_eq!(
        std::fs::read_to_string(env.path("made-inside")).unwrap(),
        "ok\n"
    );
}

#[test]
fn the_readme_example_runs_sandboxed_with_no_engine() {
    let env = Env::new();
    let hello = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/hello.iter"),
    )
    .unwrap();
    env.write("hello.iter", &hello);
    let out = no_engine(&env, &["run", "hello.iter"]);
    let run = env.only_run();
    let events = env.events(&run);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}\n{events:#?}",
        stderr_of(&out)
    );
    let started = first(&events, "sandbox_started").unwrap();
    assert_eq!(started["driver"], json!("namespace"));
    assert!(
        first(&events, "sandbox_skipped").is_none(),
        "{:?}",
        kinds(&events)
    );
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains("NOT isolated"),
        "{}",
        stderr_of(&out)
    );
}

#[test]
fn an_untrusted_run_is_admitted_on_the_namespace_driver() {
    let env = Env::new();
    env.write(
        "u.iter",
        "tool probe:\n  command: `id -u; echo changed > changed.txt`\n\nworkflow u:\n  entry: probe\n  probe -> done\n",
    );
    std::fs::write(env.path("kept.txt"), "kept").unwrap();
    let out = no_engine(&env, &["run", "--trust", "untrusted", "u.iter"]);
    let run = env.only_run();
    let events = env.events(&run);
    let logs = env.logs(&run);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}\n{events:#?}",
        stderr_of(&out)
    );
    assert_eq!(
        first(&events, "sandbox_started").unwrap()["driver"],
        json!("namespace")
    );
    // It ran as a non-root uid, on the copy: the checkout is untouched.
    let uid = logs
        .iter()
        .map(|(s, l)| (s, l.trim_start_matches("[probe]").trim()))
        .find(|(s, l)| *s == "stdout" && l.parse::<u32>().is_ok())
        .map(|(_, l)| l.to_owned())
        .unwrap_or_else(|| panic!("{logs:#?}"));
    assert_ne!(uid, "0");
    assert!(!env.path("changed.txt").exists());
}

#[test]
fn attack_an_untrusted_bundles_skills_go_into_the_copy_never_the_checkout() {
    // A stranger's bundle must not plant `.claude/skills/` (instructions the operator's own
    // claude loads later) in the operator's checkout: the skills reach the run in its copy, and
    // the landing holds the run's own change only.
    let env = Env::new();
    std::fs::create_dir_all(env.path("bundle/skills")).unwrap();
    env.write(
        "bundle/main.bot",
        "tool probe:\n  command: `cat .claude/skills/rules.md; ls -ln .claude/skills | tail -n 1; echo work > out.txt`\n\nworkflow u:\n  entry: probe\n  probe -> done\n",
    );
    env.write("bundle/skills/rules.md", "PLANTED-RULES\n");
    let out = no_engine(&env, &["run", "--trust", "untrusted", "bundle"]);
    let run = env.only_run();
    let events = env.events(&run);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}\n{events:#?}",
        stderr_of(&out)
    );
    let logs = env.logs(&run);
    stdout_line(&logs, "PLANTED-RULES");
    // The skill belongs to the run's uid, which can edit it.
    let listed = stdout_line(&logs, "rules.md");
    assert!(!listed.contains(" 0 "), "owned by root: {listed}");
    assert!(
        !env.path(".claude").exists(),
        "skills planted in the checkout"
    );
    assert!(!env.path("out.txt").exists());
    let landed = first(&events, "sandbox_workspace_landed").unwrap();
    assert_eq!(landed["changed"], json!(true), "{landed}");
    let patch = std::fs::read_to_string(landed["patch"].as_str().unwrap()).unwrap();
    assert!(patch.contains("out.txt"), "{patch}");
    assert!(
        !patch.contains(".claude"),
        "the skills were landed: {patch}"
    );
}

#[test]
fn sandbox_none_still_runs_on_the_host() {
    let env = Env::new();
    env.write(
        "n.iter",
        "tool probe:\n  command: `echo host`\n\nworkflow n:\n  entry: probe\n  sandbox: none\n  probe -> done\n",
    );
    let out = no_engine(&env, &["run", "n.iter"]);
    let run = env.only_run();
    let events = env.events(&run);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert!(
        first(&events, "sandbox_started").is_none(),
        "{:?}",
        kinds(&events)
    );
    assert!(
        first(&events, "sandbox_skipped").is_none(),
        "{:?}",
        kinds(&events)
    );
}

#[test]
fn a_workflow_naming_an_image_refuses_as_before_and_says_why_namespace_cannot() {
    let env = Env::new();
    env.write(
        "i.iter",
        "tool probe:\n  command: `echo never`\n\nworkflow i:\n  entry: probe\n  sandbox:\n    image: \"alpine:3.20\"\n  probe -> done\n",
    );
    let out = no_engine(&env, &["run", "i.iter"]);
    let run = env.only_run();
    let events = env.events(&run);
    assert_ne!(out.status.code(), Some(0));
    let skipped = first(&events, "sandbox_skipped").unwrap();
    let reason = skipped["reason"].as_str().unwrap_or_default().to_owned();
    assert!(
        reason.contains("namespace: runs the host's root, not an image"),
        "{reason}"
    );
    assert!(first(&events, "sandbox_started").is_none());
    assert!(
        stderr_of(&out).contains("SANDBOX_DRIVER_UNAVAILABLE"),
        "{}",
        stderr_of(&out)
    );
}

#[test]
fn a_devcontainer_image_under_auto_degrades_as_before() {
    let env = Env::new();
    std::fs::create_dir_all(env.path(".devcontainer")).unwrap();
    env.write(
        ".devcontainer/devcontainer.json",
        "{\"image\": \"alpine:3.20\"}",
    );
    env.write(
        "d.iter",
        "tool probe:\n  command: `echo ran`\n\nworkflow d:\n  entry: probe\n  probe -> done\n",
    );
    let out = no_engine(&env, &["run", "d.iter"]);
    let run = env.only_run();
    let events = env.events(&run);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert!(
        first(&events, "sandbox_started").is_none(),
        "{:?}",
        kinds(&events)
    );
    let reason = first(&events, "sandbox_skipped").unwrap()["reason"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(
        reason.contains("namespace: runs the host's root"),
        "{reason}"
    );
}

#[test]
fn iterion_sandbox_driver_pins_the_driver_and_a_bad_value_is_refused() {
    let env = Env::new();
    env.write(
        "p.iter",
        "tool probe:\n  command: `echo ran`\n\nworkflow p:\n  entry: probe\n  probe -> done\n",
    );
    let out = env
        .cmd()
        .args(["run", "p.iter"])
        .env("ITERION_SANDBOX_DRIVER", "namespace")
        .env("ITERION_BIN", iterion_binary())
        .output()
        .unwrap();
    let run = env.only_run();
    let events = env.events(&run);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(
        first(&events, "sandbox_started").unwrap()["driver"],
        json!("namespace")
    );

    let bad = env
        .cmd()
        .args(["run", "p.iter"])
        .env("ITERION_SANDBOX_DRIVER", "chroot")
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2), "{}", stderr_of(&bad));
    assert!(
        stderr_of(&bad).contains("ITERION_SANDBOX_DRIVER"),
        "{}",
        stderr_of(&bad)
    );
}

#[test]
fn the_doctor_reports_user_namespaces_and_selects_the_namespace_driver_with_no_engine() {
    let env = Env::new();
    let xdg = runtime_dir(&env);
    let out = env
        .cmd()
        .args(["sandbox", "doctor", "--json"])
        .env("DOCKER_HOST", "unix:///nonexistent/docker.sock")
        .env("XDG_RUNTIME_DIR", &xdg)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["selected_driver"], json!("namespace"));
    assert_eq!(report["user_namespaces"]["usable"], json!(true));
    assert_eq!(report["user_namespaces"]["remedy"], json!(null));
    let findings = report["user_namespaces"]["findings"].to_string();
    assert!(
        findings.contains("user.max_user_namespaces = "),
        "{findings}"
    );
    assert!(findings.contains("trial unshare"), "{findings}");
}

#[test]
fn an_unprivileged_user_gets_the_same_sandbox() {
    // The common case: iterion run by an ordinary user, whose bind sources are mounted by path
    // (and checked against the inode screened) rather than cloned by a root engine.
    use std::os::unix::fs::MetadataExt as _;
    if std::fs::metadata("/proc/self").unwrap().uid() != 0 {
        return; // already unprivileged: every other test of this file is this case
    }
    use std::os::unix::fs::PermissionsExt as _;
    let base = tempfile::Builder::new()
        .prefix("ns-user")
        .tempdir_in("/var/tmp")
        .unwrap();
    std::fs::set_permissions(base.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let (home, ws) = (base.path().join("home"), base.path().join("ws"));
    for dir in [&home, &ws] {
        std::fs::create_dir(dir).unwrap();
        std::os::unix::fs::chown(dir, Some(65534), Some(65534)).unwrap();
    }
    std::fs::write(
        ws.join("u.iter"),
        "tool probe:\n  command: `id -u; echo ok > mine.txt`\n\nworkflow u:\n  entry: probe\n  probe -> done\n",
    )
    .unwrap();
    let iterion = iterion_binary();
    let out = std::process::Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(&iterion)
        .args(["run", "--json", "u.iter"])
        .current_dir(&ws)
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("HOME", &home)
        .env("ITERION_HOME", home.join(".iterion"))
        .env("DOCKER_HOST", "unix:///nonexistent/docker.sock")
        .env("ITERION_BIN", &iterion)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(summary["status"], json!("finished"), "{summary}");
    assert_eq!(
        std::fs::read_to_string(ws.join("mine.txt")).unwrap(),
        "ok\n"
    );
    assert_eq!(std::fs::metadata(ws.join("mine.txt")).unwrap().uid(), 65534);
}

#[test]
fn the_strict_doctor_passes_on_the_namespace_driver_without_asking_for_an_engine_or_an_image() {
    let env = Env::new();
    let xdg = runtime_dir(&env);
    let out = env
        .cmd()
        .args(["sandbox", "doctor", "--strict", "--json"])
        .env("DOCKER_HOST", "unix:///nonexistent/docker.sock")
        .env("XDG_RUNTIME_DIR", &xdg)
        .env("ITERION_BIN", iterion_binary())
        .output()
        .unwrap();
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let ids: Vec<&str> = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["id"].as_str())
        .collect();
    assert_eq!(out.status.code(), Some(0), "{report:#}");
    assert_eq!(report["driver"], json!("namespace"));
    assert!(
        !ids.contains(&"docker-daemon") && !ids.contains(&"image-resolvable"),
        "{ids:?}"
    );
}

#[test]
fn js_and_python_script_tools_run_inside_the_namespace_sandbox() {
    // The namespace driver's image is the host's root (read-only), so the interpreters
    // scripts/test.sh installs (node, python3) are there; the scripts run inside the sandbox.
    let env = Env::new();
    let example = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../examples/10_script_languages.iter"),
    )
    .unwrap();
    env.write(
        "w.iter",
        &example.replace(
            "workflow languages:\n",
            "workflow languages:\n  sandbox: auto\n",
        ),
    );
    let out = no_engine(&env, &["run", "w.iter", "--json"]);
    let run = env.only_run();
    let events = env.events(&run);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}\n{events:#?}",
        stderr_of(&out)
    );
    assert_eq!(
        first(&events, "sandbox_started").unwrap()["driver"],
        json!("namespace")
    );
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        summary["output"],
        json!({"text": "HELLO ADA \"THE FIRST\" '); PRINT('PWNED", "length": 38})
    );
}

/// The node of the limits tests: a fork loop of 60 children that stay, then the cgroup paths it
/// sees; prints how many forks succeeded, how many the kernel refused with EAGAIN, and how many
/// of its `/proc/self/cgroup` lines are the namespace's root.
const FORK_LOOP: &str = r#"import errno, os, time
kids, refused = [], 0
for _ in range(60):
    try:
        pid = os.fork()
    except OSError as e:
        refused += e.errno == errno.EAGAIN
        continue
    if pid == 0:
        time.sleep(30)
        os._exit(0)
    kids.append(pid)
for k in kids:
    os.kill(k, 9)
for k in kids:
    os.waitpid(k, 0)
lines = open("/proc/self/cgroup").read().split()
print(f"forks={len(kids)} refused={refused} roots={sum(l.endswith(':/') for l in lines)} lines={len(lines)}")
"#;

fn field(line: &str, key: &str) -> i64 {
    line.split_whitespace()
        .find_map(|pair| pair.strip_prefix(&format!("{key}=")))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {key} in {line:?}"))
}

/// Issue 18: the operator's limits on the namespace driver. Where the doctor says this host
/// lets the engine make a cgroup per sandbox (this one: cgroup v1 as root), the pids limit holds
/// a fork loop and no `sandbox_limits_not_applied` event is emitted; where it says not, the
/// event carries its reason and the run goes on unlimited. Under `ITERION_IT_DOCKER=1` a host
/// that cannot apply them fails the test.
#[test]
fn the_namespace_driver_applies_the_operators_limits_or_says_why_not() {
    let env = Env::new();
    env.write("forks.py", FORK_LOOP);
    env.write(
        "forks.iter",
        "tool forks:\n  command: `python3 forks.py`\n\nworkflow forks:\n  entry: forks\n  forks -> done\n",
    );
    let xdg = runtime_dir(&env);
    let doctor = env
        .cmd()
        .args(["sandbox", "doctor", "--json"])
        .env("DOCKER_HOST", "unix:///nonexistent/docker.sock")
        .env("XDG_RUNTIME_DIR", &xdg)
        .output()
        .unwrap();
    let report: serde_json::Value = serde_json::from_slice(&doctor.stdout).unwrap();
    let verdict = report["user_namespaces"]["resource_limits"]
        .as_str()
        .unwrap()
        .to_owned();
    let applies = verdict.starts_with("applied: cgroup v");
    let strict = std::env::var("ITERION_IT_DOCKER").is_ok_and(|v| v.trim() == "1");
    assert!(applies || !strict, "ITERION_IT_DOCKER=1 and {verdict}");
    assert_eq!(
        report["capabilities"]["resource_limits"],
        json!(applies),
        "the capability is the host's: {verdict}"
    );
    let out = env
        .cmd()
        .args(["run", "forks.iter", "--json"])
        .env("DOCKER_HOST", "unix:///nonexistent/docker.sock")
        .env("XDG_RUNTIME_DIR", &xdg)
        .env("ITERION_BIN", iterion_binary())
        .env("ITERION_SANDBOX_DRIVER", "namespace")
        .env("ITERION_SANDBOX_MEMORY", "256m")
        .env("ITERION_SANDBOX_PIDS", "24")
        .env("ITERION_SANDBOX_CPUS", "1")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let events = env.events(&env.only_run());
    assert_eq!(
        first(&events, "sandbox_started").unwrap()["driver"],
        json!("namespace")
    );
    let result = events
        .iter()
        .find(|(kind, _)| kind == "node_finished")
        .map(|(_, data)| data["output"]["result"].as_str().unwrap().to_owned())
        .unwrap();
    let not_applied = first(&events, "sandbox_limits_not_applied");
    if applies {
        assert!(not_applied.is_none(), "{not_applied:?}");
        let (forks, refused) = (field(&result, "forks"), field(&result, "refused"));
        assert!(
            forks < 24 && refused == 60 - forks,
            "the pids limit held the loop: {result}"
        );
        // The cgroup namespace's root is the sandbox's own cgroup.
        assert!(field(&result, "roots") >= 3, "{result}");
    } else {
        let not_applied = not_applied.expect("the event");
        assert_eq!(not_applied["limits"], json!(["memory", "cpus", "pids"]));
        let reason = not_applied["reason"].as_str().unwrap();
        assert!(
            reason.starts_with(
                "the namespace driver can make no cgroup for the sandbox here: cgroup v"
            ),
            "{reason}"
        );
        assert_eq!(field(&result, "refused"), 0, "{result}");
    }
}
