//! Bundle directories: `DIR/main.bot` gets the prompts of `DIR/prompts/*.md`, read beneath the
//! bundle (a symlink out of it is C916, never followed).
use std::path::Path;

use iterion_dsl::{CompileOptions, compile_file};
use pretty_assertions::assert_eq;

const MAIN: &str = "prompt own:\n  Declared in main.bot.\n\nagent a:\n  model: \"anthropic/claude\"\n  system: helper\n  user: own\n\nworkflow w:\n  entry: a\n  a -> done\n";

fn bundle(main: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("main.bot"), main).unwrap();
    std::fs::create_dir(dir.path().join("prompts")).unwrap();
    dir
}

fn codes(dir: &Path) -> Vec<String> {
    let compiled = compile_file(&dir.join("main.bot"), &CompileOptions::default()).unwrap();
    compiled
        .diagnostics
        .iter()
        .map(|d| format!("{}: {}", d.code.as_str(), d.message))
        .collect()
}

#[test]
fn a_bundle_prompt_file_is_a_prompt_and_main_bot_wins_a_clash() {
    let dir = bundle(MAIN);
    std::fs::write(
        dir.path().join("prompts/helper.md"),
        "You help {{vars.who}}.\n\n",
    )
    .unwrap();
    std::fs::write(dir.path().join("prompts/own.md"), "From the folder.").unwrap();
    std::fs::write(dir.path().join("prompts/not-a-name.md"), "ignored").unwrap();
    std::fs::write(dir.path().join("prompts/.gitkeep"), "").unwrap();
    let main = MAIN.replace(
        "workflow w:",
        "vars:\n  who: string = \"you\"\n\nworkflow w:",
    );
    std::fs::write(dir.path().join("main.bot"), &main).unwrap();
    let compiled = compile_file(&dir.path().join("main.bot"), &CompileOptions::default()).unwrap();
    assert_eq!(compiled.error_count(), 0, "{:?}", compiled.diagnostics);
    let wf = compiled.workflow.unwrap();
    let agent = wf.nodes.iter().find(|n| n.id == "a").unwrap();
    let iterion_dsl::ir::NodeBody::Agent(agent) = &agent.body else {
        panic!("{agent:?}")
    };
    assert_eq!(agent.system.as_deref(), Some("You help {{vars.who}}."));
    assert_eq!(agent.user, "Declared in main.bot.");
}

#[test]
fn a_prompt_symlinked_out_of_the_bundle_is_refused() {
    // Attack: a stranger's bundle whose prompt is a link to a file of the host; reading it
    // would send the file to the model.
    let dir = bundle(MAIN);
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("id_rsa"), "PRIVATE KEY").unwrap();
    std::os::unix::fs::symlink(
        outside.path().join("id_rsa"),
        dir.path().join("prompts/helper.md"),
    )
    .unwrap();
    let got = codes(dir.path());
    assert!(
        got.iter()
            .any(|c| c.starts_with("C916: bundle prompt prompts/helper.md")),
        "{got:?}"
    );
    // The prompts dir itself linked out of the bundle.
    let dir = bundle(MAIN);
    std::fs::remove_dir(dir.path().join("prompts")).unwrap();
    std::os::unix::fs::symlink(outside.path(), dir.path().join("prompts")).unwrap();
    let got = codes(dir.path());
    assert!(
        got.iter()
            .any(|c| c.starts_with("C916: bundle prompts/ is a symbolic link")),
        "{got:?}"
    );
}

#[test]
fn a_prompt_over_the_bound_is_refused() {
    let dir = bundle(MAIN);
    let file = std::fs::File::create(dir.path().join("prompts/helper.md")).unwrap();
    file.set_len(iterion_dsl::MAX_PROMPT_BYTES + 1).unwrap();
    let got = codes(dir.path());
    assert!(
        got.iter()
            .any(|c| c.starts_with("C916: bundle prompt prompts/helper.md")),
        "{got:?}"
    );
}

#[test]
fn a_bundles_skills_and_manifest_are_read_by_the_bundle_rules() {
    let dir = bundle(MAIN);
    std::fs::write(dir.path().join("prompts/helper.md"), "Help.").unwrap();
    std::fs::create_dir(dir.path().join("skills")).unwrap();
    std::fs::write(
        dir.path().join("skills/review-rules.md"),
        "# Rules\r\nkept as is\n",
    )
    .unwrap();
    std::fs::write(dir.path().join("skills/notes.txt"), "not a skill").unwrap();
    std::fs::write(
        dir.path().join("manifest.yaml"),
        "name: demo\ndisplay_name: Demo (a catalogue title)\nicon: x\nversion: \"1.2\"\ndescription: |\n  Two lines\n  of text.\ncompat:\n  iterion: \">=0.15\"\nrequires:\n  iterion: \">= 3.141.0\"\ninvocations:\n  - kind: keepalive\n    mode: direct\n",
    )
    .unwrap();
    let compiled = compile_file(&dir.path().join("main.bot"), &CompileOptions::default()).unwrap();
    assert_eq!(compiled.diagnostics, vec![]);
    let wf = compiled.workflow.unwrap();
    assert_eq!(wf.skills.len(), 1);
    assert_eq!(wf.skills[0].name, "review-rules");
    // A skill is copied byte for byte.
    assert_eq!(wf.skills[0].text, "# Rules\r\nkept as is\n");
    let manifest = wf.manifest.unwrap();
    assert_eq!(
        (
            manifest.name.as_str(),
            manifest.version.as_str(),
            manifest.description.as_str()
        ),
        ("demo", "1.2", "Two lines\nof text.")
    );

    // A folder skill (not read yet) and a manifest key upstream does not know are C916.
    std::fs::create_dir(dir.path().join("skills/folder")).unwrap();
    std::fs::write(dir.path().join("manifest.yaml"), "name: demo\nrunner: x\n").unwrap();
    let got = codes(dir.path());
    assert_eq!(got.len(), 2, "{got:?}");
    assert!(got.iter().all(|c| c.starts_with("C916")), "{got:?}");
    assert!(
        got.iter()
            .any(|c| c.contains("skills/folder is a directory")),
        "{got:?}"
    );
    assert!(
        got.iter().any(|c| c.contains("unknown key \"runner\"")),
        "{got:?}"
    );
}

#[test]
fn attack_a_skill_symlinked_out_of_the_bundle_is_refused() {
    let dir = bundle(MAIN);
    std::fs::write(dir.path().join("prompts/helper.md"), "Help.").unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("id_rsa"), "secret key").unwrap();
    std::fs::create_dir(dir.path().join("skills")).unwrap();
    std::os::unix::fs::symlink(
        outside.path().join("id_rsa"),
        dir.path().join("skills/key.md"),
    )
    .unwrap();
    let compiled = compile_file(&dir.path().join("main.bot"), &CompileOptions::default()).unwrap();
    assert!(compiled.workflow.is_none());
    assert!(
        compiled
            .diagnostics
            .iter()
            .any(|d| d.code.as_str() == "C916" && d.message.contains("skills/key.md")),
        "{:?}",
        compiled.diagnostics
    );
}

#[test]
fn an_agent_s_skills_name_the_bundle_s_skills_and_one_it_lacks_is_c923() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("skills")).unwrap();
    std::fs::write(dir.path().join("skills/review.md"), "# Review\n").unwrap();
    let src = "agent a:\n  model: \"anthropic/m\"\n  skills: [\"review\", \"missing\"]\n\nworkflow w:\n  entry: a\n  a -> done\n";
    std::fs::write(dir.path().join("main.bot"), src).unwrap();
    let compiled = compile_file(&dir.path().join("main.bot"), &CompileOptions::default()).unwrap();
    let got: Vec<(&str, u32, u32, &str)> = compiled
        .diagnostics
        .iter()
        .map(|d| (d.code.as_str(), d.span.line, d.span.col, d.message.as_str()))
        .collect();
    assert_eq!(
        got,
        [(
            "C923",
            3,
            22,
            "skill \"missing\" is not in the bundle's skills/; the node runs without it"
        )]
    );
    assert_eq!(
        compiled.workflow.unwrap().skills.len(),
        1,
        "a warning: it runs"
    );
    // Outside a bundle no skill ships: each name is C923.
    std::fs::write(dir.path().join("flow.iter"), src).unwrap();
    let compiled = compile_file(&dir.path().join("flow.iter"), &CompileOptions::default()).unwrap();
    assert_eq!(compiled.diagnostics.len(), 2, "{:?}", compiled.diagnostics);
}
