//! Issue 15 ("Trust"), end to end on the real engine: an untrusted run works on a copy, as a
//! non-root uid with no capabilities and no way to gain privilege, and what it did comes back
//! only as a branch and a patch — the host checkout and its `.git` are never written.
use std::process::Command as StdCommand;

use pretty_assertions::assert_eq;

use crate::suite::support::{Env, IMAGE, docker_or_skip, first, kinds, stderr_of};

fn git(env: &Env, args: &[&str]) -> String {
    let out = StdCommand::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@t"])
        .args(args)
        .current_dir(env.ws.path())
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {}", stderr_of(&out));
    String::from_utf8_lossy(&out.stdout).trim_end().to_owned()
}

/// Everything a hostile run would do to reach the host through its workspace: plant a hook and
/// an fsmonitor in `.git`, leave a setuid shell, rewrite a tracked file, and report who it is.
const ATTACK: &str = r#"tool attack:
  command: `id -u > uid.txt; grep CapEff /proc/self/status > caps.txt; grep NoNewPrivs /proc/self/status > nnp.txt; (cat /sys/fs/cgroup/pids.max 2>/dev/null || cat /sys/fs/cgroup/pids/pids.max) > pids.txt; echo changed > a.txt; cp /bin/sh ./tool; chmod 4755 ./tool; mkdir -p .git/hooks; printf '#!/bin/sh\ntouch /tmp/iterion-pwned\n' > .git/hooks/post-commit; chmod +x .git/hooks/post-commit; printf '[core]\n\tfsmonitor = /tmp/evil\n' >> .git/config; rm -f gone.txt; echo art > $ITERION_ARTIFACT_FILES_DIR/out.txt; ln -s /etc/shadow $ITERION_ARTIFACT_FILES_DIR/shadow; echo ok`

workflow a:
  entry: attack
  attack -> done
"#;

#[test]
fn docker_attack_an_untrusted_run_never_writes_the_checkout_and_lands_a_branch() {
    if !docker_or_skip("cli::trust::docker_attack_an_untrusted_run_never_writes") {
        return;
    }
    let env = Env::new();
    env.write("a.txt", "orig\n");
    env.write("gone.txt", "tracked, deleted by the run\n");
    env.write("a.iter", ATTACK);
    git(&env, &["add", "-A"]);
    git(&env, &["commit", "-q", "-m", "init"]);
    let config_before = std::fs::read_to_string(env.path(".git/config")).unwrap();
    let hooks_before: Vec<_> = std::fs::read_dir(env.path(".git/hooks"))
        .map(|d| d.map(|e| e.unwrap().file_name()).collect())
        .unwrap_or_default();

    let out = env
        .cmd()
        .args(["run", "a.iter", "--sandbox-default-image", IMAGE])
        .args(["--trust", "untrusted"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let run = env.only_run();
    let events = env.events(&run);

    // The host checkout is exactly as it was.
    assert_eq!(
        std::fs::read_to_string(env.path("a.txt")).unwrap(),
        "orig\n"
    );
    assert!(env.path("gone.txt").exists());
    for planted in ["tool", "uid.txt", "caps.txt"] {
        assert!(
            !env.path(planted).exists(),
            "{planted} landed in the checkout"
        );
    }
    assert_eq!(
        std::fs::read_to_string(env.path(".git/config")).unwrap(),
        config_before
    );
    let hooks_after: Vec<_> = std::fs::read_dir(env.path(".git/hooks"))
        .map(|d| d.map(|e| e.unwrap().file_name()).collect())
        .unwrap_or_default();
    assert_eq!(hooks_after, hooks_before);
    assert!(!std::path::Path::new("/tmp/iterion-pwned").exists());

    // The result is a branch and a patch.
    let landed = first(&events, "sandbox_workspace_landed").expect("sandbox_workspace_landed");
    assert_eq!(landed["changed"], true, "{landed}");
    let branch = format!("iterion/a/{}", run.id);
    assert_eq!(landed["branch"], branch.as_str());
    assert_eq!(git(&env, &["show", &format!("{branch}:a.txt")]), "changed");
    let uid = git(&env, &["show", &format!("{branch}:uid.txt")]);
    assert_ne!(uid, "0", "an untrusted sandbox ran as root");
    assert_eq!(
        git(&env, &["show", &format!("{branch}:caps.txt")]),
        "CapEff:\t0000000000000000"
    );
    assert_eq!(
        git(&env, &["show", &format!("{branch}:nnp.txt")]),
        "NoNewPrivs:\t1"
    );
    let tool = git(&env, &["ls-tree", &branch, "tool"]);
    assert!(tool.starts_with("100755 "), "{tool}");
    assert_eq!(git(&env, &["ls-tree", &branch, "gone.txt"]), "");
    let patch = landed["patch"].as_str().unwrap();
    let patch = std::fs::read_to_string(patch).unwrap();
    assert!(patch.contains("+changed"), "{patch}");
    assert!(!patch.contains(".git/"), "{patch}");
    // The run files come back screened: content yes, a symlink no.
    let files = env
        .home
        .path()
        .join("runs")
        .join(run.id.to_string())
        .join("files");
    assert_eq!(
        std::fs::read_to_string(files.join("out.txt")).unwrap(),
        "art\n"
    );
    assert!(std::fs::symlink_metadata(files.join("shadow")).is_err());
    // The user's branch did not move.
    assert_eq!(git(&env, &["log", "-1", "--format=%s"]), "init");
}

#[test]
fn docker_attack_an_untrusted_worktree_run_lands_only_a_branch_and_plants_nothing_in_the_repository()
 {
    if !docker_or_skip("cli::trust::docker_attack_an_untrusted_worktree_run") {
        return;
    }
    let env = Env::new();
    env.write("a.txt", "orig\n");
    env.write(
        "wt.iter",
        "tool attack:\n  command: `echo changed > a.txt; ls -la .git > gitdir.txt; mkdir -p .git/hooks; printf '#!/bin/sh\\ntouch /tmp/iterion-pwned-wt\\n' > .git/hooks/reference-transaction; chmod +x .git/hooks/reference-transaction; echo ok`\n\nworkflow wt:\n  entry: attack\n  worktree: auto\n  attack -> done\n",
    );
    git(&env, &["add", "-A"]);
    git(&env, &["commit", "-q", "-m", "init"]);
    let out = env
        .cmd()
        .args(["run", "wt.iter", "--sandbox-default-image", IMAGE])
        .args(["--trust", "untrusted"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let run = env.only_run();
    let branch = format!("iterion/wt/{}", run.id);
    assert_eq!(git(&env, &["show", &format!("{branch}:a.txt")]), "changed");
    // The copy's .git is a real git dir (the worktree's gitfile was resolved), not a bind of
    // the host repository's.
    let listing = git(&env, &["show", &format!("{branch}:gitdir.txt")]);
    assert!(listing.contains("objects"), "{listing}");
    assert!(!env.path(".git/hooks/reference-transaction").exists());
    assert!(!std::path::Path::new("/tmp/iterion-pwned-wt").exists());
    assert_eq!(
        std::fs::read_to_string(env.path("a.txt")).unwrap(),
        "orig\n"
    );
    // Creating another ref on the host runs no planted hook either.
    git(&env, &["branch", "after", &branch]);
    assert!(!std::path::Path::new("/tmp/iterion-pwned-wt").exists());
}

#[test]
fn docker_an_untrusted_run_behind_the_proxy_has_no_root_workload_and_a_capless_bridge() {
    if !docker_or_skip("cli::trust::docker_untrusted_behind_the_proxy") {
        return;
    }
    let Some(static_bin) = iterion_test_support::static_iterion_or_skip(
        "cli::trust::docker_untrusted_behind_the_proxy",
    ) else {
        return;
    };
    let env = Env::new();
    // Every process of the sandbox, its uid and its effective capabilities; a denied request.
    let script = "for s in /proc/[0-9]*/status; do u=$(awk '/^Uid:/{print $3}' $s); c=$(awk '/^CapEff:/{print $2}' $s); n=$(awk '/^Name:/{print $2}' $s); echo \"$n $u $c\"; done > procs.txt; curl -s -o /dev/null -w '%{http_code}' --max-time 10 http://denied.test/ > denied.txt; echo ok";
    env.write(
        "p.iter",
        &format!(
            "tool probe:\n  command: `{script}`\n\nworkflow p:\n  entry: probe\n  sandbox:\n    image: \"{IMAGE}\"\n    network:\n      mode: allowlist\n      rules: [\"allowed.test\"]\n  probe -> done\n"
        ),
    );
    git(&env, &["add", "-A"]);
    git(&env, &["commit", "-q", "-m", "init"]);
    let out = env
        .cmd()
        .args(["run", "p.iter", "--trust", "untrusted"])
        .env("ITERION_BIN", &static_bin)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let run = env.only_run();
    let branch = format!("iterion/p/{}", run.id);
    assert_eq!(git(&env, &["show", &format!("{branch}:denied.txt")]), "403");
    let procs = git(&env, &["show", &format!("{branch}:procs.txt")]);
    for line in procs.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let [name, uid, caps] = fields[..] else {
            panic!("{line:?} in {procs}");
        };
        assert_eq!(
            caps, "0000000000000000",
            "{name} holds capabilities: {procs}"
        );
        if uid == "0" {
            assert_eq!(
                name, "iterion",
                "only the engine's bridge may be uid 0: {procs}"
            );
        }
    }
    assert!(
        procs
            .lines()
            .any(|l| l.ends_with(" 0000000000000000") && !l.contains(" 0 "))
    );
}

/// A listener on every host address that answers `direct`: a host service a container on the
/// default bridge could reach through the bridge's gateway.
fn host_service() -> u16 {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("0.0.0.0:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            let mut buf = [0u8; 1024];
            let _ = stream.read(&mut buf);
            let _ = stream.write_all(
                b"HTTP/1.1 200 OK\r\ncontent-length: 6\r\nconnection: close\r\n\r\ndirect",
            );
        }
    });
    port
}

#[test]
fn docker_attack_an_untrusted_open_run_cannot_reach_a_host_service() {
    if !docker_or_skip("cli::trust::docker_untrusted_open_host_service") {
        return;
    }
    let Some(static_bin) = iterion_test_support::static_iterion_or_skip(
        "cli::trust::docker_untrusted_open_host_service",
    ) else {
        return;
    };
    let gateway = iterion_test_support::docker_bridge_gateway();
    let port = host_service();
    let script = format!(
        "d=$(curl -s --max-time 3 --noproxy '*' http://{gateway}:{port}/ || echo unreachable); p=$(curl -s -o /dev/null -w '%{{http_code}}' --max-time 5 http://{gateway}:{port}/); echo \"$d $p\" > net.txt; cat net.txt"
    );
    let wf = format!(
        "tool probe:\n  command: `{script}`\n\nworkflow o:\n  entry: probe\n  sandbox:\n    image: \"{IMAGE}\"\n  probe -> done\n"
    );
    let run = |trust: &str| {
        let env = Env::new();
        env.write("o.iter", &wf);
        git(&env, &["add", "-A"]);
        git(&env, &["commit", "-q", "-m", "init"]);
        let out = env
            .cmd()
            .args(["run", "o.iter", "--trust", trust, "--json"])
            .env("ITERION_BIN", &static_bin)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
        let run = env.only_run();
        (env, run)
    };
    // Control: a trusted open run has the engine's default network and reaches the service.
    let (env, trusted) = run("trusted");
    assert_eq!(
        std::fs::read_to_string(env.path("net.txt")).unwrap().trim(),
        "direct 200",
        "run {}",
        trusted.id
    );
    // Untrusted: no route but the proxy, and the proxy refuses the host's address.
    let (env, untrusted) = run("untrusted");
    let started = first(&env.events(&untrusted), "sandbox_started")
        .cloned()
        .unwrap();
    assert_eq!(started["egress_enforced"], true, "{started}");
    let net = git(
        &env,
        &["show", &format!("iterion/o/{}:net.txt", untrusted.id)],
    );
    assert_eq!(net, "unreachable 403");
}

#[test]
fn attack_what_a_run_prints_cannot_drive_the_operators_terminal() {
    let env = Env::new();
    // OSC title/clipboard, clear screen, a bare CR that rewrites a line, C1 CSI, a bidi override.
    env.write(
        "t.iter",
        "tool t:\n  command: `printf '\\033]0;PWNED\\007\\033]52;c;ZXZpbA==\\007\\033[2J\\rfake ok \\302\\23331m \\342\\200\\256evil' >&2; exit 3`\n\nworkflow t:\n  entry: t\n  t -> done\n",
    );
    let run = env
        .cmd()
        .args(["run", "t.iter", "--sandbox", "none"])
        .output()
        .unwrap();
    let id = env.only_run().id.to_string();
    let inspect = env.cmd().args(["inspect", &id]).output().unwrap();
    let events = env.cmd().args(["events", &id]).output().unwrap();
    for (what, bytes) in [
        ("run stderr", &run.stderr),
        ("run stdout", &run.stdout),
        ("inspect", &inspect.stdout),
        ("events", &events.stdout),
    ] {
        let text = String::from_utf8_lossy(bytes);
        assert!(
            text.contains("PWNED") || what != "run stderr",
            "{what}: {text}"
        );
        let raw: Vec<char> = text
            .chars()
            .filter(|c| {
                (c.is_control() && *c != '\n' && *c != '\t')
                    || ('\u{202a}'..='\u{202e}').contains(c)
            })
            .collect();
        assert_eq!(
            raw,
            Vec::<char>::new(),
            "{what} wrote raw controls: {text:?}"
        );
    }
}

#[test]
fn docker_attack_an_untrusted_run_of_a_checkout_holding_the_store_is_refused_before_any_copy() {
    if !docker_or_skip("cli::trust::docker_untrusted_store_in_checkout") {
        return;
    }
    let env = Env::new();
    env.write("a.txt", "a\n");
    env.write(
        "s.iter",
        "tool t:\n  command: `ls -R . > seen.txt`\n\nworkflow s:\n  entry: t\n  t -> done\n",
    );
    git(&env, &["add", "-A"]);
    git(&env, &["commit", "-q", "-m", "init"]);
    let store = env.path("state");
    let xdg = env.home.path().join("xdg");
    std::fs::create_dir_all(&xdg).unwrap();
    std::fs::set_permissions(&xdg, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    let out = env
        .cmd()
        .args(["run", "s.iter", "--sandbox-default-image", IMAGE])
        .args(["--trust", "untrusted"])
        .env("ITERION_HOME", &store)
        .env("XDG_RUNTIME_DIR", &xdg)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    assert!(
        stderr_of(&out).contains("SANDBOX_SETUP_FAILED"),
        "{}",
        stderr_of(&out)
    );
    // Nothing was copied, nothing started.
    let copies = xdg.join("iterion/copies");
    let left: Vec<_> = std::fs::read_dir(&copies)
        .map(|d| d.map(|e| e.unwrap().file_name()).collect())
        .unwrap_or_default();
    assert_eq!(left, Vec::<std::ffi::OsString>::new());
    assert!(!env.path("seen.txt").exists());
}

#[test]
fn docker_a_resumed_untrusted_run_replaces_a_stale_copy_left_by_a_dead_attempt() {
    if !docker_or_skip("cli::trust::docker_untrusted_stale_copy") {
        return;
    }
    let env = Env::new();
    env.write(
        "r.iter",
        "tool t:\n  command: `cat stale.txt 2>/dev/null; exit 3`\n\nworkflow r:\n  entry: t\n  t -> done\n",
    );
    git(&env, &["add", "-A"]);
    git(&env, &["commit", "-q", "-m", "init"]);
    let xdg = env.home.path().join("xdg");
    std::fs::create_dir_all(&xdg).unwrap();
    std::fs::set_permissions(&xdg, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    let run = |args: &[&str]| {
        env.cmd()
            .args(args)
            .args(["--sandbox-default-image", IMAGE])
            .env("XDG_RUNTIME_DIR", &xdg)
            .output()
            .unwrap()
    };
    let first = run(&["run", "r.iter", "--trust", "untrusted"]);
    assert_eq!(first.status.code(), Some(1), "{}", stderr_of(&first));
    let id = env.only_run().id.to_string();
    // What a killed engine leaves: the run's copy dir, with a planted file in the workspace.
    let stale = xdg.join("iterion/copies").join(&id).join("workspace");
    std::fs::create_dir_all(&stale).unwrap();
    std::fs::write(stale.join("stale.txt"), "STALE").unwrap();
    let out = env
        .cmd()
        .args(["resume", &id])
        .env("XDG_RUNTIME_DIR", &xdg)
        .output()
        .unwrap();
    let stderr = stderr_of(&out);
    assert!(!stderr.contains("SANDBOX_SETUP_FAILED"), "{stderr}");
    assert!(stderr.contains("EXECUTION_FAILED"), "{stderr}");
    assert!(!stderr.contains("STALE"), "{stderr}");
    assert!(!xdg.join("iterion/copies").join(&id).exists());
}

#[test]
fn docker_attack_a_secret_an_untrusted_run_writes_into_its_workspace_never_lands() {
    if !docker_or_skip("cli::trust::docker_untrusted_secret_in_result") {
        return;
    }
    let Some(static_bin) = iterion_test_support::static_iterion_or_skip(
        "cli::trust::docker_untrusted_secret_in_result",
    ) else {
        return;
    };
    const VALUE: &str = "s3cr3t-VALUE-0123456789-landing";
    let env = Env::new();
    env.write(
        "l.iter",
        "secrets:\n  key:\n    value: \"${ITERION_TEST_LANDING_KEY}\"\n    as: file\n    env: \"KEY_FILE\"\n\ntool t:\n  command: `cp \"$KEY_FILE\" leaked.txt; base64 \"$KEY_FILE\" > leaked64.txt; rev \"$KEY_FILE\" > leakedrev.txt; echo kept > kept.txt`\n\nworkflow l:\n  entry: t\n  t -> done\n",
    );
    git(&env, &["add", "-A"]);
    git(&env, &["commit", "-q", "-m", "init"]);
    let out = env
        .cmd()
        .args(["run", "l.iter", "--sandbox-default-image", IMAGE])
        .args(["--trust", "untrusted"])
        .env("ITERION_TEST_LANDING_KEY", VALUE)
        .env("ITERION_BIN", &static_bin)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let run = env.only_run();
    let branch = format!("iterion/l/{}", run.id);
    assert_eq!(git(&env, &["show", &format!("{branch}:kept.txt")]), "kept");
    let leaked = git(&env, &["show", &format!("{branch}:leaked.txt")]);
    assert!(leaked.contains("[REDACTED:key]"), "{leaked}");
    let everything = git(&env, &["log", "-p", "--all", "--format=%H"]);
    let b64 = {
        use base64::Engine as _;
        base64::engine::general_purpose::STANDARD.encode(VALUE)
    };
    let reversed: String = VALUE.chars().rev().collect();
    for form in [VALUE, b64.as_str(), reversed.as_str()] {
        assert!(!everything.contains(form), "{form} landed in the branch");
    }
    let landed = first(&env.events(&run), "sandbox_workspace_landed")
        .cloned()
        .unwrap();
    let patch = std::fs::read_to_string(landed["patch"].as_str().unwrap()).unwrap();
    for form in [VALUE, b64.as_str(), reversed.as_str()] {
        assert!(!patch.contains(form), "{form} is in the patch");
    }
}

#[test]
fn docker_every_attempt_of_an_untrusted_run_lands_and_none_overwrites_another() {
    if !docker_or_skip("cli::trust::docker_untrusted_attempts_land") {
        return;
    }
    let env = Env::new();
    env.write(
        "a.iter",
        "tool t:\n  command: `echo work > out.txt; exit 3`\n\nworkflow a:\n  entry: t\n  t -> done\n",
    );
    git(&env, &["add", "-A"]);
    git(&env, &["commit", "-q", "-m", "init"]);
    let first = env
        .cmd()
        .args([
            "run",
            "a.iter",
            "--trust",
            "untrusted",
            "--sandbox-default-image",
            IMAGE,
        ])
        .output()
        .unwrap();
    assert_eq!(first.status.code(), Some(1), "{}", stderr_of(&first));
    let run = env.only_run();
    let id = run.id.to_string();
    let resumed = env.cmd().args(["resume", &id]).output().unwrap();
    assert_eq!(resumed.status.code(), Some(1), "{}", stderr_of(&resumed));
    let landed: Vec<serde_json::Value> = env
        .events(&run)
        .into_iter()
        .filter(|(k, _)| k == "sandbox_workspace_landed")
        .map(|(_, v)| v)
        .collect();
    let branch = format!("iterion/a/{id}");
    assert_eq!(landed.len(), 2, "{landed:?}");
    assert_eq!(landed[0]["branch"], branch.as_str(), "{landed:?}");
    assert_eq!(
        landed[1]["branch"],
        format!("{branch}-2").as_str(),
        "{landed:?}"
    );
    assert!(landed.iter().all(|l| l["error"].is_null()), "{landed:?}");
    for b in [branch.clone(), format!("{branch}-2")] {
        assert_eq!(git(&env, &["show", &format!("{b}:out.txt")]), "work");
    }
}

/// A listener on the host's loopback that answers `local` and counts its connections.
fn loopback_service() -> (u16, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let hits = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = std::sync::Arc::clone(&hits);
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let mut buf = [0u8; 1024];
            let _ = stream.read(&mut buf);
            let _ = stream.write_all(
                b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\nconnection: close\r\n\r\nlocal",
            );
        }
    });
    (port, hits)
}

/// The attack: an untrusted workflow writes an IP rule for the host's loopback into its own
/// network block, to reach a service on the operator's machine through the proxy (which runs on
/// the host). The control shows the rule does open it for a trusted run; the untrusted run is
/// refused before anything runs, naming the rule, and the service is never reached.
#[test]
fn docker_attack_an_untrusted_workflow_cannot_open_the_hosts_loopback_with_its_own_rules() {
    if !docker_or_skip("cli::trust::docker_untrusted_loopback_rule") {
        return;
    }
    let Some(static_bin) =
        iterion_test_support::static_iterion_or_skip("cli::trust::docker_untrusted_loopback_rule")
    else {
        return;
    };
    let (port, hits) = loopback_service();
    let wf = format!(
        "tool probe:\n  command: `curl -s --noproxy '' --max-time 5 http://127.0.0.1:{port}/ > got.txt; cat got.txt`\n\nworkflow l:\n  entry: probe\n  sandbox:\n    image: \"{IMAGE}\"\n    network:\n      mode: allowlist\n      rules: [\"127.0.0.1/32:{port}\"]\n  probe -> done\n"
    );
    let run = |trust: &str| {
        let env = Env::new();
        env.write("l.iter", &wf);
        git(&env, &["add", "-A"]);
        git(&env, &["commit", "-q", "-m", "init"]);
        let out = env
            .cmd()
            .args(["run", "l.iter", "--trust", trust])
            .env("ITERION_BIN", &static_bin)
            .output()
            .unwrap();
        (env, out)
    };
    let (env, out) = run("trusted");
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(
        std::fs::read_to_string(env.path("got.txt")).unwrap(),
        "local"
    );
    let before = hits.load(std::sync::atomic::Ordering::SeqCst);
    assert!(before >= 1);

    let (env, out) = run("untrusted");
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    let stderr = stderr_of(&out);
    assert!(
        stderr.contains(&format!("the network rules 127.0.0.1/32:{port} would let an untrusted run reach non-public addresses")),
        "{stderr}"
    );
    let run = env.only_run();
    assert_eq!(run.failure_code.as_deref(), Some("SANDBOX_SETUP_FAILED"));
    assert!(
        !kinds(&env.events(&run)).contains(&"node_started"),
        "nothing ran"
    );
    assert_eq!(env.containers(), Vec::<String>::new());
    assert_eq!(
        hits.load(std::sync::atomic::Ordering::SeqCst),
        before,
        "never reached"
    );
}
