//! Issue 22 items 2–4 end to end: `curl` in a real container, through the egress bridge and the
//! inspecting proxy, to a local HTTPS server whose CA reaches the proxy as
//! `ITERION_SANDBOX_UPSTREAM_CA`. Over HTTP/1.1 and HTTP/2 the server sees the real secret and
//! the sandbox only the placeholder; an SSE stream comes through event by event. (The WebSocket
//! echo is tested in `crates/netproxy/tests/suite/protocols.rs`: the image's curl has no
//! WebSocket support.)
use iterion_test_support::https::HttpsServer;
use iterion_test_support::static_iterion_or_skip;
use pretty_assertions::assert_eq;

use crate::suite::egress::runtime_dir;
use crate::suite::support::{Ended, Env, IMAGE, docker_or_skip};

const SECRET_VALUE: &str = "s3cr3t-value-0123456789";

#[test]
fn docker_the_inspected_secret_swap_holds_over_http1_and_http2_and_sse_streams_with_the_upstream_ca()
 {
    if !docker_or_skip("cli::egress_inspect::swap") {
        return;
    }
    let Some(static_bin) = static_iterion_or_skip("cli::egress_inspect::swap") else {
        return;
    };
    let env = Env::new();
    let server = HttpsServer::start(&["scoped.test"]);
    let port = server.port();
    let ca = env.write("upstream-ca.pem", &server.ca_pem);
    let xdg = runtime_dir(&env);
    let script = format!(
        "get() {{ curl -s --max-time 10 -H 'Authorization: Bearer {{{{secrets.tok}}}}' \"$@\"; }}; \
         h1=$(get --http1.1 https://scoped.test:{port}/h1); \
         h2=$(get --http2 https://scoped.test:{port}/h2); \
         sse() {{ curl -s -N --max-time 10 \"$1\" \"https://scoped.test:{port}/sse?n=3&gap_ms=50\" | tr '\\n' '.'; }}; \
         s1=$(sse --http1.1); s2=$(sse --http2); \
         echo \"h1=$h1 h2=$h2 sse1=$s1 sse2=$s2\""
    );
    env.write(
        "swap.iter",
        &format!(
            "secrets:\n  tok:\n    value: \"${{ITERION_TEST_TOK}}\"\n    hosts: [\"scoped.test\"]\n\ntool probe:\n  command: `{script}`\n\nworkflow swap:\n  entry: probe\n  sandbox:\n    image: \"{IMAGE}\"\n    network:\n      mode: allowlist\n      rules: [\"scoped.test:{port}\", \"127.0.0.1/32:{port}\"]\n  probe -> done\n"
        ),
    );
    let out = env
        .cmd()
        .args(["run", "swap.iter"])
        .env("ITERION_BIN", &static_bin)
        .env("XDG_RUNTIME_DIR", &xdg)
        .env("ITERION_TEST_TOK", SECRET_VALUE)
        .env("ITERION_SANDBOX_PROXY_HOSTS", "scoped.test=127.0.0.1")
        .env("ITERION_SANDBOX_UPSTREAM_CA", &ca)
        .output()
        .unwrap();
    let Ended { events, logs, .. } = env.only_run_ended(&out, 0);
    let line = logs
        .iter()
        .find(|(s, l)| s == "stdout" && l.contains("h1="))
        .map(|(_, l)| l.clone())
        .unwrap_or_else(|| panic!("{logs:#?}\n{events:#?}"));
    let placeholder = "__ITERION_SECRET_tok__";
    assert_eq!(
        line.trim().trim_start_matches("[probe] "),
        format!(
            "h1=auth=Bearer {placeholder};proto=HTTP/1.1 h2=auth=Bearer {placeholder};proto=HTTP/2.0 \
             sse1=data: 0..data: 1..data: 2.. sse2=data: 0..data: 1..data: 2.."
        )
    );
    // The server saw the real value, over the protocol the client chose.
    let seen: Vec<(String, String, Option<String>)> = server
        .seen()
        .into_iter()
        .map(|s| {
            let auth = s.header("authorization").map(str::to_owned);
            (s.path, s.version, auth)
        })
        .collect();
    let real = Some(format!("Bearer {SECRET_VALUE}"));
    assert_eq!(
        seen,
        vec![
            ("/h1".to_owned(), "HTTP/1.1".to_owned(), real.clone()),
            ("/h2".to_owned(), "HTTP/2.0".to_owned(), real),
            ("/sse?n=3&gap_ms=50".to_owned(), "HTTP/1.1".to_owned(), None),
            ("/sse?n=3&gap_ms=50".to_owned(), "HTTP/2.0".to_owned(), None),
        ]
    );
    let everything = format!(
        "{}{}{events:?}{logs:?}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(!everything.contains(SECRET_VALUE), "the secret leaked");
    assert_eq!(env.containers(), Vec::<String>::new());
}
