use pretty_assertions::assert_eq;
use serde_json::json;

use super::*;

fn wf(src: &str) -> Workflow {
    let compiled = iterion_dsl::compile(src.as_bytes(), &iterion_dsl::CompileOptions::default());
    assert_eq!(compiled.error_count(), 0, "{:?}", compiled.diagnostics);
    compiled.workflow.unwrap()
}

const VARS: &str = "vars:\n  name: string = \"world\"\n  n: int\n  f: float = 1.5\n  ok: bool = false\n  tags: string[] = []\n  blob: json = \"{}\"\n\ntool a:\n  command: `true`\n\nworkflow w:\n  entry: a\n  a -> done\n";

fn args(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| (*s).to_owned()).collect()
}

#[test]
fn vars_are_typed_and_defaults_fill_the_rest() {
    let w = wf(VARS);
    let got = resolve_vars(
        &w,
        &args(&[
            "n=-42",
            "ok=true",
            "tags=[\"a\",\"b\"]",
            "blob={\"k\":[1]}",
            "f=2",
        ]),
    )
    .unwrap();
    assert_eq!(
        Value::Object(got),
        json!({"name": "world", "n": -42, "f": 2.0, "ok": true, "tags": ["a", "b"], "blob": {"k": [1]}})
    );
}

#[test]
fn bad_var_input_is_refused_with_the_knob_named() {
    let w = wf(VARS);
    let cases: Vec<(Vec<String>, &str)> = vec![
        (args(&[]), "var n (int) has no default; pass --var n=VALUE"),
        (args(&["n"]), "--var \"n\": expected NAME=VALUE"),
        (
            args(&["n=1", "zz=1"]),
            "--var zz: the workflow declares no var \"zz\" (declared: name, n, f, ok, tags, blob)",
        ),
        (args(&["n=1", "n=2"]), "--var n is given more than once"),
        (
            args(&["n=1.5"]),
            "--var n=\"1.5\": n is a int, and \"1.5\" is not an integer (an optional -, then digits)",
        ),
        (
            args(&["n=1", "ok=yes"]),
            "--var ok=\"yes\": ok is a bool, and \"yes\" is not true or false",
        ),
        (
            args(&["n=1", "tags=[1]"]),
            "--var tags=\"[1]\": tags is a string[], and \"[1]\" is not a JSON array of strings",
        ),
    ];
    for (given, want) in cases {
        let err = resolve_vars(&w, &given).unwrap_err();
        assert_eq!(
            (err.code(), err.to_string()),
            ("VAR_INVALID", want.to_owned())
        );
    }
}

#[test]
fn an_enum_var_takes_only_its_values_from_any_source() {
    let src = "vars:\n  tier: string [enum: \"glance\", \"guard\", \"audit\"] = \"guard\"\n  mode: string [enum: \"a\", \"b\"]\n\npresets:\n  odd:\n    tier: \"premium\"\n\ntool a:\n  command: `true`\n\nworkflow w:\n  entry: a\n  a -> done\n";
    let w = wf(src);
    assert_eq!(
        w.vars[0].enum_values,
        Some(vec!["glance".into(), "guard".into(), "audit".into()])
    );
    let got = resolve_vars(&w, &args(&["mode=b"])).unwrap();
    assert_eq!(Value::Object(got), json!({"tier": "guard", "mode": "b"}));
    let refusal = |e: LaunchError| (e.code(), e.to_string());
    assert_eq!(
        refusal(resolve_vars(&w, &args(&["mode=c"])).unwrap_err()),
        (
            "VAR_INVALID",
            "var mode is \"c\", which is not one of its enum values: a, b; pass --var mode=VALUE with one of them".to_owned()
        )
    );
    // A preset is checked the same way.
    assert_eq!(
        refusal(resolve_vars_with_preset(&w, Some("odd"), &args(&["mode=a"])).unwrap_err()).1,
        "var tier is \"premium\", which is not one of its enum values: glance, guard, audit; pass --var tier=VALUE with one of them"
    );
}

#[test]
fn a_required_secret_that_expands_to_nothing_names_its_variable() {
    let w = wf(
        "secrets:\n  token:\n    value: \"${API_TOKEN}\"\n    hosts: [\"api.example.com\"]\n  opt:\n    value: \"${OPT_X}\"\n    hosts: [\"x.example.com\"]\n    optional: true\n\ntool a:\n  command: `true`\n\nworkflow w:\n  entry: a\n  a -> done\n",
    );
    let err = resolve_secrets(&w, |_| None).unwrap_err();
    assert_eq!(err.code(), "SECRET_UNRESOLVED");
    assert!(err.to_string().contains("set API_TOKEN"), "{err}");
    let got = resolve_secrets(&w, |k| (k == "API_TOKEN").then(|| "s3cr3t".to_owned())).unwrap();
    assert_eq!(
        got.iter().map(ResolvedSecret::name).collect::<Vec<_>>(),
        vec!["token"]
    );
}

#[test]
fn the_workflow_hash_is_sha256_of_the_source() {
    assert_eq!(
        workflow_hash(b""),
        "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    );
}
