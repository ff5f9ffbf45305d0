//! Property tests (STYLE.md §5.15): random input never panics, and expansion never asks the host
//! for a variable off the allow-list, whatever the repository writes.

use std::cell::RefCell;
use std::path::Path;

use proptest::prelude::*;

use crate::mounts::ScreenContext;

use super::convert::to_sandbox_spec;
use super::corpus_tests::Repo;
use super::expand::{LocalVars, expand_local_vars, is_allowed_local_env};
use super::read::parse_devcontainer;
use super::run_args::screen_run_args;
use super::*;

/// JSON-ish text: the characters a devcontainer is made of, plus comments and quirks.
fn jsonish() -> impl Strategy<Value = String> {
    let atoms = prop_oneof![
        Just("{".to_owned()),
        Just("}".to_owned()),
        Just("[".to_owned()),
        Just("]".to_owned()),
        Just(",".to_owned()),
        Just(":".to_owned()),
        Just("\"image\"".to_owned()),
        Just("\"build\"".to_owned()),
        Just("\"dockerfile\"".to_owned()),
        Just("\"mounts\"".to_owned()),
        Just("\"postCreateCommand\"".to_owned()),
        Just("\"containerEnv\"".to_owned()),
        Just("\"runArgs\"".to_owned()),
        Just("\"workspaceFolder\"".to_owned()),
        Just("null".to_owned()),
        Just("1".to_owned()),
        Just("// c\n".to_owned()),
        Just("/* c */".to_owned()),
        Just("'".to_owned()),
        Just("\"${localEnv:HOME:x}\"".to_owned()),
        "\"[^\"\\\\]{0,8}\"".prop_map(|s| s),
        any::<char>().prop_map(String::from),
    ];
    prop::collection::vec(atoms, 0..40).prop_map(|atoms| atoms.concat())
}

fn structured() -> impl Strategy<Value = String> {
    let value = prop_oneof![
        Just("\"x\"".to_owned()),
        Just("[\"a\", \"b c\"]".to_owned()),
        Just("{\"k\": \"v\"}".to_owned()),
        Just("{\"k\": [\"v\"]}".to_owned()),
        Just("1".to_owned()),
        Just("null".to_owned()),
        Just("\"relative\"".to_owned()),
        Just("[{\"source\": \"s\", \"target\": \"/t\", \"type\": \"volume\"}]".to_owned()),
    ];
    let key = prop_oneof![
        Just("image"),
        Just("build"),
        Just("mounts"),
        Just("postCreateCommand"),
        Just("containerEnv"),
        Just("remoteEnv"),
        Just("workspaceFolder"),
        Just("remoteUser"),
        Just("runArgs"),
    ];
    prop::collection::vec((key, value), 0..8).prop_map(|pairs| {
        let body: Vec<String> = pairs
            .iter()
            .map(|(key, value)| format!("\"{key}\": {value}"))
            .collect();
        format!("{{ {}, }}", body.join(", "))
    })
}

proptest! {
    #[test]
    fn random_jsonish_text_never_panics_the_reader_or_the_converter(text in prop_oneof![jsonish(), structured()]) {
        let path = Path::new("/r/.devcontainer/devcontainer.json");
        if let Ok(dc) = parse_devcontainer(path, &text) {
            let lookup = |_: &str| Some("v".to_owned());
            let vars = LocalVars { repo_root: Some(Path::new("/r")), lookup: &lookup };
            let _ = to_sandbox_spec(&dc, Path::new("/r"), &vars);
        }
    }

    #[test]
    fn expansion_never_asks_for_a_name_off_the_allow_list(text in "[a-zA-Z_:${}0-9 ]{0,64}") {
        let asked = RefCell::new(Vec::<String>::new());
        let lookup = |name: &str| {
            asked.borrow_mut().push(name.to_owned());
            Some(format!("[{name}]"))
        };
        let vars = LocalVars { repo_root: None, lookup: &lookup };
        let _ = expand_local_vars(&text, &vars);
        for name in asked.borrow().iter() {
            prop_assert!(is_allowed_local_env(name), "asked for {name}");
        }
    }

    #[test]
    fn expansion_without_forms_is_the_identity(text in "[^$]{0,64}") {
        let lookup = |_: &str| Some("v".to_owned());
        let vars = LocalVars { repo_root: None, lookup: &lookup };
        prop_assert_eq!(expand_local_vars(&text, &vars), text);
    }

    #[test]
    fn run_args_screening_never_panics(args in prop::collection::vec("(-{0,2}[a-z=:/~. -]{0,12})", 0..6)) {
        let repo = Repo::new();
        let ctx = ScreenContext::new(&repo.root, Some(&repo.home)).unwrap();
        let _ = screen_run_args(&args, &ctx);
    }

    #[test]
    fn overlay_parsing_never_panics(content in "[A-Za-z_=#\n\r 0-9-]{0,80}") {
        let _ = parse_env_file("f", &content);
    }
}
