//! End-to-end tests of the declaration checks through [`crate::compile`], on the DSL.md §9
//! fixtures of `examples/` and on fragments of the §9.6 table.
use pretty_assertions::assert_eq;

use crate::{Code, CompileOptions, Diagnostic, compile, render};

/// The codes `check/decls.rs` emits.
const DECL_CODES: [Code; 19] = [
    Code::C002,
    Code::C003,
    Code::C041,
    Code::C044,
    Code::C090,
    Code::C091,
    Code::C092,
    Code::C094,
    Code::C109,
    Code::C128,
    Code::C135,
    Code::C136,
    Code::C140,
    Code::C142,
    Code::C143,
    Code::C902,
    Code::C909,
    Code::C914,
    Code::C922,
];

const GALLERY: &str = include_str!("../../../../../examples/06_gallery.iter");

const EXAMPLES: [(&str, &str); 6] = [
    ("hello", include_str!("../../../../../examples/hello.iter")),
    (
        "01_probe",
        include_str!("../../../../../examples/01_probe.iter"),
    ),
    (
        "02_egress_retry",
        include_str!("../../../../../examples/02_egress_retry.iter"),
    ),
    (
        "03_secret_agent",
        include_str!("../../../../../examples/03_secret_agent.iter"),
    ),
    (
        "04_parallel_review",
        include_str!("../../../../../examples/04_parallel_review.iter"),
    ),
    (
        "05_fix_tests",
        include_str!("../../../../../examples/05_fix_tests.iter"),
    ),
];

fn opts() -> CompileOptions {
    CompileOptions {
        ask_user_in_sandbox: false,
    }
}

fn decl_diags(src: &str) -> Vec<Diagnostic> {
    compile(src.as_bytes(), &opts())
        .diagnostics
        .into_iter()
        .filter(|d| DECL_CODES.contains(&d.code))
        .collect()
}

/// (line, code) of every declaration diagnostic, sorted.
fn lines(src: &str) -> Vec<(u32, &'static str)> {
    let mut v: Vec<_> = decl_diags(src)
        .iter()
        .map(|d| (d.span.line, d.code.as_str()))
        .collect();
    v.sort();
    v
}

#[test]
fn the_gallery_draws_exactly_its_declaration_codes_line_by_line() {
    let mut want = Vec::new();
    for (i, line) in GALLERY.lines().enumerate() {
        let Some((_, codes)) = line.split_once("# expect:") else {
            continue;
        };
        for code in codes.split(',').map(str::trim) {
            if DECL_CODES.iter().any(|c| c.as_str() == code) {
                let code = Code::ALL.iter().find(|c| c.as_str() == code).unwrap();
                want.push((u32::try_from(i + 1).unwrap(), code.as_str()));
            }
        }
    }
    want.sort();
    assert_eq!(want.len(), 17, "the gallery lost some expectations");
    assert_eq!(lines(GALLERY), want);
}

#[test]
fn the_gallery_declaration_diagnostics_render_as_pinned() {
    let out = render::human("06_gallery.iter", GALLERY, &decl_diags(GALLERY));
    insta::assert_snapshot!(out);
}

#[test]
fn the_clean_examples_draw_no_diagnostic_and_lower() {
    for (name, src) in EXAMPLES {
        let out = compile(src.as_bytes(), &opts());
        assert_eq!(out.diagnostics, vec![], "{name}");
        assert!(out.workflow.is_some(), "{name}");
    }
}

#[test]
fn the_examples_lower_to_pinned_ir() {
    for (name, src) in EXAMPLES {
        let wf = compile(src.as_bytes(), &opts()).workflow;
        insta::assert_json_snapshot!(name, wf);
    }
}

/// A clean one-node workflow with `extra` spliced in after `entry` (line 5 is `entry`).
fn workflow_with(extra: &str) -> String {
    format!("tool a:\n  command: `echo '{{}}'`\n\nworkflow w:\n  entry: a\n{extra}  a -> done\n")
}

#[test]
fn fragment_table_sandbox_rows_draw_one_c044_each_with_its_message() {
    let cases = [
        (
            "  sandbox: inline\n",
            6,
            12,
            "an inline sandbox needs image or build",
        ),
        (
            "  sandbox:\n",
            6,
            3,
            "an inline sandbox needs image or build",
        ),
        (
            "  sandbox:\n    image: \"x\"\n    build:\n      dockerfile: \"Dockerfile\"\n",
            8,
            5,
            "image and build are mutually exclusive",
        ),
        (
            "  sandbox:\n    mode: auto\n    image: \"x\"\n",
            8,
            12,
            "mode auto takes no image",
        ),
        (
            "  sandbox:\n    mode: none\n    env: { A: \"1\" }\n",
            8,
            10,
            "mode none takes no other field",
        ),
        (
            "  sandbox:\n    image: \"x\"\n    host_state: shared\n",
            8,
            17,
            "invalid host_state \"shared\"",
        ),
        (
            "  sandbox:\n    image: \"x\"\n    workspace_folder: \"work\"\n",
            8,
            23,
            "invalid workspace_folder \"work\"",
        ),
        (
            "  sandbox:\n    image: \"x\"\n    network:\n      mode: closed\n",
            9,
            13,
            "invalid network mode \"closed\"",
        ),
        (
            "  sandbox:\n    image: \"x\"\n    network:\n      mode: allowlist\n      inherit: merge\n",
            10,
            16,
            "invalid inherit \"merge\"",
        ),
        (
            "  sandbox:\n    image: \"x\"\n    network:\n      mode: allowlist\n      preset: \"strict\"\n",
            10,
            15,
            "unknown network preset \"strict\"",
        ),
        (
            "  sandbox:\n    image: \"x\"\n    network:\n      mode: open\n      rules: [\"example.com\"]\n",
            10,
            14,
            "mode open ignores rules",
        ),
        (
            "  sandbox:\n    build:\n      dockerfile: \"../Dockerfile\"\n",
            8,
            19,
            "invalid dockerfile \"../Dockerfile\"",
        ),
        (
            "  sandbox: denylist\n",
            6,
            12,
            "\"denylist\" is a network mode, not a sandbox mode",
        ),
    ];
    for (extra, line, col, message) in cases {
        let src = workflow_with(extra);
        let got: Vec<_> = compile(src.as_bytes(), &opts())
            .diagnostics
            .into_iter()
            .map(|d| (d.code, d.span.line, d.span.col, d.message))
            .collect();
        assert_eq!(
            got,
            vec![(Code::C044, line, col, message.to_owned())],
            "{src}"
        );
    }
}

#[test]
fn a_workflow_opt_out_draws_c128_and_c909_per_secret_and_no_c136() {
    let src = "secrets:\n  tok:\n    value: \"${TOK}\"\n    hosts: [\"api.example.com\"]\n  \
               key:\n    as: file\n\nagent x:\n  model: \"anthropic/claude-sonnet-4-5\"\n  \
               user: \"hi\"\n  interaction: ask\n  sandbox: none\n\nworkflow w:\n  entry: x\n  \
               sandbox: none\n  x -> done\n";
    let got: Vec<_> = decl_diags(src)
        .into_iter()
        .map(|d| (d.code, d.span.line, d.message))
        .collect();
    assert_eq!(
        got,
        vec![
            (
                Code::C909,
                2,
                "secret \"tok\" is never delivered: workflow opts out of the sandbox".to_owned()
            ),
            (
                Code::C909,
                5,
                "secret \"key\" is never delivered: workflow opts out of the sandbox".to_owned()
            ),
            (
                Code::C128,
                16,
                "workflow opts out of the sandbox: every node runs on the host".to_owned()
            ),
        ]
    );
}

#[test]
fn network_block_without_mode_draws_c902_and_lowers_to_an_allowlist() {
    let src = workflow_with("  sandbox:\n    image: \"x\"\n    network:\n      rules: []\n");
    let out = compile(src.as_bytes(), &opts());
    let got: Vec<_> = out
        .diagnostics
        .iter()
        .map(|d| (d.code, d.span.line, d.message.as_str()))
        .collect();
    assert_eq!(
        got,
        vec![(
            Code::C902,
            8,
            "network block has no mode: treated as allowlist with no rules: all egress refused"
        )]
    );
    let network = out.workflow.and_then(|w| w.sandbox.network).unwrap();
    assert_eq!(
        (network.mode, network.mode_defaulted, network.rules),
        (crate::ir::NetworkMode::Allowlist, true, vec![])
    );
}

#[test]
fn strict_escape_silences_c143() {
    let extra = "  sandbox:\n    image: \"x\"\n    post_create: \"echo \\\"hi\\\"\"\n";
    assert_eq!(lines(&workflow_with(extra)), vec![(8, "C143")]);
    assert_eq!(
        lines(&format!("## strict-escape: on\n{}", workflow_with(extra))),
        vec![]
    );
}

#[test]
fn a_model_with_an_unknown_provider_draws_c914_at_the_value() {
    let src = "agent x:\n  model: \"mistral/large\"\n  user: \"hi\"\n\nworkflow w:\n  entry: x\n  x -> done\n";
    let got: Vec<_> = decl_diags(src)
        .into_iter()
        .map(|d| (d.code, d.span.line, d.span.col, d.message, d.node))
        .collect();
    assert_eq!(
        got,
        vec![(
            Code::C914,
            2,
            10,
            "unknown model provider \"mistral\"".to_owned(),
            Some("x".to_owned())
        )]
    );
}

#[test]
fn var_defaults_through_the_parser() {
    let src = "vars:\n  a: string[] = [\"x\", y]\n  b: string[] = `[\"x\"]`\n  c: json = `{\"k\": 1}`\n  \
               d: float = 3\n  e: json = 3\n  f: bool = \"true\"\n\n";
    let src = format!("{src}{}", workflow_with(""));
    assert_eq!(lines(&src), vec![(6, "C109"), (7, "C109")]);
}

#[test]
fn repo_devbox_is_on_or_off_and_lowers_to_the_workflow() {
    let src = |v: &str| {
        format!(
            "tool a:\n  command: `true`\n\nworkflow w:\n  entry: a\n  repo_devbox: {v}\n  a -> done\n"
        )
    };
    let out = compile(src("maybe").as_bytes(), &opts());
    assert_eq!(
        out.diagnostics,
        vec![Diagnostic::new(
            Code::C134,
            crate::ast::Span::new(6, 16, 5),
            "invalid repo_devbox \"maybe\"; expected on or off"
        )]
    );
    for (v, want) in [("on", Some(true)), ("off", Some(false))] {
        let wf = compile(src(v).as_bytes(), &opts()).workflow.unwrap();
        assert_eq!(wf.repo_devbox, want, "{v}");
    }
    let wf = compile(
        src("on").replace("  repo_devbox: on\n", "").as_bytes(),
        &opts(),
    );
    assert_eq!(wf.workflow.unwrap().repo_devbox, None);
}

#[test]
fn workspace_checkpoint_off_is_clean_on_is_a_warning_and_other_words_are_c139() {
    let src = |v: &str| {
        format!(
            "tool a:\n  command: `true`\n\nworkflow w:\n  entry: a\n  workspace_checkpoint: {v}\n  a -> done\n"
        )
    };
    let out = compile(src("off").as_bytes(), &opts());
    assert_eq!(out.diagnostics, vec![]);
    let out = compile(src("on").as_bytes(), &opts());
    let codes: Vec<&str> = out.diagnostics.iter().map(|d| d.code.as_str()).collect();
    assert_eq!(codes, ["C141"]);
    assert!(out.workflow.is_some(), "a warning: it compiles");
    let out = compile(src("of").as_bytes(), &opts());
    let got: Vec<(&str, &str)> = out
        .diagnostics
        .iter()
        .map(|d| (d.code.as_str(), d.message.as_str()))
        .collect();
    assert_eq!(
        got,
        [(
            "C139",
            "invalid workspace_checkpoint \"of\"; expected on or off"
        )]
    );
}

#[test]
fn every_node_kind_takes_a_description() {
    let src = "schema o:\n  ok: bool\n\nagent a:\n  description: \"writes\"\n  model: \"anthropic/m\"\n  output: o\n\n\
               tool t:\n  description: \"runs\"\n  command: `true`\n\n\
               compute c:\n  description: \"computes\"\n  output: o\n  expr:\n    ok: \"true\"\n\n\
               human h:\n  description: \"asks\"\n  output: o\n\n\
               router r:\n  description: \"routes\"\n  mode: condition\n\n\
               workflow w:\n  entry: t\n  t -> c\n  c -> r\n  r -> a when ok\n  r -> h when not ok\n  a -> done\n  h -> done\n";
    let out = compile(src.as_bytes(), &opts());
    assert_eq!(out.diagnostics, vec![]);
    // Still one string, once.
    let twice = src.replace(
        "  description: \"runs\"\n",
        "  description: \"runs\"\n  description: \"again\"\n",
    );
    let out = compile(twice.as_bytes(), &opts());
    assert!(out.error_count() > 0, "a repeated key is refused");
}
