//! Mount screening end to end (SANDBOX.md §5.1–§5.2, our decision 2), on both engines: every
//! hostile mount is refused by `start` before anything is created — the engine never holds a
//! container for it — and the benign ones really are mounted, with the behaviour they ask for.
//! The pure table of rules lives beside the screening code; this is the driver's half.

// Test code: a failed unwrap is the assertion.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::os::unix::fs::symlink;
use std::path::Path;

use bollard::query_parameters::RemoveVolumeOptionsBuilder;
use iterion_sandbox::{Driver, Error, NoProgress, Spec};
use iterion_sandbox_docker::DockerSettings;
use pretty_assertions::assert_eq;

use super::docker_driver::{busybox_spec, ids, run_info, sh, start, text};
use super::engines::{Engine, labelled};

crate::engine_tests!(
    hostile_mounts_never_reach_the_engine,
    benign_mounts_are_really_mounted,
);

/// A host laid out in a tempdir: `<root>/ws` is the workspace, `<root>/outside` a directory
/// beside it with a credential store, and the workspace holds symlinks that point out.
struct Host {
    _dir: tempfile::TempDir,
    root: std::path::PathBuf,
    ws: std::path::PathBuf,
}

fn host() -> Host {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let ws = root.join("ws");
    for sub in [
        "ws/data",
        "ws/ro",
        "ws/sub",
        "outside/.ssh",
        "outside/.aws",
        "outside/cache",
    ] {
        std::fs::create_dir_all(root.join(sub)).unwrap();
    }
    std::fs::write(root.join("outside/.ssh/id_ed25519"), "secret").unwrap();
    std::fs::write(root.join("outside/.git-credentials"), "secret").unwrap();
    std::fs::write(root.join("outside/podman.sock"), "").unwrap();
    std::fs::write(ws.join("file.txt"), "one file\n").unwrap();
    std::fs::write(ws.join("ro/readme"), "read only\n").unwrap();
    std::fs::write(root.join("outside/cache/hit"), "cached\n").unwrap();
    symlink("/proc", ws.join("link-proc")).unwrap();
    symlink(root.join("outside/.ssh"), ws.join("link-ssh")).unwrap();
    symlink(root.join("outside"), ws.join("link-out")).unwrap();
    symlink("/var/run/docker.sock", ws.join("link-sock")).unwrap();
    symlink("sub", ws.join("link-sub")).unwrap();
    Host {
        _dir: dir,
        root,
        ws,
    }
}

fn hostile(root: &Path) -> Vec<String> {
    let root = root.display();
    let home = std::env::var("HOME").unwrap_or_else(|_| "/root".to_owned());
    let mut mounts: Vec<String> = [
        // Engine sockets, typed and untyped, canonical, rootless and through a link.
        "type=bind,source=/var/run/docker.sock,target=/var/run/docker.sock",
        "source=/var/run/docker.sock,target=/sock",
        "source=/run/docker.sock,target=/sock",
        "type=bind,source=/run/podman/podman.sock,target=/s",
        "source=/run/user/1000/podman/podman.sock,target=/s",
        "source=/run/containerd/containerd.sock,target=/s",
        "source=./link-sock,target=/s",
        // Kernel and system trees; the ancestor clause covers / /etc /var.
        "source=/proc,target=/p",
        "type=bind,source=/proc/self/root,target=/p",
        "source=/sys,target=/s",
        "source=/sys/fs/cgroup,target=/c",
        "source=/dev,target=/d",
        "source=/,target=/host",
        "source=/etc,target=/e",
        "source=/etc/shadow,target=/s,readonly",
        "source=/var,target=/v",
        "source=/boot,target=/b",
        "source=/var/lib/docker,target=/d",
        "source=/var/lib/containers,target=/d",
        "source=/tmp/../etc/sudoers,target=/s",
        // Through the workspace: symlinks and `..`.
        "source=./link-proc,target=/p",
        "source=link-proc/1,target=/p",
        "source=./link-ssh,target=/k",
        "source=./link-out,target=/o",
        "source=../outside,target=/o",
        "source=./sub/../../outside,target=/o",
        // Syntax: control characters, a leading dash, reserved and root targets, forbidden keys.
        "source=./data,target=/data\n--privileged",
        "source=./data,target=/da\rta",
        "-v=/:/host",
        " --mount=source=/,target=/h",
        "source=./data,target=/run/iterion/bin",
        "source=./data,target=/",
        "type=volume,source=v,target=/v,volume-driver=local",
        "type=volume,source=v,target=/v,volume-opt=device=/etc",
        "type=bind,source=./data,target=/d,bind-propagation=rshared",
        "type=devpts,target=/dev/pts",
        "source=./missing,target=/m",
        "type=bind,target=/no-source",
        "target=relative/target",
    ]
    .iter()
    .map(|m| (*m).to_owned())
    .collect();
    mounts.extend([
        // Credential stores, typed and untyped, wherever they are.
        format!("source={home}/.ssh,target=/k"),
        format!("type=bind,source={home}/.aws,target=/a"),
        format!("source={home},target=/home"),
        format!("source={root}/outside/.ssh,target=/k"),
        format!("type=bind,source={root}/outside/.ssh/id_ed25519,target=/k,readonly"),
        format!("source={root}/outside/.aws,target=/a"),
        format!("source={root}/outside/.git-credentials,target=/g"),
        format!("source={root}/outside/podman.sock,target=/s"),
    ]);
    mounts
}

async fn hostile_mounts_never_reach_the_engine(engine: Engine) {
    let (test_id, run_id) = ids(engine, "hostile_mounts");
    let Some((driver, client)) = engine
        .driver_or_skip(&test_id, DockerSettings::default().persist_nix(false))
        .await
    else {
        return;
    };
    let host = host();
    let prepared = driver.prepare(&busybox_spec(), &NoProgress).await.unwrap();
    let mounts = hostile(&host.root);
    assert!(mounts.len() >= 30, "{} hostile mounts", mounts.len());
    let mut accepted = Vec::new();
    for (index, mount) in mounts.iter().enumerate() {
        let mut attempt = prepared.clone();
        attempt.spec.mounts = vec![mount.clone()];
        let info = run_info(&format!("{run_id}-{index}"), "store", &host.ws, &host.root);
        match driver.start(attempt, info).await {
            Err(Error::MountRefused { .. } | Error::InvalidArgument { .. }) => {}
            Err(other) => accepted.push(format!("{mount:?}: refused by the wrong rule: {other}")),
            Ok(run) => {
                accepted.push(format!("{mount:?}: ACCEPTED"));
                run.cleanup().await.unwrap();
            }
        }
    }
    assert_eq!(accepted, Vec::<String>::new());
    // Nothing was ever created: a created-but-never-started container would still be listed.
    assert_eq!(labelled(&client, &test_id).await, Vec::<String>::new());
}

async fn benign_mounts_are_really_mounted(engine: Engine) {
    let (test_id, run_id) = ids(engine, "benign_mounts");
    let Some((driver, client)) = engine
        .driver_or_skip(&test_id, DockerSettings::default().persist_nix(false))
        .await
    else {
        return;
    };
    let host = host();
    // Not `iterion…`: those names are the engine's own (issue 15 item 3).
    let volume = format!("it-vol-{run_id}");
    let root = host.root.display();
    let mounts = vec![
        "source=./data,target=/data".to_owned(),
        "type=bind,source=ro,target=/ro,readonly".to_owned(),
        "src=./data,dst=/data-alias,ro".to_owned(),
        "source=./link-sub,target=/linked".to_owned(),
        "type=bind,source=./data,target=/private,bind-propagation=rprivate".to_owned(),
        "source=./file.txt,target=/etc/iterion-file.txt,readonly".to_owned(),
        format!("source={root}/outside/cache,target=/cache"),
        "type=volume,target=/anonymous".to_owned(),
        format!("type=volume,source={volume},target=/named"),
        "type=volume,target=/nocopy,volume-nocopy".to_owned(),
        "type=tmpfs,target=/fast,tmpfs-size=1048576".to_owned(),
        "target=/anonymous-untyped".to_owned(),
    ];
    assert!(mounts.len() >= 10);
    let spec = Spec {
        mounts: mounts.clone(),
        tmpfs: vec!["/scratch:size=1m".to_owned()],
        ..busybox_spec()
    };
    let info = run_info(&run_id, "store", &host.ws, &host.root);
    let (run, _guard) = start(engine, &driver, &spec, info).await;
    let script = r#"
        check() { if "$@" >/dev/null 2>&1; then echo yes; else echo no; fi; }
        echo "data:$(check touch /data/from-container)"
        echo "ro:$(check touch /ro/x) $(cat /ro/readme)"
        echo "alias:$(cat /data-alias/from-container >/dev/null 2>&1 && echo sees) $(check touch /data-alias/y)"
        echo "linked:$(check touch /linked/z)"
        echo "private:$(ls /private)"
        echo "file:$(cat /etc/iterion-file.txt) $(check sh -c 'echo x >> /etc/iterion-file.txt')"
        echo "cache:$(cat /cache/hit)"
        for d in /anonymous /named /nocopy /anonymous-untyped; do echo "$d:$(check touch $d/w)"; done
        echo "fast:$(awk '$2 == "/fast" {print $3}' /proc/mounts) $(check touch /fast/w)"
        echo "scratch:$(awk '$2 == "/scratch" {print $3}' /proc/mounts)"
    "#;
    let result = sh(run.as_ref(), script).await;
    assert_eq!(
        (result.exit_code, text(result.stdout)),
        (
            0,
            [
                "data:yes",
                "ro:no read only",
                "alias:sees no",
                "linked:yes",
                "private:from-container",
                "file:one file no",
                "cache:cached",
                "/anonymous:yes",
                "/named:yes",
                "/nocopy:yes",
                "/anonymous-untyped:yes",
                "fast:tmpfs yes",
                "scratch:tmpfs",
                "",
            ]
            .join("\n")
        ),
        "stderr: {:?}",
        result.stderr
    );
    // What the container wrote through the binds is on the host, at the canonical sources.
    assert_eq!(
        (
            host.ws.join("data/from-container").exists(),
            host.ws.join("sub/z").exists()
        ),
        (true, true)
    );
    run.cleanup().await.unwrap();
    let _ = client
        .remove_volume(
            &volume,
            Some(RemoveVolumeOptionsBuilder::new().force(true).build()),
        )
        .await;
    assert_eq!(labelled(&client, &test_id).await, Vec::<String>::new());
}
