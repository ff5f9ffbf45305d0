//! Unit tests of the declaration checks, on trees built by hand (the parser is tested on its
//! own; end-to-end tests through `crate::compile` live in `check/decls/e2e_tests.rs`).
use pretty_assertions::assert_eq;

use crate::{
    Code, CompileOptions,
    ast::*,
    check::symbols::Symbols,
    diag::{self, Diagnostic},
    ir::test_builders::*,
};

fn run_with(f: &File, opts: CompileOptions) -> Vec<Diagnostic> {
    let syms = Symbols::build(f);
    let mut out = Vec::new();
    super::check(f, &syms, &opts, &mut out);
    diag::sort(&mut out);
    out
}

fn run(f: &File) -> Vec<Diagnostic> {
    run_with(f, CompileOptions::default())
}

fn d(code: Code, line: u32, col: u32, message: &str) -> Diagnostic {
    Diagnostic::new(code, at(line, col), message)
}

/// A clean file around one workflow: the agent `a` it enters.
fn with_workflow(f: impl FnOnce(&mut Workflow)) -> File {
    file(vec![agent("a", 10, |_| {}), workflow(f)])
}

// ---- nodes ----

#[test]
fn a_clean_file_draws_nothing() {
    let f = file(vec![
        schema("s", 1, &[("ok", VarType::Bool)]),
        agent("a", 10, |a| {
            a.output = Some(id("s", 13, 11));
            a.tools = Some(WordList {
                items: vec![wd("bash", 14, 11), wd("grep", 14, 17), wd("bash", 14, 23)],
                span: at(14, 10),
            });
        }),
        tool("t", 20, |t| t.input = Some(id("s", 22, 10))),
        workflow(|w| w.sandbox = Some(SandboxDecl::Short(wd("auto", 102, 12)))),
    ]);
    assert_eq!(run(&f), vec![]);
}

#[test]
fn unknown_input_and_output_schemas_draw_c002_at_the_value() {
    let f = file(vec![
        schema("known", 1, &[("x", VarType::String)]),
        agent("a", 10, |a| {
            a.input = Some(id("known", 13, 10));
            a.output = Some(id("verdict", 14, 11));
        }),
        tool("t", 20, |t| {
            t.input = Some(id("nope", 22, 10));
            t.output = Some(id("known", 23, 11));
        }),
        workflow(|_| {}),
    ]);
    assert_eq!(
        run(&f),
        vec![
            d(Code::C002, 14, 11, "unknown schema \"verdict\"").with_node("a"),
            d(Code::C002, 22, 10, "unknown schema \"nope\"").with_node("t"),
        ]
    );
}

#[test]
fn a_prompt_ident_naming_no_prompt_draws_c003_but_inline_text_does_not() {
    let f = file(vec![
        Decl::Prompt(Prompt {
            name: id("known", 1, 8),
            body: st("text", 2, 3),
        }),
        agent("a", 10, |a| {
            a.system = Some(PromptRef::Named(id("missing_prompt", 13, 11)));
            a.user = Some(PromptRef::Named(id("known", 14, 9)));
        }),
        agent("b", 20, |a| {
            a.user = Some(PromptRef::Named(id("other", 22, 9)))
        }),
        workflow(|_| {}),
    ]);
    let hint = "write text in quotes for an inline prompt";
    assert_eq!(
        run(&f),
        vec![
            d(Code::C003, 13, 11, "unknown prompt \"missing_prompt\"")
                .with_node("a")
                .with_hint(hint),
            d(Code::C003, 22, 9, "unknown prompt \"other\"")
                .with_node("b")
                .with_hint(hint),
        ]
    );
}

#[test]
fn a_node_declared_twice_across_kinds_draws_c041_at_the_second_name() {
    let f = file(vec![
        agent("x", 10, |_| {}),
        tool("x", 20, |_| {}),
        tool("x", 30, |_| {}),
        workflow(|_| {}),
    ]);
    assert_eq!(
        run(&f),
        vec![
            d(
                Code::C041,
                20,
                6,
                "node \"x\" is already declared at line 10"
            )
            .with_node("x"),
            d(
                Code::C041,
                30,
                6,
                "node \"x\" is already declared at line 10"
            )
            .with_node("x"),
        ]
    );
}

#[test]
fn tools_outside_the_roster_draw_c135_with_the_roster_as_hint() {
    let f = file(vec![
        agent("a", 10, |a| {
            a.tools = Some(WordList {
                items: vec![wd("bash", 13, 11), wd("web_search", 13, 17)],
                span: at(13, 10),
            });
        }),
        workflow(|_| {}),
    ]);
    assert_eq!(
        run(&f),
        vec![
            d(
                Code::C922,
                13,
                17,
                "unknown tool \"web_search\": node \"a\" fails when it starts"
            )
                .with_node("a")
                .with_hint(
                    "available: bash, read_file, write_file, file_edit, glob, grep, git_diff, git_status, git_log, web_fetch, read_image, sleep, todo_write, structured_output, send_user_message, or mcp.SERVER.TOOL for a tool of an MCP server the node gets"
                )
        ]
    );
}

#[test]
fn a_literal_model_with_an_unknown_provider_draws_c914() {
    let f = file(vec![
        agent("a", 10, |a| a.model = Some(st("mistral/large", 11, 10))),
        agent("b", 20, |a| {
            a.model = Some(st("openai_compatible/llama3", 21, 10))
        }),
        agent("c", 30, |a| a.model = Some(st("openai/gpt-4o", 31, 10))),
        agent("e", 40, |a| a.model = Some(st("${MODEL:-bogus/x}", 41, 10))),
        agent("f", 50, |a| a.model = Some(st("{{vars.model}}", 51, 10))),
        workflow(|_| {}),
    ]);
    assert_eq!(
        run(&f),
        vec![
            d(Code::C914, 11, 10, "unknown model provider \"mistral\"")
                .with_node("a")
                .with_hint("expected anthropic/…, openai/… or openai_compatible/…")
        ]
    );
}

// ---- C136 ----

fn asking_agent(line: u32) -> Decl {
    agent("a", line, |a| {
        a.interaction = Some((Interaction::Ask, at(line + 3, 16)));
    })
}

fn c136() -> Diagnostic {
    d(
        Code::C136,
        13,
        16,
        "node \"a\" asks the operator but runs in the sandbox, which has no ask-user channel",
    )
    .with_node("a")
    .with_hint("set interaction: none, or sandbox: none on the workflow; run --sandbox none")
}

#[test]
fn ask_under_a_sandbox_that_may_be_active_draws_c136() {
    // Absent, auto, inline: all may be active.
    let image = |b: &mut SandboxBlock| b.image = Some(st("debian", 103, 12));
    for sandbox in [
        None,
        Some(SandboxDecl::Short(wd("auto", 102, 12))),
        Some(block(102, image)),
    ] {
        let f = file(vec![asking_agent(10), workflow(|w| w.sandbox = sandbox)]);
        assert_eq!(run(&f), vec![c136()]);
    }
}

#[test]
fn ask_under_a_dropped_workflow_block_still_draws_c136() {
    // `mode: none` with another field drew C044: the block counts as absent.
    let f = file(vec![
        asking_agent(10),
        workflow(|w| {
            w.sandbox = Some(block(102, |b| {
                b.mode = Some(wd("none", 103, 11));
                b.user = Some(st("1000", 104, 11));
            }));
        }),
    ]);
    assert_eq!(
        run(&f),
        vec![
            c136(),
            d(Code::C044, 104, 11, "mode none takes no other field")
                .with_hint("remove the other fields, or choose mode auto or inline"),
        ]
    );
}

#[test]
fn ask_draws_no_c136_when_the_workflow_opts_out_or_the_engine_has_the_channel() {
    let f = file(vec![
        asking_agent(10),
        workflow(|w| w.sandbox = Some(SandboxDecl::Short(wd("none", 102, 12)))),
    ]);
    assert_eq!(
        run(&f),
        vec![d(
            Code::C128,
            102,
            12,
            "workflow opts out of the sandbox: every node runs on the host"
        )]
    );
    let f = file(vec![asking_agent(10), workflow(|_| {})]);
    let opts = CompileOptions {
        ask_user_in_sandbox: true,
    };
    assert_eq!(run_with(&f, opts), vec![]);
}

#[test]
fn a_node_level_none_does_not_silence_c136() {
    let f = file(vec![
        agent("a", 10, |a| {
            a.interaction = Some((Interaction::Ask, at(13, 16)));
            a.sandbox = Some(SandboxDecl::Short(wd("none", 14, 12)));
        }),
        workflow(|_| {}),
    ]);
    assert_eq!(
        run(&f),
        vec![
            c136(),
            d(
                Code::C128,
                14,
                12,
                "node sandbox is not honoured: \"a\" runs in the workflow's sandbox"
            )
            .with_node("a"),
        ]
    );
}

// ---- C128 ----

#[test]
fn every_node_sandbox_that_passed_c044_draws_c128_at_its_value_or_key() {
    let f = file(vec![
        tool("a", 10, |t| {
            t.sandbox = Some(SandboxDecl::Short(wd("none", 12, 12)))
        }),
        tool("b", 20, |t| {
            t.sandbox = Some(SandboxDecl::Short(wd("auto", 22, 12)))
        }),
        tool("c", 30, |t| {
            t.sandbox = Some(block(32, |b| b.image = Some(st("debian", 33, 12))));
        }),
        // Dropped by C044: no C128.
        agent("e", 40, |a| {
            a.sandbox = Some(SandboxDecl::Short(wd("allowlist", 44, 12)))
        }),
        workflow(|_| {}),
    ]);
    let honoured =
        |n: &str| format!("node sandbox is not honoured: \"{n}\" runs in the workflow's sandbox");
    assert_eq!(
        run(&f),
        vec![
            d(Code::C128, 12, 12, &honoured("a")).with_node("a"),
            d(Code::C128, 22, 12, &honoured("b")).with_node("b"),
            d(Code::C128, 32, 3, &honoured("c")).with_node("c"),
            d(
                Code::C044,
                44,
                12,
                "\"allowlist\" is a network mode, not a sandbox mode"
            )
            .with_node("e")
            .with_hint(
                "set the egress policy inside the block: sandbox: / network: / mode: allowlist"
            ),
        ]
    );
}

#[test]
fn a_node_level_none_under_a_workflow_none_is_quiet_but_other_node_modes_are_not() {
    let f = file(vec![
        tool("a", 10, |t| {
            t.sandbox = Some(SandboxDecl::Short(wd("none", 12, 12)))
        }),
        tool("b", 20, |t| {
            t.sandbox = Some(block(22, |b| b.mode = Some(wd("none", 23, 11))));
        }),
        tool("c", 30, |t| {
            t.sandbox = Some(SandboxDecl::Short(wd("auto", 32, 12)))
        }),
        workflow(|w| {
            w.sandbox = Some(block(102, |b| b.mode = Some(wd("none", 103, 11))));
        }),
    ]);
    assert_eq!(
        run(&f),
        vec![
            d(
                Code::C128,
                32,
                12,
                "node sandbox is not honoured: \"c\" runs in the workflow's sandbox"
            )
            .with_node("c"),
            // A block with `mode: none` is an explicit opt-out too; anchored at the key.
            d(
                Code::C128,
                102,
                3,
                "workflow opts out of the sandbox: every node runs on the host"
            ),
        ]
    );
}

// ---- C044 ----

/// The diagnostics of one workflow-level sandbox.
fn sandbox_diags(decl: SandboxDecl) -> Vec<Diagnostic> {
    run(&with_workflow(|w| w.sandbox = Some(decl)))
}

fn c044(line: u32, col: u32, message: &str, hint: &str) -> Diagnostic {
    d(Code::C044, line, col, message).with_hint(hint)
}

#[test]
fn short_forms_outside_none_and_auto_draw_c044() {
    assert_eq!(
        sandbox_diags(SandboxDecl::Short(wd("inline", 102, 12))),
        vec![c044(
            102,
            12,
            "an inline sandbox needs image or build",
            "write a block with image or build, or use sandbox: auto"
        )]
    );
    assert_eq!(
        sandbox_diags(SandboxDecl::Short(wd("denylist", 102, 12))),
        vec![c044(
            102,
            12,
            "\"denylist\" is a network mode, not a sandbox mode",
            "set the egress policy inside the block: sandbox: / network: / mode: denylist"
        )]
    );
    assert_eq!(
        sandbox_diags(SandboxDecl::Short(wd("docker", 102, 12))),
        vec![c044(
            102,
            12,
            "unknown sandbox mode \"docker\"",
            "expected none, auto or inline"
        )]
    );
}

#[test]
fn an_inline_block_needs_image_or_build_anchored_at_mode_or_key() {
    let hint = "add image: \"…\" or a build: block, or use sandbox: auto";
    assert_eq!(
        sandbox_diags(block(102, |_| {})),
        vec![c044(102, 3, "an inline sandbox needs image or build", hint)]
    );
    assert_eq!(
        sandbox_diags(block(102, |b| b.mode = Some(wd("inline", 103, 11)))),
        vec![c044(
            103,
            11,
            "an inline sandbox needs image or build",
            hint
        )]
    );
}

#[test]
fn image_and_build_together_draw_c044_at_the_later_one() {
    let got = sandbox_diags(block(102, |b| {
        b.image = Some(st("debian", 103, 12));
        b.build = Some(BuildBlock {
            key: at(104, 5),
            ..BuildBlock::default()
        });
    }));
    assert_eq!(
        got,
        vec![c044(
            104,
            5,
            "image and build are mutually exclusive",
            "keep one of them"
        )]
    );
}

#[test]
fn mode_auto_takes_no_image_and_no_build() {
    let hint = "auto uses the repository's devcontainer or the default image; remove mode: auto for an inline sandbox";
    let got = sandbox_diags(block(102, |b| {
        b.mode = Some(wd("auto", 103, 11));
        b.image = Some(st("x", 104, 12));
        b.build = Some(BuildBlock {
            key: at(105, 5),
            ..BuildBlock::default()
        });
        b.user = Some(st("1000", 106, 11));
    }));
    assert_eq!(
        got,
        vec![
            c044(104, 12, "mode auto takes no image", hint),
            c044(105, 5, "mode auto takes no build", hint),
        ]
    );
}

#[test]
fn mode_none_takes_no_other_field_one_diagnostic_per_field() {
    let hint = "remove the other fields, or choose mode auto or inline";
    let got = sandbox_diags(block(102, |b| {
        b.mode = Some(wd("none", 103, 11));
        b.env = Some(MapValue {
            entries: vec![MapEntry {
                key: id("A", 104, 12),
                value: st("1", 104, 15),
            }],
            span: at(104, 10),
        });
        b.network = Some(NetworkBlock {
            key: at(105, 5),
            ..NetworkBlock::default()
        });
    }));
    assert_eq!(
        got,
        vec![
            c044(104, 10, "mode none takes no other field", hint),
            c044(105, 5, "mode none takes no other field", hint),
        ]
    );
}

#[test]
fn field_shapes_host_state_user_workspace_folder_and_build_paths() {
    let got = sandbox_diags(block(102, |b| {
        b.image = Some(st("debian", 103, 12));
        b.host_state = Some(wd("shared", 104, 17));
        b.user = Some(st("", 105, 11));
        b.workspace_folder = Some(st("work", 106, 23));
        b.build = None;
    }));
    assert_eq!(
        got,
        vec![
            c044(
                104,
                17,
                "invalid host_state \"shared\"",
                "expected auto or none"
            ),
            c044(
                105,
                11,
                "invalid user \"\"",
                "expected a uid, uid:gid or a user name"
            ),
            c044(
                106,
                23,
                "invalid workspace_folder \"work\"",
                "expected an absolute path in the container"
            ),
        ]
    );
    let got = sandbox_diags(block(102, |b| {
        b.user = Some(st("john doe", 105, 11));
        b.build = Some(BuildBlock {
            key: at(106, 5),
            dockerfile: Some(st("../Dockerfile", 107, 19)),
            context: Some(st("/abs", 108, 16)),
            args: None,
        });
    }));
    let hint =
        "build paths are relative to the workspace and may not leave it (no absolute path, no ..)";
    assert_eq!(
        got,
        vec![
            c044(
                105,
                11,
                "invalid user \"john doe\"",
                "expected a uid, uid:gid or a user name"
            ),
            c044(107, 19, "invalid dockerfile \"../Dockerfile\"", hint),
            c044(108, 16, "invalid context \"/abs\"", hint),
        ]
    );
}

#[test]
fn devcontainer_references_skip_the_path_shape_checks() {
    let got = sandbox_diags(block(102, |b| {
        b.workspace_folder = Some(st("${localWorkspaceFolderBasename}/x", 103, 23));
        b.user = Some(st("${localEnv:USER:some one}", 104, 11));
        b.build = Some(BuildBlock {
            key: at(105, 5),
            dockerfile: Some(st("${localWorkspaceFolder}/../Dockerfile", 106, 19)),
            context: Some(st("${localEnv:CTX}", 107, 16)),
            args: None,
        });
    }));
    assert_eq!(got, vec![]);
}

fn network(f: impl FnOnce(&mut NetworkBlock)) -> SandboxDecl {
    block(102, |b| {
        b.image = Some(st("debian", 103, 12));
        let mut n = NetworkBlock {
            key: at(104, 5),
            ..NetworkBlock::default()
        };
        f(&mut n);
        b.network = Some(n);
    })
}

fn rules(items: &[&str]) -> StrList {
    StrList {
        items: items
            .iter()
            .zip(0..)
            .map(|(r, i)| st(r, 106, 15 + 20 * i))
            .collect(),
        span: at(106, 14),
    }
}

#[test]
fn network_mode_inherit_and_preset_words_are_checked() {
    let got = sandbox_diags(network(|n| {
        n.mode = Some(wd("closed", 105, 13));
        n.inherit = Some(wd("merge", 107, 16));
    }));
    assert_eq!(
        got,
        vec![
            c044(
                105,
                13,
                "invalid network mode \"closed\"",
                "expected open, allowlist or denylist"
            ),
            c044(
                107,
                16,
                "invalid inherit \"merge\"",
                "want replace or append; omit it to merge"
            ),
        ]
    );
    let got = sandbox_diags(network(|n| {
        n.mode = Some(wd("allowlist", 105, 13));
        n.preset = Some(st("strict", 106, 15));
        n.inherit = Some(wd("append", 107, 16));
    }));
    assert_eq!(
        got,
        vec![c044(
            106,
            15,
            "unknown network preset \"strict\"",
            "the only preset is \"iterion-default\""
        )]
    );
}

#[test]
fn mode_open_ignores_preset_and_rules() {
    let got = sandbox_diags(network(|n| {
        n.mode = Some(wd("open", 105, 13));
        n.preset = Some(st("iterion-default", 105, 30));
        n.rules = Some(rules(&["bad rule"]));
    }));
    assert_eq!(
        got,
        vec![
            c044(
                105,
                30,
                "mode open ignores preset",
                "remove it, or choose mode allowlist or denylist"
            ),
            c044(
                106,
                14,
                "mode open ignores rules",
                "remove them, or choose mode allowlist or denylist"
            ),
        ]
    );
}

#[test]
fn each_rule_outside_the_syntax_draws_c044_at_the_rule() {
    let got = sandbox_diags(network(|n| {
        n.mode = Some(wd("denylist", 105, 13));
        n.rules = Some(rules(&[
            "**.example.com",
            "bad rule",
            "!",
            "${localEnv:RULE}",
        ]));
    }));
    assert_eq!(
        got,
        vec![
            d(
                Code::C044,
                106,
                35,
                "invalid network rule \"bad rule\": a space is not allowed in a host name (letters, digits and \"-\" only)"
            ),
            d(
                Code::C044,
                106,
                55,
                "invalid network rule \"!\": \"!\" must be followed by a pattern"
            ),
        ]
    );
}

#[test]
fn a_network_block_without_mode_draws_c902_and_is_not_dropped() {
    let warn = |suffix: &str| {
        d(
            Code::C902,
            104,
            5,
            &format!("network block has no mode: treated as allowlist{suffix}"),
        )
    };
    assert_eq!(
        sandbox_diags(network(|_| {})),
        vec![warn(" with no rules: all egress refused")]
    );
    assert_eq!(
        sandbox_diags(network(|n| n.rules = Some(rules(&[])))),
        vec![warn(" with no rules: all egress refused")]
    );
    assert_eq!(
        sandbox_diags(network(|n| n.rules = Some(rules(&["github.com"])))),
        vec![warn("")]
    );
    assert_eq!(
        sandbox_diags(network(|n| n.preset = Some(st("iterion-default", 105, 15)))),
        vec![warn("")]
    );
    // C902 is a warning, so the block is not dropped: at node level it still draws C128.
    let f = file(vec![
        tool("t", 10, |t| t.sandbox = Some(network(|_| {}))),
        workflow(|_| {}),
    ]);
    assert_eq!(
        run(&f),
        vec![
            d(
                Code::C128,
                102,
                3,
                "node sandbox is not honoured: \"t\" runs in the workflow's sandbox"
            )
            .with_node("t"),
            warn(" with no rules: all egress refused").with_node("t"),
        ]
    );
}

// ---- vars, schemas, worktree ----

fn var(name: &str, line: u32, ty: VarType, default: Option<Value>) -> VarDef {
    VarDef {
        name: id(name, line, 3),
        ty,
        ty_span: at(line, 10),
        enum_values: None,
        default,
    }
}

fn vars(list: Vec<VarDef>) -> Decl {
    Decl::Vars(VarsBlock {
        keyword: at(1, 1),
        vars: list,
    })
}

fn list(items: Vec<Value>, line: u32) -> Value {
    Value::List(items, at(line, 20))
}

#[test]
fn var_defaults_of_the_right_type_pass() {
    let s = |v: &str, line| Value::Str(st(v, line, 20));
    let f = file(vec![
        vars(vec![
            var("a", 2, VarType::String, Some(s("eu", 2))),
            var("b", 3, VarType::String, Some(Value::Ident(id("eu", 3, 20)))),
            var("c", 4, VarType::Bool, Some(Value::Bool(true, at(4, 20)))),
            var("e", 5, VarType::Int, Some(Value::Int(3, at(5, 20)))),
            var("g", 6, VarType::Float, Some(Value::Int(3, at(6, 20)))),
            var("h", 7, VarType::Float, Some(Value::Float(0.5, at(7, 20)))),
            var(
                "i",
                8,
                VarType::StringList,
                Some(list(vec![s("x", 8), Value::Ident(id("y", 8, 25))], 8)),
            ),
            var("j", 9, VarType::StringList, Some(s("[\"x\", \"y\"]", 9))),
            var("k", 10, VarType::StringList, Some(list(vec![], 10))),
            var("l", 11, VarType::Json, Some(s("{\"a\": [1, null]}", 11))),
            var("m", 12, VarType::Json, Some(s("null", 12))),
            var("n", 13, VarType::Int, None),
        ]),
        agent("a", 20, |_| {}),
        workflow(|w| {
            w.vars = Some(VarsBlock {
                keyword: at(102, 3),
                vars: vec![var("o", 103, VarType::Json, Some(s("3", 103)))],
            });
        }),
    ]);
    assert_eq!(run(&f), vec![]);
}

#[test]
fn var_defaults_of_the_wrong_type_draw_c109_in_both_blocks() {
    let s = |v: &str, line| Value::Str(st(v, line, 20));
    let f = file(vec![
        vars(vec![
            var("retries", 2, VarType::Int, Some(s("three", 2))),
            var("b", 3, VarType::Bool, Some(s("true", 3))),
            var("c", 4, VarType::String, Some(Value::Int(3, at(4, 20)))),
            var("e", 5, VarType::Int, Some(Value::Float(1.5, at(5, 20)))),
            var(
                "g",
                6,
                VarType::StringList,
                Some(list(vec![Value::Int(1, at(6, 21))], 6)),
            ),
            var("h", 7, VarType::StringList, Some(s("[1, 2]", 7))),
            var("i", 8, VarType::StringList, Some(s("x", 8))),
            var("j", 9, VarType::Json, Some(s("{nope", 9))),
            var("k", 10, VarType::Json, Some(Value::Int(3, at(10, 20)))),
        ]),
        agent("a", 20, |_| {}),
        workflow(|w| {
            w.vars = Some(VarsBlock {
                keyword: at(102, 3),
                vars: vec![var("f", 103, VarType::Float, Some(s("1.5", 103)))],
            });
        }),
    ]);
    let list_hint = "write a list of strings, or a string holding a JSON array of strings";
    let json_hint = "write the JSON text in a string";
    assert_eq!(
        run(&f),
        vec![
            d(Code::C109, 2, 20, "default of \"retries\" is not a int"),
            d(Code::C109, 3, 20, "default of \"b\" is not a bool"),
            d(Code::C109, 4, 20, "default of \"c\" is not a string"),
            d(Code::C109, 5, 20, "default of \"e\" is not a int"),
            d(Code::C109, 6, 20, "default of \"g\" is not a string[]").with_hint(list_hint),
            d(Code::C109, 7, 20, "default of \"h\" is not a string[]").with_hint(list_hint),
            d(Code::C109, 8, 20, "default of \"i\" is not a string[]").with_hint(list_hint),
            d(Code::C109, 9, 20, "default of \"j\" is not a json").with_hint(json_hint),
            d(Code::C109, 10, 20, "default of \"k\" is not a json").with_hint(json_hint),
            d(Code::C109, 103, 20, "default of \"f\" is not a float"),
        ]
    );
}

#[test]
fn a_schema_without_fields_draws_c140() {
    let f = file(vec![
        schema("empty", 1, &[]),
        schema("full", 3, &[("x", VarType::Int)]),
        agent("a", 10, |_| {}),
        workflow(|_| {}),
    ]);
    assert_eq!(
        run(&f),
        vec![d(Code::C140, 1, 8, "schema \"empty\" has no fields")]
    );
}

#[test]
fn worktree_outside_none_and_auto_draws_c142() {
    for ok in ["none", "auto"] {
        assert_eq!(
            run(&with_workflow(|w| w.worktree = Some(wd(ok, 102, 13)))),
            vec![]
        );
    }
    assert_eq!(
        run(&with_workflow(
            |w| w.worktree = Some(wd("sometimes", 102, 13))
        )),
        vec![d(
            Code::C142,
            102,
            13,
            "invalid worktree \"sometimes\"; expected none or auto"
        )]
    );
}

// ---- C143 ----

#[test]
fn each_backslash_quote_string_draws_c143_with_its_node() {
    let mut f = file(vec![
        tool("t", 10, |t| {
            t.sandbox = Some(block(12, |b| {
                b.image = Some(st("debian", 13, 12));
                b.post_create = Some(st("echo \\\"hi\\\"", 14, 18));
            }));
        }),
        agent("a", 20, |_| {}),
        workflow(|w| {
            w.sandbox = Some(block(102, |b| {
                b.image = Some(st("debian", 103, 12));
                b.post_create = Some(st("echo \\\"ready\\\"", 104, 18));
            }));
        }),
    ]);
    f.backslash_quote_strings = vec![at(14, 18), at(21, 10), at(104, 18)];
    let c143 = |line, col| {
        d(
            Code::C143,
            line,
            col,
            "the backslash in \\\" is kept in this string's value",
        )
        .with_hint("use a backtick string or ## strict-escape: on")
    };
    assert_eq!(
        run(&f),
        vec![
            d(
                Code::C128,
                12,
                3,
                "node sandbox is not honoured: \"t\" runs in the workflow's sandbox"
            )
            .with_node("t"),
            c143(14, 18).with_node("t"),
            c143(21, 10).with_node("a"),
            c143(104, 18),
        ]
    );
    f.strict_escape = true;
    assert_eq!(run(&f).iter().filter(|d| d.code == Code::C143).count(), 0);
}

// ---- secrets ----

#[test]
fn secrets_c090_duplicate_and_c091_named_like_a_var() {
    let mut kube = secret("kube", 3);
    kube.hosts = Some(hosts(&["k8s.example.com"], 4));
    let mut kube2 = secret("kube", 5);
    kube2.hosts = Some(hosts(&["k8s.example.com"], 6));
    let mut token = secret("api_token", 7);
    token.hosts = Some(hosts(&["api.example.com"], 8));
    let f = file(vec![
        vars(vec![var("api_token", 2, VarType::String, None)]),
        secrets(vec![kube, kube2, token]),
        agent("a", 20, |_| {}),
        workflow(|_| {}),
    ]);
    assert_eq!(
        run(&f),
        vec![
            d(Code::C090, 5, 3, "secret \"kube\" is already declared"),
            d(
                Code::C091,
                7,
                3,
                "secret \"api_token\" has the same name as a var"
            )
            .with_hint("rename one of them: {{vars.…}} and {{secrets.…}} must not be confused"),
        ]
    );
}

#[test]
fn bad_hosts_entries_draw_c092_each() {
    let mut s = secret("webhook", 3);
    s.hosts = Some(hosts(
        &["https://hooks.example.com/in", "ok.example.com", "a:1"],
        4,
    ));
    let f = file(vec![
        secrets(vec![s]),
        agent("a", 20, |_| {}),
        workflow(|_| {}),
    ]);
    assert_eq!(
        run(&f),
        vec![
            d(
                Code::C092,
                4,
                13,
                "hosts entry \"https://hooks.example.com/in\" must be a bare host or IP (no scheme)"
            ),
            d(
                Code::C092,
                4,
                53,
                "hosts entry \"a:1\" must be a bare host or IP (no port)"
            ),
        ]
    );
}

#[test]
fn c094_as_word_file_only_fields_env_name_and_mount_path() {
    let mut bad_as = secret("a", 3);
    bad_as.as_ = Some(wd("env", 4, 9));
    let mut env_on_value = secret("deploy_key", 5);
    env_on_value.env = Some(st("DEPLOY_KEY_PATH", 6, 10));
    env_on_value.hosts = Some(hosts(&["deploy.example.com"], 7));
    let mut path_on_value = secret("b", 8);
    path_on_value.as_ = Some(wd("value", 9, 9));
    path_on_value.mount_path = Some(st("/x", 10, 17));
    path_on_value.hosts = Some(hosts(&["b.example.com"], 11));
    let mut relative = secret("signing_key", 12);
    relative.as_ = Some(wd("file", 13, 9));
    relative.mount_path = Some(st("keys/signing.pem", 14, 17));
    relative.env = Some(st("1BAD", 15, 10));
    let f = file(vec![
        secrets(vec![bad_as, env_on_value, path_on_value, relative]),
        agent("a", 20, |_| {}),
        workflow(|_| {}),
    ]);
    assert_eq!(
        run(&f),
        vec![
            d(Code::C094, 4, 9, "as must be value or file, found \"env\"")
                .with_hint("expected value or file"),
            d(Code::C094, 6, 10, "env is only valid with as: file")
                .with_hint("a value secret is never in the container; add as: file to mount it"),
            d(Code::C094, 10, 17, "mount_path is only valid with as: file"),
            d(Code::C094, 14, 17, "mount_path must be absolute"),
            d(
                Code::C094,
                15,
                10,
                "env must match [A-Za-z_][A-Za-z0-9_]*, found \"1BAD\""
            ),
        ]
    );
}

#[test]
fn two_file_secrets_on_one_mount_path_draw_c094_at_the_later() {
    let file_secret = |name: &str, line: u32, path: Option<&str>| {
        let mut s = secret(name, line);
        s.as_ = Some(wd("file", line + 1, 9));
        s.mount_path = path.map(|p| st(p, line + 2, 17));
        s
    };
    let f = file(vec![
        secrets(vec![
            file_secret("key", 3, None),
            // `_key_` sanitises to `key`: the same default path.
            file_secret("_key_", 6, None),
            file_secret("c", 9, Some("/run/iterion/secrets/key")),
            file_secret("e", 12, Some("/etc/e")),
            file_secret("f", 15, Some("/etc/e")),
        ]),
        agent("a", 20, |_| {}),
        workflow(|_| {}),
    ]);
    let clash = |line, col, path: &str, other: &str| {
        d(
            Code::C094,
            line,
            col,
            &format!("mount_path \"{path}\" is already used by secret \"{other}\""),
        )
    };
    assert_eq!(
        run(&f),
        vec![
            clash(6, 3, "/run/iterion/secrets/key", "key"),
            clash(11, 17, "/run/iterion/secrets/key", "key"),
            clash(17, 17, "/etc/e", "e"),
        ]
    );
}

#[test]
fn c909_value_secret_without_hosts_and_any_secret_under_an_opt_out() {
    let mut with_hosts = secret("b", 4);
    with_hosts.hosts = Some(hosts(&["b.example.com"], 5));
    let mut file_secret = secret("c", 6);
    file_secret.as_ = Some(wd("file", 7, 9));
    let mut empty_hosts = secret("e", 8);
    empty_hosts.hosts = Some(hosts(&[], 9));
    let list = vec![secret("a", 3), with_hosts, file_secret, empty_hosts];
    let hint = "list the hosts it may travel to in hosts: [...], or deliver it with as: file";
    let f = file(vec![
        secrets(list.clone()),
        agent("x", 20, |_| {}),
        workflow(|_| {}),
    ]);
    assert_eq!(
        run(&f),
        vec![
            d(
                Code::C909,
                3,
                3,
                "secret \"a\" is never delivered: no hosts"
            )
            .with_hint(hint),
            d(
                Code::C909,
                8,
                3,
                "secret \"e\" is never delivered: no hosts"
            )
            .with_hint(hint),
        ]
    );
    let f = file(vec![
        secrets(list),
        agent("x", 20, |_| {}),
        workflow(|w| w.sandbox = Some(SandboxDecl::Short(wd("none", 102, 12)))),
    ]);
    let out = |name: &str, line| {
        d(
            Code::C909,
            line,
            3,
            &format!("secret \"{name}\" is never delivered: workflow opts out of the sandbox"),
        )
        .with_hint("secrets reach only a sandboxed run; remove sandbox: none")
    };
    assert_eq!(
        run(&f),
        vec![
            out("a", 3),
            out("b", 4),
            out("c", 6),
            out("e", 8),
            d(
                Code::C128,
                102,
                12,
                "workflow opts out of the sandbox: every node runs on the host"
            ),
        ]
    );
}
