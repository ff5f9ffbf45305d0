//! Attack tests for mount screening (SANDBOX.md §5.1–§5.4, our decision 2): hostile mounts are
//! refused with the rule that catches them, benign ones pass with their canonical source.

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use super::*;
use crate::error::Error;
use crate::rules::{MountRule, Sensitivity};
use crate::spec::{EngineMount, EngineMountKind, Spec};
use pretty_assertions::assert_eq;

/// A fake host in a tempdir: `<root>/home/user` is the home, `<root>/home/user/proj` the
/// workspace, with credential stores in the home and symlinks planted in the workspace.
struct Host {
    _dir: tempfile::TempDir,
    root: PathBuf,
    home: PathBuf,
    ws: PathBuf,
}

impl Host {
    fn new() -> Host {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let home = root.join("home/user");
        let ws = home.join("proj");
        for sub in [
            ".ssh",
            ".aws",
            ".kube",
            ".docker",
            ".gnupg",
            ".azure",
            ".config/gcloud",
            "proj/sub",
            "proj/a",
            "projects-cache",
        ] {
            std::fs::create_dir_all(home.join(sub)).unwrap();
        }
        for file in [
            ".ssh/id_ed25519",
            ".npmrc",
            ".pypirc",
            ".netrc",
            ".git-credentials",
        ] {
            std::fs::write(home.join(file), "secret").unwrap();
        }
        std::fs::create_dir_all(root.join("outside")).unwrap();
        std::fs::create_dir_all(root.join("xdg/podman")).unwrap();
        std::fs::write(root.join("xdg/podman/podman.sock"), "").unwrap();
        symlink("../.aws", ws.join("link-aws")).unwrap();
        symlink("/proc", ws.join("link-proc")).unwrap();
        symlink("sub", ws.join("link-sub")).unwrap();
        symlink(root.join("outside"), ws.join("link-out")).unwrap();
        symlink(home.join(".ssh"), root.join("outside/innocent")).unwrap();
        Host {
            _dir: dir,
            root,
            home,
            ws,
        }
    }

    fn ctx(&self) -> ScreenContext {
        ScreenContext::new(&self.ws, Some(&self.home)).unwrap()
    }
}

fn sensitive(path: impl Into<PathBuf>, why: Sensitivity) -> MountRule {
    MountRule::Sensitive {
        path: path.into(),
        why,
    }
}

fn system(path: &str, entry: &str) -> MountRule {
    sensitive(path, Sensitivity::SystemEntry(PathBuf::from(entry)))
}

fn credential(path: impl Into<PathBuf>, component: &str) -> MountRule {
    sensitive(path, Sensitivity::CredentialStore(component.to_owned()))
}

fn screen(
    mount: &str,
    ctx: &ScreenContext,
) -> std::result::Result<Option<PathBuf>, (String, MountRule)> {
    match validate_mount(mount, ctx) {
        Ok(screened) => Ok(screened.host_source),
        Err(Error::MountRefused { mount, rule }) => Err((mount, rule)),
        Err(other) => panic!("{mount}: not a MountRefused: {other}"),
    }
}

#[test]
fn hostile_mounts_are_refused_with_the_rule_that_catches_them() {
    let host = Host::new();
    let ctx = host.ctx();
    let (root, home, ws) = (host.root.display(), host.home.display(), host.ws.display());
    let rows: Vec<(String, MountRule)> = vec![
        // Container-engine sockets, typed and untyped, canonical and rootless.
        (
            "type=bind,source=/var/run/docker.sock,target=/var/run/docker.sock".into(),
            system("/var/run/docker.sock", "/var/run/docker.sock"),
        ),
        (
            "source=/var/run/docker.sock,target=/sock".into(),
            system("/var/run/docker.sock", "/var/run/docker.sock"),
        ),
        (
            "type=bind,source=/run/podman/podman.sock,target=/s".into(),
            system("/run/podman/podman.sock", "/run/podman/podman.sock"),
        ),
        (
            "source=/var/run/podman/podman.sock,target=/s".into(),
            system("/var/run/podman/podman.sock", "/var/run/podman/podman.sock"),
        ),
        (
            format!("source={root}/xdg/podman/podman.sock,target=/s"),
            sensitive(
                host.root.join("xdg/podman/podman.sock"),
                Sensitivity::EngineSocket("podman.sock".into()),
            ),
        ),
        (
            "source=/run/user/1000/docker.sock,target=/s".into(),
            system("/run/user/1000/docker.sock", "/run/user"),
        ),
        (
            "source=/run/containerd/containerd.sock,target=/s".into(),
            system("/run/containerd/containerd.sock", "/run/containerd"),
        ),
        // Kernel and system trees; the ancestor clause catches / /etc /var.
        ("source=/proc,target=/p".into(), system("/proc", "/proc")),
        (
            "type=bind,source=/proc/1/root,target=/p".into(),
            system("/proc/1/root", "/proc"),
        ),
        ("source=/sys,target=/s".into(), system("/sys", "/sys")),
        (
            "source=/sys/fs/cgroup,target=/c".into(),
            system("/sys/fs/cgroup", "/sys"),
        ),
        ("source=/dev,target=/d".into(), system("/dev", "/dev")),
        (
            "source=/,target=/host".into(),
            system("/", "/var/run/docker.sock"),
        ),
        (
            "source=/etc,target=/e".into(),
            system("/etc", "/etc/shadow"),
        ),
        (
            "source=/var,target=/v".into(),
            system("/var", "/var/run/docker.sock"),
        ),
        (
            "source=/etc/shadow,target=/s".into(),
            system("/etc/shadow", "/etc/shadow"),
        ),
        (
            "source=/etc/sudoers.d/admins,target=/s".into(),
            system("/etc/sudoers.d/admins", "/etc/sudoers.d"),
        ),
        ("source=/root,target=/r".into(), system("/root", "/root")),
        ("source=/boot,target=/b".into(), system("/boot", "/boot")),
        (
            "source=/var/lib/docker/volumes,target=/d".into(),
            system("/var/lib/docker/volumes", "/var/lib/docker"),
        ),
        (
            "source=/tmp/../etc/sudoers,target=/s".into(),
            system("/etc/sudoers", "/etc/sudoers"),
        ),
        // Credential stores in the home, typed and untyped.
        (
            format!("source={home}/.ssh,target=/k"),
            credential(host.home.join(".ssh"), ".ssh"),
        ),
        (
            format!("type=bind,source={home}/.ssh,target=/k"),
            credential(host.home.join(".ssh"), ".ssh"),
        ),
        (
            format!("type=bind,source={home}/.ssh/id_ed25519,target=/k,readonly"),
            credential(host.home.join(".ssh/id_ed25519"), ".ssh"),
        ),
        (
            format!("source={home}/.aws,target=/a"),
            credential(host.home.join(".aws"), ".aws"),
        ),
        (
            format!("source={home}/.kube,target=/k"),
            credential(host.home.join(".kube"), ".kube"),
        ),
        (
            format!("source={home}/.docker,target=/d"),
            credential(host.home.join(".docker"), ".docker"),
        ),
        (
            format!("source={home}/.gnupg,target=/g"),
            credential(host.home.join(".gnupg"), ".gnupg"),
        ),
        (
            format!("source={home}/.azure,target=/z"),
            credential(host.home.join(".azure"), ".azure"),
        ),
        (
            format!("source={home}/.config/gcloud,target=/g"),
            credential(host.home.join(".config/gcloud"), ".config/gcloud"),
        ),
        (
            format!("source={home}/.npmrc,target=/n"),
            credential(host.home.join(".npmrc"), ".npmrc"),
        ),
        (
            format!("source={home}/.pypirc,target=/n"),
            credential(host.home.join(".pypirc"), ".pypirc"),
        ),
        (
            format!("source={home}/.netrc,target=/n"),
            credential(host.home.join(".netrc"), ".netrc"),
        ),
        (
            format!("source={home}/.git-credentials,target=/n"),
            credential(host.home.join(".git-credentials"), ".git-credentials"),
        ),
        // The home itself, and its ancestors, however spelt.
        (
            format!("source={home},target=/h"),
            sensitive(host.home.clone(), Sensitivity::HomeOrAncestor),
        ),
        (
            format!("source={home}/..,target=/h"),
            sensitive(host.root.join("home"), Sensitivity::HomeOrAncestor),
        ),
        (
            "source=./a/../../..,target=/x".into(),
            sensitive(host.root.join("home"), Sensitivity::HomeOrAncestor),
        ),
        // Symlinks are resolved before judging.
        (
            "source=link-aws,target=/x".into(),
            credential(host.home.join(".aws"), ".aws"),
        ),
        (
            format!("type=bind,source={ws}/link-proc,target=/x"),
            system("/proc", "/proc"),
        ),
        (
            format!("source={root}/outside/innocent,target=/x"),
            credential(host.home.join(".ssh"), ".ssh"),
        ),
        // Relative sources stay inside the workspace.
        (
            "source=../projects-cache,target=/x".into(),
            MountRule::RelativeSourceEscapesWorkspace(host.home.join("projects-cache")),
        ),
        (
            "source=link-out,target=/x".into(),
            MountRule::RelativeSourceEscapesWorkspace(host.root.join("outside")),
        ),
        // Control characters and a leading dash, anywhere.
        (
            "type=bind,source=/tmp\n,target=/x".into(),
            MountRule::ControlCharacter,
        ),
        (
            format!("source={ws}/sub,target=/x\r"),
            MountRule::ControlCharacter,
        ),
        (
            format!("source={ws}/sub\0,target=/x"),
            MountRule::ControlCharacter,
        ),
        (
            format!("source={ws}/sub,target=/x\u{1b}[2J"),
            MountRule::ControlCharacter,
        ),
        ("-v /:/host".into(), MountRule::LeadingDash),
        ("--privileged".into(), MountRule::LeadingDash),
        (" -source=/,target=/x".into(), MountRule::LeadingDash),
        (
            "type=bind,source=-rf,target=/x".into(),
            MountRule::LeadingDash,
        ),
        // A volume driver can turn a volume into a host bind.
        (
            "type=volume,source=v,target=/x,volume-opt=device=/etc".into(),
            MountRule::ForbiddenKey("volume-opt".into()),
        ),
        (
            "type=volume,source=v,target=/x,volume-driver=local".into(),
            MountRule::ForbiddenKey("volume-driver".into()),
        ),
        // Targets: reserved, root, relative, unclean.
        (
            format!("source={ws}/sub,target=/run/iterion/bin"),
            MountRule::TargetReserved,
        ),
        (
            "type=tmpfs,target=/run/iterion".into(),
            MountRule::TargetReserved,
        ),
        (format!("source={ws}/sub,target=/"), MountRule::TargetIsRoot),
        (
            format!("source={ws}/sub,target=relative"),
            MountRule::TargetNotAbsoluteClean("relative".into()),
        ),
        (
            format!("source={ws}/sub,target=/a/../run/iterion/bin"),
            MountRule::TargetNotAbsoluteClean("/a/../run/iterion/bin".into()),
        ),
        (format!("source={ws}/sub"), MountRule::MissingTarget),
        // Grammar.
        (String::new(), MountRule::Empty),
        (
            "type=npipe,source=x,target=/x".into(),
            MountRule::UnsupportedType("npipe".into()),
        ),
        (
            format!("type=bind,source={ws}/sub,target=/x,bind-propagation=shared"),
            MountRule::InvalidValue {
                key: "bind-propagation".into(),
                want: "private or rprivate",
            },
        ),
        ("type=bind,target=/x".into(), MountRule::BindWithoutSource),
        (
            "src=/a,source=/b,target=/c".into(),
            MountRule::DuplicateKey("source".into()),
        ),
        (
            "type=volume,source=/etc,target=/x".into(),
            MountRule::InvalidVolumeName,
        ),
        (
            "TYPE=bind,source=/etc,target=/x".into(),
            MountRule::UnknownKey("TYPE".into()),
        ),
        (
            "type=bind,source=/etc,target=/x,,".into(),
            MountRule::EmptyItem,
        ),
        (
            format!("source={ws}/missing,target=/x"),
            MountRule::SourceMissing(host.ws.join("missing")),
        ),
    ];
    assert!(
        rows.len() >= 30,
        "the table must stay at least 30 rows long"
    );
    let got: Vec<_> = rows.iter().map(|(mount, _)| screen(mount, &ctx)).collect();
    let want: Vec<_> = rows
        .iter()
        .map(|(mount, rule)| Err((mount.clone(), rule.clone())))
        .collect();
    assert_eq!(got, want);
}

#[test]
fn benign_mounts_pass_and_bind_their_canonical_source() {
    let host = Host::new();
    let ctx = host.ctx();
    let (root, ws) = (host.root.display(), host.ws.display());
    let sub = Some(host.ws.join("sub"));
    let rows: Vec<(String, Option<PathBuf>)> = vec![
        (
            format!("type=bind,source={ws}/sub,target=/data"),
            sub.clone(),
        ),
        ("source=./sub,target=/data".into(), sub.clone()),
        ("source=sub,target=/data,readonly".into(), sub.clone()),
        (format!("source={ws}/link-sub,target=/l"), sub.clone()),
        ("source=a/../sub,target=/l".into(), sub.clone()),
        (
            format!("type=bind,source={ws}/sub,target=/d,consistency=cached"),
            sub.clone(),
        ),
        (
            format!("type=bind, source={ws},target=/workspace2,bind-propagation=rprivate"),
            Some(host.ws.clone()),
        ),
        (
            format!("type=bind,source={root}/outside,target=/x,ro=true"),
            Some(host.root.join("outside")),
        ),
        ("type=volume,source=cache,target=/cache".into(), None),
        (
            "type=volume,src=my_vol-1.0,dst=/v,volume-nocopy".into(),
            None,
        ),
        ("type=volume,target=/anon".into(), None),
        ("target=/anon2".into(), None),
        (
            "type=tmpfs,target=/scratch,tmpfs-size=64m,tmpfs-mode=1777".into(),
            None,
        ),
        (
            "type=bind,source=/usr/share,target=/host-share,ro".into(),
            Some(std::fs::canonicalize("/usr/share").unwrap()),
        ),
    ];
    assert!(
        rows.len() >= 10,
        "the table must stay at least 10 rows long"
    );
    let got: Vec<_> = rows
        .iter()
        .map(|(mount, _)| (mount.clone(), screen(mount, &ctx)))
        .collect();
    let want: Vec<_> = rows
        .iter()
        .map(|(mount, source)| (mount.clone(), Ok(source.clone())))
        .collect();
    assert_eq!(got, want);
}

#[test]
fn the_workspace_may_not_be_root_the_home_its_ancestors_or_sensitive() {
    let host = Host::new();
    let ctx = host.ctx();
    std::fs::create_dir_all(host.home.join(".ssh/proj")).unwrap();
    let rows: Vec<(PathBuf, Option<MountRule>)> = vec![
        (host.ws.clone(), None),
        (PathBuf::from("/"), Some(MountRule::RootDirectory)),
        (
            host.home.clone(),
            Some(sensitive(host.home.clone(), Sensitivity::HomeOrAncestor)),
        ),
        (
            host.root.join("home"),
            Some(sensitive(
                host.root.join("home"),
                Sensitivity::HomeOrAncestor,
            )),
        ),
        (PathBuf::from("/proc"), Some(system("/proc", "/proc"))),
        (PathBuf::from("/etc"), Some(system("/etc", "/etc/shadow"))),
        (
            host.home.join(".ssh/proj"),
            Some(credential(host.home.join(".ssh/proj"), ".ssh")),
        ),
    ];
    let got: Vec<_> = rows
        .iter()
        .map(|(path, _)| {
            let rule = match ctx.validate_workspace(path) {
                Ok(canonical) => {
                    assert_eq!(&canonical, path);
                    None
                }
                Err(Error::WorkspaceRefused { rule, .. }) => Some(rule),
                Err(other) => panic!("{other}"),
            };
            (path.clone(), rule)
        })
        .collect();
    assert_eq!(got, rows);
    let error = ctx.validate_workspace(Path::new("/")).err().unwrap();
    assert_eq!(
        (error.code(), error.to_string()),
        (
            "SANDBOX_SETUP_FAILED",
            "workspace / may not be bound: it is the filesystem root".to_owned()
        )
    );
}

#[test]
fn a_project_below_root_s_home_is_accepted_when_the_home_is_root() {
    let host = Host::new();
    let ctx = ScreenContext::new(&host.ws, Some(Path::new("/root"))).unwrap();
    let rule = |path: &str| ctx.workspace_rule(Path::new(path));
    assert_eq!(
        [rule("/root/proj"), rule("/root"), rule("/root/.ssh/proj")],
        [
            None,
            Some(system("/root", "/root")),
            Some(credential("/root/.ssh/proj", ".ssh")),
        ]
    );
    let not_root = host.ctx();
    assert_eq!(
        not_root.workspace_rule(Path::new("/root/proj")),
        Some(system("/root/proj", "/root"))
    );
}

#[test]
fn build_inputs_must_resolve_inside_the_workspace() {
    let host = Host::new();
    std::fs::write(host.ws.join("sub/Dockerfile"), "FROM scratch").unwrap();
    std::fs::write(host.root.join("outside/Dockerfile"), "FROM scratch").unwrap();
    let check = |target: &str| {
        validate_contains_workspace(&host.ws, Path::new(target), "build context")
            .map_err(|error| error.to_string())
    };
    assert_eq!(
        [
            check("sub/Dockerfile"),
            check("."),
            check("link-sub"),
            check("../../../outside/Dockerfile"),
            check("link-out/Dockerfile"),
        ],
        [
            Ok(host.ws.join("sub/Dockerfile")),
            Ok(host.ws.clone()),
            Ok(host.ws.join("sub")),
            Err(format!(
                "build context {}/outside/Dockerfile escapes the workspace",
                host.root.display()
            )),
            Err(format!(
                "build context {}/outside/Dockerfile escapes the workspace",
                host.root.display()
            )),
        ]
    );
    let missing = validate_contains_workspace(&host.ws, Path::new("nope"), "dockerfile")
        .err()
        .unwrap();
    assert!(
        matches!(
            missing,
            Error::Io {
                operation: "canonicalize",
                ..
            }
        ),
        "{missing}"
    );
}

#[test]
fn a_spec_is_screened_whole_and_engine_mounts_skip_only_the_sensitive_list() {
    let host = Host::new();
    let ctx = host.ctx();
    let good = Spec {
        image: Some("alpine:3".to_owned()),
        user: Some("1000:1000".to_owned()),
        workspace_folder: Some("/workspace".to_owned()),
        tmpfs: vec!["/tmp:size=64m".to_owned()],
        mounts: vec![
            "source=sub,target=/data".to_owned(),
            "type=volume,target=/v".to_owned(),
        ],
        engine_mounts: vec![
            EngineMount {
                kind: EngineMountKind::Bind,
                source: "/root/.iterion".to_owned(),
                target: "/root/.iterion".to_owned(),
                read_only: false,
                purpose: "host-state".to_owned(),
            },
            EngineMount {
                kind: EngineMountKind::Bind,
                source: "/usr/local/bin/iterion".to_owned(),
                target: "/run/iterion/bin/iterion".to_owned(),
                read_only: true,
                purpose: "engine-binary".to_owned(),
            },
        ],
        env: [("A".to_owned(), "1".to_owned())].into(),
        ..Spec::default()
    };
    let screened = validate_spec_mounts(&good, &ctx).unwrap();
    assert_eq!(
        screened
            .iter()
            .map(|m| m.host_source.clone())
            .collect::<Vec<_>>(),
        vec![Some(host.ws.join("sub")), None]
    );

    let refusal = |spec: Spec| validate_spec_mounts(&spec, &ctx).err().unwrap().to_string();
    let engine = |source: &str, target: &str| EngineMount {
        kind: EngineMountKind::Bind,
        source: source.to_owned(),
        target: target.to_owned(),
        read_only: true,
        purpose: "test".to_owned(),
    };
    assert_eq!(
        [
            refusal(Spec { image: Some("--privileged".to_owned()), ..good.clone() }),
            refusal(Spec { user: Some("0\n".to_owned()), ..good.clone() }),
            refusal(Spec { tmpfs: vec!["/run/iterion/x:size=1m".to_owned()], ..good.clone() }),
            refusal(Spec { mounts: vec!["source=/proc,target=/p".to_owned()], ..good.clone() }),
            refusal(Spec { engine_mounts: vec![engine("relative", "/x")], ..good.clone() }),
            refusal(Spec { engine_mounts: vec![engine("/x", "/")], ..good.clone() }),
            refusal(Spec { env: [("K".to_owned(), "v\r\n".to_owned())].into(), ..good.clone() }),
        ],
        [
            "sandbox: image \"--privileged\" refused: begins with -".to_owned(),
            "sandbox: user \"0\\n\" refused: contains a control character".to_owned(),
            "sandbox: mount refused: /run/iterion/x:size=1m: target lies under /run/iterion, which the engine reserves".to_owned(),
            "sandbox: mount refused: source=/proc,target=/p: /proc is sensitive: it is, lies under or contains the sensitive host path /proc".to_owned(),
            "sandbox: mount refused: type=bind,source=relative,target=/x: invalid value for \"source\": want an absolute host path".to_owned(),
            "sandbox: mount refused: type=bind,source=/x,target=/: target may not be /".to_owned(),
            "sandbox: env \"K\" refused: value contains a newline, carriage return or NUL".to_owned(),
        ]
    );
}

#[test]
fn the_masked_paths_hide_homes_secrets_and_the_store_but_not_what_a_read_only_root_needs() {
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let store = home.path().join(".iterion");
    std::fs::create_dir(&store).unwrap();
    let scope = MountScope {
        store: vec![store.clone()],
        ..MountScope::default()
    };
    let ctx = ScreenContext::new(ws.path(), Some(home.path()))
        .unwrap()
        .for_run(crate::mode::Trust::Trusted, &scope);
    let masked = ctx.masked_paths();
    let canonical = |p: &std::path::Path| p.canonicalize().unwrap();
    assert!(masked.contains(&canonical(home.path())), "{masked:?}");
    assert!(masked.contains(&canonical(&store)), "{masked:?}");
    for present in ["/etc/shadow", "/root"] {
        if std::path::Path::new(present).exists() {
            assert!(
                masked.contains(&canonical(std::path::Path::new(present))),
                "{present}"
            );
        }
    }
    for shown in ["/etc/passwd", "/etc/group", "/proc", "/dev", "/sys"] {
        assert!(
            !masked.iter().any(|m| m == std::path::Path::new(shown)),
            "{shown}"
        );
    }
    assert!(!masked.contains(&canonical(ws.path())));
}
