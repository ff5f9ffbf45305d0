//! DSL.md §9.6, the fragment table: codes that cannot share a file with the gallery, each in a
//! complete file that is otherwise clean. Every case asserts the exact set of (code, line).
use iterion_dsl::{CompileOptions, compile};
use pretty_assertions::assert_eq;

const TOOL_A: &str = "tool a:\n  command: `echo '{}'`\n";

fn got(src: &str) -> Vec<(String, u32)> {
    let out = compile(
        src.as_bytes(),
        &CompileOptions {
            ask_user_in_sandbox: false,
        },
    );
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

/// A clean one-node workflow with `extra` spliced into the workflow block (after `entry`).
fn workflow_with(extra: &str) -> String {
    format!("{TOOL_A}\nworkflow w:\n  entry: a\n{extra}  a -> done\n")
}

#[test]
fn the_base_fixture_is_clean() {
    expect(&workflow_with(""), &[]);
}

#[test]
fn e001_unsupported_declaration_kind() {
    let src = format!("supervisor gate:\n  prompt: \"x\"\n{}", workflow_with(""));
    expect(&src, &[("E001", 1)]);
    let out = compile(src.as_bytes(), &CompileOptions::default());
    assert_eq!(
        out.diagnostics[0].message,
        "`supervisor` declarations are not supported yet"
    );
}

#[test]
fn e002_missing_colon_after_a_declaration_name() {
    expect(&format!("agent a\n{}", workflow_with("")), &[("E002", 1)]);
}

#[test]
fn e003_tab_in_indentation() {
    expect(
        "tool a:\n\tcommand: `echo hi`\n\nworkflow w:\n  entry: a\n  a -> done\n",
        &[("E003", 2)],
    );
}

#[test]
fn e004_unterminated_quoted_string() {
    expect(
        "tool a:\n  command: \"echo hi\n\nworkflow w:\n  entry: a\n  a -> done\n",
        &[("E004", 2)],
    );
}

#[test]
fn e004_unterminated_raw_string_at_end_of_file() {
    expect("tool a:\n  command: `echo hi\n", &[("E004", 2)]);
}

#[test]
fn e005_unknown_escape_under_strict_escape() {
    let src = format!(
        "## strict-escape: on\n{TOOL_A}\nworkflow w:\n  entry: a\n  sandbox:\n    image: \"x\"\n    post_create: \"a\\qb\"\n  a -> done\n"
    );
    expect(&src, &[("E005", 9)]);
}

#[test]
fn e006_invalid_utf8_in_a_prompt() {
    let mut src = b"prompt p:\n  hello ".to_vec();
    src.push(0xFF);
    src.extend_from_slice(b"\n\n");
    src.extend_from_slice(workflow_with("").as_bytes());
    let out = compile(&src, &CompileOptions::default());
    let codes: Vec<_> = out
        .diagnostics
        .iter()
        .map(|d| (d.code.as_str(), d.span.line, d.span.col))
        .collect();
    assert_eq!(codes, vec![("E006", 2, 9)]);
    assert_eq!(out.diagnostics[0].message, "invalid UTF-8 at byte 18");
}

#[test]
fn e010_prompt_declared_twice() {
    let src = format!(
        "prompt p:\n  one\n\nprompt p:\n  two\n\n{}",
        workflow_with("")
    );
    expect(&src, &[("E010", 4)]);
}

#[test]
fn e011_reserved_word_as_a_node_name() {
    expect(
        &format!("tool done:\n  command: `true`\n\n{}", workflow_with("")),
        &[("E011", 1)],
    );
}

#[test]
fn e012_unknown_property_with_a_did_you_mean_hint() {
    let src = format!(
        "agent x:\n  modle: \"x\"\n  user: \"hi\"\n\n{}",
        workflow_with("")
    );
    expect(&src, &[("E012", 2)]);
    let out = compile(src.as_bytes(), &CompileOptions::default());
    assert_eq!(
        out.diagnostics[0].hint.as_deref(),
        Some("did you mean \"model\"?")
    );
}

#[test]
fn e013_tool_without_command() {
    let src = format!(
        "schema result:\n  ok: bool\n\ntool t:\n  output: result\n\n{}",
        workflow_with("")
    );
    expect(&src, &[("E013", 4)]);
}

#[test]
fn e014_two_secrets_blocks() {
    let src = format!(
        "secrets:\n  a: \"${{A}}\"\n\nsecrets:\n  b: \"${{B}}\"\n\n{}",
        workflow_with("")
    );
    expect(&src, &[("E014", 4)]);
}

#[test]
fn e020_unsupported_backend() {
    let src = format!(
        "agent x:\n  model: \"anthropic/claude-sonnet-4-5\"\n  backend: gemini_cli\n  user: \"hi\"\n\n{}",
        workflow_with("")
    );
    expect(&src, &[("E020", 3)]);
}

/// `nodes`, then a workflow running `x` (and `y` after it, when declared).
fn run_nodes(nodes: &str) -> String {
    let edges = if nodes.contains("agent y:") {
        "  x -> y\n  y -> done\n"
    } else {
        "  x -> done\n"
    };
    format!("{nodes}\nworkflow w:\n  entry: x\n{edges}")
}

#[test]
fn delegate_backends_compile_with_their_properties() {
    let src = run_nodes(
        "agent x:\n  model: \"anthropic/claude-sonnet-4-5\"\n  backend: \"claude_code\"\n  session: inherit\n  reasoning_effort: high\n  max_tokens: 2000\n  tools: [bash, write_file]\n  user: \"hi\"\n\nagent y:\n  model: \"openai/gpt-5\"\n  backend: codex\n  session: fork\n  user: \"hi\"\n",
    );
    expect(&src, &[]);
}

#[test]
fn c914_a_delegate_backend_refuses_a_provider_its_cli_cannot_speak() {
    let src = run_nodes(
        "agent x:\n  model: \"openai/gpt-5\"\n  backend: claude_code\n  user: \"hi\"\n\nagent y:\n  model: \"anthropic/claude\"\n  backend: codex\n  user: \"hi\"\n",
    );
    expect(&src, &[("C914", 2), ("C914", 7)]);
}

#[test]
fn c941_a_carried_session_on_a_claw_node_warns_that_it_does_nothing() {
    // `max_tokens` and `reasoning_effort` reach the provider's request: no warning.
    let src = run_nodes(
        "agent x:\n  model: \"anthropic/claude\"\n  session: inherit\n  max_tokens: 9\n  reasoning_effort: high\n  user: \"hi\"\n",
    );
    expect(&src, &[("C941", 3)]);
}

#[test]
fn c136_an_asking_delegate_node_follows_the_claw_rule() {
    let src = run_nodes(
        "agent x:\n  model: \"anthropic/claude\"\n  backend: claude_code\n  interaction: ask\n  user: \"hi\"\n",
    );
    // Without the ask-user channel in the sandbox: C136, as for a claw node.
    expect(&src, &[("C136", 4)]);
    let claw =
        run_nodes("agent x:\n  model: \"anthropic/claude\"\n  interaction: ask\n  user: \"hi\"\n");
    expect(&claw, &[("C136", 3)]);
    // With it (what `iterion validate` and `run` pass): neither warns.
    for src in [&src, &claw] {
        let relayed = compile(
            src.as_bytes(),
            &CompileOptions {
                ask_user_in_sandbox: true,
            },
        );
        assert!(relayed.diagnostics.is_empty(), "{:?}", relayed.diagnostics);
    }
}

#[test]
fn tool_max_steps_zero_is_upstreams_not_set_and_takes_the_default() {
    let src = "agent x:\n  model: \"anthropic/claude-sonnet-4-5\"\n  user: \"hi\"\n  tool_max_steps: 0\n\nworkflow w:\n  entry: x\n  x -> done\n";
    expect(src, &[]);
    let wf = iterion_dsl::compile(src.as_bytes(), &iterion_dsl::CompileOptions::default())
        .workflow
        .unwrap();
    match &wf.node("x").unwrap().body {
        iterion_dsl::ir::NodeBody::Agent(a) => {
            assert_eq!(a.tool_max_steps, iterion_dsl::ir::DEFAULT_TOOL_MAX_STEPS);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn e021_malformed_duration() {
    expect(
        &workflow_with("  budget:\n    max_duration: \"soon\"\n"),
        &[("E021", 7)],
    );
}

#[test]
fn e030_duplicate_clause() {
    let src = format!("{TOOL_A}\nworkflow w:\n  entry: a\n  a -> done when x when y\n");
    expect(&src, &[("E030", 6)]);
}

#[test]
fn e031_when_and_else() {
    let src = format!("{TOOL_A}\nworkflow w:\n  entry: a\n  a -> done when x else\n");
    expect(&src, &[("E031", 6)]);
}

#[test]
fn e040_dsl_profile_three() {
    expect(&format!("dsl: 3\n{}", workflow_with("")), &[("E040", 1)]);
}

#[test]
fn dsl_profile_two_decodes_escapes_and_refuses_the_directive() {
    // Upstream's profile 2: a quoted string reads the standard escapes with no directive.
    let src = "## a bot\n\ndsl: 2\n\ntool a:\n  command: \"printf '%s\\\\n' \\\"hi\\\"\"\n\nworkflow w:\n  entry: a\n  a -> done\n";
    expect(src, &[]);
    let out = compile(src.as_bytes(), &CompileOptions::default());
    let wf = out.workflow.expect("compiles");
    let iterion_dsl::ir::NodeBody::Tool(t) = &wf.node("a").unwrap().body else {
        panic!("tool")
    };
    assert_eq!(t.command, "printf '%s\\n' \"hi\"");
    // The same text under profile 1 keeps its backslashes (and warns about the \").
    let one = compile(
        src.replace("dsl: 2", "dsl: 1").as_bytes(),
        &CompileOptions::default(),
    );
    let one = one.workflow.unwrap();
    let iterion_dsl::ir::NodeBody::Tool(t) = &one.node("a").unwrap().body else {
        panic!("tool")
    };
    assert_eq!(t.command, "printf '%s\\\\n' \\\"hi\\\"");
    // The profile-1 directive has no place in a profile-2 file.
    let directive = src.replace("## a bot", "## strict-escape: on");
    expect(&directive, &[("E040", 1)]);
}

#[test]
fn dsl_profile_one_is_accepted() {
    expect(&format!("dsl: 1\n{}", workflow_with("")), &[]);
}

#[test]
fn c001_unknown_edge_target() {
    expect(&workflow_with("  a -> ghost\n"), &[("C001", 6)]);
}

#[test]
fn c004_unterminated_reference_and_unsupported_namespace() {
    let src = "agent x:\n  model: \"anthropic/claude-sonnet-4-5\"\n  user: \"{{vars.x\"\n\nworkflow w:\n  entry: x\n  x -> done\n";
    expect(src, &[("C004", 3)]);
    let src =
        "tool a:\n  command: `cat {{params.report}}`\n\nworkflow w:\n  entry: a\n  a -> done\n";
    expect(src, &[("C004", 2)]);
}

#[test]
fn c005_one_loop_with_two_caps() {
    let src = "tool a:\n  command: `true`\n\ntool b:\n  command: `true`\n\ntool c:\n  command: `true`\n\nworkflow w:\n  entry: a\n  a -> b as r(2)\n  a -> c\n  b -> done\n  c -> a as r(3)\n  c -> done\n";
    expect(src, &[("C005", 15)]);
}

#[test]
fn c006_no_workflow() {
    expect(TOOL_A, &[("C006", 1)]);
}

#[test]
fn c007_second_workflow() {
    let src = format!(
        "{}\nworkflow v:\n  entry: a\n  a -> done\n",
        workflow_with("")
    );
    expect(&src, &[("C007", 8)]);
}

#[test]
fn c008_missing_and_unknown_entry() {
    expect(
        &format!("{TOOL_A}\nworkflow w:\n  a -> done\n"),
        &[("C008", 4)],
    );
    expect(
        &format!("{TOOL_A}\nworkflow w:\n  entry: ghost\n  a -> done\n"),
        &[("C008", 5)],
    );
}

#[test]
fn c040_expression_syntax_error() {
    let src = format!(
        "{TOOL_A}\nworkflow w:\n  entry: a\n  a -> done when \"ok ==\"\n  a -> fail else\n"
    );
    expect(&src, &[("C040", 6)]);
}

#[test]
fn c041_node_declared_twice_across_kinds() {
    let src = "agent x:\n  model: \"anthropic/claude-sonnet-4-5\"\n  user: \"hi\"\n\ntool x:\n  command: `true`\n\nworkflow w:\n  entry: x\n  x -> done\n";
    expect(src, &[("C041", 5)]);
}

#[test]
fn c044_inline_needs_image_or_build() {
    expect(&workflow_with("  sandbox: inline\n"), &[("C044", 6)]);
    expect(&workflow_with("  sandbox:\n"), &[("C044", 6)]);
}

#[test]
fn c044_image_and_build_are_exclusive() {
    let got = got(&workflow_with(
        "  sandbox:\n    image: \"x\"\n    build:\n      dockerfile: \"Dockerfile\"\n",
    ));
    // Anchored at the image or the build key; either names the clash.
    assert!(
        got == [("C044".into(), 7)] || got == [("C044".into(), 8)],
        "{got:?}"
    );
}

#[test]
fn c044_mode_auto_takes_no_image() {
    expect(
        &workflow_with("  sandbox:\n    mode: auto\n    image: \"x\"\n"),
        &[("C044", 8)],
    );
}

#[test]
fn c044_mode_none_takes_no_other_field() {
    expect(
        &workflow_with("  sandbox:\n    mode: none\n    env: { A: \"1\" }\n"),
        &[("C044", 8)],
    );
}

#[test]
fn c044_bad_host_state_and_relative_workspace_folder() {
    expect(
        &workflow_with("  sandbox:\n    image: \"x\"\n    host_state: shared\n"),
        &[("C044", 8)],
    );
    expect(
        &workflow_with("  sandbox:\n    image: \"x\"\n    workspace_folder: \"work\"\n"),
        &[("C044", 8)],
    );
}

#[test]
fn c044_bad_network_blocks() {
    for body in [
        "      mode: closed\n",
        "      mode: allowlist\n      inherit: merge\n",
        "      mode: allowlist\n      preset: \"strict\"\n",
        "      mode: open\n      rules: [\"example.com\"]\n",
    ] {
        let extra = format!("  sandbox:\n    image: \"x\"\n    network:\n{body}");
        let src = workflow_with(&extra);
        let got = got(&src);
        assert_eq!(
            got.iter().map(|(c, _)| c.as_str()).collect::<Vec<_>>(),
            ["C044"],
            "{src}"
        );
    }
}

#[test]
fn c044_build_path_outside_the_workspace() {
    expect(
        &workflow_with("  sandbox:\n    build:\n      dockerfile: \"../Dockerfile\"\n"),
        &[("C044", 8)],
    );
}

#[test]
fn c044_network_word_as_workflow_sandbox_mode() {
    let src = workflow_with("  sandbox: denylist\n");
    expect(&src, &[("C044", 6)]);
    let out = compile(src.as_bytes(), &CompileOptions::default());
    assert_eq!(
        out.diagnostics[0].message,
        "\"denylist\" is a network mode, not a sandbox mode"
    );
}

#[test]
fn c090_secret_declared_twice() {
    let src = format!(
        "secrets:\n  kube:\n    value: \"${{KUBE}}\"\n    hosts: [\"k8s.example.com\"]\n  kube:\n    value: \"${{KUBE}}\"\n    hosts: [\"k8s.example.com\"]\n\n{}",
        workflow_with("")
    );
    expect(&src, &[("C090", 5)]);
}

#[test]
fn c123_two_else_edges() {
    let src = format!(
        "{TOOL_A}\nworkflow w:\n  entry: a\n  a -> done when \"true\"\n  a -> fail else\n  a -> done else\n"
    );
    expect(&src, &[("C123", 8)]);
}

#[test]
fn c128_and_c909_on_a_workflow_opt_out_and_no_c136() {
    let src = "secrets:\n  tok:\n    value: \"${TOK}\"\n    hosts: [\"api.example.com\"]\n\nagent x:\n  model: \"anthropic/claude-sonnet-4-5\"\n  user: \"hi\"\n  interaction: ask\n\nworkflow w:\n  entry: x\n  sandbox: none\n  x -> done\n";
    expect(src, &[("C128", 13), ("C909", 2)]);
}

#[test]
fn c136_fires_without_the_capability_and_not_with_it() {
    let src = "agent x:\n  model: \"anthropic/claude-sonnet-4-5\"\n  user: \"hi\"\n  interaction: ask\n\nworkflow w:\n  entry: x\n  x -> done\n";
    expect(src, &[("C136", 4)]);
    let out = compile(
        src.as_bytes(),
        &CompileOptions {
            ask_user_in_sandbox: true,
        },
    );
    assert_eq!(out.diagnostics, vec![]);
}

#[test]
fn c147_unknown_loop() {
    let src = "tool a:\n  command: `echo {{loop.nope.iteration}}`\n\nworkflow w:\n  entry: a\n  a -> done\n";
    expect(src, &[("C147", 2)]);
}

#[test]
fn c903_loop_edge_after_an_unconditional_edge() {
    let src = "tool a:\n  command: `true`\n\ntool b:\n  command: `true`\n\ntool c:\n  command: `true`\n\nworkflow w:\n  entry: a\n  a -> b\n  b -> done\n  a -> c as l(2)\n  c -> done\n";
    expect(src, &[("C903", 14)]);
}

#[test]
fn c904_go_template_is_kept_as_text() {
    let src = "tool a:\n  command: `docker inspect -f '{{json .Config}}' x`\n\nworkflow w:\n  entry: a\n  a -> done\n";
    expect(src, &[("C904", 2)]);
}

const FAN: &str = "router r:\n  mode: fan_out_all\n\ntool a:\n  command: `true`\n\ntool b:\n  command: `true`\n\ntool j:\n  await: wait_all\n  command: `true`\n\n";

#[test]
fn a_clean_fan_out_has_no_diagnostic() {
    let src = format!(
        "{FAN}workflow w:\n  entry: r\n  r -> a\n  r -> b\n  a -> j\n  b -> j\n  j -> done\n"
    );
    expect(&src, &[]);
}

#[test]
fn c905_else_on_a_fan_out_edge() {
    let src = format!(
        "{FAN}workflow w:\n  entry: r\n  r -> a else\n  r -> b\n  a -> j\n  b -> j\n  j -> done\n"
    );
    expect(&src, &[("C905", 16)]);
}

#[test]
fn a_condition_on_a_fan_out_edge_gates_its_branch() {
    let src = format!(
        "{FAN}workflow w:\n  entry: r\n  r -> a when ok\n  r -> b\n  a -> j\n  b -> j\n  j -> done\n"
    );
    expect(&src, &[]);
}

#[test]
fn a_fan_out_router_every_branch_reaches_is_their_join() {
    let src = format!(
        "{FAN}router r2:\n  mode: fan_out_all\n\ntool c:\n  command: `true`\n\ntool d:\n  command: `true`\n\n\
         workflow w:\n  entry: r\n  r -> a\n  r -> b\n  a -> r2\n  b -> r2\n  r2 -> c\n  r2 -> d\n  c -> j\n  d -> j\n  j -> done\n"
    );
    expect(&src, &[]);
}

#[test]
fn c907_a_fan_out_inside_one_branch_still_nests() {
    let src = format!(
        "{FAN}router r2:\n  mode: fan_out_all\n\ntool c:\n  command: `true`\n\ntool d:\n  command: `true`\n\ntool k:\n  await: wait_all\n  command: `true`\n\n\
         workflow w:\n  entry: r\n  r -> a\n  r -> b\n  a -> r2\n  r2 -> c\n  r2 -> d\n  c -> k\n  d -> k\n  k -> j\n  b -> j\n  j -> done\n"
    );
    expect(&src, &[("C907", 31)]);
}

#[test]
fn c906_fan_out_without_a_join() {
    let src = "router r:\n  mode: fan_out_all\n\ntool a:\n  command: `true`\n\ntool b:\n  command: `true`\n\nworkflow w:\n  entry: r\n  r -> a\n  r -> b\n  a -> done\n  b -> fail\n";
    let got = got(src);
    assert!(got.contains(&("C906".to_string(), 1)), "{got:?}");
}

#[test]
fn c907_node_reachable_from_two_branches() {
    let src = "router r:\n  mode: fan_out_all\n\ntool a:\n  command: `true`\n\ntool b:\n  command: `true`\n\ntool m:\n  command: `true`\n\ntool j:\n  await: wait_all\n  command: `true`\n\nworkflow w:\n  entry: r\n  r -> a\n  r -> b\n  a -> m\n  b -> m\n  m -> j\n";
    let got = got(src);
    assert!(got.iter().any(|(c, _)| c == "C907"), "{got:?}");
}

#[test]
fn c028_two_unconditional_edges_map_the_same_key() {
    let src = "tool a:\n  command: `true`\n\ntool b:\n  command: `true`\n\ntool t:\n  command: `true`\n\nworkflow w:\n  entry: a\n  a -> b with { k: \"1\" }\n  b -> t with { k: \"2\" }\n  t -> done\n";
    // a -> b and b -> t target different nodes: clean.
    expect(src, &[]);
    // Two sources into a node that is not a join: the taken edge's mapping wins, no clash.
    let src = "router r:\n  mode: condition\n\ntool a:\n  command: `echo '{\"ok\":true}'`\n\ntool b:\n  command: `true`\n\ntool t:\n  command: `true`\n\nworkflow w:\n  entry: a\n  a -> b when ok\n  a -> r else\n  b -> t with { k: \"1\" }\n  r -> t with { k: \"2\" }\n  t -> done\n";
    expect(src, &[]);
    // Two branches into a join: a clash.
    let src = "router r:\n  mode: fan_out_all\n\ntool a:\n  command: `true`\n\ntool b:\n  command: `true`\n\ntool t:\n  await: wait_all\n  command: `true`\n\nworkflow w:\n  entry: r\n  r -> a\n  r -> b\n  a -> t with { k: \"1\" }\n  b -> t with { k: \"2\" }\n  t -> done\n";
    expect(src, &[("C028", 19)]);
}

#[test]
fn c032_field_of_a_node_without_output_schema() {
    let src = "tool t:\n  command: `echo '{\"x\":1}'`\n\ntool u:\n  command: `echo {{outputs.t.x}}`\n\nworkflow w:\n  entry: t\n  t -> u\n  u -> done\n";
    expect(src, &[("C032", 5)]);
}

#[test]
fn c035_an_artifact_nobody_publishes_and_fields_of_a_published_one() {
    let nodes = "schema v:\n  verdict: string [enum: \"ok\", \"ko\"]\n\nagent x:\n  model: \"anthropic/claude\"\n  output: v\n  publish: review\n  user: \"hi\"\n\nagent y:\n  model: \"anthropic/claude\"\n  user: \"{{artifacts.review.verdict}} {{artifacts.review}}\"\n";
    expect(&run_nodes(nodes), &[]);
    // An unknown artifact is C035; a field the publisher's schema lacks is C031 (the artifact
    // is its publisher's output).
    let bad = nodes.replace(
        "{{artifacts.review}}",
        "{{artifacts.nope}} {{artifacts.review.absent}}",
    );
    expect(&run_nodes(&bad), &[("C031", 12), ("C035", 12)]);
}

#[test]
fn schema_enums_lower_into_the_ir_and_reject_non_strings_and_repeats() {
    let src = run_nodes(
        "schema v:\n  level: string [enum: \"low\", \"high\"]\n\nagent x:\n  model: \"anthropic/claude\"\n  output: v\n  user: \"hi\"\n",
    );
    let compiled = iterion_dsl::compile(src.as_bytes(), &Default::default());
    let wf = compiled.workflow.expect("compiles");
    assert_eq!(
        wf.schemas["v"].fields[0].enum_values,
        Some(vec!["low".to_owned(), "high".to_owned()])
    );
    for (bad, code) in [
        ("n: int [enum: \"a\"]", "E021"),
        ("s: string [enum: \"a\", \"a\"]", "E010"),
        ("s: string [enum: ]", "E002"),
        ("s: string [max: \"a\"]", "E001"),
    ] {
        let src = format!("schema v:\n  {bad}\n");
        expect(&src, &[(code, 2)]);
    }
}

#[test]
fn upstream_node_and_budget_properties_compile() {
    // readonly drops writing tools (C942 says so); max_cost_usd is not enforced (C940);
    // default_backend makes model optional; provider names a bare model's provider.
    let src = "agent x:\n  model: \"claude-opus-4-7\"\n  provider: anthropic\n  readonly: true\n  tools: [read_file, write_file, list_files]\n  reasoning_effort: \"${EFFORT:-high}\"\n  user: \"hi\"\n\nagent y:\n  session: inherit_if_available\n  user: \"hi\"\n\nworkflow w:\n  entry: x\n  default_backend: claude_code\n  budget:\n    max_parallel_branches: 2\n    max_tokens: 1000\n    max_cost_usd: 2.5\n  x -> y\n  y -> done\n";
    expect(src, &[("C940", 18), ("C940", 19), ("C942", 5)]);
    let wf = iterion_dsl::compile(src.as_bytes(), &Default::default())
        .workflow
        .expect("compiles");
    assert_eq!(wf.budget.max_parallel_branches, Some(2));
    assert_eq!(wf.budget.max_tokens, Some(1000));
    let iterion_dsl::ir::NodeBody::Agent(x) = &wf.nodes[0].body else {
        panic!("agent")
    };
    assert!(x.readonly);
    assert_eq!(
        x.tools,
        vec![iterion_dsl::ir::Tool::ReadFile, iterion_dsl::ir::Tool::Glob]
    );
    assert_eq!(x.backend, iterion_dsl::ir::Backend::ClaudeCode);
    assert_eq!(x.provider.as_deref(), Some("anthropic"));
    let iterion_dsl::ir::NodeBody::Agent(y) = &wf.nodes[1].body else {
        panic!("agent")
    };
    assert_eq!(y.model, iterion_dsl::ir::default_delegate_model(y.backend));
    assert_eq!(y.session, iterion_dsl::ir::Session::InheritIfAvailable);
}

#[test]
fn a_workflow_var_overrides_a_top_level_one() {
    let src = "vars:\n  dir: string = \"top\"\n\ntool a:\n  command: `echo {{vars.dir}}`\n\nworkflow w:\n  vars:\n    dir: string = \"workflow\"\n  entry: a\n  a -> done\n";
    let wf = iterion_dsl::compile(src.as_bytes(), &Default::default())
        .workflow
        .expect("compiles");
    assert_eq!(wf.vars.len(), 1);
    assert_eq!(wf.vars[0].default, Some(serde_json::json!("workflow")));
}

#[test]
fn c943_capabilities_compaction_and_memory_are_accepted_but_not_enforced() {
    let src = run_nodes(
        "agent x:\n  model: \"anthropic/claude\"\n  capabilities: [board.read, board.create]\n  compaction:\n    threshold: 0.9\n    preserve_recent: 8\n  memory:\n    enabled: true\n    scope: fp\n  user: \"hi\"\n",
    );
    expect(&src, &[("C943", 3), ("C943", 4), ("C943", 7)]);
    // The shape is still checked: an unknown key in the block is E012.
    let bad = src.replace("preserve_recent", "preserve_recnt");
    expect(&bad, &[("E012", 6)]);
}

#[test]
fn c943_workflow_compaction_and_interaction_are_accepted_but_not_enforced() {
    let src = workflow_with("  interaction: llm_or_human\n  compaction:\n    threshold: 0.9\n");
    expect(&src, &[("C943", 6), ("C943", 7)]);
}

#[test]
fn a_human_node_publishes_its_answer_like_an_agent() {
    let src = "schema v:\n  verdict: string\n\nhuman x:\n  output: v\n  publish: decisions\n  instructions: \"decide\"\n\nagent y:\n  model: \"anthropic/claude\"\n  user: \"{{artifacts.decisions.verdict}}\"\n\nworkflow w:\n  entry: x\n  x -> y\n  y -> done\n";
    expect(src, &[]);
    let wf = iterion_dsl::compile(src.as_bytes(), &Default::default())
        .workflow
        .expect("compiles");
    let iterion_dsl::ir::NodeBody::Human(h) = &wf.nodes[0].body else {
        panic!("human")
    };
    assert_eq!(h.publish.as_deref(), Some("decisions"));
    // The answer's schema is checked through the artifact as through the output.
    let bad = src.replace("decisions.verdict", "decisions.absent");
    expect(&bad, &[("C031", 11)]);
}
