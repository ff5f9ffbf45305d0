//! Forms of older upstream files, read the way upstream read them then (docs/language.md,
//! "Older upstream forms"): each case compiles clean and lowers to what it meant, and each
//! misuse still gets its diagnostic.
use iterion_dsl::ir::{AwaitMode, HumanMode, NodeBody};
use iterion_dsl::{CompileOptions, compile};
use pretty_assertions::assert_eq;

fn codes(src: &str) -> Vec<(String, u32)> {
    let out = compile(src.as_bytes(), &CompileOptions::default());
    let mut v: Vec<(String, u32)> = out
        .diagnostics
        .iter()
        .filter(|d| d.severity == iterion_dsl::Severity::Error)
        .map(|d| (d.code.as_str().to_string(), d.span.line))
        .collect();
    v.sort();
    v
}

const FAN: &str = "schema bundle:\n  a: json\n  b: json\n\ntool a:\n  command: `echo '{\"n\":1}'`\n\ntool b:\n  command: `echo '{\"n\":2}'`\n\nrouter fan:\n  mode: fan_out_all\n\n";

#[test]
fn a_join_declaration_is_the_compute_join_it_amounts_to() {
    let src = format!(
        "{FAN}join both:\n  strategy: best_effort\n  require: [a, b]\n  output: bundle\n\nworkflow w:\n  entry: fan\n  fan -> a\n  fan -> b\n  a -> both\n  b -> both\n  both -> done\n"
    );
    assert_eq!(codes(&src), vec![]);
    let wf = compile(src.as_bytes(), &CompileOptions::default())
        .workflow
        .unwrap();
    let node = wf.node("both").unwrap();
    assert_eq!(node.await_mode, Some(AwaitMode::BestEffort));
    match &node.body {
        NodeBody::Compute(c) => {
            assert_eq!(
                c.expr,
                vec![
                    ("a".to_owned(), "outputs.a".to_owned()),
                    ("b".to_owned(), "outputs.b".to_owned()),
                    (
                        "_failed_branches".to_owned(),
                        "concat(input._failed_branches)".to_owned()
                    ),
                ]
            );
            // Upstream never conformed a join's output to its schema.
            assert_eq!(c.output, None);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_wait_all_join_maps_only_its_required_nodes_and_checks_what_it_names() {
    let ok = format!(
        "{FAN}join both:\n  strategy: wait_all\n  require: [a, b]\n  output: bundle\n\nworkflow w:\n  entry: fan\n  fan -> a\n  fan -> b\n  a -> both\n  b -> both\n  both -> done\n"
    );
    let wf = compile(ok.as_bytes(), &CompileOptions::default())
        .workflow
        .unwrap();
    match &wf.node("both").unwrap().body {
        NodeBody::Compute(c) => assert_eq!(c.expr.len(), 2),
        other => panic!("{other:?}"),
    }
    // An unknown schema is C002, a required name no node has C029, a bad strategy E020, an
    // unknown property E012.
    let bad = ok
        .replace("output: bundle", "output: nothing")
        .replace("[a, b]", "[a, zz]");
    assert_eq!(codes(&bad), vec![("C002".into(), 17), ("C029".into(), 16)]);
    assert_eq!(
        codes(&ok.replace("wait_all", "all")),
        vec![("E020".into(), 15)]
    );
    assert_eq!(
        codes(&ok.replace("output: bundle", "outputs: bundle")),
        vec![("E012".into(), 17)]
    );
}

#[test]
fn a_human_nodes_former_mode_words_are_its_interaction() {
    for (word, mode) in [
        ("pause_until_answers", HumanMode::Human),
        ("auto_answer", HumanMode::Llm),
        ("auto_or_pause", HumanMode::LlmOrHuman),
    ] {
        let src = format!(
            "human h:\n  mode: {word}\n  model: \"anthropic/m\"\n  instructions: \"ok?\"\n\nworkflow w:\n  entry: h\n  h -> done\n"
        );
        assert_eq!(codes(&src), vec![], "{word}");
        let wf = compile(src.as_bytes(), &CompileOptions::default())
            .workflow
            .unwrap();
        assert!(
            matches!(&wf.node("h").unwrap().body, NodeBody::Human(h) if h.mode == mode),
            "{word}"
        );
    }
    // Both names at once, or a new word under the old name, are refused.
    let both = "human h:\n  mode: auto_answer\n  interaction: llm\n  model: \"anthropic/m\"\n\nworkflow w:\n  entry: h\n  h -> done\n";
    assert_eq!(codes(both), vec![("E012".into(), 3)]);
    let new_word =
        "human h:\n  mode: llm\n  model: \"anthropic/m\"\n\nworkflow w:\n  entry: h\n  h -> done\n";
    assert_eq!(codes(new_word), vec![("E020".into(), 2)]);
}

#[test]
fn mcp_server_wildcards_name_every_tool_of_a_server_the_node_gets() {
    let src = "mcp_server kit:\n  command: \"kit\"\n\nagent x:\n  model: \"anthropic/m\"\n  user: \"hi\"\n  tools: [mcp.kit.*, bash]\n  mcp:\n    servers: [kit]\n\nworkflow w:\n  entry: x\n  x -> done\n";
    assert_eq!(codes(src), vec![]);
    let wf = compile(src.as_bytes(), &CompileOptions::default())
        .workflow
        .unwrap();
    match &wf.node("x").unwrap().body {
        NodeBody::Agent(a) => {
            assert_eq!(a.mcp_tools.len(), 1);
            assert!(a.mcp_tools[0].is_all());
            assert_eq!(a.mcp_tools[0].server, "kit");
        }
        other => panic!("{other:?}"),
    }
    // A server the node does not get is still C135; `*` alone or mid-path is not a name.
    assert_eq!(
        codes(&src.replace("mcp.kit.*", "mcp.other.*")),
        vec![("C135".into(), 7)]
    );
    assert_eq!(
        codes(&src.replace("mcp.kit.*", "mcp.*.x"))
            .first()
            .map(|c| c.0.clone()),
        Some("E001".into())
    );
}

#[test]
fn references_on_a_scripts_comment_lines_are_text() {
    let script = |lang: &str, comment: &str| {
        format!(
            "schema in:\n  name: string\n\ntool t:\n  input: in\n  language: {lang}\n  script: |\n    {comment} {{{{input.X}}}} documents the reference forms\n    x = {{{{input.name}}}}  {comment} {{{{input.Y}}}} after code is still a reference\n\nworkflow w:\n  entry: t\n  t -> done\n"
        )
    };
    // Only the reference on the code line is checked: C034 for `Y` on line 9, none for `X`.
    for (lang, comment) in [("js", "//"), ("py", "#"), ("sh", "#")] {
        assert_eq!(
            codes(&script(lang, comment)),
            vec![("C034".into(), 9)],
            "{lang}"
        );
    }
    // `#` is not a comment in JavaScript, nor `//` in Python: there both are references.
    assert_eq!(
        codes(&script("js", "#")),
        vec![("C034".into(), 8), ("C034".into(), 9)]
    );
    assert_eq!(
        codes(&script("py", "//")),
        vec![("C034".into(), 8), ("C034".into(), 9)]
    );
    // A command is not a script: its references are all checked.
    let cmd = "schema in:\n  name: string\n\ntool t:\n  input: in\n  command: |\n    # {{input.X}}\n    echo {{input.name}}\n\nworkflow w:\n  entry: t\n  t -> done\n";
    assert_eq!(codes(cmd), vec![("C034".into(), 7)]);
}

#[test]
fn a_compute_reading_a_field_its_source_lacks_is_a_warning_and_elsewhere_an_error() {
    let src = "schema r:\n  ok: bool\n\ntool a:\n  command: `echo '{\"ok\": true}'`\n  output: r\n\ncompute c:\n  expr:\n    plan: \"outputs.a.fix_plan\"\n\nworkflow w:\n  entry: a\n  a -> c\n  c -> done\n";
    let out = compile(src.as_bytes(), &CompileOptions::default());
    let got: Vec<(&str, u32, iterion_dsl::Severity)> = out
        .diagnostics
        .iter()
        .map(|d| (d.code.as_str(), d.span.line, d.severity))
        .collect();
    assert_eq!(got, vec![("C921", 10, iterion_dsl::Severity::Warning)]);
    assert!(out.workflow.is_some());
    // The same read in a `when` expression or a template stays C031.
    let when = src.replace(
        "  a -> c\n",
        "  a -> c when `outputs.a.fix_plan == null`\n  a -> fail\n",
    );
    assert_eq!(codes(&when), vec![("C031".into(), 14)]);
}

#[test]
fn branches_that_all_end_at_done_converge_there_as_upstreams_did() {
    // One node per branch, every edge of it into done: upstream waited for all of them there.
    let src = format!(
        "{FAN}workflow w:\n  entry: fan\n  fan -> a\n  fan -> b\n  a -> done with {{ first: \"{{{{outputs.a}}}}\" }}\n  b -> done with {{ second: \"{{{{outputs.b.n}}}}\" }}\n"
    );
    assert_eq!(codes(&src), vec![]);
    let wf = compile(src.as_bytes(), &CompileOptions::default())
        .workflow
        .unwrap();
    let join = wf.node("fan_at_done").unwrap();
    assert_eq!(join.await_mode, Some(AwaitMode::WaitAll));
    match &join.body {
        NodeBody::Compute(c) => assert_eq!(
            c.expr,
            vec![
                ("first".to_owned(), "input.first".to_owned()),
                ("second".to_owned(), "input.second".to_owned()),
            ]
        ),
        other => panic!("{other:?}"),
    }
    // Without `with` keys the join maps each branch node's output.
    let bare = format!(
        "{FAN}workflow w:\n  entry: fan\n  fan -> a\n  fan -> b\n  a -> done\n  b -> done\n"
    );
    let wf = compile(bare.as_bytes(), &CompileOptions::default())
        .workflow
        .unwrap();
    match &wf.node("fan_at_done").unwrap().body {
        NodeBody::Compute(c) => assert_eq!(
            c.expr,
            vec![
                ("a".to_owned(), "outputs.a".to_owned()),
                ("b".to_owned(), "outputs.b".to_owned()),
            ]
        ),
        other => panic!("{other:?}"),
    }
}

#[test]
fn longer_branches_that_end_at_done_are_c906_with_a_hint_naming_the_fix() {
    let src = format!(
        "{FAN}tool m:\n  command: `true`\n\nworkflow w:\n  entry: fan\n  fan -> a\n  fan -> b\n  a -> m\n  m -> done\n  b -> done\n"
    );
    let out = compile(src.as_bytes(), &CompileOptions::default());
    let c906: Vec<_> = out
        .diagnostics
        .iter()
        .filter(|d| d.code.as_str() == "C906")
        .collect();
    assert_eq!(c906.len(), 1, "{:?}", out.diagnostics);
    assert!(
        c906[0]
            .hint
            .as_deref()
            .is_some_and(|h| h.contains("the branches all end at done")),
        "{:?}",
        c906[0]
    );
}
