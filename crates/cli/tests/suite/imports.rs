//! `import` (issue 20, docs/language.md "Imports"): a bot in several files runs as one program,
//! its run's identity covers every fragment, a diagnostic names the fragment it is in, and an
//! import never reads outside the bot's directory.
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::suite::lang_nodes::example_dir;
use crate::suite::support::{Env, stderr_of};

fn json_of(out: &std::process::Output) -> Value {
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)))
}

#[test]
fn a_bot_in_several_files_runs_and_its_identity_covers_every_fragment() {
    let env = Env::new();
    example_dir(&env, "24_imports");
    let out = env
        .cmd()
        .args(["run", "main.bot", "--sandbox", "none", "--json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3), "{}", stderr_of(&out));
    let paused = json_of(&out);
    assert_eq!(
        paused["message"],
        json!("Approve the release \"v2.0\" (risk: low)?")
    );
    let run = paused["run_id"].as_str().unwrap().to_owned();

    // A fragment two imports deep edited under the paused run is a source change.
    let schemas = env.path("lib/schemas.bot");
    let text = std::fs::read_to_string(&schemas).unwrap();
    env.write("lib/schemas.bot", &format!("{text}\n## edited\n"));
    let answer = r#"{"approved": true, "comment": "ship it"}"#;
    let out = env
        .cmd()
        .args(["resume", &run, "--answer", answer, "--json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    let refused = json_of(&out);
    assert_eq!(refused["failure_code"], json!("RESUME_INVALID"));
    assert!(
        refused["message"]
            .as_str()
            .unwrap()
            .contains("(or a file it imports) changed since run"),
        "{refused}"
    );

    let out = env
        .cmd()
        .args(["resume", &run, "--answer", answer, "--json", "--force"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(json_of(&out)["output"], json!({"line": "published v2.0"}));
}

/// The main's graph needs node `leaked`, declared only in a file outside the bot: were the
/// import followed, the bot would compile.
const MAIN: &str = "import \"IMPORT\"\n\nworkflow w:\n  entry: leaked\n  leaked -> done\n";
const OUTSIDE: &str = "tool leaked:\n  command: `echo TOPSECRET`\n";

fn validate(env: &Env, file: &str) -> (Option<i32>, Value) {
    let out = env
        .cmd()
        .args(["validate", file, "--json"])
        .output()
        .unwrap();
    (out.status.code(), json_of(&out))
}

#[test]
fn attack_an_import_never_reads_outside_the_bot_directory() {
    let env = Env::new();
    env.write("outside/secret.bot", OUTSIDE);
    // The same declarations inside the bot compile: the refusals below are the rule, not the
    // fragment.
    env.write("bot/lib/inside.bot", OUTSIDE);
    env.write("bot/main.bot", &MAIN.replace("IMPORT", "lib/inside.bot"));
    assert_eq!(validate(&env, "bot/main.bot").1["errors"], json!(0));

    std::os::unix::fs::symlink("../../outside/secret.bot", env.path("bot/lib/evil.bot")).unwrap();
    std::os::unix::fs::symlink("../outside", env.path("bot/linked")).unwrap();
    let absolute = env.path("outside/secret.bot").display().to_string();
    for import in [
        "../outside/secret.bot",
        "lib/../../outside/secret.bot",
        absolute.as_str(),
        "lib/evil.bot",
        "linked/secret.bot",
        "./lib/evil.bot",
    ] {
        env.write("bot/main.bot", &MAIN.replace("IMPORT", import));
        let (code, doc) = validate(&env, "bot/main.bot");
        assert_eq!(code, Some(1), "{import}: {doc}");
        let codes: Vec<&str> = doc["diagnostics"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["code"].as_str().unwrap())
            .collect();
        assert!(codes.contains(&"C917"), "{import}: {doc}");
        assert!(!doc.to_string().contains("TOPSECRET"), "{import}: {doc}");
    }
}

#[test]
fn a_diagnostic_in_a_fragment_names_the_fragment_and_its_own_line() {
    let env = Env::new();
    env.write(
        "main.bot",
        "dsl: 2\nimport \"lib/nodes.bot\"\n\nworkflow w:\n  entry: a\n  a -> done\n",
    );
    env.write(
        "lib/nodes.bot",
        "## nodes\ndsl: 2\ntool a:\n  command: `true`\n  colour: blue\n",
    );
    let (code, doc) = validate(&env, "main.bot");
    assert_eq!(code, Some(1), "{doc}");
    let d = &doc["diagnostics"][0];
    assert_eq!(
        (
            d["file"].as_str().unwrap().ends_with("lib/nodes.bot"),
            &d["line"],
            &d["code"]
        ),
        (true, &json!(5), &json!("E012")),
        "{doc}"
    );
    let out = env.cmd().args(["validate", "main.bot"]).output().unwrap();
    let human = String::from_utf8_lossy(&out.stdout);
    assert!(human.contains("lib/nodes.bot:5:3: error[E012]"), "{human}");
    assert!(human.contains("5 |   colour: blue"), "{human}");

    // Fragments that import each other are each read once; a different profile is refused.
    env.write(
        "lib/nodes.bot",
        "dsl: 2\nimport \"more.bot\"\ntool a:\n  command: `true`\n",
    );
    env.write(
        "lib/more.bot",
        "import \"nodes.bot\"\nschema s:\n  x: int\n",
    );
    assert_eq!(validate(&env, "main.bot").1["errors"], json!(0));
    env.write("lib/more.bot", "dsl: 1\nschema s:\n  x: int\n");
    let (_, doc) = validate(&env, "main.bot");
    assert_eq!(doc["diagnostics"][0]["code"], json!("C917"), "{doc}");
}
