//! Parser tests: the DSL.md §9 examples, the E-code fragments of §9.6, trees, messages,
//! recovery and robustness.
use pretty_assertions::assert_eq;

use super::parse;
use crate::ast::*;
use crate::diag::{Code, Diagnostic};

/// DSL.md §9 example, verbatim.
const PROBE: &str = r##"# 01_probe.iter: a single shell step in the sandbox.
schema host_facts:
  os: string
  user: string
  cwd: string

tool probe:
  command: `printf '{"os":"%s","user":"%s","cwd":"%s"}\n' "$(uname -s)" "$(id -un)" "$PWD"`
  output: host_facts

workflow probe_env:
  entry: probe
  sandbox: auto
  probe -> done
"##;

/// DSL.md §9 example, verbatim.
const EGRESS_RETRY: &str = r##"# 02_egress_retry.iter: probe an endpoint; 4xx is final, anything else is retried three times.
vars:
  url: string = "https://api.github.com/zen"

schema probe:
  ok: bool
  status: int

tool fetch:
  command: `code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 10 {{vars.url}}) || code=0; if [ "$code" = 200 ]; then ok=true; else ok=false; fi; printf '{"ok":%s,"status":%d}\n' "$ok" "$code"`
  output: probe

router verdict:
  mode: condition

tool pause:
  command: `sleep 5; echo '{}'`

workflow egress_retry:
  entry: fetch
  sandbox:
    image: "docker.io/library/buildpack-deps:bookworm-curl"
    user: "1000:1000"
    host_state: none
    network:
      mode: allowlist
      preset: "iterion-default"
      rules: ["!gist.github.com"]
  budget:
    max_duration: "5m"

  fetch -> verdict with { ok: "{{input.ok}}", status: "{{input.status}}" }
  verdict -> done when ok
  verdict -> fail when "status >= 400 and status < 500"
  verdict -> pause else
  pause -> fetch as retry(3)
  pause -> fail
"##;

/// DSL.md §9 example, verbatim.
const SECRET_AGENT: &str = r##"# 03_secret_agent.iter: a registry credential as a read-only file; an agent limited to four tools.
secrets:
  registry_token:
    value: "${REGISTRY_TOKEN}"
    as: file
    env: "REGISTRY_TOKEN_FILE"
    hosts: ["npm.internal.example"]

schema audit_in:
  manifest: string

schema audit_out:
  ok: bool
  summary: string
  issues: string[]

prompt auditor_system:
  You audit dependency manifests inside an isolated container.
  Use only the tools you were given. Never print the content of credential files.

prompt auditor_user:
  Audit the manifest at {{input.manifest}}.
  A registry credential is mounted at {{secrets.registry_token}}; give that path to commands that need it.
  Answer with ok, a one-paragraph summary and the list of issues.

tool locate:
  command: `if [ -f package.json ]; then echo '{"manifest":"package.json"}'; else echo '{"manifest":""}'; fi`
  output: audit_in

agent auditor:
  model: "${AUDIT_MODEL:-anthropic/claude-sonnet-4-5}"
  system: auditor_system
  user: auditor_user
  input: audit_in
  output: audit_out
  tools: [bash, read_file, grep, glob]
  tool_max_steps: 20

workflow dependency_audit:
  entry: locate
  sandbox:
    image: "docker.io/library/node:22-bookworm"
    host_state: none
    network:
      mode: allowlist
      preset: "iterion-default"
      rules: ["npm.internal.example"]

  locate -> auditor when "manifest != ''" with { manifest: "{{input.manifest}}" }
  locate -> done else
  auditor -> done when ok
  auditor -> fail when not ok
"##;

/// DSL.md §9 example, verbatim.
const PARALLEL_REVIEW: &str = r##"# 04_parallel_review.iter: a linter and a reviewer in parallel; the join tolerates one failure.
schema review:
  approved: bool
  notes: string

schema verdict:
  approved: bool

prompt test_review:
  Read the tests under tests/ and say whether they exercise the public API.
  Set approved to true only if every public function has at least one test.

router reviews:
  mode: fan_out_all

tool lint:
  command: `if make lint >/tmp/lint.log 2>&1; then ok=true; else ok=false; fi; printf '{"approved":%s,"notes":"see /tmp/lint.log"}\n' "$ok"`
  output: review

judge test_reviewer:
  model: "anthropic/claude-sonnet-4-5"
  user: test_review
  output: review
  tools: [read_file, glob, grep]

tool tally:
  await: best_effort
  command: `if [ {{input.lint}} = true ] && [ {{input.tests}} = true ]; then echo '{"approved":true}'; else echo '{"approved":false}'; fi`
  output: verdict

workflow parallel_review:
  entry: reviews
  sandbox: auto
  budget:
    max_iterations: 10

  reviews -> lint
  reviews -> test_reviewer
  lint -> tally with { lint: "{{input.approved}}" }
  test_reviewer -> tally with { tests: "{{input.approved}}" }
  tally -> done when approved
  tally -> fail when not approved
"##;

/// DSL.md §9 example, verbatim.
const FIX_TESTS: &str = r##"# 05_fix_tests.iter: fix failing tests in a throwaway worktree; success lands on a branch.
# The image (devcontainer or default) must provide bash and jq.
vars:
  test_cmd: string = "cargo test --quiet"

schema tests:
  passed: bool
  log: string

schema fix_in:
  log: string

schema fix_out:
  summary: string

prompt fixer_system:
  You repair failing tests in the repository that is your working directory.
  Keep changes minimal and never edit CI configuration.

prompt fixer_user:
  The command {{vars.test_cmd}} failed. The end of its output:

  {{input.log}}

  Fix the cause, then summarise what you changed.

tool test:
  command: `if bash -c {{vars.test_cmd}} >/tmp/test.log 2>&1; then p=true; else p=false; fi; tail -c 4000 /tmp/test.log | jq -Rs --argjson passed "$p" '{passed: $passed, log: .}'`
  output: tests

agent fixer:
  model: "anthropic/claude-sonnet-4-5"
  system: fixer_system
  user: fixer_user
  input: fix_in
  output: fix_out
  tools: [bash, read_file, write_file, file_edit, glob, grep]
  tool_max_steps: 40

workflow fix_tests:
  entry: test
  worktree: auto
  sandbox: auto
  budget:
    max_duration: "45m"
    max_iterations: 8

  test -> done when passed
  test -> fixer when not passed as fix_round(2) with { log: "{{input.log}}" }
  test -> fail else
  fixer -> test
"##;

/// DSL.md §9 example, verbatim.
const GALLERY: &str = r##"## 06_gallery.iter: compile-stage diagnostics, one or more per marked line.
vars:
  region: string = "eu"
  retries: int = "three"                                       # expect: C109
  api_token: string = "unused"

secrets:
  api_token: "${API_TOKEN}"                                    # expect: C091, C909
  signing_key:
    as: file
    mount_path: "keys/signing.pem"                             # expect: C094
  deploy_key:
    value: "${DEPLOY_KEY}"
    env: "DEPLOY_KEY_PATH"                                     # expect: C094
    hosts: ["deploy.example.com"]
  webhook:
    value: "${WEBHOOK_TOKEN}"
    hosts: ["https://hooks.example.com/in"]                    # expect: C092

schema result:
  ok: bool
  detail: string

schema empty:                                                  # expect: C140

prompt release_question:
  May release {{vars.region}} ship today?

tool build:
  command: `make build REGION={{vars.region}} TAG="{{vars.region}}"`   # expect: C137
  output: result
  sandbox: none                                                # expect: C128

tool publish:
  input: result
  command: `./publish.sh {{input.detail}} --key {{secrets.api_token.path}} --hook {{secrets.nope}}`   # expect: C095, C093
  output: result

agent gatekeeper:
  model: "anthropic/claude-sonnet-4-5"
  user: "Approve release {{vars.regoin}}: {{outputs.ghost.ok}}"  # expect: C033, C029
  output: result
  tools: [bash, web_search]                                    # expect: C135
  interaction: ask                                             # expect: C136

judge reviewer:
  model: "{{outputs.build.detail}}"                            # expect: C148
  system: missing_prompt                                       # expect: C003
  user: release_question
  output: verdict                                              # expect: C002

agent helper:
  model: "anthropic/claude-sonnet-4-5"
  user: "Summarise {{outputs.build.detail}} and {{outputs.build.size}}."   # expect: C031
  sandbox: allowlist                                           # expect: C044

tool sink:                                                     # expect: C901
  input: result
  command: `echo {{input.nope}} {{outputs.orphan.ok}}`         # expect: C034, C036
  output: empty
  await: wait_all                                              # expect: C908

tool orphan:                                                   # expect: C016
  command: `echo '{"ok":true,"detail":"x"}'`
  output: result

workflow gallery:
  entry: build
  worktree: sometimes                                          # expect: C142
  sandbox:
    image: "docker.io/library/debian:bookworm"
    post_create: "echo \"ready\""                              # expect: C143
    network:                                                   # expect: C902
      rules: ["**.example.com", "bad rule"]                    # expect: C044

  build -> publish when ok
  build -> helper when ok                                      # expect: C011
  build -> gatekeeper when "length(detail) > 0 and contains(detail)"   # expect: C138
  build -> reviewer when detail                                # expect: C013
  build -> sink when missing_field                             # expect: C014, C012
  publish -> gatekeeper
  publish -> fail else                                         # expect: C015, C124
  gatekeeper -> reviewer as review_round(0)                    # expect: C026, C145
  reviewer -> helper when approved
  reviewer -> done else
  helper -> reviewer                                           # expect: C019
  helper -> done                                               # expect: C010
  orphan -> done
"##;

// ----- helpers ----------------------------------------------------------------------------

/// (code, line) of every diagnostic.
pub(super) fn codes(src: &str) -> Vec<(Code, u32)> {
    parse(src).1.iter().map(|d| (d.code, d.span.line)).collect()
}

/// The only diagnostic.
pub(super) fn only(src: &str) -> Diagnostic {
    let (_, diags) = parse(src);
    assert_eq!(diags.len(), 1, "{src}\n{diags:#?}");
    diags.into_iter().next().unwrap()
}

pub(super) fn d(code: Code, line: u32, col: u32, width: u32, msg: &str) -> Diagnostic {
    Diagnostic::new(code, Span::new(line, col, width), msg)
}

pub(super) fn ident(name: &str, line: u32, col: u32) -> Ident {
    Ident {
        name: name.into(),
        span: Span::new(line, col, u32::try_from(name.len()).unwrap()),
    }
}

pub(super) fn word(text: &str, line: u32, col: u32) -> Word {
    Word {
        text: text.into(),
        span: Span::new(line, col, u32::try_from(text.len()).unwrap()),
    }
}

/// A one-line quoted string whose opening quote is at `line:col`.
pub(super) fn q(value: &str, line: u32, col: u32) -> StrLit {
    StrLit {
        value: value.into(),
        kind: StrKind::Quoted,
        span: Span::new(line, col, u32::try_from(value.chars().count() + 2).unwrap()),
        lines: vec![LineStart {
            value_offset: 0,
            line,
            col: col + 1,
        }],
    }
}

/// A bare IDENT (or number) taken as a string.
pub(super) fn spelled(value: &str, line: u32, col: u32) -> StrLit {
    StrLit {
        value: value.into(),
        kind: StrKind::Ident,
        span: Span::new(line, col, u32::try_from(value.len()).unwrap()),
        lines: vec![LineStart {
            value_offset: 0,
            line,
            col,
        }],
    }
}

/// A clean one-tool workflow with `extra` spliced into the workflow block (lines 4.. are
/// `workflow w:` = 4, `entry: a` = 5, `extra` from 6).
pub(super) fn workflow_with(extra: &str) -> String {
    format!("tool a:\n  command: `true`\n\nworkflow w:\n  entry: a\n{extra}  a -> done\n")
}

/// An agent with `extra` properties after `model` and `user` (lines 1–3; `extra` from 4).
pub(super) fn agent_with(extra: &str) -> String {
    format!(
        "agent x:\n  model: \"anthropic/claude-sonnet-4-5\"\n  user: \"hi\"\n{extra}\nworkflow w:\n  entry: x\n  x -> done\n"
    )
}

// ----- the examples -----------------------------------------------------------------------

#[test]
fn the_six_examples_have_no_parse_diagnostic() {
    for (name, src, decls) in [
        ("01", PROBE, 3),
        ("02", EGRESS_RETRY, 6),
        ("03", SECRET_AGENT, 8),
        ("04", PARALLEL_REVIEW, 8),
        ("05", FIX_TESTS, 9),
        ("06", GALLERY, 13),
    ] {
        let (file, diags) = parse(src);
        assert_eq!(diags, vec![], "example {name}");
        assert_eq!(file.decls.len(), decls, "example {name}");
        assert!(!file.strict_escape, "example {name}");
    }
}

#[test]
fn the_gallery_collects_its_one_backslash_quote_string() {
    let (file, _) = parse(GALLERY);
    let line = GALLERY
        .lines()
        .position(|l| l.contains("post_create"))
        .unwrap();
    let line = u32::try_from(line + 1).unwrap();
    assert_eq!(file.backslash_quote_strings, vec![Span::new(line, 18, 16)]);
}

#[test]
fn example_prompt_bodies_are_exact() {
    let (file, _) = parse(FIX_TESTS);
    let bodies: Vec<(&str, &str)> = file
        .decls
        .iter()
        .filter_map(|decl| match decl {
            Decl::Prompt(p) => Some((p.name.name.as_str(), p.body.value.as_str())),
            _ => None,
        })
        .collect();
    assert_eq!(
        bodies,
        vec![
            (
                "fixer_system",
                "You repair failing tests in the repository that is your working directory.\n\
                 Keep changes minimal and never edit CI configuration."
            ),
            (
                "fixer_user",
                "The command {{vars.test_cmd}} failed. The end of its output:\n\n\
                 {{input.log}}\n\n\
                 Fix the cause, then summarise what you changed."
            ),
        ]
    );
}

#[test]
fn example_edges_parse_into_clauses() {
    let (file, _) = parse(FIX_TESTS);
    let Some(Decl::Workflow(w)) = file.decls.last() else {
        panic!("no workflow")
    };
    let l = 49; // `test -> fixer when not passed as fix_round(2) with { log: "{{input.log}}" }`
    assert_eq!(
        w.edges.get(1),
        Some(&Edge {
            from: ident("test", l, 3),
            to: ident("fixer", l, 11),
            when: Some(When::Field {
                negated: true,
                field: ident("passed", l, 26),
                span: Span::new(l, 17, 4),
            }),
            else_: None,
            loop_: Some(LoopClause {
                name: ident("fix_round", l, 36),
                cap: 2,
                cap_template: None,
                span: Span::new(l, 33, 2),
            }),
            with: Some(WithMap {
                entries: vec![(ident("log", l, 56), Value::Str(q("{{input.log}}", l, 61)))],
                span: Span::new(l, 49, 4),
            }),
        })
    );
}

// ----- §9.6 fragments: each E-code at its line --------------------------------------------

#[test]
fn fragment_e001_unsupported_declaration_kind() {
    let src = format!("supervisor gate:\n  prompt: \"x\"\n\n{}", workflow_with(""));
    assert_eq!(
        only(&src),
        d(
            Code::E001,
            1,
            1,
            10,
            "`supervisor` declarations are not supported yet"
        )
    );
    for kind in ["emit", "include"] {
        let src = format!("{kind} x:\n  a: 1\n\n{}", workflow_with(""));
        assert_eq!(
            only(&src).message,
            format!("`{kind}` declarations are not supported yet")
        );
    }
}

#[test]
fn fragment_e002_missing_colon() {
    let src = format!("agent a\n  model: \"x/y\"\n\n{}", workflow_with(""));
    assert_eq!(
        only(&src),
        d(Code::E002, 1, 8, 1, "expected \":\", found end of line")
    );
}

#[test]
fn fragment_e003_tab_in_indentation() {
    let src = "tool a:\n\tcommand: `echo hi`\n\nworkflow w:\n  entry: a\n  a -> done\n";
    assert_eq!(only(src), d(Code::E003, 2, 1, 1, "tab in indentation"));
}

#[test]
fn fragment_e004_unterminated_string() {
    let src = "tool a:\n  command: \"echo hi\n\nworkflow w:\n  entry: a\n  a -> done\n";
    assert_eq!(
        only(src),
        d(Code::E004, 2, 12, 1, "unterminated quoted string")
    );
}

#[test]
fn fragment_e005_unknown_escape() {
    let src = format!(
        "## strict-escape: on\n{}",
        workflow_with("  sandbox:\n    image: \"x\"\n    post_create: \"a\\qb\"\n")
    );
    assert_eq!(only(&src), d(Code::E005, 9, 20, 2, "unknown escape \\q"));
    assert!(
        parse(&workflow_with("  sandbox:\n    image: \"x\\q\"\n"))
            .1
            .is_empty()
    );
}

#[test]
fn fragment_e006_invalid_utf8() {
    let mut src = b"prompt p:\n  hello ".to_vec();
    src.push(0xFF);
    src.extend_from_slice(b"\n");
    let (file, diags) = crate::parse(&src);
    assert_eq!(
        (file, diags),
        (
            File::default(),
            vec![d(Code::E006, 2, 9, 1, "invalid UTF-8 at byte 18")]
        )
    );
}

#[test]
fn fragment_e010_prompt_declared_twice() {
    let src = format!(
        "prompt p:\n  one\n\nprompt p:\n  two\n\n{}",
        workflow_with("")
    );
    assert_eq!(
        only(&src),
        d(
            Code::E010,
            4,
            8,
            1,
            "prompt \"p\" already declared at line 1"
        )
    );
}

#[test]
fn fragment_e011_reserved_node_name() {
    let src = format!("tool done:\n  command: `true`\n\n{}", workflow_with(""));
    assert_eq!(only(&src), d(Code::E011, 1, 6, 4, "\"done\" is reserved"));
}

#[test]
fn fragment_e012_unknown_property_with_hint() {
    let src = format!(
        "agent x:\n  modle: \"x\"\n  user: \"hi\"\n\n{}",
        workflow_with("")
    );
    assert_eq!(
        only(&src),
        d(Code::E012, 2, 3, 5, "unknown property \"modle\" in agent")
            .with_hint("did you mean \"model\"?")
    );
}

#[test]
fn fragment_e013_tool_without_command() {
    let src = format!("tool t:\n  output: result\n\n{}", workflow_with(""));
    assert_eq!(
        only(&src),
        d(
            Code::E013,
            1,
            6,
            1,
            "tool \"t\" needs \"command\" or \"script\""
        )
    );
}

#[test]
fn fragment_e014_two_secrets_blocks() {
    let src = format!(
        "secrets:\n  a: \"${{A}}\"\n\nsecrets:\n  b: \"${{B}}\"\n\n{}",
        workflow_with("")
    );
    assert_eq!(
        only(&src),
        d(
            Code::E014,
            4,
            1,
            7,
            "only one secrets block is allowed here"
        )
    );
}

#[test]
fn fragment_e020_backend() {
    assert_eq!(
        only(&agent_with("  backend: gemini\n")),
        d(Code::E020, 4, 12, 6, "backend \"gemini\" is not supported")
            .with_hint("expected claw, claude_code or codex")
    );
    for ok in ["claw", "claude_code", "\"claude_code\"", "codex"] {
        assert!(
            parse(&agent_with(&format!("  backend: {ok}\n")))
                .1
                .is_empty(),
            "{ok}"
        );
    }
}

#[test]
fn fragment_e021_tool_max_steps_and_duration() {
    // `0` is upstream's "not set" (the default applies); a negative number is no int token.
    assert!(parse(&agent_with("  tool_max_steps: 0\n")).1.is_empty());
    assert_eq!(
        only(&workflow_with("  budget:\n    max_duration: \"soon\"\n")),
        d(
            Code::E021,
            7,
            19,
            6,
            "max_duration expects a duration such as \"90s\" or \"1h30m\", found \"soon\""
        )
    );
}

#[test]
fn fragment_e030_duplicate_clause() {
    let src = "tool a:\n  command: `true`\n\nworkflow w:\n  entry: a\n  a -> done when x when y\n";
    assert_eq!(
        only(src),
        d(Code::E030, 6, 20, 4, "duplicate when on edge \"a -> done\"")
    );
}

#[test]
fn fragment_e031_when_and_else() {
    let src = "tool a:\n  command: `true`\n\nworkflow w:\n  entry: a\n  a -> done when x else\n";
    assert_eq!(
        only(src),
        d(
            Code::E031,
            6,
            20,
            4,
            "an edge cannot have both when and else"
        )
    );
    let src = "tool a:\n  command: `true`\n\nworkflow w:\n  entry: a\n  a -> done else when x\n";
    assert_eq!(
        only(src),
        d(
            Code::E031,
            6,
            13,
            4,
            "an edge cannot have both when and else"
        )
    );
}

#[test]
fn fragment_e040_dsl_profile() {
    assert_eq!(
        only(&format!("dsl: 3\n{}", workflow_with(""))),
        d(
            Code::E040,
            1,
            6,
            1,
            "dsl profile 3 is not supported (only 1 and 2)"
        )
    );
    assert!(
        parse(&format!("dsl: 1\n{}", workflow_with("")))
            .1
            .is_empty()
    );
    assert_eq!(
        codes(&format!("{}dsl: 1\n", workflow_with(""))),
        vec![(Code::E001, 7)]
    );
}

// ----- whole trees ------------------------------------------------------------------------

const EVERY_DECL: &str = r#"vars:
  region: string = "eu"
  tags: string[]

secrets:
  tok: "${TOK}"
  key:
    as: file
    hosts: [example, "b.org"]
    optional: true

schema out:
  ok: bool

agent a:
  model: "anthropic/claude"
  system: sys
  user: |
    Hi {{vars.region}}
  output: out
  tools: [bash, "grep"]
  tool_max_steps: 5
  interaction: ask

router r:
  mode: condition

workflow w:
  entry: a
  vars:
    n: int = 3
  budget:
    max_duration: "1h30m"
    max_iterations: 8
  sandbox:
    env:
      PORT: 8080
      V: 1.50
    network:
  a -> r with { n: 1, f: 1.5, b: true, s: "x", i: ident }
  r -> fail else
"#;

#[test]
fn every_declaration_kind_becomes_its_tree() {
    let user = StrLit {
        value: "Hi {{vars.region}}\n".into(),
        kind: StrKind::Block,
        span: Span::new(19, 5, 18),
        lines: vec![LineStart {
            value_offset: 0,
            line: 19,
            col: 5,
        }],
    };
    let want = File {
        strict_escape: false,
        backslash_quote_strings: vec![],
        decls: vec![
            Decl::Vars(VarsBlock {
                keyword: Span::new(1, 1, 4),
                vars: vec![
                    VarDef {
                        name: ident("region", 2, 3),
                        ty: VarType::String,
                        ty_span: Span::new(2, 11, 6),
                        enum_values: None,
                        default: Some(Value::Str(q("eu", 2, 20))),
                    },
                    VarDef {
                        name: ident("tags", 3, 3),
                        ty: VarType::StringList,
                        ty_span: Span::new(3, 9, 8),
                        enum_values: None,
                        default: None,
                    },
                ],
            }),
            Decl::Secrets(SecretsBlock {
                keyword: Span::new(5, 1, 7),
                secrets: vec![
                    SecretDef {
                        name: ident("tok", 6, 3),
                        value: Some(q("${TOK}", 6, 8)),
                        as_: None,
                        mount_path: None,
                        env: None,
                        hosts: None,
                        optional: None,
                        description: None,
                    },
                    SecretDef {
                        name: ident("key", 7, 3),
                        value: None,
                        as_: Some(word("file", 8, 9)),
                        mount_path: None,
                        env: None,
                        hosts: Some(StrList {
                            items: vec![spelled("example", 9, 13), q("b.org", 9, 22)],
                            span: Span::new(9, 12, 1),
                        }),
                        optional: Some(BoolLit {
                            value: true,
                            span: Span::new(10, 15, 4),
                        }),
                        description: None,
                    },
                ],
            }),
            Decl::Schema(Schema {
                name: ident("out", 12, 8),
                fields: vec![Field {
                    name: ident("ok", 13, 3),
                    ty: VarType::Bool,
                    ty_span: Span::new(13, 7, 4),
                    enum_values: None,
                }],
            }),
            Decl::Node(Node {
                kind: NodeKind::Agent,
                kind_span: Span::new(15, 1, 5),
                name: ident("a", 15, 7),
                body: NodeBody::Agent(AgentProps {
                    model: Some(q("anthropic/claude", 16, 10)),
                    delegate: Box::default(),
                    system: Some(PromptRef::Named(ident("sys", 17, 11))),
                    user: Some(PromptRef::Inline(user)),
                    input: None,
                    output: Some(ident("out", 20, 11)),
                    tools: Some(WordList {
                        items: vec![
                            word("bash", 21, 11),
                            Word {
                                text: "grep".into(),
                                span: Span::new(21, 17, 6),
                            },
                        ],
                        span: Span::new(21, 10, 1),
                    }),
                    tool_max_steps: Some(IntLit {
                        value: 5,
                        span: Span::new(22, 19, 1),
                    }),
                    interaction: Some((Interaction::Ask, Span::new(23, 16, 3))),
                    await_: None,
                    sandbox: None,
                    publish: None,
                    readonly: None,
                    extras: Box::default(),
                }),
            }),
            Decl::Node(Node {
                kind: NodeKind::Router,
                kind_span: Span::new(25, 1, 6),
                name: ident("r", 25, 8),
                body: NodeBody::Router(RouterProps {
                    mode: RouterMode::Condition,
                    ..RouterProps::default()
                }),
            }),
            Decl::Workflow(Workflow {
                name: ident("w", 28, 10),
                entry: Some(word("a", 29, 10)),
                vars: Some(VarsBlock {
                    keyword: Span::new(30, 3, 4),
                    vars: vec![VarDef {
                        name: ident("n", 31, 5),
                        ty: VarType::Int,
                        ty_span: Span::new(31, 8, 3),
                        enum_values: None,
                        default: Some(Value::Int(3, Span::new(31, 14, 1))),
                    }],
                }),
                sandbox: Some(SandboxDecl::Block(SandboxBlock {
                    key: Span::new(35, 3, 7),
                    env: Some(MapValue {
                        entries: vec![
                            MapEntry {
                                key: ident("PORT", 37, 7),
                                value: spelled("8080", 37, 13),
                            },
                            MapEntry {
                                key: ident("V", 38, 7),
                                value: spelled("1.50", 38, 10),
                            },
                        ],
                        span: Span::new(36, 5, 3),
                    }),
                    network: Some(NetworkBlock {
                        key: Span::new(39, 5, 7),
                        ..NetworkBlock::default()
                    }),
                    ..SandboxBlock::default()
                })),
                worktree: None,
                repo_devbox: None,
                workspace_checkpoint: None,
                budget: Some(Budget {
                    key: Span::new(32, 3, 6),
                    max_duration: Some(q("1h30m", 33, 19)),
                    max_iterations: Some(IntLit {
                        value: 8,
                        span: Span::new(34, 21, 1),
                    }),
                    ..Budget::default()
                }),
                default_backend: None,
                permission: Default::default(),
                mcp: None,
                attachments: None,
                unenforced: vec![],
                edges: vec![
                    Edge {
                        from: ident("a", 40, 3),
                        to: ident("r", 40, 8),
                        when: None,
                        else_: None,
                        loop_: None,
                        with: Some(WithMap {
                            entries: vec![
                                (ident("n", 40, 17), Value::Int(1, Span::new(40, 20, 1))),
                                (ident("f", 40, 23), Value::Float(1.5, Span::new(40, 26, 3))),
                                (ident("b", 40, 31), Value::Bool(true, Span::new(40, 34, 4))),
                                (ident("s", 40, 40), Value::Str(q("x", 40, 43))),
                                (ident("i", 40, 48), Value::Ident(ident("ident", 40, 51))),
                            ],
                            span: Span::new(40, 10, 4),
                        }),
                    },
                    Edge {
                        from: ident("r", 41, 3),
                        to: ident("fail", 41, 8),
                        when: None,
                        else_: Some(Span::new(41, 13, 4)),
                        loop_: None,
                        with: None,
                    },
                ],
            }),
        ],
    };
    assert_eq!(parse(EVERY_DECL), (want, vec![]));
}

#[test]
fn sandbox_blocks_keep_every_field_as_written() {
    let src = workflow_with(
        "  sandbox:\n    mode: inline\n    image: img\n    build:\n      dockerfile: \"D\"\n      context: \".\"\n      args: { A: \"1\", B: 2 }\n    user: \"1000:1000\"\n    workspace_folder: \"/w\"\n    host_state: none\n    post_create: `make`\n    mounts: [\"a\", \"b\"]\n    network:\n      mode: allowlist\n      preset: \"iterion-default\"\n      rules: [\"**.x.org\", \"!y.org\"]\n      inherit: append\n",
    );
    let (file, diags) = parse(&src);
    assert_eq!(diags, vec![]);
    let Some(Decl::Workflow(w)) = file.decls.last() else {
        panic!("no workflow")
    };
    let Some(SandboxDecl::Block(b)) = &w.sandbox else {
        panic!("no sandbox block")
    };
    let texts = |l: &Option<StrList>| -> Vec<String> {
        l.iter()
            .flat_map(|l| l.items.iter().map(|s| s.value.clone()))
            .collect()
    };
    assert_eq!(
        (
            b.mode.as_ref().map(|w| w.text.as_str()),
            b.image.as_ref().map(|s| (s.value.as_str(), s.kind)),
            b.build.as_ref().map(|b| (
                b.dockerfile.as_ref().map(|s| s.value.as_str()),
                b.context.as_ref().map(|s| s.value.as_str()),
                b.args
                    .iter()
                    .flat_map(|m| m
                        .entries
                        .iter()
                        .map(|e| (e.key.name.as_str(), e.value.value.as_str())))
                    .collect::<Vec<_>>(),
            )),
            b.user.as_ref().map(|s| s.value.as_str()),
            b.workspace_folder.as_ref().map(|s| s.value.as_str()),
            b.host_state.as_ref().map(|w| w.text.as_str()),
            b.post_create.as_ref().map(|s| (s.value.as_str(), s.kind)),
            texts(&b.mounts),
            b.network.as_ref().map(|n| (
                n.mode.as_ref().map(|w| w.text.as_str()),
                n.preset.as_ref().map(|s| s.value.as_str()),
                texts(&n.rules),
                n.inherit.as_ref().map(|w| w.text.as_str()),
            )),
        ),
        (
            Some("inline"),
            Some(("img", StrKind::Ident)),
            Some((Some("D"), Some("."), vec![("A", "1"), ("B", "2")])),
            Some("1000:1000"),
            Some("/w"),
            Some("none"),
            Some(("make", StrKind::Raw)),
            vec!["a".to_owned(), "b".to_owned()],
            Some((
                Some("allowlist"),
                Some("iterion-default"),
                vec!["**.x.org".to_owned(), "!y.org".to_owned()],
                Some("append"),
            )),
        )
    );
}

#[test]
fn short_and_empty_sandboxes() {
    let (file, diags) = parse(&workflow_with("  sandbox: \"auto\"\n"));
    assert_eq!(diags, vec![]);
    let Some(Decl::Workflow(w)) = file.decls.last() else {
        panic!()
    };
    assert_eq!(
        w.sandbox,
        Some(SandboxDecl::Short(Word {
            text: "auto".into(),
            span: Span::new(6, 12, 6)
        }))
    );
    let (file, _) = parse(&workflow_with("  sandbox:\n"));
    let Some(Decl::Workflow(w)) = file.decls.last() else {
        panic!()
    };
    assert_eq!(
        w.sandbox,
        Some(SandboxDecl::Block(SandboxBlock {
            key: Span::new(6, 3, 7),
            ..SandboxBlock::default()
        }))
    );
}

#[test]
fn node_sandboxes_await_and_router_defaults() {
    let src = "tool t:\n  await: best_effort\n  sandbox: none\n  command: `x`\n\nrouter r:\n\nworkflow w:\n  entry: t\n  t -> done\n";
    let (file, diags) = parse(src);
    assert_eq!(diags, vec![]);
    assert_eq!(
        file.decls.get(..2),
        Some(
            &[
                Decl::Node(Node {
                    kind: NodeKind::Tool,
                    kind_span: Span::new(1, 1, 4),
                    name: ident("t", 1, 6),
                    body: NodeBody::Tool(ToolProps {
                        command: StrLit {
                            value: "x".into(),
                            kind: StrKind::Raw,
                            span: Span::new(4, 12, 3),
                            lines: vec![LineStart {
                                value_offset: 0,
                                line: 4,
                                col: 13
                            }],
                        },
                        script: None,
                        publish: None,
                        input: None,
                        output: None,
                        await_: Some((AwaitMode::BestEffort, Span::new(2, 10, 11))),
                        sandbox: Some(SandboxDecl::Short(word("none", 3, 12))),
                    }),
                }),
                Decl::Node(Node {
                    kind: NodeKind::Router,
                    kind_span: Span::new(6, 1, 6),
                    name: ident("r", 6, 8),
                    body: NodeBody::Router(RouterProps {
                        mode: RouterMode::FanOutAll,
                        ..RouterProps::default()
                    }),
                }),
            ][..]
        )
    );
}

#[test]
fn when_expressions_and_multi_line_with_maps() {
    let src = "tool a:\n  command: `x`\n\nworkflow w:\n  entry: a\n  a -> done when `x > 1` with {\n    k: \"v\",\n  }\n  a -> fail when \"y\"\n";
    let (file, diags) = parse(src);
    assert_eq!(diags, vec![]);
    let Some(Decl::Workflow(w)) = file.decls.last() else {
        panic!()
    };
    let whens: Vec<(String, StrKind, Span)> = w
        .edges
        .iter()
        .filter_map(|e| match &e.when {
            Some(When::Expr { text, span }) => Some((text.value.clone(), text.kind, *span)),
            _ => None,
        })
        .collect();
    assert_eq!(
        whens,
        vec![
            ("x > 1".into(), StrKind::Raw, Span::new(6, 13, 4)),
            ("y".into(), StrKind::Quoted, Span::new(9, 13, 4)),
        ]
    );
    assert_eq!(
        w.edges.first().and_then(|e| e.with.clone()),
        Some(WithMap {
            entries: vec![(ident("k", 7, 5), Value::Str(q("v", 7, 8)))],
            span: Span::new(6, 26, 4),
        })
    );
}

#[test]
fn a_map_takes_one_entry_per_line_without_commas_as_upstream_writes_them() {
    let src = "tool a:\n  command: `x`\n\nworkflow w:\n  entry: a\n  a -> done with {\n    k: \"v\"\n    j: \"u\",\n    i: \"t\"\n  }\n";
    let (file, diags) = parse(src);
    assert_eq!(diags, vec![]);
    let Some(Decl::Workflow(w)) = file.decls.last() else {
        panic!()
    };
    let keys: Vec<String> = w.edges[0]
        .with
        .as_ref()
        .unwrap()
        .entries
        .iter()
        .map(|(k, _)| k.name.clone())
        .collect();
    assert_eq!(keys, ["k", "j", "i"]);
    // On one line the comma is still required.
    let (_, diags) = parse(&src.replace("{\n    k: \"v\"\n    j", "{ k: \"v\" j"));
    assert_eq!(diags.len(), 1, "{diags:?}");
    assert_eq!(diags[0].code, Code::E002);
}

#[test]
fn strict_escape_is_recorded_and_strings_are_decoded() {
    let (file, diags) = parse(&format!(
        "## strict-escape: on\n{}",
        workflow_with("  worktree: \"a\\tb\"\n")
    ));
    assert_eq!(diags.len(), 1); // "a\tb" is not a word
    assert!(file.strict_escape);
    let (file, diags) = parse(&format!(
        "## strict-escape: on\n{}",
        workflow_with("  sandbox:\n    image: \"a\\\"b\"\n")
    ));
    assert_eq!((diags, file.backslash_quote_strings), (vec![], vec![]));
}

// ----- subbot (§3.9) -------------------------------------------------------------------------

#[test]
fn a_subbot_parses_source_output_and_await() {
    let src = format!(
        "subbot review:\n  source: \"children/review.iter\"\n  output: verdict\n  await: best_effort\n\n{}",
        workflow_with("")
    );
    let (file, diags) = parse(&src);
    assert_eq!(diags, vec![]);
    let node = file
        .decls
        .iter()
        .find_map(|d| match d {
            Decl::Node(n) => Some(n),
            _ => None,
        })
        .expect("the subbot");
    assert_eq!(node.kind, NodeKind::Subbot);
    assert_eq!(node.name.name, "review");
    let NodeBody::Subbot(b) = &node.body else {
        panic!("not a subbot body: {:?}", node.body);
    };
    assert_eq!(b.source.value, "children/review.iter");
    assert_eq!(b.output.as_ref().map(|o| o.name.as_str()), Some("verdict"));
    assert_eq!(b.await_.map(|(m, _)| m), Some(AwaitMode::BestEffort));
}

#[test]
fn subbot_property_errors() {
    let cases = [
        (
            "subbot s:\n  output: r\n",
            d(Code::E013, 1, 8, 1, "subbot \"s\" needs \"source\""),
        ),
        (
            "subbot s:\n  source: \"c.iter\"\n  sorce: \"x\"\n",
            d(Code::E012, 3, 3, 5, "unknown property \"sorce\" in subbot")
                .with_hint("did you mean \"source\"?"),
        ),
        (
            "subbot s:\n  source: \"c.iter\"\n  source: \"d.iter\"\n",
            d(
                Code::E010,
                3,
                3,
                6,
                "property \"source\" already declared at line 2",
            ),
        ),
    ];
    for (decl, want) in cases {
        let src = format!("{decl}\n{}", workflow_with(""));
        assert_eq!(only(&src), want, "{decl}");
    }
}
