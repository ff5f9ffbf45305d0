//! A run under a network policy, end to end (SANDBOX.md §6.1–§6.2, §4.6, §6.11, §9.1): the
//! engine starts the per-run proxy on `<run dir>/net/proxy.sock`, the container gets
//! `--network none` and the egress bridge, and a tool node's `curl` goes through the proxy.
//!
//! The upstream is a tiny HTTP server on the host. The proxy runs on the host too, so the names
//! the workflow uses (`allowed.test`, `denied.test`) are mapped to 127.0.0.1 through
//! `ITERION_SANDBOX_PROXY_HOSTS`, and a `127.0.0.1/32:<port>` rule lets the allowed name through
//! the resolved-address check (§6.6); every rule names the upstream's port, since a rule without
//! `:port` allows 443 and 80 only (issue 15 item 10). The same server listens on every host interface, so a direct
//! connection from the container to the docker bridge gateway would succeed if the container had
//! any route: it must not.
use std::io::{Read as _, Write as _};
use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;
use std::process::Command as StdCommand;

use iterion_test_support::static_iterion_or_skip;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::suite::support::{Ended, Env, IMAGE, docker_or_skip, first, kinds};

/// The value of the secret the inspection test declares.
const SECRET_VALUE: &str = "s3cr3t-value-0123456789";

/// An HTTP server on all host interfaces answering `upstream:<request line>`, or, for a request
/// with an `Authorization` header, `auth=real` / `auth=placeholder` / `auth=other`.
pub(crate) fn upstream() -> u16 {
    let listener = TcpListener::bind("0.0.0.0:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            std::thread::spawn(move || {
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") && head.len() < 16 * 1024 {
                    match conn.read(&mut byte) {
                        Ok(1) => head.push(byte[0]),
                        _ => return,
                    }
                }
                let head = String::from_utf8_lossy(&head);
                let line = head.lines().next().unwrap_or_default().replace(' ', "_");
                let body = match head
                    .lines()
                    .find(|l| l.to_ascii_lowercase().starts_with("authorization:"))
                {
                    Some(auth) if auth.contains(SECRET_VALUE) => "auth=real\n".to_owned(),
                    Some(auth) if auth.contains("__ITERION_SECRET_tok__") => {
                        "auth=placeholder\n".to_owned()
                    }
                    Some(_) => "auth=other\n".to_owned(),
                    None => format!("upstream:{line}\n"),
                };
                let _ = write!(
                    conn,
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
            });
        }
    });
    port
}

/// The default bridge network's gateway: the host as a container on it would see it.
fn bridge_gateway() -> String {
    iterion_test_support::docker_bridge_gateway()
}

/// A private runtime root for the run dirs, so the test can see what teardown leaves.
pub(crate) fn runtime_dir(env: &Env) -> std::path::PathBuf {
    let dir = env.home.path().join("xdg");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    dir
}

/// Teardown left nothing: no container of this store, nothing of the run under the runtime dir,
/// no socket.
fn assert_torn_down(env: &Env, xdg: &Path, run: &iterion_store::Run) {
    assert_eq!(env.containers(), Vec::<String>::new());
    let left = files_under(xdg);
    assert!(
        !left
            .iter()
            .any(|p| p.contains(run.id.as_str()) || p.ends_with(".sock")),
        "{left:#?}"
    );
}

fn files_under(dir: &Path) -> Vec<String> {
    let mut found = Vec::new();
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries.flatten() {
            let path = entry.path();
            found.push(path.display().to_string());
            if path.is_dir() {
                found.extend(files_under(&path));
            }
        }
    }
    found
}

#[test]
fn docker_egress_goes_through_the_proxy_only_and_the_policy_holds() {
    if !docker_or_skip("cli::egress::docker_egress_through_the_proxy") {
        return;
    }
    let Some(static_bin) = static_iterion_or_skip("cli::egress::docker_egress_through_the_proxy")
    else {
        return;
    };
    let env = Env::new();
    let port = upstream();
    let gateway = bridge_gateway();
    let xdg = runtime_dir(&env);
    let script = format!(
        "printf %s \"$HTTPS_PROXY\" > proxy_url.txt; \
         a=$(curl -s --max-time 10 http://allowed.test:{port}/hello); \
         d1=$(curl -s -o /dev/null -w '%{{http_code}}' --max-time 10 http://denied.test:{port}/); \
         d2=$(curl -s -o /dev/null -w '%{{http_code}}' --max-time 10 http://denied.test:{port}/again); \
         x=$(curl -s --max-time 3 --noproxy '*' http://{gateway}:{port}/direct || echo unreachable); \
         echo \"allowed=$a denied=$d1,$d2 direct=$x no_proxy=$NO_PROXY\""
    );
    env.write(
        "egress.iter",
        &format!(
            "tool probe:\n  command: `{script}`\n\nworkflow egress:\n  entry: probe\n  sandbox:\n    image: \"{IMAGE}\"\n    network:\n      mode: allowlist\n      rules: [\"allowed.test:{port}\", \"127.0.0.1/32:{port}\"]\n  probe -> done\n"
        ),
    );
    let out = env
        .cmd()
        .args(["run", "egress.iter"])
        .env("ITERION_BIN", &static_bin)
        .env("XDG_RUNTIME_DIR", &xdg)
        .env(
            "ITERION_SANDBOX_PROXY_HOSTS",
            "allowed.test=127.0.0.1,denied.test=127.0.0.1",
        )
        .output()
        .unwrap();
    let run = env.only_run();
    let events = env.events(&run);
    let logs = env.logs(&run);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}\n{events:#?}\n{logs:#?}",
        String::from_utf8_lossy(&out.stderr)
    );

    // sandbox_started: proxied and enforced.
    let started = first(&events, "sandbox_started").unwrap();
    assert_eq!(started["network_mode"], json!("allowlist"));
    assert_eq!(started["proxy"], json!(true));
    assert_eq!(started["egress_enforced"], json!(true));
    assert_eq!(started["tls_inspection"], json!(false));

    // What the tool saw: the allowed host answered through the proxy, the denied one got 403
    // (twice), the direct route does not exist, and NO_PROXY is §6.11's.
    let line = logs
        .iter()
        .find(|(s, l)| s == "stdout" && l.contains("allowed="))
        .map(|(_, l)| l.clone())
        .unwrap_or_else(|| panic!("{logs:#?}"));
    assert!(
        line.contains("allowed=upstream:GET_/hello_HTTP/1.1"),
        "{line}"
    );
    assert!(line.contains("denied=403,403"), "{line}");
    assert!(line.contains("direct=unreachable"), "{line}");
    assert!(line.contains("no_proxy=localhost,127.0.0.1,::1"), "{line}");

    // Exactly one network_blocked for the denied host (repeats are counted, not re-emitted).
    let blocked: Vec<&Value> = events
        .iter()
        .filter(|(k, _)| k == "network_blocked")
        .map(|(_, d)| d)
        .collect();
    assert_eq!(
        blocked,
        vec![&json!({"host": "denied.test", "reason": "policy denial", "run_id": run.id.as_str()})],
        "{:?}",
        kinds(&events)
    );

    // The token: the container had it, no record has it.
    let url = std::fs::read_to_string(env.path("proxy_url.txt")).unwrap();
    let token = url
        .strip_prefix("http://t:")
        .and_then(|rest| rest.strip_suffix("@127.0.0.1:3128"))
        .unwrap_or_else(|| panic!("{url}"))
        .to_owned();
    assert_eq!(token.len(), 64, "{url}");
    let cli_events = env
        .cmd()
        .args(["events", run.id.as_str(), "--json"])
        .output()
        .unwrap();
    let everything = format!(
        "{}{}{events:?}{logs:?}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&cli_events.stdout),
    );
    assert!(!everything.contains(&token), "the proxy token leaked");
    assert!(
        logs.iter()
            .any(|(s, l)| s == "system" && l.contains("HTTPS_PROXY=http://t:***@127.0.0.1:3128")),
        "{logs:#?}"
    );

    assert_torn_down(&env, &xdg, &run);
}

#[test]
fn docker_a_secret_with_hosts_turns_inspection_on_and_is_materialised_only_toward_its_host() {
    if !docker_or_skip("cli::egress::docker_secret_inspection") {
        return;
    }
    let Some(static_bin) = static_iterion_or_skip("cli::egress::docker_secret_inspection") else {
        return;
    };
    let env = Env::new();
    let port = upstream();
    let xdg = runtime_dir(&env);
    let script = format!(
        "s=$(curl -s --max-time 10 -H 'Authorization: Bearer {{{{secrets.tok}}}}' http://scoped.test:{port}/); \
         o=$(curl -s --max-time 10 -H 'Authorization: Bearer {{{{secrets.tok}}}}' http://other.test:{port}/); \
         test -s \"$SSL_CERT_FILE\" && ca=present || ca=missing; \
         echo \"scoped=$s other=$o ca=$ca ssl=$SSL_CERT_FILE curl=$CURL_CA_BUNDLE node=$NODE_EXTRA_CA_CERTS req=$REQUESTS_CA_BUNDLE git=$GIT_SSL_CAINFO\""
    );
    env.write(
        "secret.iter",
        &format!(
            "secrets:\n  tok:\n    value: \"${{ITERION_TEST_TOK}}\"\n    hosts: [\"scoped.test\"]\n\ntool probe:\n  command: `{script}`\n\nworkflow inspect:\n  entry: probe\n  sandbox:\n    image: \"{IMAGE}\"\n    network:\n      mode: allowlist\n      rules: [\"scoped.test:{port}\", \"other.test:{port}\", \"127.0.0.1/32:{port}\"]\n  probe -> done\n"
        ),
    );
    let out = env
        .cmd()
        .args(["run", "secret.iter"])
        .env("ITERION_BIN", &static_bin)
        .env("XDG_RUNTIME_DIR", &xdg)
        .env("ITERION_TEST_TOK", SECRET_VALUE)
        .env(
            "ITERION_SANDBOX_PROXY_HOSTS",
            "scoped.test=127.0.0.1,other.test=127.0.0.1",
        )
        .output()
        .unwrap();
    let run = env.only_run();
    let events = env.events(&run);
    let logs = env.logs(&run);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}\n{events:#?}\n{logs:#?}",
        String::from_utf8_lossy(&out.stderr)
    );
    let started = first(&events, "sandbox_started").unwrap();
    assert_eq!(started["proxy"], json!(true));
    assert_eq!(started["tls_inspection"], json!(true));
    assert_eq!(started["egress_enforced"], json!(true));
    let line = logs
        .iter()
        .find(|(s, l)| s == "stdout" && l.contains("scoped="))
        .map(|(_, l)| l.clone())
        .unwrap_or_else(|| panic!("{logs:#?}"));
    // The real value went to the secret's host only; the other host saw the placeholder.
    assert!(line.contains("scoped=auth=real"), "{line}");
    assert!(line.contains("other=auth=placeholder"), "{line}");
    // The CA is mounted and every trust variable points at it.
    let ca = "/run/iterion/ca/egress-ca.pem";
    assert!(line.contains("ca=present"), "{line}");
    for var in ["ssl", "curl", "node", "req", "git"] {
        assert!(line.contains(&format!("{var}={ca}")), "{var}: {line}");
    }
    // The value is in no record.
    let everything = format!(
        "{}{}{events:?}{logs:?}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(!everything.contains(SECRET_VALUE), "the secret leaked");
    assert_eq!(env.containers(), Vec::<String>::new());
    let left = files_under(&xdg);
    assert!(
        !left.iter().any(|p| p.contains(run.id.as_str())),
        "{left:#?}"
    );
}

#[test]
fn docker_a_bridge_that_cannot_start_fails_the_setup_and_leaves_nothing() {
    if !docker_or_skip("cli::egress::docker_bridge_fails") {
        return;
    }
    let env = Env::new();
    let xdg = runtime_dir(&env);
    // The test build of iterion is dynamically linked: it cannot run in busybox (no glibc), so
    // the bridge exits before `ready`.
    let dynamic = assert_cmd::cargo::cargo_bin("iterion");
    env.write(
        "b.iter",
        &format!(
            "tool probe:\n  command: `echo never`\n\nworkflow b:\n  entry: probe\n  sandbox:\n    image: \"{}\"\n    network:\n      mode: allowlist\n      rules: [\"allowed.test\"]\n  probe -> done\n",
            iterion_test_support::BUSYBOX_IMAGE
        ),
    );
    let out = env
        .cmd()
        .args(["run", "b.iter"])
        .env("ITERION_BIN", &dynamic)
        .env("XDG_RUNTIME_DIR", &xdg)
        .output()
        .unwrap();
    let run = env.only_run();
    let events = env.events(&run);
    assert_ne!(out.status.code(), Some(0), "{events:#?}");
    assert_eq!(
        run.failure_code.as_deref(),
        Some("SANDBOX_SETUP_FAILED"),
        "{events:#?}"
    );
    let message = run.failure_message.clone().unwrap_or_default();
    assert!(
        message.contains("egress bridge exited before ready"),
        "{message}"
    );
    assert!(first(&events, "sandbox_started").is_none(), "{events:#?}");
    assert_torn_down(&env, &xdg, &run);
}

/// Attacks from inside the container, each through the real bridge and proxy (SANDBOX.md §6.4,
/// §6.6, §6.9): no or a wrong proxy token → 407; the metadata address and an IP literal under an
/// allowlist → 403; an allowed name whose address is private but not allowed by a CIDR rule
/// (DNS rebinding) → 403; a Host header that differs from the CONNECT target inside an inspected
/// tunnel → 421. An allowed host still answers, so the refusals are the policy, not a dead proxy.
#[test]
fn docker_attacks_from_inside_the_container_are_refused() {
    if !docker_or_skip("cli::egress::docker_attacks_refused") {
        return;
    }
    let Some(static_bin) = static_iterion_or_skip("cli::egress::docker_attacks_refused") else {
        return;
    };
    let env = Env::new();
    let port = upstream();
    let xdg = runtime_dir(&env);
    let script = format!(
        "code() {{ curl -s -o /dev/null -w '%{{http_code}}' --max-time 10 \"$@\"; }}; \
         noauth=$(code --proxy http://127.0.0.1:3128 http://allowed.test:{port}/); \
         wrong=$(code --proxy http://t:not-the-token@127.0.0.1:3128 http://allowed.test:{port}/); \
         meta=$(code http://169.254.169.254/latest/meta-data/); \
         iplit=$(code http://10.9.8.7:{port}/); \
         rebind=$(code http://rebind.test:{port}/); \
         ok=$(code http://allowed.test:{port}/); \
         mismatch=$(code -H 'Host: evil.test:{port}' https://allowed.test:{port}/); \
         bare=$(code http://bare.test:{port}/); \
         echo \"noauth=$noauth wrong=$wrong meta=$meta iplit=$iplit rebind=$rebind ok=$ok mismatch=$mismatch bare=$bare\""
    );
    env.write(
        "attacks.iter",
        &format!(
            "tool probe:\n  command: `{script}`\n\nworkflow attacks:\n  entry: probe\n  sandbox:\n    image: \"{IMAGE}\"\n    network:\n      mode: allowlist\n      rules: [\"allowed.test:{port}\", \"rebind.test:{port}\", \"bare.test\", \"127.0.0.1/32:{port}\"]\n  probe -> done\n"
        ),
    );
    let out = env
        .cmd()
        .args(["run", "attacks.iter"])
        .env("ITERION_BIN", &static_bin)
        .env("XDG_RUNTIME_DIR", &xdg)
        .env("ITERION_SANDBOX_TLS_INSPECT", "1")
        .env(
            "ITERION_SANDBOX_PROXY_HOSTS",
            "allowed.test=127.0.0.1,rebind.test=127.0.0.2,bare.test=127.0.0.1",
        )
        .output()
        .unwrap();
    let Ended { run, events, logs } = env.only_run_ended(&out, 0);
    assert_eq!(run.status.as_str(), "finished");
    let line = logs
        .iter()
        .find(|(s, l)| s == "stdout" && l.contains("noauth="))
        .map(|(_, l)| l.clone())
        .unwrap_or_else(|| panic!("{logs:#?}"));
    assert_eq!(
        line.trim().trim_start_matches("[probe] "),
        "noauth=407 wrong=407 meta=403 iplit=403 rebind=403 ok=200 mismatch=421 bare=403",
        "{events:#?}"
    );
    let blocked: Vec<(String, String)> = events
        .iter()
        .filter(|(k, _)| k == "network_blocked")
        .map(|(_, d)| {
            (
                d["host"].as_str().unwrap_or_default().to_owned(),
                d["reason"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    for expected in [
        ("10.9.8.7", "policy denial"),
        ("rebind.test", "resolved to a non-public address"),
        // A rule without `:port` allows 443 and 80 only (issue 15 item 10).
        ("bare.test", "policy denial"),
        (
            "allowed.test",
            "request host differs from the CONNECT target",
        ),
    ] {
        assert!(
            blocked
                .iter()
                .any(|(h, r)| (h.as_str(), r.as_str()) == expected),
            "{expected:?} not in {blocked:#?}"
        );
    }
    assert_eq!(env.containers(), Vec::<String>::new());
}

/// The real value of a secret is nowhere the container (or anyone reading its configuration) can
/// see it (ARCHITECTURE decision 5): not in `docker inspect` taken while the container runs, not
/// in `/proc/1/environ` (pid 1, the exec agent, is not dumpable: unreadable to the node) or the
/// node shell's own `/proc/$$/environ` (the container's env plus the exec's), not in the tool's
/// environment or argv (which carry the placeholder), not in events or logs. The file secret's bytes are only in its read-only file.
#[test]
fn docker_secret_values_stay_out_of_the_container_configuration() {
    if !docker_or_skip("cli::egress::docker_secret_values_stay_out") {
        return;
    }
    let Some(static_bin) = static_iterion_or_skip("cli::egress::docker_secret_values_stay_out")
    else {
        return;
    };
    const FILE_VALUE: &str = "file-secret-bytes-9876543210";
    let env = Env::new();
    let xdg = runtime_dir(&env);
    let script = "touch started; \
         i=0; while [ ! -e inspected ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done; \
         { tr '\\0' '\\n' < /proc/1/environ 2>/dev/null || echo pid1-unreadable; \
         tr '\\0' '\\n' < /proc/$$/environ; } > environ.txt; env > env.txt; \
         echo '{{secrets.tok}}' > argv.txt; \
         stat -c '%a %s' \"$KEY_FILE\" > keyfile.txt";
    env.write(
        "values.iter",
        &format!(
            "secrets:\n  tok:\n    value: \"${{ITERION_TEST_TOK}}\"\n    hosts: [\"scoped.test\"]\n  key:\n    value: \"${{ITERION_TEST_KEY}}\"\n    as: file\n    env: \"KEY_FILE\"\n\ntool probe:\n  command: `{script}`\n\nworkflow values:\n  entry: probe\n  sandbox:\n    image: \"{IMAGE}\"\n    network:\n      mode: allowlist\n      rules: [\"scoped.test\"]\n  probe -> done\n"
        ),
    );
    let child = env
        .std_cmd()
        .args(["run", "values.iter"])
        .env("ITERION_BIN", &static_bin)
        .env("XDG_RUNTIME_DIR", &xdg)
        .env("ITERION_TEST_TOK", SECRET_VALUE)
        .env("ITERION_TEST_KEY", FILE_VALUE)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !env.path("started").exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "the tool never started"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let ids = env.containers();
    assert_eq!(ids.len(), 1, "{ids:?}");
    let inspect = StdCommand::new("docker")
        .args(["inspect", &ids[0]])
        .output()
        .unwrap();
    std::fs::write(env.path("inspected"), "").unwrap();
    let out = child.wait_with_output().unwrap();
    let Ended { events, logs, .. } = env.only_run_ended(&out, 0);
    let inspect = String::from_utf8_lossy(&inspect.stdout).into_owned();
    assert!(
        inspect.contains("KEY_FILE="),
        "inspect shows the env: {inspect}"
    );
    let read = |name: &str| std::fs::read_to_string(env.path(name)).unwrap();
    let (environ, tool_env, argv) = (read("environ.txt"), read("env.txt"), read("argv.txt"));
    assert_eq!(argv.trim(), "__ITERION_SECRET_tok__");
    assert!(environ.contains("KEY_FILE="), "{environ}");
    // The image user is not a numeric uid the engine knows, so 0444 under the 0700 run dir (§8.7).
    assert_eq!(
        read("keyfile.txt").trim(),
        format!("444 {}", FILE_VALUE.len())
    );
    let records = format!(
        "{}{}{events:?}{logs:?}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    for (what, text) in [
        ("docker inspect", &inspect),
        ("/proc/1/environ", &environ),
        ("the tool's env", &tool_env),
        ("argv", &argv),
        ("events, logs and output", &records),
    ] {
        for value in [SECRET_VALUE, FILE_VALUE] {
            assert!(!text.contains(value), "{value} leaked into {what}");
        }
    }
    assert_eq!(env.containers(), Vec::<String>::new());
}

/// With no `ITERION_BIN`, the dynamically linked test build of iterion binds its static twin
/// (`scripts/build-static.sh` → `target/static/…`, SANDBOX.md §8.4 as `engine_binary.rs` extends
/// it), so an allowlisted run works even in busybox, which has no libc at all.
#[test]
fn docker_without_iterion_bin_the_static_twin_runs_the_bridge_in_busybox() {
    if !docker_or_skip("cli::egress::docker_static_twin") {
        return;
    }
    let dynamic = assert_cmd::cargo::cargo_bin("iterion");
    let chosen = iterion_engine::container_binary_for(&dynamic.canonicalize().unwrap());
    if chosen.link != iterion_sandbox::LinkKind::Static {
        assert!(
            std::env::var_os("ITERION_IT_DOCKER").is_none(),
            "no fresh static twin of {}: {} (scripts/test.sh builds it after the test binaries)",
            dynamic.display(),
            chosen.reason
        );
        return;
    }
    let env = Env::new();
    let xdg = runtime_dir(&env);
    env.write(
        "twin.iter",
        &format!(
            "tool probe:\n  command: `true`\n\nworkflow twin:\n  entry: probe\n  sandbox:\n    image: \"{}\"\n    network:\n      mode: allowlist\n      rules: [\"allowed.test\"]\n  probe -> done\n",
            iterion_test_support::BUSYBOX_IMAGE
        ),
    );
    let out = env
        .cmd()
        .args(["run", "twin.iter"])
        .env_remove("ITERION_BIN")
        .env("XDG_RUNTIME_DIR", &xdg)
        .output()
        .unwrap();
    let run = env.only_run();
    let events = env.events(&run);
    // The bridge ran (sandbox_started comes after its `ready`); busybox has no bash, so the tool
    // node itself then fails with 126 — which is the tool's business, not the sandbox's.
    let started = first(&events, "sandbox_started")
        .unwrap_or_else(|| panic!("{}\n{events:#?}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(started["egress_enforced"], json!(true));
    assert!(
        !run.failure_code
            .as_deref()
            .is_some_and(|c| c.starts_with("SANDBOX_")),
        "{events:#?}"
    );
    assert_eq!(env.containers(), Vec::<String>::new());
}
