//! The `runArgs` screen (SANDBOX.md §7.2): every spelling of a host privilege is refused with the
//! entry named; everything else is ignored and listed.

use std::path::PathBuf;

use pretty_assertions::assert_eq;

use crate::mounts::ScreenContext;
use crate::rules::{MountRule, RunArgRule, Sensitivity};

use super::corpus_tests::Repo;
use super::run_args::screen_run_args;

fn screen(repo: &Repo, args: &[&str]) -> Result<Vec<String>, (String, RunArgRule)> {
    let ctx = ScreenContext::new(&repo.root, Some(&repo.home)).unwrap();
    let args: Vec<String> = args.iter().map(|arg| (*arg).to_owned()).collect();
    screen_run_args(&args, &ctx)
}

#[test]
fn privilege_flags_are_refused_in_every_form() {
    let repo = Repo::new();
    let cases: Vec<(Vec<&str>, &str, &'static str)> = vec![
        (vec!["--privileged"], "--privileged", "--privileged"),
        (
            vec!["--privileged=true"],
            "--privileged=true",
            "--privileged",
        ),
        (
            vec!["--privileged=false"],
            "--privileged=false",
            "--privileged",
        ),
        (vec!["--cap-add=ALL"], "--cap-add=ALL", "--cap-add"),
        (
            vec!["--cap-add", "NET_ADMIN"],
            "--cap-add NET_ADMIN",
            "--cap-add",
        ),
        (
            vec!["--security-opt", "seccomp=unconfined"],
            "--security-opt seccomp=unconfined",
            "--security-opt",
        ),
        (
            vec!["--security-opt=apparmor=unconfined"],
            "--security-opt=apparmor=unconfined",
            "--security-opt",
        ),
        (vec!["--device=/dev/kvm"], "--device=/dev/kvm", "--device"),
        (
            vec!["--device", "/dev/fuse"],
            "--device /dev/fuse",
            "--device",
        ),
        (vec!["--cap-add"], "--cap-add", "--cap-add"),
    ];
    for (args, written, flag) in cases {
        assert_eq!(
            screen(&repo, &args),
            Err((written.to_owned(), RunArgRule::HostPrivilege(flag))),
            "{args:?}"
        );
    }
}

#[test]
fn host_namespaces_are_refused_in_every_form() {
    let repo = Repo::new();
    let cases: Vec<(Vec<&str>, &str, RunArgRule)> = vec![
        (
            vec!["--pid=host"],
            "--pid=host",
            RunArgRule::HostPidNamespace,
        ),
        (
            vec!["--pid", "host"],
            "--pid host",
            RunArgRule::HostPidNamespace,
        ),
        (
            vec!["--network=host"],
            "--network=host",
            RunArgRule::HostNetwork,
        ),
        (
            vec!["--network", "host"],
            "--network host",
            RunArgRule::HostNetwork,
        ),
        (vec!["--net=host"], "--net=host", RunArgRule::HostNetwork),
        (vec!["--net", "HOST"], "--net HOST", RunArgRule::HostNetwork),
    ];
    for (args, written, rule) in cases {
        assert_eq!(
            screen(&repo, &args),
            Err((written.to_owned(), rule)),
            "{args:?}"
        );
    }
}

#[test]
fn volumes_to_sensitive_sources_are_refused_in_every_form() {
    let repo = Repo::new();
    let sock = || {
        RunArgRule::Mount(MountRule::Sensitive {
            path: PathBuf::from("/var/run/docker.sock"),
            why: Sensitivity::SystemEntry(PathBuf::from("/var/run/docker.sock")),
        })
    };
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec!["-v", "/var/run/docker.sock:/s"],
            "-v /var/run/docker.sock:/s",
        ),
        (
            vec!["-v/var/run/docker.sock:/s"],
            "-v/var/run/docker.sock:/s",
        ),
        (
            vec!["-v=/var/run/docker.sock:/s"],
            "-v=/var/run/docker.sock:/s",
        ),
        (
            vec!["-itv", "/var/run/docker.sock:/s"],
            "-itv /var/run/docker.sock:/s",
        ),
        (
            vec!["--volume=/var/run/docker.sock:/s:ro"],
            "--volume=/var/run/docker.sock:/s:ro",
        ),
        (
            vec!["--volume", "/var/run/docker.sock:/s"],
            "--volume /var/run/docker.sock:/s",
        ),
        (
            vec!["--mount", "type=bind,source=/var/run/docker.sock,target=/s"],
            "--mount type=bind,source=/var/run/docker.sock,target=/s",
        ),
        (
            vec!["--mount=src=/var/run/docker.sock,dst=/s"],
            "--mount=src=/var/run/docker.sock,dst=/s",
        ),
    ];
    for (args, written) in cases {
        assert_eq!(
            screen(&repo, &args),
            Err((written.to_owned(), sock())),
            "{args:?}"
        );
    }
    let ssh = RunArgRule::Mount(MountRule::Sensitive {
        path: repo.home.join(".ssh"),
        why: Sensitivity::CredentialStore(".ssh".to_owned()),
    });
    assert_eq!(
        screen(&repo, &["-v", "~/.ssh:/root/.ssh"]),
        Err(("-v ~/.ssh:/root/.ssh".to_owned(), ssh))
    );
    let home = RunArgRule::Mount(MountRule::Sensitive {
        path: repo.home.clone(),
        why: Sensitivity::HomeOrAncestor,
    });
    assert_eq!(
        screen(&repo, &["-v", "~:/h"]),
        Err(("-v ~:/h".to_owned(), home))
    );
}

#[test]
fn a_relative_volume_through_a_symlink_to_the_home_aws_dir_is_refused() {
    let repo = Repo::new();
    std::fs::create_dir(repo.home.join(".aws")).unwrap();
    std::os::unix::fs::symlink(repo.home.join(".aws"), repo.root.join("creds")).unwrap();
    let rule = RunArgRule::Mount(MountRule::Sensitive {
        path: repo.home.join(".aws"),
        why: Sensitivity::CredentialStore(".aws".to_owned()),
    });
    assert_eq!(
        screen(&repo, &["-v", "./creds:/c"]),
        Err(("-v ./creds:/c".to_owned(), rule))
    );
}

#[test]
fn everything_else_is_ignored_and_listed_in_order() {
    let repo = Repo::new();
    let args = [
        "--init",
        "--network=bridge",
        "--net",
        "none",
        "--pid=container:x",
        "-v",
        "named:/cache",
        "--mount",
        "type=volume,source=v,target=/v",
        "-e",
        "v=1",
        "--label=privileged",
        "-ev",
    ];
    assert_eq!(
        screen(&repo, &args),
        Ok(args.iter().map(|arg| (*arg).to_owned()).collect())
    );
}

#[test]
fn refusal_messages_name_the_flag() {
    let got: Vec<String> = [
        RunArgRule::HostPrivilege("--cap-add"),
        RunArgRule::HostPidNamespace,
        RunArgRule::HostNetwork,
    ]
    .iter()
    .map(ToString::to_string)
    .collect();
    assert_eq!(
        got,
        vec![
            "--cap-add grants host privileges",
            "--pid=host shares the host's processes",
            "host networking bypasses the egress proxy",
        ]
    );
}
