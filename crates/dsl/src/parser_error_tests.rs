//! Parser tests: diagnostic messages and error recovery (DSL.md §2.2, §8.4).
use pretty_assertions::assert_eq;

use super::parse;
use super::tests::{agent_with, codes, d, only, workflow_with};
use crate::ast::*;
use crate::diag::Code;

// ----- messages ---------------------------------------------------------------------------

#[test]
fn unsupported_upstream_properties_say_so() {
    for prop in ["tool_policy", "timeout", "command"] {
        let src = agent_with(&format!("  {prop}: x\n"));
        assert_eq!(
            only(&src),
            d(
                Code::E012,
                4,
                3,
                u32::try_from(prop.len()).unwrap(),
                &format!("\"{prop}\" is not supported yet")
            ),
            "{prop}"
        );
    }
    assert_eq!(
        only(&workflow_with("  budget:\n    warn_tokens: 3\n")).message,
        "\"warn_tokens\" is not supported yet"
    );
    assert_eq!(
        only(&workflow_with("  tool_policy: [bash]\n")).message,
        "\"tool_policy\" is not supported yet"
    );
}

#[test]
fn unknown_properties_hint_the_closest_within_two_edits() {
    let hint = |src: &str| only(src).hint;
    assert_eq!(
        hint(&agent_with("  tool_max_step: 3\n")).as_deref(),
        Some("did you mean \"tool_max_steps\"?")
    );
    // `mode` is one edit from `model` only.
    assert_eq!(
        hint(&agent_with("  mode: x\n")).as_deref(),
        Some("did you mean \"model\"?")
    );
    assert_eq!(hint(&agent_with("  zzz: x\n")), None);
    // Ties go to the first property in table order: `inpt` is one edit from `input` only,
    // `ouput` from `output`; `usr` is one from `user`.
    assert_eq!(
        hint(&agent_with("  usr: x\n")).as_deref(),
        Some("did you mean \"user\"?")
    );
    assert_eq!(
        hint(&workflow_with("  entri: a\n")).as_deref(),
        Some("did you mean \"entry\"?")
    );
    assert_eq!(
        only(&workflow_with(
            "  sandbox:\n    network:\n      mdoe: open\n"
        )),
        d(Code::E012, 8, 7, 4, "unknown property \"mdoe\" in network")
            .with_hint("did you mean \"mode\"?")
    );
    assert_eq!(
        only("router r:\n  await: wait_all\n").message,
        "unknown property \"await\" in router"
    );
}

#[test]
fn a_property_given_twice_is_e010() {
    assert_eq!(
        only(&agent_with("  user: \"again\"\n")),
        d(
            Code::E010,
            4,
            3,
            4,
            "property \"user\" already declared at line 3"
        )
    );
    assert_eq!(
        only(&workflow_with("  entry: a\n")),
        d(
            Code::E010,
            6,
            3,
            5,
            "property \"entry\" already declared at line 5"
        )
    );
}

#[test]
fn duplicate_vars_fields_and_keys_are_e010() {
    // A workflow's vars may redeclare top-level ones (the workflow's win, as upstream); a
    // name declared twice in one block is E010.
    let src = format!(
        "vars:\n  x: int\n\n{}",
        workflow_with("  vars:\n    x: string\n")
    );
    assert_eq!(parse(&src).1, vec![]);
    let src = workflow_with("  vars:\n    x: string\n    x: int\n");
    assert_eq!(only(&src).message, "var \"x\" already declared at line 7");
    assert_eq!(
        only("vars:\n  x: int\n  x: bool\n"),
        d(Code::E010, 3, 3, 1, "var \"x\" already declared at line 2")
    );
    assert_eq!(
        only("schema s:\n  a: int\n  a: bool\n"),
        d(
            Code::E010,
            3,
            3,
            1,
            "field \"a\" already declared at line 2"
        )
    );
    assert_eq!(
        only("schema s:\n  a: int\nschema s:\n  b: int\n"),
        d(
            Code::E010,
            3,
            8,
            1,
            "schema \"s\" already declared at line 1"
        )
    );
    assert_eq!(
        only(&workflow_with(
            "  sandbox:\n    env:\n      A: 1\n      A: 2\n"
        )),
        d(Code::E010, 9, 7, 1, "key \"A\" already declared at line 8")
    );
    assert_eq!(
        codes(
            "tool a:\n  command: `x`\n\nworkflow w:\n  entry: a\n  a -> done with { k: 1, k: 2 }\n"
        ),
        vec![(Code::E010, 6)]
    );
}

#[test]
fn a_second_vars_block_at_one_level_is_e014() {
    assert_eq!(
        only("vars:\n  a: int\nvars:\n  b: int\n"),
        d(Code::E014, 3, 1, 4, "only one vars block is allowed here")
    );
    assert_eq!(
        only(&workflow_with("  vars:\n    a: int\n  vars:\n    b: int\n")),
        d(Code::E014, 8, 3, 4, "only one vars block is allowed here")
    );
    // One at top level and one in the workflow is fine.
    assert!(
        parse(&format!(
            "vars:\n  a: int\n{}",
            workflow_with("  vars:\n    b: int\n")
        ))
        .1
        .is_empty()
    );
}

#[test]
fn reserved_words_are_e011_as_any_name() {
    for (src, line) in [
        ("prompt with:\n  x\n".to_owned(), 1),
        ("schema s:\n  when: bool\n".to_owned(), 2),
        ("vars:\n  true: int\n".to_owned(), 2),
        ("secrets:\n  as: \"x\"\n".to_owned(), 2),
        ("workflow not:\n  entry: a\n".to_owned(), 1),
        (workflow_with("  a -> done as else(2)\n"), 6),
        (workflow_with("  a -> done when true\n"), 6),
        (workflow_with("  a -> done with { done: 1 }\n"), 6),
        (workflow_with("  a -> with\n"), 6),
    ] {
        let d = only(&src);
        assert_eq!((d.code, d.span.line), (Code::E011, line), "{src}");
    }
    // `done` and `fail` are legal edge targets, schema field names and `when` fields.
    assert!(parse(&workflow_with("  a -> fail when x\n")).1.is_empty());
    assert!(
        parse(&workflow_with("  a -> done when not done\n"))
            .1
            .is_empty()
    );
    assert!(
        parse(&workflow_with("  a -> done when fail\n"))
            .1
            .is_empty()
    );
    assert!(
        parse("schema s:\n  done: bool\n  fail: string\n")
            .1
            .is_empty()
    );
}

#[test]
fn required_properties_are_e013_at_the_name() {
    // A missing model is a compile-stage E013 on the claw backend only: a delegate backend
    // (on the node or the workflow's default_backend) makes it optional, and a node naming
    // neither runs on claude_code.
    let compiled = crate::compile(
        b"agent a:\n  backend: claw\n  user: \"x\"\nworkflow w:\n  entry: a\n  a -> done\n",
        &Default::default(),
    );
    let codes: Vec<_> = compiled
        .diagnostics
        .iter()
        .map(|d| (d.code, d.span.line))
        .collect();
    assert_eq!(codes, vec![(Code::E013, 1)]);
    assert_eq!(
        compiled.diagnostics[0].message,
        "agent \"a\" needs \"model\""
    );
    let auto = crate::compile(
        b"agent a:\n  user: \"x\"\nworkflow w:\n  entry: a\n  a -> done\n",
        &Default::default(),
    );
    assert_eq!(auto.error_count(), 0, "{:?}", auto.diagnostics);
    let lowered = auto.workflow.expect("compiles");
    assert!(matches!(
        &lowered.nodes[0].body,
        crate::ir::NodeBody::Agent(a)
            if a.backend == crate::ir::Backend::ClaudeCode && a.model == "anthropic/claude-sonnet-4-5"
    ));
    for delegate in [
        "agent a:\n  backend: claude_code\n  user: \"x\"\nworkflow w:\n  entry: a\n  a -> done\n",
        "agent a:\n  user: \"x\"\nworkflow w:\n  entry: a\n  default_backend: codex\n  a -> done\n",
    ] {
        let compiled = crate::compile(delegate.as_bytes(), &Default::default());
        assert_eq!(
            compiled.error_count(),
            0,
            "{delegate}: {:?}",
            compiled.diagnostics
        );
    }
}

#[test]
fn an_agent_or_judge_without_user_reads_its_input_as_json() {
    // Upstream's fallback: no `user:` means the user message is the node's input as JSON.
    for src in [
        "judge j:\n  model: \"a/b\"\n",
        "agent a:\n  model: \"a/b\"\n",
    ] {
        let (_, diags) = parse(src);
        assert!(
            !diags.iter().any(|d| d.code == Code::E013),
            "{src}: {diags:?}"
        );
    }
}

#[test]
fn enumerations_checked_at_parse_stage_are_e020() {
    assert_eq!(
        only(&agent_with("  interaction: review\n")),
        d(
            Code::E020,
            4,
            16,
            6,
            "\"review\" is not a valid interaction; expected none, ask or human"
        )
    );
    assert_eq!(
        only(&agent_with("  await: \"all\"\n")).message,
        "\"all\" is not a valid await; expected wait_all or best_effort"
    );
    assert_eq!(
        only("router r:\n  mode: fan_out_some\n").message,
        "\"fan_out_some\" is not a valid mode; expected condition, fan_out_all, round_robin, llm or fan_out_each"
    );
    // Enumerations checked by C-codes stay words.
    assert!(
        parse(&workflow_with(
            "  worktree: sometimes\n  sandbox: allowlist\n"
        ))
        .1
        .is_empty()
    );
}

#[test]
fn values_of_the_wrong_kind_are_e021() {
    let msg = |src: &str| only(src).message;
    assert_eq!(
        msg(&agent_with("  tool_max_steps: \"5\"\n")),
        "tool_max_steps expects an int of at least 0, found \"5\""
    );
    assert_eq!(
        msg(&agent_with("  tool_max_steps: 99999999999999999999\n")),
        "tool_max_steps expects an int in i64 range, found 99999999999999999999"
    );
    assert_eq!(
        msg(&agent_with("  tools: bash\n")),
        "tools expects a list of words, found bash"
    );
    assert_eq!(
        msg(&agent_with("  tools: [bash, \"two words\"]\n")),
        "tools expects a list of words, found \"two words\""
    );
    assert_eq!(
        msg(&agent_with("  output: [a]\n")),
        "output expects a schema name, found a list"
    );
    assert_eq!(
        msg(&agent_with("  system: 3\n")),
        "system expects a prompt name or a string, found 3"
    );
    assert_eq!(
        msg(&agent_with("  sandbox: 3\n")),
        "sandbox expects a word or a block, found 3"
    );
    assert_eq!(
        msg(&agent_with("  input:\n    x: 1\n")),
        "input expects a schema name, found a nested block"
    );
    assert_eq!(
        msg("secrets:\n  s:\n    optional: \"yes\"\n"),
        "optional expects true or false, found \"yes\""
    );
    assert_eq!(
        msg("secrets:\n  s:\n    hosts: \"a\"\n"),
        "hosts expects a list of strings, found \"a\""
    );
    assert_eq!(
        msg("secrets:\n  s: [a]\n"),
        "s expects a string, found a list"
    );
    assert_eq!(
        msg("vars:\n  x: strng\n"),
        "x expects a type (string, bool, int, float, json or string[]), found \"strng\""
    );
    assert_eq!(
        msg(&workflow_with("  budget: 5\n")),
        "budget expects a block, found 5"
    );
    assert_eq!(
        msg(&workflow_with("  budget:\n    max_iterations: 0\n")),
        "max_iterations expects an int of at least 1, found 0"
    );
    assert_eq!(
        msg(&workflow_with("  sandbox:\n    env: [a]\n")),
        "env expects a map, found a list"
    );
    assert_eq!(
        msg(&workflow_with("  sandbox:\n    env: { A: [1] }\n")),
        "A expects a string, found a list"
    );
    assert_eq!(
        msg(&workflow_with("  a -> done with { k: [1] }\n")),
        "k expects a string, int, float or bool, found a list"
    );
    assert_eq!(
        msg(&workflow_with("  a -> done as r(99999999999999999999)\n")),
        "loop cap expects an int in i64 range, found 99999999999999999999"
    );
}

#[test]
fn a_literal_model_must_look_like_provider_slash_model() {
    for bad in ["", "Anthropic/x", "/x", "a/", "a/b c", "a b/c", "gpt 4"] {
        let src = agent_with("").replace("anthropic/claude-sonnet-4-5", bad);
        assert_eq!(
            only(&src).message,
            format!("model expects \"provider/model\" or a model name, found \"{bad}\""),
            "{bad}"
        );
    }
    // A bare model name (upstream's `claude-opus-4-7`) takes its provider at launch.
    for good in [
        "openai/gpt-4o",
        "a_1/é",
        "${MODEL}",
        "{{vars.m}}",
        "x${Y}",
        "claude-opus-4-7",
        "gpt4",
    ] {
        let src = agent_with("").replace("anthropic/claude-sonnet-4-5", good);
        assert_eq!(parse(&src).1, vec![], "{good}");
    }
}

#[test]
fn durations_are_int_unit_pairs_with_a_positive_total() {
    for good in ["90s", "1h30m", "5ms", "1m5s", "0h1s", "${BUDGET}", "x${Y}"] {
        let src = workflow_with(&format!("  budget:\n    max_duration: \"{good}\"\n"));
        assert_eq!(parse(&src).1, vec![], "{good}");
    }
    for bad in [
        "",
        "0s",
        "5",
        "s",
        "1.5h",
        "1 h",
        "1d",
        "1h-",
        "99999999999999999999h",
    ] {
        let src = workflow_with(&format!("  budget:\n    max_duration: \"{bad}\"\n"));
        assert_eq!(codes(&src), vec![(Code::E021, 7)], "{bad:?}");
    }
    assert_eq!(super::values::duration_ms("1h30m"), Some(5_400_000));
    assert_eq!(super::values::duration_ms("2m5ms"), Some(120_005));
}

#[test]
fn syntax_errors_name_what_was_expected() {
    let msg = |src: &str| only(src).message;
    assert_eq!(msg("agent a b:\n"), "expected \":\", found \"b\"");
    assert_eq!(
        msg("agent \"a\":\n"),
        "expected a node name, found string \"a\""
    );
    assert_eq!(
        msg("vars:\nrouter r:\n"),
        "expected an indented block after \"vars:\", found \"router\""
    );
    assert_eq!(
        msg("workflow w:\n"),
        "expected an indented block after \"workflow w:\", found end of file"
    );
    assert_eq!(
        msg(&agent_with("  tools: [a b]\n")),
        "expected \",\" or \"]\", found \"b\""
    );
    assert_eq!(
        msg(&agent_with("  tools: [a,,]\n")),
        "expected a value, found \",\""
    );
    assert_eq!(
        msg(&agent_with("  tools\n")),
        "expected \":\", found end of line"
    );
    assert_eq!(
        msg(&agent_with("  output:\n")),
        "expected a schema name after \"output:\", found end of line"
    );
    assert_eq!(
        msg(&workflow_with("  a -> done when not\n")),
        "expected a field name after \"when not\", found end of line"
    );
    assert_eq!(
        msg(&workflow_with("  a -> done when\n")),
        "expected a field name or an expression after \"when\", found end of line"
    );
    assert_eq!(
        msg(&workflow_with("  a -> done as r 2\n")),
        "expected \"(\", found \"2\""
    );
    assert_eq!(
        msg(&workflow_with("  a -> done as r(x)\n")),
        "expected the loop cap, found \"x\""
    );
    assert_eq!(
        msg(&workflow_with("  a -> done with k\n")),
        "expected \"{\", found \"k\""
    );
    assert_eq!(
        msg(&workflow_with("  a -> done then\n")),
        "unexpected \"then\""
    );
    assert_eq!(
        msg(&workflow_with("  a -> done -> fail\n")),
        "unexpected \"->\": edge chains (a -> b -> c) are not supported yet"
    );
    assert_eq!(
        msg(&agent_with("  user2: \"x\" \"y\"\n")),
        "unknown property \"user2\" in agent"
    );
    assert_eq!(msg(&agent_with("  tools: [] x\n")), "unexpected \"x\"");
    assert_eq!(
        msg("prompt p: \"inline\"\n"),
        "unexpected string \"inline\""
    );
}

#[test]
fn unexpected_indentation_is_e003() {
    assert_eq!(
        only(&agent_with("    input: s\n")),
        d(Code::E003, 4, 1, 4, "unexpected indentation")
    );
    assert_eq!(only("  agent a:\n").message, "unexpected indentation");
}

#[test]
fn top_level_words_are_declarations_or_e001() {
    assert_eq!(
        only("agnet a:\n  x: 1\n"),
        d(Code::E001, 1, 1, 5, "unexpected \"agnet\"").with_hint("did you mean \"agent\"?")
    );
    assert_eq!(only("42\n").message, "unexpected \"42\"");
    assert_eq!(only("a -> b\n").message, "unexpected \"a\"");
}

// ----- recovery ---------------------------------------------------------------------------

#[test]
fn each_bad_declaration_reports_once_and_is_dropped() {
    let src = "agent a:\n  modle: x\n  also: bad\n\ntool ok1:\n  command: `x`\n\ntool b:\n  command: [\n    \"x\",\n\nschema s:\n  f: int\n\nsupervisor h:\n  x: `multi\nline\n`\n\nrouter ok2:\n";
    let (file, diags) = parse(src);
    let names: Vec<&str> = file
        .decls
        .iter()
        .filter_map(|d| match d {
            Decl::Node(n) => Some(n.name.name.as_str()),
            Decl::Schema(s) => Some(s.name.name.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(
        (
            names,
            diags
                .iter()
                .map(|d| (d.code, d.span.line))
                .collect::<Vec<_>>()
        ),
        (
            vec!["ok1", "s", "ok2"],
            vec![(Code::E012, 2), (Code::E002, 12), (Code::E001, 15)]
        )
    );
}

#[test]
fn an_unclosed_bracket_does_not_swallow_later_declarations() {
    let src = "tool a:\n  command: `x`\n  output: [\n\nworkflow w:\n  entry: a\n  oops\n";
    assert_eq!(codes(src), vec![(Code::E002, 5), (Code::E012, 7)]);
}

#[test]
fn a_lexical_error_is_reported_where_it_is() {
    assert_eq!(
        codes("tool a:\n  command: `x`\n  input: s\n    deeper: 1\n\nagent b:\n  model: $\n"),
        vec![(Code::E003, 4), (Code::E001, 7)]
    );
}

#[test]
fn an_unclosed_bracket_is_named_in_the_hint() {
    let src = "tool a:\n  command: `x`\n  output: [\n\nworkflow w:\n  entry: a\n";
    assert_eq!(
        parse(src).1.first(),
        Some(
            &d(Code::E002, 5, 10, 1, "expected \",\" or \"]\", found \"w\"")
                .with_hint("the \"[\" at line 3 is not closed")
        )
    );
    assert_eq!(
        parse("agent a:\n  tools: [a,\n").1,
        vec![d(
            Code::E002,
            2,
            13,
            1,
            "expected \"]\" to close the bracket at line 2, found end of file"
        )]
    );
}

#[test]
fn a_var_enum_is_parsed_and_its_default_checked() {
    let ok = "vars:\n  tier: string [enum: \"glance\", \"guard\"] = \"guard\"\n\ntool a:\n  command: `true`\n\nworkflow w:\n  entry: a\n  a -> done\n";
    let compiled = crate::compile(ok.as_bytes(), &crate::CompileOptions::default());
    assert_eq!(compiled.error_count(), 0, "{:?}", compiled.diagnostics);
    let bad = ok.replace("= \"guard\"", "= \"audit\"");
    let compiled = crate::compile(bad.as_bytes(), &crate::CompileOptions::default());
    let errors: Vec<(Code, String)> = compiled
        .diagnostics
        .iter()
        .map(|d| (d.code, d.message.clone()))
        .collect();
    assert_eq!(
        errors,
        [(
            Code::C109,
            "default \"audit\" of \"tier\" is not one of its enum values".to_owned()
        )]
    );
    let not_string = ok.replace("tier: string [", "tier: int [");
    let (_, diags) = parse(&not_string);
    assert_eq!(diags[0].code, Code::E021, "{diags:?}");
}

#[test]
fn delegate_is_upstreams_former_name_for_backend() {
    let src = "agent a:\n  delegate: \"codex\"\n  user: \"x\"\n";
    let (file, diags) = parse(src);
    assert!(diags.is_empty(), "{diags:?}");
    let Decl::Node(n) = &file.decls[0] else {
        panic!()
    };
    let NodeBody::Agent(a) = &n.body else {
        panic!()
    };
    assert_eq!(a.delegate.backend.map(|(b, _)| b), Some(Backend::Codex));
    let (_, diags) =
        parse("agent a:\n  backend: \"codex\"\n  delegate: \"codex\"\n  user: \"x\"\n");
    assert_eq!(diags[0].code, Code::E012, "{diags:?}");
}
