use pretty_assertions::assert_eq;
use serde_json::json;

use super::*;

fn r(ns: Namespace, path: &[&str], form: RefForm, text: &str, offset: usize) -> Segment {
    Segment::Ref(Reference {
        namespace: ns,
        path: path.iter().map(|s| s.to_string()).collect(),
        form,
        text: text.to_string(),
        offset,
        len: text.chars().count(),
    })
}

fn t(s: &str) -> Segment {
    Segment::Text(s.to_string())
}

fn malformed(text: &str, offset: usize, reason: &str) -> TemplateIssue {
    TemplateIssue {
        kind: IssueKind::Malformed {
            reason: reason.to_string(),
        },
        text: text.to_string(),
        offset,
        len: text.chars().count(),
    }
}

#[test]
fn references_and_text_alternate_with_char_offsets() {
    assert_eq!(
        parse("é {{vars.a}}-{{ input.x.y }}{{!outputs.n.f}}"),
        Template {
            segments: vec![
                t("é "),
                r(Namespace::Vars, &["a"], RefForm::Quoted, "{{vars.a}}", 2),
                t("-"),
                r(
                    Namespace::Input,
                    &["x", "y"],
                    RefForm::Quoted,
                    "{{ input.x.y }}",
                    13
                ),
                r(
                    Namespace::Outputs,
                    &["n", "f"],
                    RefForm::Raw,
                    "{{!outputs.n.f}}",
                    28
                ),
            ],
            issues: vec![],
        }
    );
}

#[test]
fn every_namespace_shape_of_the_table_parses() {
    for (src, ns, path) in [
        ("{{vars.x}}", Namespace::Vars, vec!["x"]),
        (
            "{{vars.x.deep.er}}",
            Namespace::Vars,
            vec!["x", "deep", "er"],
        ),
        ("{{input}}", Namespace::Input, vec![]),
        ("{{input.f.p}}", Namespace::Input, vec!["f", "p"]),
        ("{{outputs.n}}", Namespace::Outputs, vec!["n"]),
        (
            "{{loop.l.iteration}}",
            Namespace::Loop,
            vec!["l", "iteration"],
        ),
        ("{{loop.l.max}}", Namespace::Loop, vec!["l", "max"]),
        (
            "{{loop.l.previous_output}}",
            Namespace::Loop,
            vec!["l", "previous_output"],
        ),
        (
            "{{loop.l.previous_output.f.g}}",
            Namespace::Loop,
            vec!["l", "previous_output", "f", "g"],
        ),
        ("{{run.id}}", Namespace::Run, vec!["id"]),
        ("{{secrets.s}}", Namespace::Secrets, vec!["s"]),
        ("{{secrets.s.path}}", Namespace::Secrets, vec!["s", "path"]),
        ("{{! secrets.s  }}", Namespace::Secrets, vec!["s"]),
    ] {
        let got = parse(src);
        assert_eq!(got.issues, vec![], "{src}");
        let form = if src.starts_with("{{!") {
            RefForm::Raw
        } else {
            RefForm::Quoted
        };
        assert_eq!(got.segments, vec![r(ns, &path, form, src, 0)], "{src}");
    }
}

#[test]
fn non_candidates_are_plain_text_without_issues() {
    for src in [
        "{{.State}}",
        "{{ }}",
        "{{}}",
        "{{{{",
        "{ {vars.x}}",
        "{{ !vars.x}}",
        "{{1abc}}",
        "printf '%{http_code}' {\"a\":{\"b\":1}}",
        "",
    ] {
        let got = parse(src);
        assert_eq!(got.issues, vec![], "{src}");
        let want = if src.is_empty() { vec![] } else { vec![t(src)] };
        assert_eq!(got.segments, want, "{src}");
    }
}

#[test]
fn a_brace_before_a_reference_is_text() {
    assert_eq!(
        parse("{{{vars.x}}}").segments,
        vec![
            t("{"),
            r(Namespace::Vars, &["x"], RefForm::Quoted, "{{vars.x}}", 1),
            t("}")
        ]
    );
}

#[test]
fn a_go_template_is_kept_and_draws_c904() {
    let got = parse("docker inspect -f '{{json .Config}}' x");
    assert_eq!(
        got.segments,
        vec![t("docker inspect -f '{{json .Config}}' x")]
    );
    let issue = TemplateIssue {
        kind: IssueKind::NotAReference {
            word: "json".to_string(),
        },
        text: "{{json".to_string(),
        offset: 19,
        len: 6,
    };
    assert_eq!(got.issues, vec![issue.clone()]);
    assert_eq!(issue.code(), Code::C904);
    assert_eq!(
        issue.message(),
        "{{json…}} is not a reference and is kept as written"
    );
}

#[test]
fn a_reference_inside_a_non_reference_candidate_is_still_found() {
    let got = parse("{{foo {{vars.x}}}}");
    assert_eq!(
        got.segments,
        vec![
            t("{{foo "),
            r(Namespace::Vars, &["x"], RefForm::Quoted, "{{vars.x}}", 6),
            t("}}")
        ]
    );
    assert_eq!(got.issues.len(), 1);
}

#[test]
fn malformed_references_are_c004_and_stay_text() {
    for (src, issue) in [
        (
            "{{vars.x",
            malformed("{{vars.x", 0, "missing }} on the same line"),
        ),
        (
            "a {{vars.x\n}}",
            malformed("{{vars.x", 2, "missing }} on the same line"),
        ),
        (
            "{{vars.{{x}}",
            malformed("{{vars.{{x}}", 0, "a {{ inside a reference"),
        ),
        (
            "{{vars..x}}",
            malformed("{{vars..x}}", 0, "empty path segment"),
        ),
        ("{{vars.}}", malformed("{{vars.}}", 0, "empty path segment")),
        (
            "{{vars.x y}}",
            malformed("{{vars.x y}}", 0, "unexpected character ' '"),
        ),
        (
            "{{vars.x[0]}}",
            malformed("{{vars.x[0]}}", 0, "unexpected character '['"),
        ),
        (
            "{{vars.0x}}",
            malformed("{{vars.0x}}", 0, "\"0x\" is not a name"),
        ),
        (
            "{{vars}}",
            malformed("{{vars}}", 0, "vars needs a var name"),
        ),
        (
            "{{outputs}}",
            malformed("{{outputs}}", 0, "outputs needs a node name"),
        ),
        (
            "{{secrets}}",
            malformed("{{secrets}}", 0, "secrets needs a secret name"),
        ),
        (
            "{{run}}",
            malformed(
                "{{run}}",
                0,
                "run needs a field: one of id, elapsed_seconds, max_duration_seconds, iterations, max_iterations, tokens, max_tokens, cost_usd, max_cost_usd",
            ),
        ),
        (
            "{{run.started}}",
            malformed(
                "{{run.started}}",
                0,
                "run.started does not exist (the run has id, elapsed_seconds, max_duration_seconds, iterations, max_iterations, tokens, max_tokens, cost_usd, max_cost_usd)",
            ),
        ),
        (
            "{{run.id.x}}",
            malformed("{{run.id.x}}", 0, "run.id has no fields"),
        ),
        (
            "{{loop}}",
            malformed("{{loop}}", 0, "loop needs a loop name"),
        ),
        (
            "{{loop.l}}",
            malformed(
                "{{loop.l}}",
                0,
                "loop.l needs a field: iteration, max or previous_output",
            ),
        ),
        (
            "{{loop.l.count}}",
            malformed(
                "{{loop.l.count}}",
                0,
                "unknown loop field \"count\" (expected iteration, max or previous_output)",
            ),
        ),
        (
            "{{loop.l.max.x}}",
            malformed("{{loop.l.max.x}}", 0, "loop.l.max has no fields"),
        ),
        (
            "{{vars-x}}",
            malformed("{{vars-x}}", 0, "unexpected character '-'"),
        ),
    ] {
        let got = parse(src);
        assert_eq!(got.issues, vec![issue.clone()], "{src}");
        assert_eq!(issue.code(), Code::C004);
        assert!(got.references().next().is_none(), "{src}");
        let text: String = got
            .segments
            .iter()
            .map(|s| match s {
                Segment::Text(t) => t.clone(),
                Segment::Ref(r) => r.text.clone(),
            })
            .collect();
        assert_eq!(text, src);
    }
}

#[test]
fn c004_messages_follow_the_spec_shape() {
    assert_eq!(
        parse("{{vars.x").issues[0].message(),
        "malformed reference {{vars.x: missing }} on the same line"
    );
    let got = parse("cat {{params.report}} {{ each.x }}");
    assert_eq!(
        got.issues
            .iter()
            .map(|i| (i.code(), i.message(), i.offset))
            .collect::<Vec<_>>(),
        vec![
            (
                Code::C004,
                "malformed reference {{params.report}}: namespace \"params\" is not supported yet"
                    .to_string(),
                4
            ),
            (
                Code::C004,
                "malformed reference {{ each.x }}: namespace \"each\" is not supported yet"
                    .to_string(),
                22
            ),
        ]
    );
}

#[test]
fn single_reference_is_the_whole_template_only() {
    assert!(parse("{{input.ok}}").single_reference().is_some());
    assert!(parse(" {{input.ok}}").single_reference().is_none());
    assert!(
        parse("{{input.ok}}{{input.ok}}")
            .single_reference()
            .is_none()
    );
}

#[test]
fn dotted_and_lookup_walk_the_scope() {
    let t = parse("{{outputs.n.f.g}} {{input.missing}} {{vars.nil}}");
    let refs: Vec<&Reference> = t.references().collect();
    assert_eq!(refs[0].dotted(), "outputs.n.f.g");
    let scope = json!({"outputs": {"n": {"f": {"g": 3}}}, "input": {}, "vars": {"nil": null}});
    assert_eq!(refs[0].lookup(&scope), Some(&json!(3)));
    assert_eq!(refs[1].lookup(&scope), None);
    assert_eq!(refs[2].lookup(&scope), Some(&Value::Null));
}

// ----- host references

#[test]
fn host_references_parse_with_nested_defaults() {
    assert_eq!(
        parse_host("$HOME ${A}/${B:-x${C:-}y}$").unwrap(),
        vec![
            HostPart::Text("$HOME ".into()),
            HostPart::Var {
                name: "A".into(),
                default: None
            },
            HostPart::Text("/".into()),
            HostPart::Var {
                name: "B".into(),
                default: Some(vec![
                    HostPart::Text("x".into()),
                    HostPart::Var {
                        name: "C".into(),
                        default: Some(vec![])
                    },
                    HostPart::Text("y".into()),
                ])
            },
            HostPart::Text("$".into()),
        ]
    );
}

#[test]
fn malformed_host_references_are_c004() {
    for (src, reason, offset) in [
        ("${}", "expected a variable name after ${", 0),
        ("a ${1X}", "expected a variable name after ${", 2),
        ("${X", "missing }", 0),
        ("${X:-abc", "missing }", 0),
        (
            "${X:default}",
            "unexpected character ':' after the name (expected } or :-)",
            0,
        ),
        (
            "${localEnv:HOME}",
            "unexpected character ':' after the name (expected } or :-)",
            0,
        ),
        (
            "${X-d}",
            "unexpected character '-' after the name (expected } or :-)",
            0,
        ),
    ] {
        let err = parse_host(src).unwrap_err();
        assert_eq!((err.reason.as_str(), err.offset), (reason, offset), "{src}");
        assert_eq!(err.code(), Code::C004);
        assert!(
            err.to_string().starts_with("malformed reference ${"),
            "{err}"
        );
    }
}

#[test]
fn host_error_text_runs_to_the_closing_brace() {
    let err = parse_host("${X:default} tail").unwrap_err();
    assert_eq!(err.text, "${X:default}");
    assert_eq!(err.len, 12);
    assert_eq!(
        err.to_string(),
        "malformed reference ${X:default}: unexpected character ':' after the name (expected } or :-)"
    );
}

#[test]
fn deeply_nested_host_defaults_are_refused_not_overflowed() {
    let src = "${A:-".repeat(10_000);
    let err = parse_host(&src).unwrap_err();
    assert!(err.reason.contains("nested more than"), "{}", err.reason);
}

#[test]
fn expansion_follows_unset_and_empty_rules() {
    let env = |k: &str| match k {
        "SET" => Some("v".to_string()),
        "EMPTY" => Some(String::new()),
        _ => None,
    };
    for (src, want) in [
        ("${SET}", "v"),
        ("${UNSET}", ""),
        ("${EMPTY}", ""),
        ("${SET:-d}", "v"),
        ("${UNSET:-d}", "d"),
        ("${EMPTY:-d}", "d"),
        ("${UNSET:-${SET}/x}", "v/x"),
        ("${UNSET:-}", ""),
        ("a$b ${SET}", "a$b v"),
        (
            "${AUDIT_MODEL:-anthropic/claude-sonnet-4-5}",
            "anthropic/claude-sonnet-4-5",
        ),
    ] {
        assert_eq!(expand_host(src, env).unwrap(), want, "{src}");
    }
    assert!(expand_host("${", env).is_err());
}

// ----- shell quoting (C137)

fn states(src: &str) -> Vec<ShellQuote> {
    let t = parse(src);
    quote_states(&t).into_iter().map(|(_, q)| q).collect()
}

#[test]
fn quote_states_track_single_double_and_escapes() {
    use ShellQuote::*;
    assert_eq!(
        states(r#"make REGION={{vars.r}} TAG="{{vars.r}}""#),
        vec![Unquoted, Double]
    );
    assert_eq!(
        states("echo '{{vars.a}}' {{vars.b}}"),
        vec![Single, Unquoted]
    );
    assert_eq!(states(r#"echo \"{{vars.a}}"#), vec![Unquoted]);
    assert_eq!(states(r#"echo \'{{vars.a}}"#), vec![Unquoted]);
    assert_eq!(states(r#"echo "a\"{{vars.a}}""#), vec![Double]);
    // No escapes inside single quotes: the backslash does not protect the closing quote.
    assert_eq!(states(r"echo 'a\' {{vars.a}}"), vec![Unquoted]);
    // No `$( … )` nesting: the inner quote closes the outer one.
    assert_eq!(states(r#"echo "$(cat "{{vars.a}}")""#), vec![Unquoted]);
    assert_eq!(
        states("x=$(curl -w '%{http_code}' {{vars.url}}) || y"),
        vec![Unquoted]
    );
}

#[test]
fn quoted_references_lists_only_those_inside_quotes() {
    let t = parse(r#"a {{vars.x}} "{{!vars.y}}" '{{vars.z}}'"#);
    let got: Vec<&str> = quoted_references(&t)
        .iter()
        .map(|r| r.text.as_str())
        .collect();
    assert_eq!(got, vec!["{{!vars.y}}", "{{vars.z}}"]);
}

// ----- rendering

#[test]
fn shell_words_follow_the_table_of_6_1() {
    use RefForm::*;
    for (v, quoted, raw) in [
        (json!("it's"), r"'it'\''s'", "it's"),
        (json!(""), "''", ""),
        (json!(3), "'3'", "3"),
        (json!(2.5), "'2.5'", "2.5"),
        (json!(true), "'true'", "true"),
        (json!(null), "''", ""),
        (
            json!(["a b", 1, false]),
            "'a b' '1' 'false'",
            r#"["a b",1,false]"#,
        ),
        (json!([]), "", "[]"),
        (json!(["x", null]), "'x' ''", r#"["x",null]"#),
        (
            json!({"b": 1, "a": "x'y"}),
            r#"'{"a":"x'\''y","b":1}'"#,
            r#"{"a":"x'y","b":1}"#,
        ),
        (json!([["a"], "b"]), r#"'[["a"],"b"]'"#, r#"[["a"],"b"]"#),
        (json!([{"k": 1}]), r#"'[{"k":1}]'"#, r#"[{"k":1}]"#),
    ] {
        assert_eq!(shell_word(&v, Quoted), quoted, "{v}");
        assert_eq!(shell_word(&v, Raw), raw, "{v}");
    }
}

#[test]
fn text_form_follows_4_2() {
    for (v, want) in [
        (json!("a\nb"), "a\nb"),
        (json!(7), "7"),
        (json!(-1.5), "-1.5"),
        (json!(false), "false"),
        (json!(null), ""),
        (json!(["x", 1]), r#"["x",1]"#),
        (
            json!({"z": {"b": 2, "a": 1}, "y": null}),
            r#"{"y":null,"z":{"a":1,"b":2}}"#,
        ),
    ] {
        assert_eq!(text_form(&v), want, "{v}");
    }
}

#[test]
fn compact_json_escapes_keys_and_strings() {
    assert_eq!(compact_json(&json!({"a\"b": "c\nd"})), r#"{"a\"b":"c\nd"}"#);
}

#[test]
fn render_text_keeps_unresolved_references_as_written() {
    let t = parse("Hi {{ input.name }}, {{input.gone}} {{!vars.n}}");
    let scope = json!({"input": {"name": "Ada"}, "vars": {"n": [1, 2]}});
    assert_eq!(
        t.render_text(|r| r.lookup(&scope).cloned()),
        "Hi Ada, {{input.gone}} [1,2]"
    );
}

#[test]
fn render_command_quotes_and_fails_on_unresolved() {
    let t = parse("grep {{input.pat}} {{!input.flags}} ${HOME} {{json .X}}");
    let scope = json!({"input": {"pat": "a'b", "flags": "-r -n"}});
    assert_eq!(
        t.render_command(|r| r.lookup(&scope).cloned()),
        Ok(r"grep 'a'\''b' -r -n ${HOME} {{json .X}}".to_string())
    );
    let t = parse("echo {{input.gone}}");
    let err = t.render_command(|r| r.lookup(&scope).cloned()).unwrap_err();
    assert_eq!(
        err,
        Unresolved {
            reference: "{{input.gone}}".to_string()
        }
    );
    assert_eq!(err.code(), "TEMPLATE_UNRESOLVED");
}

#[test]
fn substituted_text_is_never_scanned_again() {
    let t = parse("echo {{!input.a}}");
    let scope = json!({"input": {"a": "{{input.b}}"}, "b": "no"});
    assert_eq!(
        t.render_command(|r| r.lookup(&scope).cloned()),
        Ok("echo {{input.b}}".to_string())
    );
}

mod props {
    use proptest::prelude::*;

    use super::super::*;

    proptest! {
        #[test]
        fn parse_never_panics_and_keeps_the_text(s in "[{}!. a-z_$:\\-\n\"']{0,40}") {
            let t = parse(&s);
            let text: String = t.segments.iter().map(|seg| match seg {
                Segment::Text(t) => t.clone(),
                Segment::Ref(r) => r.text.clone(),
            }).collect();
            prop_assert_eq!(text, s.clone());
            let _ = parse_host(&s);
            let _ = quote_states(&t);
        }

        #[test]
        fn quoted_words_round_trip_through_single_quotes(s in "\\PC{0,20}") {
            let q = shell_quote(&s);
            // Undo the quoting: strip the outer quotes and turn '\'' back into '.
            let inner = &q[1..q.len() - 1];
            prop_assert_eq!(inner.replace("'\\''", "'"), s);
        }
    }
}
