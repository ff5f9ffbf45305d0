//! `compute`, `human`, `round_robin` / `llm` routers and `script:` tools: each diagnostic they
//! add, in a file that is otherwise clean, with the exact set of (code, line).
use iterion_dsl::ir::{HumanMode, NodeBody, RouterMode, ScriptLanguage};
use iterion_dsl::{CompileOptions, compile};
use pretty_assertions::assert_eq;

fn got(src: &str) -> Vec<(String, u32)> {
    let out = compile(src.as_bytes(), &CompileOptions::default());
    let mut v: Vec<(String, u32)> = out
        .diagnostics
        .iter()
        .map(|d| (d.code.as_str().to_string(), d.span.line))
        .collect();
    v.sort();
    v
}

#[track_caller]
fn expect(src: &str, want: &[(&str, u32)]) {
    let mut want: Vec<(String, u32)> = want.iter().map(|(c, l)| (c.to_string(), *l)).collect();
    want.sort();
    assert_eq!(got(src), want, "source:\n{src}");
}

const AB: &str = "tool a:\n  command: `echo a`\n\ntool b:\n  command: `echo b`\n\n";

#[test]
fn the_four_kinds_lower_into_the_ir() {
    let src = format!(
        "{AB}router rr:\n  mode: round_robin\n\nrouter pick:\n  mode: llm\n  model: \"anthropic/m\"\n  system: \"choose\"\n\ncompute c:\n  expr:\n    n: \"length(input.items)\"\n\nhuman h:\n  instructions: \"ok?\"\n\nhuman auto:\n  interaction: llm\n  model: \"openai/m\"\n\ntool s:\n  language: py\n  script: |\n    print({{{{vars.x}}}})\n\nvars:\n  x: string = \"1\"\n\nworkflow w:\n  entry: rr\n  rr -> a\n  rr -> b\n  a -> pick\n  b -> pick\n  pick -> c\n  pick -> h\n  c -> auto\n  h -> s\n  auto -> done\n  s -> done\n"
    );
    let out = compile(src.as_bytes(), &CompileOptions::default());
    assert_eq!(out.diagnostics, vec![]);
    let wf = out.workflow.unwrap();
    let body = |id: &str| &wf.node(id).unwrap().body;
    assert!(matches!(body("rr"), NodeBody::Router(r) if r.mode == RouterMode::RoundRobin));
    assert!(
        matches!(body("pick"), NodeBody::Router(r) if r.mode == RouterMode::Llm && r.model.as_deref() == Some("anthropic/m") && r.system.as_deref() == Some("choose"))
    );
    assert!(
        matches!(body("c"), NodeBody::Compute(c) if c.expr == vec![("n".to_owned(), "length(input.items)".to_owned())])
    );
    assert!(
        matches!(body("h"), NodeBody::Human(h) if h.mode == HumanMode::Human && h.instructions.as_deref() == Some("ok?"))
    );
    assert!(matches!(body("auto"), NodeBody::Human(h) if h.mode == HumanMode::Llm));
    assert!(
        matches!(body("s"), NodeBody::Tool(t) if t.script == Some(ScriptLanguage::Python) && t.command == "print({{vars.x}})\n")
    );
    assert_eq!(body("pick").model(), Some("anthropic/m"));
    assert_eq!(body("auto").model(), Some("openai/m"));
    assert_eq!(body("h").model(), None);
}

#[test]
fn round_robin_and_llm_routers_need_two_plain_edges() {
    // C020: one edge; C022: a clause on a picked edge.
    expect(
        &format!(
            "{AB}router rr:\n  mode: round_robin\n\nworkflow w:\n  entry: rr\n  rr -> a\n  a -> done\n  b -> done\n"
        ),
        &[("C016", 4), ("C020", 12)],
    );
    expect(
        &format!(
            "{AB}router rr:\n  mode: llm\n  model: \"anthropic/m\"\n\nworkflow w:\n  entry: rr\n  rr -> a when \"true\"\n  rr -> b\n  a -> done\n  b -> done\n"
        ),
        &[("C022", 13)],
    );
    expect(
        &format!(
            "{AB}router rr:\n  mode: llm\n  model: \"anthropic/m\"\n\nworkflow w:\n  entry: rr\n  rr -> a\n  a -> done\n  b -> done\n"
        ),
        &[("C016", 4), ("C021", 13)],
    );
}

#[test]
fn model_properties_belong_to_llm_routers_and_model_modes_need_a_model() {
    // C023: `model` on a condition router.
    expect(
        &format!(
            "{AB}router r:\n  mode: condition\n  model: \"anthropic/m\"\n\nworkflow w:\n  entry: r\n  r -> a\n  a -> b\n  b -> done\n"
        ),
        &[("C023", 9)],
    );
    // C018: an llm router, an llm human node without a model.
    expect(
        &format!(
            "{AB}router r:\n  mode: llm\n\nworkflow w:\n  entry: r\n  r -> a\n  r -> b\n  a -> done\n  b -> done\n"
        ),
        &[("C018", 7)],
    );
    expect(
        "human h:\n  interaction: llm_or_human\n\nworkflow w:\n  entry: h\n  h -> done\n",
        // C136: it may ask the operator, and the sandbox has no ask-user channel here.
        &[("C018", 1), ("C136", 2)],
    );
    // C003: an unknown named prompt.
    expect(
        "human h:\n  instructions: nothing\n\nworkflow w:\n  entry: h\n  h -> done\n",
        &[("C003", 2)],
    );
    // An llm router on a delegate backend needs no model: it takes the backend's default.
    let delegate = format!(
        "{AB}router r:\n  mode: llm\n  backend: codex\n  provider: openai\n  reasoning_effort: high\n\nworkflow w:\n  entry: r\n  r -> a\n  r -> b\n  a -> done\n  b -> done\n"
    );
    expect(&delegate, &[]);
    let wf = compile(delegate.as_bytes(), &CompileOptions::default())
        .workflow
        .unwrap();
    match &wf.node("r").unwrap().body {
        NodeBody::Router(r) => {
            assert_eq!(r.backend, iterion_dsl::ir::Backend::Codex);
            assert_eq!(r.model.as_deref(), Some("openai/gpt-5"));
            assert_eq!(r.provider.as_deref(), Some("openai"));
            assert_eq!(r.reasoning_effort.as_deref(), Some("high"));
        }
        other => panic!("{other:?}"),
    }
    // `delegate:` is upstream's former name for it (one of the two only).
    expect(&delegate.replace("backend: codex", "delegate: codex"), &[]);
    expect(
        &delegate.replace("backend: codex", "backend: codex\n  delegate: codex"),
        &[("E012", 10)],
    );
    // `backend: claw` still needs one; the three belong to llm routers (C023).
    expect(
        &delegate.replace("backend: codex", "backend: claw"),
        &[("C018", 7)],
    );
    expect(
        &delegate
            .replace("mode: llm", "mode: condition")
            .replace("  r -> b\n  a -> done\n", "  a -> b\n"),
        &[("C023", 9), ("C023", 10), ("C023", 11)],
    );
}

#[test]
fn compute_expressions_are_checked_like_when_expressions() {
    expect(
        "compute c:\n  output: s\n\nschema s:\n  x: int\n\nworkflow w:\n  entry: c\n  c -> done\n",
        &[("C039", 1)],
    );
    expect(
        "compute c:\n  expr:\n    x: \"nope(1)\"\n    y: \"if(true, 1)\"\n    z: \"vars.missing\"\n\nworkflow w:\n  entry: c\n  c -> done\n",
        &[("C033", 5), ("C040", 3), ("C138", 4)],
    );
}

#[test]
fn a_tool_has_a_command_or_a_script_and_a_language_from_the_list() {
    expect(
        "tool t:\n  command: `x`\n  script: `y`\n\nworkflow w:\n  entry: t\n  t -> done\n",
        &[("E012", 3)],
    );
    expect(
        "tool t:\n  command: `x`\n  language: sh\n\nworkflow w:\n  entry: t\n  t -> done\n",
        &[("E012", 3)],
    );
    expect(
        "tool t:\n  language: ruby\n  script: `y`\n\nworkflow w:\n  entry: t\n  t -> done\n",
        &[("E020", 2)],
    );
    expect(
        "tool t:\n  output: s\n\nworkflow w:\n  entry: t\n  t -> done\n",
        &[("E013", 1)],
    );
    // A js script's reference inside quotes is JSON, not a shell word: no C137 there; a shell
    // script keeps the command rule.
    expect(
        "vars:\n  v: string = \"x\"\n\ntool t:\n  language: js\n  script: `console.log(\"{{vars.v}}\")`\n\nworkflow w:\n  entry: t\n  t -> done\n",
        &[],
    );
    expect(
        "vars:\n  v: string = \"x\"\n\ntool t:\n  language: sh\n  script: `echo \"{{vars.v}}\"`\n\nworkflow w:\n  entry: t\n  t -> done\n",
        &[("C137", 6)],
    );
}

#[test]
fn multi_routes_are_not_supported_yet() {
    expect(
        &format!(
            "{AB}router r:\n  mode: llm\n  model: \"anthropic/m\"\n  multi: true\n\nworkflow w:\n  entry: r\n  r -> a\n  r -> b\n  a -> done\n  b -> done\n"
        ),
        &[("E012", 10)],
    );
}
