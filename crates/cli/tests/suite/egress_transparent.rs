//! Issue 22 item 1 end to end: transparent egress in docker, podman and the namespace driver.
//! Every proxy variable is unset in the sandbox; `curl` still reaches allowed local servers
//! (plain HTTP, HTTPS under inspection, HTTPS through a plain tunnel) by name, through the
//! bridge's DNS stub and its synthetic addresses, and a denied name gets NXDOMAIN with one
//! `network_blocked` event. The local servers are reached through
//! `ITERION_SANDBOX_PROXY_HOSTS`, as in the other egress tests.
use iterion_test_support::https::HttpsServer;
use iterion_test_support::static_iterion_or_skip;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::suite::egress::{runtime_dir, upstream};
use crate::suite::support::{DEAD_DOCKER, Env, IMAGE, docker_or_skip, first};

const SECRET_VALUE: &str = "s3cr3t-value-0123456789";
/// Every proxy variable plant_proxy_env sets, unset: the clients under test ignore them.
const NO_PROXY_VARS: &str =
    "unset HTTP_PROXY HTTPS_PROXY http_proxy https_proxy NO_PROXY no_proxy ALL_PROXY all_proxy";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Engine {
    Docker,
    /// Exercised by no test yet: the shared podman has no image with curl.
    #[allow(dead_code)]
    Podman,
    Namespace,
}

/// The podman socket the shared setup runs (`ITERION_IT_PODMAN_HOST`).
fn podman_host() -> String {
    std::env::var("ITERION_IT_PODMAN_HOST")
        .unwrap_or_else(|_| "unix:///run/podman/podman.sock".to_owned())
}

/// The `sandbox:` lines for `engine` (the namespace driver takes no image).
fn sandbox_head(engine: Engine) -> String {
    match engine {
        Engine::Namespace => "    mode: auto\n".to_owned(),
        _ => format!("    image: \"{IMAGE}\"\n"),
    }
}

/// A run's exit code, events and run-log lines.
pub(crate) type Outcome = (Option<i32>, Vec<(String, Value)>, Vec<(String, String)>);

/// Runs `script` as the only tool of a workflow under an allowlist of `rules` in `engine`, with
/// `hosts` as `ITERION_SANDBOX_PROXY_HOSTS`; `secret_hosts` turns inspection on. Returns the
/// exit code, the events and the run-log lines.
pub(crate) fn run_in(
    env: &Env,
    engine: Engine,
    script: &str,
    rules: &[String],
    secret_hosts: Option<&str>,
    hosts: &str,
    extra_env: &[(&str, &str)],
) -> Option<Outcome> {
    let static_bin = match engine {
        Engine::Namespace => assert_cmd::cargo::cargo_bin("iterion"),
        _ => {
            if !docker_or_skip("cli::egress_transparent") {
                return None;
            }
            static_iterion_or_skip("cli::egress_transparent")?
        }
    };
    let secrets = secret_hosts.map_or_else(String::new, |h| {
        format!("secrets:\n  tok:\n    value: \"${{ITERION_TEST_TOK}}\"\n    hosts: [\"{h}\"]\n\n")
    });
    let rules = rules
        .iter()
        .map(|r| format!("\"{r}\""))
        .collect::<Vec<_>>()
        .join(", ");
    env.write(
        "t.iter",
        &format!(
            "{secrets}tool probe:\n  command: `{NO_PROXY_VARS}; {script}`\n\nworkflow t:\n  entry: probe\n  sandbox:\n{}    network:\n      mode: allowlist\n      rules: [{rules}]\n  probe -> done\n",
            sandbox_head(engine)
        ),
    );
    let xdg = runtime_dir(env);
    let mut cmd = env.cmd();
    cmd.args(["run", "t.iter"])
        .env("ITERION_BIN", &static_bin)
        .env("XDG_RUNTIME_DIR", &xdg)
        .env("ITERION_TEST_TOK", SECRET_VALUE)
        .env("ITERION_SANDBOX_PROXY_HOSTS", hosts);
    match engine {
        Engine::Docker => {
            cmd.env("ITERION_SANDBOX_DRIVER", "docker");
        }
        Engine::Podman => {
            cmd.env("ITERION_SANDBOX_DRIVER", "podman")
                .env("DOCKER_HOST", DEAD_DOCKER)
                .env("CONTAINER_HOST", podman_host());
        }
        Engine::Namespace => {
            cmd.env("DOCKER_HOST", DEAD_DOCKER)
                .env_remove("ITERION_SANDBOX_DRIVER");
        }
    }
    for (k, v) in extra_env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    let run = env.only_run();
    let events = env.events(&run);
    let logs = env.logs(&run);
    let everything = format!(
        "{}{}{events:?}{logs:?}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(!everything.contains(SECRET_VALUE), "the secret leaked");
    Some((out.status.code(), events, logs))
}

/// The stdout line of the probe holding `marker`, without the node prefix.
pub(crate) fn probe_line(
    logs: &[(String, String)],
    events: &[(String, Value)],
    marker: &str,
) -> String {
    logs.iter()
        .find(|(s, l)| s == "stdout" && l.contains(marker))
        .map(|(_, l)| l.trim().trim_start_matches("[probe] ").to_owned())
        .unwrap_or_else(|| panic!("no stdout line with {marker}: {logs:#?}\n{events:#?}"))
}

/// The hosts of the run's `network_blocked` events, in order.
pub(crate) fn blocked_hosts(events: &[(String, Value)]) -> Vec<String> {
    events
        .iter()
        .filter(|(k, _)| k == "network_blocked")
        .map(|(_, v)| v["host"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// Plain HTTP and HTTPS (inspected with `inspect`, else a plain tunnel checked against the
/// server's own CA) with no proxy variables; a denied name is NXDOMAIN and one event.
fn transparent_curl(engine: Engine, inspect: bool) {
    let env = Env::new();
    let hport = upstream();
    let server = HttpsServer::start(&["scoped.test"]);
    let sport = server.port();
    let ca = env.write("upstream-ca.pem", &server.ca_pem);
    env.write("server-ca.pem", &server.ca_pem);
    let https = if inspect {
        // The proxy's CA is what CURL_CA_BUNDLE names; the header carries the placeholder.
        format!(
            "curl -s --http1.1 --max-time 10 -H 'Authorization: Bearer {{{{secrets.tok}}}}' https://scoped.test:{sport}/s"
        )
    } else {
        format!(
            "curl -s --http1.1 --max-time 10 --cacert server-ca.pem https://scoped.test:{sport}/s"
        )
    };
    let script = format!(
        "r=$(getent hosts allowed.test); r=${{r%% *}}; \
         a=$(curl -s --max-time 10 http://allowed.test:{hport}/hello); \
         s=$({https}); \
         d=$(curl -s --max-time 10 http://denied.test:{hport}/ 2>&1; echo rc=$?); \
         six=$(getent ahostsv6 allowed.test >/dev/null && echo has-aaaa || echo no-aaaa); \
         echo \"resolved=$r allowed=$a scoped=$s denied=$d six=$six\""
    );
    let rules = vec![
        format!("allowed.test:{hport}"),
        format!("scoped.test:{sport}"),
        format!("127.0.0.1/32:{hport}"),
        format!("127.0.0.1/32:{sport}"),
    ];
    let ca_path = ca.to_string_lossy().into_owned();
    let extra: Vec<(&str, &str)> = if inspect {
        vec![("ITERION_SANDBOX_UPSTREAM_CA", ca_path.as_str())]
    } else {
        Vec::new()
    };
    let Some((code, events, logs)) = run_in(
        &env,
        engine,
        &script,
        &rules,
        inspect.then_some("scoped.test"),
        "allowed.test=127.0.0.1,scoped.test=127.0.0.1,denied.test=127.0.0.1",
        &extra,
    ) else {
        return;
    };
    assert_eq!(code, Some(0), "{events:#?}\n{logs:#?}");
    let started = first(&events, "sandbox_started").unwrap();
    assert_eq!(
        (&started["transparent_egress"], &started["tls_inspection"]),
        (&json!(true), &json!(inspect)),
        "{started}"
    );
    let line = probe_line(&logs, &events, "resolved=");
    let scoped = if inspect {
        "auth=Bearer __ITERION_SECRET_tok__;proto=HTTP/1.1".to_owned()
    } else {
        "auth=;proto=HTTP/1.1".to_owned()
    };
    assert_eq!(
        line,
        format!(
            "resolved=127.100.0.1 allowed=upstream:GET_/hello_HTTP/1.1 scoped={scoped} denied=rc=6 six=no-aaaa"
        ),
        "{events:#?}"
    );
    // One event for the denied name, however many queries the resolver made.
    assert_eq!(blocked_hosts(&events), vec!["denied.test".to_owned()]);
    let seen: Vec<(String, Option<String>)> = server
        .seen()
        .into_iter()
        .map(|s| (s.path.clone(), s.header("authorization").map(str::to_owned)))
        .collect();
    let auth = inspect.then(|| format!("Bearer {SECRET_VALUE}"));
    assert_eq!(seen, vec![("/s".to_owned(), auth)]);
    if engine != Engine::Namespace {
        assert_eq!(env.containers(), Vec::<String>::new());
    }
}

#[test]
fn docker_transparent_curl_reaches_allowed_hosts_with_no_proxy_variables_under_inspection() {
    transparent_curl(Engine::Docker, true);
}

#[test]
fn docker_transparent_curl_reaches_allowed_hosts_with_no_proxy_variables_through_a_tunnel() {
    transparent_curl(Engine::Docker, false);
}

#[test]
fn namespace_transparent_curl_reaches_allowed_hosts_with_no_proxy_variables_under_inspection() {
    transparent_curl(Engine::Namespace, true);
}

#[test]
fn namespace_transparent_curl_reaches_allowed_hosts_with_no_proxy_variables_through_a_tunnel() {
    transparent_curl(Engine::Namespace, false);
}
