//! Issue 22 "Tests": the client matrix. Real clients inside the sandbox, with no proxy variables
//! set, reach an allowed local HTTPS server (test-support's `HttpsServer`, named through
//! `ITERION_SANDBOX_PROXY_HOSTS`, its CA given to the proxy as `ITERION_SANDBOX_UPSTREAM_CA`) with
//! TLS inspection on and off, and each is refused for a denied host:
//!
//! - `curl` over HTTP/1.1 and `--http2`, and an SSE stream (`curl -N`);
//! - `git clone` over https (git's "dumb" HTTP protocol, from the server's `/files/`);
//! - Python's `urllib` and Node's built-in `fetch` (namespace driver: the host's interpreters);
//! - a Go `net/http` client with its own transport (`Proxy: nil`), built static from
//!   `tests/clients/egress_client.go` with Debian's golang, cached under the target directory;
//!   it also does the WebSocket round trip and an SSE stream.
//!
//! The namespace driver's image is the host root, so every client runs there. The docker image
//! (`iterion-test/debian:bookworm`) has curl and git; the Go client is copied into the workspace.
//! Python and Node are not in that image, and no derived image is built for them: they would
//! exercise the same sandbox plumbing as curl and Go there (the namespace driver runs them).
//!
//! With inspection on, the server sees the real secret behind each client's placeholder and the
//! client sees only the placeholder; with it off, placeholders stay placeholders and the client
//! verifies the server itself (it is given the server's CA in the workspace).
use std::path::{Path, PathBuf};
use std::process::Command as StdCommand;

use iterion_test_support::https::HttpsServer;
use iterion_test_support::static_iterion_or_skip;
use pretty_assertions::assert_eq;
use sha2::Digest as _;

use crate::suite::egress::runtime_dir;
use crate::suite::support::{Ended, Env, IMAGE, docker_or_skip, kinds};

const SECRET_VALUE: &str = "s3cr3t-value-0123456789";
const PLACEHOLDER: &str = "__ITERION_SECRET_tok__";
const GO_SOURCE: &str = include_str!("../clients/egress_client.go");

/// The static Go client, built once per source (cached by its hash under the target directory).
fn go_client() -> PathBuf {
    let hash = sha2::Sha256::digest(GO_SOURCE.as_bytes());
    let tag: String = hash.iter().take(8).map(|b| format!("{b:02x}")).collect();
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("egress-client");
    let bin = dir.join(format!("egress_client-{tag}"));
    if bin.is_file() {
        return bin;
    }
    std::fs::create_dir_all(&dir).unwrap();
    let src = tempfile::tempdir_in(&dir).unwrap();
    std::fs::write(src.path().join("egress_client.go"), GO_SOURCE).unwrap();
    let out_tmp = src.path().join("egress_client");
    let out = StdCommand::new("go")
        .args(["build", "-trimpath", "-o"])
        .arg(&out_tmp)
        .arg("egress_client.go")
        .current_dir(src.path())
        .env("CGO_ENABLED", "0")
        .env("GO111MODULE", "off")
        .env("GOCACHE", dir.join("gocache"))
        .env("GOPATH", dir.join("gopath"))
        .env("HOME", src.path())
        .output()
        .unwrap_or_else(|e| panic!("`go` (Debian's golang-go, scripts/test.sh installs it): {e}"));
    assert!(
        out.status.success(),
        "go build: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Atomic: another test process may be building the same client.
    std::fs::rename(&out_tmp, &bin).unwrap();
    bin
}

/// A bare repository with one commit (`README` = "matrix"), ready for a dumb-HTTP clone.
fn bare_repo(root: &Path) {
    let git = |dir: &Path, args: &[&str]| {
        let ok = StdCommand::new("git")
            .args([
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@t",
                "-c",
                "init.defaultBranch=main",
            ])
            .args(args)
            .current_dir(dir)
            .status()
            .unwrap()
            .success();
        assert!(ok, "git {args:?}");
    };
    let work = root.join("work");
    std::fs::create_dir_all(&work).unwrap();
    git(&work, &["init", "-q"]);
    std::fs::write(work.join("README"), "matrix\n").unwrap();
    git(&work, &["add", "README"]);
    git(&work, &["commit", "-qm", "matrix"]);
    git(root, &["clone", "-q", "--bare", "work", "repo.git"]);
    git(&root.join("repo.git"), &["update-server-info"]);
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Driver {
    Namespace,
    Docker,
}

/// Every client of the matrix, in the order the script prints them.
const ALL: [&str; 9] = [
    "curl1", "curl2", "sse", "git", "py", "node", "go", "gosse", "ws",
];

/// The clients that honour `HTTP(S)_PROXY` (Node's `fetch` and the Go client do not).
const PROXY_AWARE: [&str; 5] = ["curl1", "curl2", "sse", "git", "py"];

/// How the sandbox's clients find the proxy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Vars {
    /// The proxy variables the engine sets are removed: transparent egress only.
    Unset,
    /// They stay (proxy-aware clients, as before transparent egress).
    Kept,
}

/// The script the sandbox runs: each client against the allowed host, then each against the
/// denied one. `$1` is the placeholder (the tool's `{{secrets.tok}}`).
fn script(port: u16, clients: &[&str], inspect: bool, vars: Vars) -> String {
    let u = format!("https://allowed.test:{port}");
    let d = format!("https://denied.test:{port}");
    let mut s = String::from("#!/bin/bash\nset -u\nph=\"$1\"\ncd \"$(dirname \"$0\")\"\n");
    if vars == Vars::Unset {
        s.push_str(
            "unset HTTP_PROXY HTTPS_PROXY ALL_PROXY NO_PROXY http_proxy https_proxy all_proxy no_proxy\n",
        );
    }
    s.push_str("proxyvars=$(env | grep -qi '^https*_proxy=' && echo set || echo none)\n");
    if !inspect {
        // Without inspection each client verifies the server itself.
        s.push_str(
            "ca=$PWD/server-ca.pem\n\
             export SSL_CERT_FILE=$ca CURL_CA_BUNDLE=$ca NODE_EXTRA_CA_CERTS=$ca GIT_SSL_CAINFO=$ca\n",
        );
    }
    s.push_str("out=\"proxyvars=$proxyvars\"\n");
    s.push_str("run() { local name=$1; shift; local r; r=$(\"$@\" 2>/dev/null) || r=ERR; out=\"$out $name=$(printf %s \"$r\" | tr '\\n ' '._')\"; }\n");
    s.push_str(
        "c() { curl -sf --max-time 10 -H \"Authorization: Bearer $ph\" \"$@\"; }\n\
         py() { python3 -c 'import sys,urllib.request as u; r=u.Request(sys.argv[1], headers={\"Authorization\": \"Bearer \"+sys.argv[2]}); print(u.urlopen(r, timeout=10).read().decode(), end=\"\")' \"$1\" \"$ph\"; }\n\
         nf() { node -e 'fetch(process.argv[1],{headers:{authorization:\"Bearer \"+process.argv[2]}}).then(async r=>{if(!r.ok)process.exit(1);process.stdout.write(await r.text())}).catch(e=>{console.error(String(e.cause||e));process.exit(1)})' \"$1\" \"$ph\"; }\n\
         gc() { rm -rf clone-$2 && git clone -q \"$1\" clone-$2 && cat clone-$2/README; }\n\
         sse() { curl -sfN --max-time 10 \"$1\" | grep '^data:' | tr '\\n' '.'; }\n\
         goc() { ./egress_client \"$@\"; }\n"
    );
    let allowed = |c: &str| -> String {
        match c {
            "curl1" => format!("run curl1 c --http1.1 {u}/curl1"),
            "curl2" => format!("run curl2 c --http2 {u}/curl2"),
            "sse" => format!("run sse sse '{u}/sse?n=3&gap_ms=50'"),
            "git" => format!("run git gc {u}/files/repo.git a"),
            "py" => format!("run py py {u}/py"),
            "node" => format!("run node nf {u}/node"),
            "go" => format!("run go goc get {u}/go \"Bearer $ph\""),
            "gosse" => format!("run gosse goc sse '{u}/sse?n=3&gap_ms=50'"),
            "ws" => format!("run ws goc ws wss://allowed.test:{port}/ws"),
            _ => String::new(),
        }
    };
    let denied = |c: &str| -> Option<String> {
        Some(match c {
            "curl1" => format!("run d.curl1 c --http1.1 {d}/denied-curl1"),
            "curl2" => format!("run d.curl2 c --http2 {d}/denied-curl2"),
            "git" => format!("run d.git gc {d}/files/repo.git d"),
            "py" => format!("run d.py py {d}/denied-py"),
            "node" => format!("run d.node nf {d}/denied-node"),
            "go" => format!("run d.go goc get {d}/denied-go x"),
            "ws" => format!("run d.ws goc ws wss://denied.test:{port}/denied-ws"),
            _ => return None,
        })
    };
    for c in clients {
        s.push_str(&allowed(c));
        s.push('\n');
    }
    for c in clients {
        if let Some(line) = denied(c) {
            s.push_str(&line);
            s.push('\n');
        }
    }
    s.push_str("echo \"matrix: $out\"\n");
    s
}

/// What the script prints when every client works: `auth=` echoes carry the placeholder (the
/// server's echo of a real value is redacted under inspection; without it, nothing swapped it).
fn expected(clients: &[&str], vars: Vars) -> String {
    let echo = |proto: &str| format!("auth=Bearer_{PLACEHOLDER};proto=HTTP/{proto}");
    let mut out = vec![match vars {
        Vars::Unset => "proxyvars=none".to_string(),
        Vars::Kept => "proxyvars=set".to_string(),
    }];
    for c in clients {
        out.push(match *c {
            "curl1" => format!("curl1={}", echo("1.1")),
            "curl2" => format!("curl2={}", echo("2.0")),
            "sse" => "sse=data:_0.data:_1.data:_2.".to_string(),
            "git" => "git=matrix".to_string(),
            "py" => format!("py={}", echo("1.1")),
            "node" => format!("node={}", echo("1.1")),
            "go" => format!("go={}", echo("2.0")),
            "gosse" => "gosse=data:_0.data:_1.data:_2".to_string(),
            "ws" => "ws=hello-ws".to_string(),
            other => panic!("{other}"),
        });
    }
    for c in clients {
        if ["curl1", "curl2", "git", "py", "node", "go", "ws"].contains(c) {
            out.push(format!("d.{c}=ERR"));
        }
    }
    out.join(" ")
}

fn run_matrix(driver: Driver, inspect: bool, vars: Vars, clients: &[&str]) {
    let static_bin = match driver {
        Driver::Docker => {
            if !docker_or_skip("cli::egress_matrix") {
                return;
            }
            let Some(bin) = static_iterion_or_skip("cli::egress_matrix") else {
                return;
            };
            bin
        }
        // The namespace driver's image is the host root: the dynamic build runs as it is.
        Driver::Namespace => assert_cmd::cargo::cargo_bin("iterion"),
    };
    let env = Env::new();
    let files = tempfile::tempdir().unwrap();
    bare_repo(files.path());
    let server = HttpsServer::start_serving(&["allowed.test"], Some(files.path().to_path_buf()));
    let port = server.port();
    let ca = env.write("upstream-ca.pem", &server.ca_pem);
    env.write("server-ca.pem", &server.ca_pem);
    std::fs::copy(go_client(), env.path("egress_client")).unwrap();
    env.write("matrix.sh", &script(port, clients, inspect, vars));
    let xdg = runtime_dir(&env);
    let sandbox = match driver {
        Driver::Namespace => "    mode: auto\n".to_string(),
        Driver::Docker => format!("    image: \"{IMAGE}\"\n"),
    };
    env.write(
        "matrix.iter",
        &format!(
            "secrets:\n  tok:\n    value: \"${{ITERION_TEST_TOK}}\"\n    hosts: [\"allowed.test\"]\n\n\
             tool probe:\n  command: `bash ./matrix.sh '{{{{secrets.tok}}}}'`\n\n\
             workflow matrix:\n  entry: probe\n  sandbox:\n{sandbox}    network:\n      mode: allowlist\n      \
             rules: [\"allowed.test:{port}\", \"127.0.0.1/32:{port}\"]\n  probe -> done\n"
        ),
    );
    let mut cmd = env.cmd();
    cmd.args(["run", "matrix.iter"])
        .env("ITERION_BIN", &static_bin)
        .env("XDG_RUNTIME_DIR", &xdg)
        .env("ITERION_TEST_TOK", SECRET_VALUE)
        .env(
            "ITERION_SANDBOX_PROXY_HOSTS",
            "allowed.test=127.0.0.1,denied.test=127.0.0.1",
        )
        .env("ITERION_SANDBOX_UPSTREAM_CA", &ca)
        .env(
            "ITERION_SANDBOX_TLS_INSPECT",
            if inspect { "1" } else { "0" },
        );
    match driver {
        Driver::Namespace => {
            cmd.env("DOCKER_HOST", "unix:///nonexistent/docker.sock")
                .env("ITERION_SANDBOX_DRIVER", "namespace");
        }
        Driver::Docker => {
            cmd.env_remove("ITERION_SANDBOX_DRIVER");
        }
    }
    let out = cmd.output().unwrap();
    let Ended { events, logs, .. } = env.only_run_ended(&out, 0);
    let line = logs
        .iter()
        .find(|(s, l)| s == "stdout" && l.contains("matrix: "))
        .map(|(_, l)| l.clone())
        .unwrap_or_else(|| panic!("{logs:#?}\n{:?}", kinds(&events)));
    let got = line.split("matrix: ").nth(1).unwrap_or_default().trim();
    assert_eq!(
        got,
        expected(clients, vars),
        "{driver:?} inspect={inspect} {vars:?}"
    );
    // The server saw each client's request once, with the real value under inspection and the
    // placeholder without; never a request meant for the denied host.
    let want_auth = if inspect {
        format!("Bearer {SECRET_VALUE}")
    } else {
        format!("Bearer {PLACEHOLDER}")
    };
    let seen = server.seen();
    for c in ["curl1", "curl2", "py", "node", "go"] {
        if !clients.contains(&c) {
            continue;
        }
        let path = format!("/{c}");
        let auths: Vec<_> = seen
            .iter()
            .filter(|s| s.path == path)
            .map(|s| s.header("authorization").unwrap_or_default().to_string())
            .collect();
        assert_eq!(auths, vec![want_auth.clone()], "{c}");
    }
    assert!(
        !seen.iter().any(|s| s.path.starts_with("/denied")),
        "{seen:#?}"
    );
    // The denied host is refused by the policy, with a `network_blocked` naming it.
    let blocked: Vec<_> = events
        .iter()
        .filter(|(k, _)| k == "network_blocked")
        .map(|(_, v)| v["host"].as_str().unwrap_or_default().to_string())
        .collect();
    assert!(!blocked.is_empty(), "{:?}", kinds(&events));
    assert!(blocked.iter().all(|h| h == "denied.test"), "{blocked:?}");
    let everything = format!(
        "{}{}{events:?}{logs:?}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(!everything.contains(SECRET_VALUE), "the secret leaked");
    if driver == Driver::Docker {
        assert_eq!(env.containers(), Vec::<String>::new());
    }
}

#[test]
fn namespace_every_client_without_proxy_variables_with_inspection() {
    run_matrix(Driver::Namespace, true, Vars::Unset, &ALL);
}

#[test]
fn namespace_every_client_without_proxy_variables_without_inspection() {
    run_matrix(Driver::Namespace, false, Vars::Unset, &ALL);
}

/// The docker image has curl and git; the Go client is copied in.
const DOCKER_CLIENTS: [&str; 7] = ["curl1", "curl2", "sse", "git", "go", "gosse", "ws"];

#[test]
fn docker_curl_git_and_go_without_proxy_variables_with_inspection() {
    run_matrix(Driver::Docker, true, Vars::Unset, &DOCKER_CLIENTS);
}

#[test]
fn docker_curl_git_and_go_without_proxy_variables_without_inspection() {
    run_matrix(Driver::Docker, false, Vars::Unset, &DOCKER_CLIENTS);
}

#[test]
fn namespace_proxy_aware_clients_through_the_proxy_variables_with_inspection() {
    run_matrix(Driver::Namespace, true, Vars::Kept, &PROXY_AWARE);
}

#[test]
fn docker_proxy_aware_clients_through_the_proxy_variables_without_inspection() {
    run_matrix(
        Driver::Docker,
        false,
        Vars::Kept,
        &["curl1", "curl2", "sse", "git"],
    );
}
