use super::*;
use pretty_assertions::assert_eq;

#[test]
fn the_untrusted_run_of_a_root_engine_holds_the_copy_owner_not_root() {
    let spec = Spec {
        user: Some("65532:65532".to_owned()),
        ..Spec::default()
    };
    assert_eq!(
        [
            ids(&spec, Trust::Untrusted, (0, 0)).unwrap(),
            ids(&spec, Trust::Trusted, (0, 0)).unwrap(),
            ids(&Spec::default(), Trust::Trusted, (1000, 1000)).unwrap(),
        ],
        [
            Ids {
                inside_uid: 65532,
                inside_gid: 65532,
                host_uid: 65532,
                host_gid: 65532
            },
            Ids {
                inside_uid: 65532,
                inside_gid: 65532,
                host_uid: 0,
                host_gid: 0
            },
            Ids {
                inside_uid: 0,
                inside_gid: 0,
                host_uid: 1000,
                host_gid: 1000
            },
        ]
    );
}

#[test]
fn a_named_user_is_refused() {
    let spec = Spec {
        user: Some("vscode".to_owned()),
        ..Spec::default()
    };
    assert!(matches!(
        ids(&spec, Trust::Trusted, (0, 0)),
        Err(Error::InvalidSpec { field, .. }) if field == "user"
    ));
}

#[test]
fn a_named_image_is_refused_and_the_default_one_replaced() {
    let info = RunInfo::new("r1", "s1", "/ws", "/run/r1");
    let inputs = PlanInputs {
        engine_ids: (1000, 1000),
        masked: &[],
        screened: &[],
        workspace: Path::new("/ws"),
        secret_sources: &[],
    };
    let named = Spec {
        image: Some("alpine".to_owned()),
        ..Spec::default()
    };
    let default = Spec {
        image: Some("ghcr.io/x/default".to_owned()),
        image_is_default: true,
        ..Spec::default()
    };
    assert!(plan(&named, &info, &inputs).is_err());
    let plan = plan(&default, &info, &inputs).unwrap();
    assert_eq!(plan.workdir, "/ws");
    assert_eq!(plan.binds[0].target, "/ws");
}

#[test]
fn masks_inside_a_bound_tree_are_applied_again_after_the_bind() {
    let binds = vec![Bind {
        source: PathBuf::from("/work"),
        target: "/work".to_owned(),
        read_only: false,
        object: Object::Dir,
        purpose: "workspace".to_owned(),
    }];
    let masked = [
        PathBuf::from("/etc/shadow"),
        PathBuf::from("/home/alice"),
        PathBuf::from("/work/.iterion"),
    ];
    let (before, after) = split_masks(&masked, &binds);
    assert_eq!(
        (before, after),
        (
            vec![
                PathBuf::from("/etc/shadow"),
                PathBuf::from("/work/.iterion")
            ],
            vec!["/work/.iterion".to_owned()]
        )
    );
}

#[test]
fn a_proxied_run_gets_the_proxy_env_and_the_net_dir() {
    let mut info = RunInfo::new("r1", "s1", "/ws", "/rt/r1");
    info.proxy = Some(iterion_sandbox::ProxyAttachment {
        endpoint: "http://t:tok@127.0.0.1:3128".to_owned(),
        host_socket: Some(PathBuf::from("/rt/r1/net/proxy.sock")),
        port: None,
    });
    let inputs = PlanInputs {
        engine_ids: (1000, 1000),
        masked: &[],
        screened: &[],
        workspace: Path::new("/ws"),
        secret_sources: &[],
    };
    let plan = plan(&Spec::default(), &info, &inputs).unwrap();
    let env: BTreeMap<String, String> = plan.env.into_iter().collect();
    assert_eq!(
        env.get("HTTPS_PROXY").map(String::as_str),
        Some("http://t:tok@127.0.0.1:3128")
    );
    assert_eq!(env.get("HOME").map(String::as_str), Some("/root"));
    assert!(
        plan.binds
            .iter()
            .any(|b| b.target == NET_DIR_TARGET && b.read_only)
    );
}
