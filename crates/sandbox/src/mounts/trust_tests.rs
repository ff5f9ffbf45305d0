//! Attack tests for issue 15 item 3: the one author-mount decision ([`ScreenContext::admit`]).
//! An untrusted run gets an allow-list (no host path, no named volume, in any spelling); for
//! every run the store, the runtime roots and iterion's own volumes are out of reach; trusted
//! screening also covers home contents, start-up files and writable system trees.

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use pretty_assertions::assert_eq;

use super::*;

use crate::devcontainer::run_args::screen_run_args;
use crate::error::Error;
use crate::mode::Trust;
use crate::rules::{MountRule, Protected, RunArgRule, Sensitivity};

/// `<root>/home/user` the home, `<root>/home/user/proj` the workspace, `<root>/srv/store` the store,
/// `<root>/rt` the runtime root, `<root>/outside` a harmless dir.
struct Host {
    _dir: tempfile::TempDir,
    root: PathBuf,
    home: PathBuf,
    ws: PathBuf,
    store: PathBuf,
    runtime: PathBuf,
}

impl Host {
    fn new() -> Host {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let home = root.join("home/user");
        let ws = home.join("proj");
        let store = root.join("srv/store");
        let runtime = root.join("rt");
        for sub in ["proj/sub", "projects-cache"] {
            std::fs::create_dir_all(home.join(sub)).unwrap();
        }
        for sub in ["runs/r1/files", "scratch/r1", "worktrees/r2/cache"] {
            std::fs::create_dir_all(store.join(sub)).unwrap();
        }
        std::fs::write(store.join("iterion.db"), "db").unwrap();
        std::fs::write(home.join(".bashrc"), "rc").unwrap();
        std::fs::create_dir_all(runtime.join("other-run/secrets")).unwrap();
        std::fs::create_dir_all(root.join("outside")).unwrap();
        std::fs::create_dir_all(root.join("bin")).unwrap();
        std::fs::write(root.join("bin/iterion"), "elf").unwrap();
        symlink(&store, ws.join("link-store")).unwrap();
        symlink(runtime.join("other-run"), ws.join("link-run")).unwrap();
        Host {
            _dir: dir,
            root,
            home,
            ws,
            store,
            runtime,
        }
    }

    fn scope(&self) -> MountScope {
        MountScope {
            store: vec![self.store.clone()],
            runtime_roots: vec![self.runtime.clone()],
            engine_binaries: vec![self.root.join("bin/iterion")],
            sandbox_writable: Vec::new(),
            engine_copy: None,
        }
    }

    fn ctx(&self, trust: Trust) -> ScreenContext {
        self.ctx_in(&self.ws, trust)
    }

    fn ctx_in(&self, ws: &Path, trust: Trust) -> ScreenContext {
        ScreenContext::new(ws, Some(&self.home))
            .unwrap()
            .for_run(trust, &self.scope())
    }
}

fn screen(mount: &str, ctx: &ScreenContext) -> Result<Option<PathBuf>, MountRule> {
    match validate_mount(mount, ctx) {
        Ok(screened) => Ok(screened.host_source),
        Err(Error::MountRefused { rule, .. }) => Err(rule),
        Err(other) => panic!("{mount}: not a MountRefused: {other}"),
    }
}

#[test]
fn untrusted_runs_may_not_name_a_host_path_or_a_named_volume_in_any_spelling() {
    let host = Host::new();
    let ctx = host.ctx(Trust::Untrusted);
    let ws = host.ws.display();
    let outside = host.root.join("outside");
    let outside = outside.display();
    let binds = [
        format!("type=bind,source={ws}/sub,target=/x"),
        format!("source={ws}/sub,target=/x"),
        format!("src={ws}/sub,dst=/x,readonly"),
        "source=./sub,target=/x".to_owned(),
        "source=sub,target=/x".to_owned(),
        "source=.,target=/x".to_owned(),
        "type=bind,source=sub,target=/x,ro".to_owned(),
        format!("type=bind,source={outside},destination=/x"),
        "source=/nonexistent/anything,target=/x".to_owned(),
        "type=bind,source=/etc/cron.d,target=/x".to_owned(),
        "type=bind,source=/usr/share,target=/x,ro".to_owned(),
    ];
    for mount in &binds {
        assert!(
            matches!(screen(mount, &ctx), Err(MountRule::UntrustedHostPath(_))),
            "{mount}: {:?}",
            screen(mount, &ctx)
        );
    }
    for mount in [
        "type=volume,source=cache,target=/x",
        "type=volume,src=shared_data,dst=/x,volume-nocopy",
        "type=volume,source=nix,target=/nix",
    ] {
        assert!(
            matches!(screen(mount, &ctx), Err(MountRule::UntrustedNamedVolume(_))),
            "{mount}: {:?}",
            screen(mount, &ctx)
        );
    }
    for mount in [
        "type=tmpfs,target=/t,tmpfs-size=1m",
        "type=volume,target=/anon",
        "target=/anon2",
    ] {
        assert_eq!(screen(mount, &ctx), Ok(None), "{mount}");
    }
    // The same decision on the spelling a devcontainer's runArgs uses.
    let refused = |args: &[&str]| {
        let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
        match screen_run_args(&args, &ctx) {
            Err((_, RunArgRule::Mount(rule))) => Some(rule),
            Err((_, other)) => panic!("{args:?}: {other}"),
            Ok(_) => None,
        }
    };
    let outside = host.root.join("outside").display().to_string();
    for args in [
        vec!["-v", "./sub:/x"],
        vec!["-v./sub:/x"],
        vec!["-v=./sub:/x"],
        vec!["-itv", "./sub:/x"],
        vec!["--volume", "sub/:/x:ro"],
        vec!["--volume=~:/h"],
        vec!["--mount", "type=bind,src=.,dst=/x"],
        vec!["--mount=source=./sub,target=/x"],
    ] {
        assert!(
            matches!(refused(&args), Some(MountRule::UntrustedHostPath(_))),
            "{args:?}: {:?}",
            refused(&args)
        );
    }
    let volume_flag = format!("--volume={outside}:/x");
    assert!(matches!(
        refused(&[volume_flag.as_str()]),
        Some(MountRule::UntrustedHostPath(_))
    ));
    for args in [
        vec!["-v", "cache:/x"],
        vec!["--volume=cache:/x:rw"],
        vec!["--mount", "type=volume,source=cache,target=/x"],
        vec!["--mount", "source=cache,type=volume,target=/x"],
    ] {
        assert!(
            matches!(refused(&args), Some(MountRule::UntrustedNamedVolume(_))),
            "{args:?}: {:?}",
            refused(&args)
        );
    }
    assert_eq!(
        refused(&["--volumes-from", "iterion-other"]),
        Some(MountRule::VolumesFrom)
    );
    assert_eq!(refused(&["-v", "/anon"]), None);
    assert_eq!(refused(&["--mount", "type=tmpfs,target=/t"]), None);
}

#[test]
fn the_store_the_runtime_roots_other_runs_and_the_engine_binary_are_never_mountable() {
    let host = Host::new();
    for trust in [Trust::Trusted, Trust::Untrusted] {
        let ctx = host.ctx(trust);
        let store = host.store.display();
        let rt = host.runtime.display();
        for mount in [
            format!("source={store},target=/x,ro"),
            format!("source={store}/iterion.db,target=/x,ro"),
            format!("source={store}/runs,target=/x,ro"),
            format!("source={store}/runs/r1/files,target=/x"),
            format!("source={store}/scratch/r1,target=/x"),
            format!("source={store}/worktrees/r2/cache,target=/x"),
            format!("source={rt},target=/x,ro"),
            format!("source={rt}/other-run/secrets,target=/x,ro"),
            "source=/tmp/iterion-0,target=/x,ro".to_owned(),
            "source=/tmp/iterion-1000/run/proxy.sock,target=/x,ro".to_owned(),
            "source=link-store,target=/x,ro".to_owned(),
            format!("source={}/bin,target=/x", host.root.display()),
            format!("source={}/bin/iterion,target=/x", host.root.display()),
            "source=./link-run/secrets,target=/x,ro".to_owned(),
        ] {
            let got = screen(&mount, &ctx);
            let ok = match trust {
                Trust::Untrusted => matches!(got, Err(MountRule::UntrustedHostPath(_))),
                Trust::Trusted => matches!(got, Err(MountRule::Protected { .. })),
            };
            assert!(ok, "{trust:?} {mount}: {got:?}");
        }
    }
    // The ancestor of the store is refused too (it contains it), and so is the temp dir (it
    // holds every uid's runtime root).
    let ctx = host.ctx(Trust::Trusted);
    assert!(screen("source=/tmp,target=/x,ro", &ctx).is_err());
    assert!(matches!(
        screen(
            &format!("source={}/srv,target=/x,ro", host.root.display()),
            &ctx
        ),
        Err(MountRule::Protected {
            what: Protected::Store,
            ..
        })
    ));
    // A worktree run's workspace lies in the store: its own tree stays mountable, the rest of
    // the store does not.
    let worktree = host.store.join("worktrees/r2");
    let ctx = host.ctx_in(&worktree, Trust::Trusted);
    assert_eq!(
        screen("source=./cache,target=/c", &ctx),
        Ok(Some(worktree.join("cache")))
    );
    assert!(matches!(
        screen(
            &format!("source={}/runs,target=/x,ro", host.store.display()),
            &ctx
        ),
        Err(MountRule::Protected { .. })
    ));
}

#[test]
fn iterion_volumes_are_never_mountable_by_a_workflow() {
    let host = Host::new();
    for trust in [Trust::Trusted, Trust::Untrusted] {
        let ctx = host.ctx(trust);
        for mount in [
            "type=volume,source=iterion-nix-0123456789ab,target=/nix",
            "type=volume,source=ITERION-nix-0123456789ab,target=/nix",
            "type=volume,source=Iterion_cache,target=/c",
            "type=volume,source=iterion,target=/c",
        ] {
            assert!(
                matches!(screen(mount, &ctx), Err(MountRule::ReservedVolume(_))),
                "{trust:?} {mount}: {:?}",
                screen(mount, &ctx)
            );
        }
        let args: Vec<String> = ["-v", "iterion-nix-0123456789ab:/nix"]
            .iter()
            .map(|a| (*a).to_owned())
            .collect();
        assert!(matches!(
            screen_run_args(&args, &ctx),
            Err((_, RunArgRule::Mount(MountRule::ReservedVolume(_))))
        ));
    }
    assert_eq!(
        screen(
            "type=volume,source=cache,target=/c",
            &host.ctx(Trust::Trusted)
        ),
        Ok(None)
    );
}

#[test]
fn trusted_screening_refuses_home_contents_startup_files_and_writable_system_trees() {
    let host = Host::new();
    let ctx = host.ctx(Trust::Trusted);
    let home = host.home.display();
    let home_contents = Sensitivity::HomeContents(PathBuf::new());
    let startup = Sensitivity::ShellStartup(String::new());
    let system = Sensitivity::SystemEntry(PathBuf::new());
    let writable = Sensitivity::WritableSystemTree(PathBuf::new());
    let cases: Vec<(String, &Sensitivity)> = vec![
        (
            format!("source={home}/projects-cache,target=/x"),
            &home_contents,
        ),
        (
            format!("source={home}/.bashrc,target=/x,ro"),
            &home_contents,
        ),
        (
            "source=/home/someone/.profile,target=/x,ro".to_owned(),
            &home_contents,
        ),
        ("source=/opt/app/.zshrc,target=/x,ro".to_owned(), &startup),
        ("source=/etc/cron.d,target=/x,ro".to_owned(), &system),
        ("source=/etc/crontab,target=/x".to_owned(), &system),
        (
            "source=/var/spool/cron/crontabs,target=/x".to_owned(),
            &system,
        ),
        ("source=/usr/local/bin,target=/x".to_owned(), &writable),
        ("source=/usr/share,target=/x".to_owned(), &writable),
    ];
    for (mount, want) in &cases {
        let got = screen(mount, &ctx);
        let ok = matches!(&got, Err(MountRule::Sensitive { why, .. })
            if std::mem::discriminant(why) == std::mem::discriminant(*want));
        assert!(ok, "{mount}: {got:?}");
    }
    // Read-only system trees and the workspace's own tree stay mountable.
    assert_eq!(
        screen("source=/usr/share,target=/x,ro", &ctx),
        Ok(Some(std::fs::canonicalize("/usr/share").unwrap()))
    );
    assert_eq!(
        screen("source=./sub,target=/x", &ctx),
        Ok(Some(host.ws.join("sub")))
    );
    // The operator's rc file through runArgs, `~` or the expanded home alike.
    for args in [
        vec!["-v".to_owned(), "~/.bashrc:/x".to_owned()],
        vec!["-v".to_owned(), format!("{home}/.bashrc:/x")],
    ] {
        assert!(
            matches!(
                screen_run_args(&args, &ctx),
                Err((_, RunArgRule::Mount(MountRule::Sensitive { .. })))
            ),
            "{args:?}"
        );
    }
}

#[test]
fn a_workspace_may_not_contain_the_store_or_a_runtime_root() {
    let host = Host::new();
    let ctx = |ws: &Path| {
        ScreenContext::new(ws, Some(Path::new("/nonexistent-home")))
            .unwrap()
            .for_run(Trust::Trusted, &host.scope())
    };
    // The store's parent, the runtime root's parent, the temp dir itself.
    for ws in [
        host.root.join("srv"),
        host.root.clone(),
        PathBuf::from("/tmp"),
    ] {
        let refused = ctx(&ws).validate_workspace(&ws).unwrap_err();
        assert!(
            matches!(
                refused,
                Error::WorkspaceRefused {
                    rule: MountRule::Protected { .. },
                    ..
                }
            ),
            "{}: {refused}",
            ws.display()
        );
    }
    // Inside a runtime root.
    let inside = host.runtime.join("other-run");
    assert!(ctx(&inside).validate_workspace(&inside).is_err());
    // A worktree inside the store, and an ordinary project, are fine.
    let worktree = host.store.join("worktrees/r2");
    assert_eq!(
        ctx(&worktree).validate_workspace(&worktree).unwrap(),
        worktree
    );
    assert_eq!(ctx(&host.ws).validate_workspace(&host.ws).unwrap(), host.ws);
}

#[test]
fn an_untrusted_runs_own_copy_is_its_workspace_and_nothing_else_in_the_runtime_root_is() {
    let host = Host::new();
    let copy = host.runtime.join("copies/r1/workspace");
    let other = host.runtime.join("copies/r2/workspace");
    std::fs::create_dir_all(&copy).unwrap();
    std::fs::create_dir_all(&other).unwrap();
    let scope = MountScope {
        engine_copy: Some(copy.clone()),
        ..host.scope()
    };
    let ctx = ScreenContext::new(&copy, Some(&host.home))
        .unwrap()
        .for_run(Trust::Untrusted, &scope);
    assert!(ctx.validate_workspace(&copy).is_ok());
    assert!(ctx.validate_workspace(&other).is_err());
    assert!(ctx.validate_workspace(&host.runtime).is_err());
}
