//! Issue 15 items 6 and 9 from inside a real container: a run under `open` with a scoped secret
//! starts the proxy for rewriting, and that proxy must still refuse the host's loopback however
//! it is written, and must refuse a plain-HTTP request whose `Host` fronts for another name.
//!
//! A host service listens on every interface: the "host service bound to 127.0.0.1" of item 9.
//! `open` takes no rules (C044), so nothing can name it: every form is refused, and the fronting
//! check comes first (421 before any address is looked at). `curl --noproxy ''` overrides the
//! sandbox's `NO_PROXY=localhost,127.0.0.1,::1` so that loopback names go to the proxy (on the
//! host), not to the container's own loopback.
use iterion_test_support::static_iterion_or_skip;
use pretty_assertions::assert_eq;

use crate::suite::egress::{runtime_dir, upstream};
use crate::suite::support::{Ended, Env, IMAGE, docker_or_skip};

const SECRET_VALUE: &str = "s3cr3t-value-0123456789";

#[test]
fn docker_open_with_a_scoped_secret_refuses_host_loopback_and_fronting() {
    if !docker_or_skip("cli::egress_attacks::open_scoped_secret") {
        return;
    }
    let Some(static_bin) = static_iterion_or_skip("cli::egress_attacks::open_scoped_secret") else {
        return;
    };
    let env = Env::new();
    let private = upstream();
    let xdg = runtime_dir(&env);
    let script = format!(
        "code() {{ curl -s -o /dev/null -w '%{{http_code}}' --max-time 10 --noproxy '' \"$@\"; }}; \
         l1=$(code http://127.0.0.1:{private}/); \
         l2=$(code http://2130706433:{private}/); \
         l3=$(code http://0x7f.1:{private}/); \
         l4=$(code http://127.1:{private}/); \
         l5=$(code 'http://[::ffff:127.0.0.1]:{private}/'); \
         l6=$(code http://localhost:{private}/); \
         l7=$(code http://scoped.test:{private}/); \
         l8=$(code http://0177.0.0.1:{private}/x); \
         l9=$(code 'http://[::1]:{private}/'); \
         front=$(code -H 'Host: evil.test:{private}' -H 'Authorization: Bearer {{{{secrets.tok}}}}' http://scoped.test:{private}/); \
         front2=$(code -H 'Host: scoped.test' -H 'Authorization: Bearer {{{{secrets.tok}}}}' http://scoped.test:{private}/); \
         echo \"l1=$l1 l2=$l2 l3=$l3 l4=$l4 l5=$l5 l6=$l6 l7=$l7 l8=$l8 l9=$l9 front=$front front2=$front2\""
    );
    env.write(
        "open.iter",
        &format!(
            "secrets:\n  tok:\n    value: \"${{ITERION_TEST_TOK}}\"\n    hosts: [\"scoped.test\"]\n\ntool probe:\n  command: `{script}`\n\nworkflow open_scoped:\n  entry: probe\n  sandbox:\n    image: \"{IMAGE}\"\n    network:\n      mode: open\n  probe -> done\n"
        ),
    );
    let out = env
        .cmd()
        .args(["run", "open.iter"])
        .env("ITERION_BIN", &static_bin)
        .env("XDG_RUNTIME_DIR", &xdg)
        .env("ITERION_TEST_TOK", SECRET_VALUE)
        .env(
            "ITERION_SANDBOX_PROXY_HOSTS",
            "scoped.test=127.0.0.1,evil.test=127.0.0.1,localhost=127.0.0.1",
        )
        .output()
        .unwrap();
    let Ended { run, events, logs } = env.only_run_ended(&out, 0);
    assert_eq!(run.status.as_str(), "finished");
    let line = logs
        .iter()
        .find(|(s, l)| s == "stdout" && l.contains("l1="))
        .map(|(_, l)| l.clone())
        .unwrap_or_else(|| panic!("{logs:#?}"));
    // Every loopback form is refused (403 from the proxy, not a dead route), and fronting is
    // refused before the address is even looked at.
    assert_eq!(
        line.trim().trim_start_matches("[probe] "),
        "l1=403 l2=403 l3=403 l4=403 l5=403 l6=403 l7=403 l8=403 l9=403 front=421 front2=421",
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
        ("127.0.0.1", "resolved to a non-public address"),
        ("::1", "resolved to a non-public address"),
        ("localhost", "resolved to a non-public address"),
        ("scoped.test", "resolved to a non-public address"),
        (
            "scoped.test",
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
    let everything = format!("{events:?}{logs:?}");
    assert!(!everything.contains(SECRET_VALUE));
    assert_eq!(env.containers(), Vec::<String>::new());
}
