//! Host variable expansion (SANDBOX.md §7.4), including the attack tests: a repository naming a
//! host secret gets the default or empty, and the lookup is never even called for it.

use std::cell::RefCell;
use std::path::Path;

use pretty_assertions::assert_eq;

use crate::mode::Mode;
use crate::spec::{Build, Spec};

use super::expand::{
    LOCAL_ENV_ALLOW_LIST, LocalVars, expand_local_vars, expand_sandbox_spec, is_allowed_local_env,
};

/// A host that has everything set, secrets included, and records what it was asked.
struct Host {
    asked: RefCell<Vec<String>>,
}

impl Host {
    fn new() -> Host {
        Host {
            asked: RefCell::new(Vec::new()),
        }
    }

    fn expand(&self, root: Option<&Path>, input: &str) -> String {
        let lookup = |name: &str| {
            self.asked.borrow_mut().push(name.to_owned());
            Some(format!("<host {name}>"))
        };
        expand_local_vars(
            input,
            &LocalVars {
                repo_root: root,
                lookup: &lookup,
            },
        )
    }

    fn asked(&self) -> Vec<String> {
        self.asked.borrow().clone()
    }
}

#[test]
fn host_secrets_expand_to_the_default_or_empty_and_are_never_looked_up() {
    let host = Host::new();
    let got: Vec<String> = [
        "${localEnv:AWS_SECRET_ACCESS_KEY}",
        "${localEnv:AWS_SECRET_ACCESS_KEY:x}",
        "${localEnv:GITHUB_TOKEN}",
        "${localEnv:GITHUB_TOKEN:}",
        "${localEnv:ANTHROPIC_API_KEY:none}",
        "${localEnv:SSH_AUTH_SOCK}",
        "${localEnv:home}",
    ]
    .iter()
    .map(|input| host.expand(None, input))
    .collect();
    assert_eq!(got, vec!["", "x", "", "", "none", "", ""]);
    assert_eq!(host.asked(), Vec::<String>::new());
}

#[test]
fn allow_listed_variables_are_read_and_lc_star_counts() {
    let host = Host::new();
    let got = host.expand(
        None,
        "${localEnv:HOME}|${localEnv:USER:u}|${localEnv:LC_ALL}|${localEnv:XDG_CACHE_HOME}",
    );
    assert_eq!(
        got,
        "<host HOME>|<host USER>|<host LC_ALL>|<host XDG_CACHE_HOME>"
    );
    assert_eq!(
        host.asked(),
        vec!["HOME", "USER", "LC_ALL", "XDG_CACHE_HOME"]
    );
}

#[test]
fn an_allow_listed_variable_that_is_unset_gives_the_default() {
    let lookup = |_: &str| None;
    let vars = LocalVars {
        repo_root: None,
        lookup: &lookup,
    };
    assert_eq!(
        expand_local_vars("${localEnv:TZ:UTC}/${localEnv:TZ}", &vars),
        "UTC/"
    );
}

#[test]
fn the_allow_list_is_exactly_the_specs() {
    let allowed: Vec<&str> = LOCAL_ENV_ALLOW_LIST.to_vec();
    assert_eq!(
        allowed,
        vec![
            "HOME",
            "USER",
            "USERNAME",
            "LOGNAME",
            "LANG",
            "LANGUAGE",
            "TERM",
            "TZ",
            "XDG_CONFIG_HOME",
            "XDG_CACHE_HOME",
            "XDG_DATA_HOME",
            "XDG_STATE_HOME",
            "XDG_RUNTIME_DIR",
            "PWD",
            "OLDPWD",
            "DISPLAY",
            "WAYLAND_DISPLAY",
            "XAUTHORITY",
            "PUID",
            "PGID",
            "VARIANT",
        ]
    );
    let judged: Vec<bool> = ["LC_ALL", "LC_", "LC_X-Y", "LCX", "PATH", "AWS_PROFILE"]
        .iter()
        .map(|name| is_allowed_local_env(name))
        .collect();
    assert_eq!(judged, vec![true, true, false, false, false, false]);
}

#[test]
fn workspace_forms_expand_only_with_a_root() {
    let host = Host::new();
    let root = Path::new("/src/my-repo");
    assert_eq!(
        host.expand(
            Some(root),
            "${localWorkspaceFolder}:${localWorkspaceFolderBasename}"
        ),
        "/src/my-repo:my-repo"
    );
    assert_eq!(
        host.expand(
            None,
            "${localWorkspaceFolder}:${localWorkspaceFolderBasename}"
        ),
        "${localWorkspaceFolder}:${localWorkspaceFolderBasename}"
    );
}

#[test]
fn container_forms_unknown_forms_and_malformed_local_env_are_left_untouched() {
    let host = Host::new();
    let inputs = [
        "${containerEnv:PATH}",
        "${containerWorkspaceFolder}",
        "${containerWorkspaceFolderBasename}",
        "${env:HOME}",
        "${localEnv:1BAD}",
        "${localEnv:}",
        "${localEnv:HOME",
        "$HOME ${ } $",
    ];
    let got: Vec<String> = inputs
        .iter()
        .map(|input| host.expand(None, input))
        .collect();
    assert_eq!(got, inputs.map(str::to_owned).to_vec());
    assert_eq!(host.asked(), Vec::<String>::new());
}

#[test]
fn substituted_values_are_not_expanded_again_and_inner_forms_are_found() {
    let lookup = |_: &str| Some("${localEnv:GITHUB_TOKEN:leak}".to_owned());
    let vars = LocalVars {
        repo_root: None,
        lookup: &lookup,
    };
    assert_eq!(
        expand_local_vars("${localEnv:HOME}", &vars),
        "${localEnv:GITHUB_TOKEN:leak}"
    );
    let host = Host::new();
    assert_eq!(host.expand(None, "${x${localEnv:TZ}}"), "${x<host TZ>}");
}

#[test]
fn the_default_may_contain_colons() {
    let host = Host::new();
    assert_eq!(
        host.expand(None, "${localEnv:NOPE:http://a:8080/x}"),
        "http://a:8080/x"
    );
}

#[test]
fn expand_sandbox_spec_covers_the_listed_fields_and_not_env_keys() {
    let lookup = |name: &str| (name == "HOME").then(|| "/home/op".to_owned());
    let vars = LocalVars {
        repo_root: Some(Path::new("/src/r")),
        lookup: &lookup,
    };
    let h = "${localEnv:HOME}";
    let mut spec = Spec {
        mode: Mode::Inline,
        image: Some(format!("img:{h}")),
        user: Some(h.to_owned()),
        workspace_folder: Some("/w/${localWorkspaceFolderBasename}".to_owned()),
        post_create: Some(format!("echo {h}")),
        mounts: vec![format!("source={h}/c,target=/c")],
        env: [(format!("K{h}"), h.to_owned())].into_iter().collect(),
        build: Some(Build {
            dockerfile: format!("{h}/D"),
            context: Some("${localWorkspaceFolder}".to_owned()),
            args: [("A".to_owned(), h.to_owned())].into_iter().collect(),
        }),
        ..Spec::default()
    };
    expand_sandbox_spec(&mut spec, &vars);
    let want = Spec {
        mode: Mode::Inline,
        image: Some("img:/home/op".to_owned()),
        user: Some("/home/op".to_owned()),
        workspace_folder: Some("/w/r".to_owned()),
        post_create: Some("echo /home/op".to_owned()),
        mounts: vec!["source=/home/op/c,target=/c".to_owned()],
        env: [(format!("K{h}"), "/home/op".to_owned())]
            .into_iter()
            .collect(),
        build: Some(Build {
            dockerfile: "/home/op/D".to_owned(),
            context: Some("/src/r".to_owned()),
            args: [("A".to_owned(), "/home/op".to_owned())]
                .into_iter()
                .collect(),
        }),
        ..Spec::default()
    };
    assert_eq!(spec, want);
}
