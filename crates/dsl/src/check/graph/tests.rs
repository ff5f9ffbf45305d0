//! Unit tests of the graph, template and expression checks on trees built by hand (end-to-end
//! tests through the parser live in `e2e_tests.rs`).
use pretty_assertions::assert_eq;

use crate::{
    Code, CompileOptions,
    ast::*,
    check::symbols::Symbols,
    diag::{self, Diagnostic},
    ir::test_builders::*,
};

fn run_exact(f: &File) -> Vec<Diagnostic> {
    let syms = Symbols::build(f);
    let mut out = Vec::new();
    super::check(f, &syms, &CompileOptions::default(), &mut out);
    diag::sort(&mut out);
    out
}

/// The diagnostics with every width set to 1, so expectations can use [`at`]; widths are
/// asserted separately.
fn run(f: &File) -> Vec<Diagnostic> {
    let mut out = run_exact(f);
    for d in &mut out {
        d.span.width = 1;
    }
    out
}

/// (code, line) pairs, sorted, for tests that only care where things fire.
fn codes(f: &File) -> Vec<(Code, u32)> {
    run(f).iter().map(|d| (d.code, d.span.line)).collect()
}

fn d(code: Code, line: u32, col: u32, message: &str) -> Diagnostic {
    Diagnostic::new(code, at(line, col), message)
}

/// `FROM -> TO` at `line`: FROM at column 3, TO at column 20.
fn e(line: u32, from: &str, to: &str) -> Edge {
    Edge {
        from: id(from, line, 3),
        to: id(to, line, 20),
        when: None,
        else_: None,
        loop_: None,
        with: None,
    }
}

fn when(mut edge: Edge, field: &str) -> Edge {
    let line = edge.from.span.line;
    edge.when = Some(When::Field {
        negated: false,
        field: id(field, line, 35),
        span: at(line, 30),
    });
    edge
}

fn when_not(mut edge: Edge, field: &str) -> Edge {
    let line = edge.from.span.line;
    edge.when = Some(When::Field {
        negated: true,
        field: id(field, line, 39),
        span: at(line, 30),
    });
    edge
}

/// `when "expr"`: `when` at column 30, the opening quote at 35.
fn when_expr(mut edge: Edge, text: &str) -> Edge {
    let line = edge.from.span.line;
    edge.when = Some(When::Expr {
        text: st(text, line, 35),
        span: at(line, 30),
    });
    edge
}

fn or_else(mut edge: Edge) -> Edge {
    edge.else_ = Some(at(edge.from.span.line, 30));
    edge
}

/// `as NAME(CAP)`, `as` at column 50.
fn looped(mut edge: Edge, name: &str, cap: i64) -> Edge {
    let line = edge.from.span.line;
    edge.loop_ = Some(LoopClause {
        name: id(name, line, 53),
        cap,
        cap_template: None,
        span: at(line, 50),
    });
    edge
}

/// `with { k: "v", … }`, `with` at column 60, keys at 70, 90, …; values are template strings.
fn with(mut edge: Edge, entries: &[(&str, &str)]) -> Edge {
    let line = edge.from.span.line;
    edge.with = Some(WithMap {
        entries: entries
            .iter()
            .zip(0..)
            .map(|((k, v), i)| {
                (
                    id(k, line, 70 + 20 * i),
                    Value::Str(st(v, line, 75 + 20 * i)),
                )
            })
            .collect(),
        span: at(line, 60),
    });
    edge
}

fn flow(entry: &str, edges: Vec<Edge>) -> Decl {
    workflow(|w| {
        w.entry = Some(wd(entry, 101, 10));
        w.edges = edges;
    })
}

fn router(name: &str, line: u32, mode: RouterMode) -> Decl {
    Decl::Node(Node {
        kind: NodeKind::Router,
        kind_span: at(line, 1),
        name: id(name, line, 8),
        body: NodeBody::Router(RouterProps {
            mode,
            ..RouterProps::default()
        }),
    })
}

fn out_schema(s: &str, line: u32) -> Option<Ident> {
    Some(id(s, line, 11))
}

fn tool_cmd(name: &str, line: u32, command: &str) -> Decl {
    tool(name, line, |t| t.command = st(command, line + 1, 12))
}

fn awaiting(name: &str, line: u32) -> Decl {
    tool(name, line, |t| {
        t.await_ = Some((AwaitMode::WaitAll, at(line + 2, 10)))
    })
}

// ---- workflows, entry, edges' endpoints ----

#[test]
fn a_small_clean_workflow_draws_nothing() {
    let f = file(vec![
        schema("r", 1, &[("ok", VarType::Bool), ("n", VarType::Int)]),
        tool("a", 10, |t| t.output = out_schema("r", 12)),
        tool("b", 20, |_| {}),
        flow(
            "a",
            vec![
                with(when(e(110, "a", "b"), "ok"), &[("n", "{{input.n}}")]),
                when_not(e(111, "a", "done"), "ok"),
                e(112, "b", "done"),
            ],
        ),
    ]);
    assert_eq!(run(&f), vec![]);
}

#[test]
fn no_workflow_is_c006_and_skips_the_graph_checks() {
    let f = file(vec![tool("a", 10, |_| {})]);
    let got = run(&f);
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(
        (got[0].code, got[0].message.as_str()),
        (Code::C006, "no workflow declared")
    );
    assert!(
        got[0]
            .hint
            .as_deref()
            .unwrap()
            .contains("validated through")
    );
}

#[test]
fn a_second_workflow_is_c007_and_is_not_checked() {
    let mut f = file(vec![
        tool("a", 10, |_| {}),
        flow("a", vec![e(110, "a", "done")]),
    ]);
    f.decls.push(Decl::Workflow(Workflow {
        name: id("v", 200, 10),
        entry: None,
        vars: None,
        sandbox: None,
        worktree: None,
        repo_devbox: None,
        workspace_checkpoint: None,
        budget: None,
        default_backend: None,
        permission: Default::default(),
        mcp: None,
        attachments: None,
        unenforced: vec![],
        edges: vec![e(201, "ghost", "done")],
    }));
    assert_eq!(
        run(&f),
        vec![d(
            Code::C007,
            200,
            10,
            "second workflow \"v\"; a file holds exactly one"
        )]
    );
}

#[test]
fn entry_missing_or_unknown_is_c008_and_skips_c016() {
    let mut f = file(vec![
        tool("a", 10, |_| {}),
        tool("b", 20, |_| {}),
        flow("a", vec![]),
    ]);
    if let Some(Decl::Workflow(w)) = f.decls.last_mut() {
        w.entry = None;
        w.edges = vec![e(110, "a", "done"), e(111, "b", "done")];
    }
    assert_eq!(
        run(&f),
        vec![d(Code::C008, 100, 10, "workflow \"w\" has no entry")]
    );
    if let Some(Decl::Workflow(w)) = f.decls.last_mut() {
        w.entry = Some(wd("bb", 101, 10));
    }
    assert_eq!(
        run(&f),
        vec![
            d(Code::C008, 101, 10, "entry \"bb\" is not a declared node")
                .with_hint("did you mean \"b\"?")
        ]
    );
    if let Some(Decl::Workflow(w)) = f.decls.last_mut() {
        w.entry = Some(wd("done", 101, 10));
    }
    assert_eq!(codes(&f), vec![(Code::C008, 101)]);
}

#[test]
fn unknown_endpoints_are_c001_and_the_edge_is_dropped() {
    let f = file(vec![
        tool("a", 10, |_| {}),
        flow(
            "a",
            vec![
                e(110, "a", "ghost"),
                e(111, "a", "done"),
                e(112, "done", "a"),
                e(113, "nope", "fial"),
            ],
        ),
    ]);
    assert_eq!(
        run(&f),
        vec![
            d(
                Code::C001,
                110,
                20,
                "edge \"a -> ghost\": unknown node \"ghost\""
            )
            .with_node("a"),
            d(
                Code::C001,
                112,
                3,
                "edge \"done -> a\": unknown node \"done\""
            ),
            d(
                Code::C001,
                113,
                3,
                "edge \"nope -> fial\": unknown node \"nope\""
            ),
            d(
                Code::C001,
                113,
                20,
                "edge \"nope -> fial\": unknown node \"fial\""
            )
            .with_hint("did you mean \"fail\"?"),
        ]
    );
}

#[test]
fn a_node_whose_only_edge_dangles_has_no_c901() {
    let f = file(vec![
        tool("a", 10, |_| {}),
        flow("a", vec![e(110, "a", "ghost")]),
    ]);
    assert_eq!(codes(&f), vec![(Code::C001, 110)]);
}

#[test]
fn unreachable_and_edgeless_nodes() {
    let f = file(vec![
        tool("a", 10, |_| {}),
        tool("b", 20, |_| {}),
        tool("c", 30, |_| {}),
        flow("a", vec![e(110, "a", "b"), e(111, "c", "done")]),
    ]);
    assert_eq!(
        run(&f),
        vec![
            d(Code::C901, 20, 6, "node \"b\" has no outgoing edge").with_node("b"),
            d(
                Code::C016,
                30,
                6,
                "node \"c\" is unreachable from entry \"a\""
            )
            .with_node("c"),
        ]
    );
}

// ---- per-source rules ----

#[test]
fn two_pure_edges_are_c010_but_a_loop_edge_does_not_count() {
    let f = file(vec![
        tool("a", 10, |_| {}),
        tool("b", 20, |_| {}),
        flow(
            "a",
            vec![
                looped(e(110, "a", "b"), "l", 2),
                e(111, "a", "b"),
                e(112, "a", "done"),
                e(113, "b", "done"),
            ],
        ),
    ]);
    assert_eq!(
        run(&f),
        vec![
            d(
                Code::C010,
                112,
                3,
                "node \"a\" already has an unconditional edge (to \"b\")"
            )
            .with_node("a")
            .with_hint("use when/else")
        ]
    );
}

#[test]
fn the_same_condition_twice_is_c011() {
    let f = file(vec![
        tool("a", 10, |_| {}),
        flow(
            "a",
            vec![
                when(e(110, "a", "done"), "ok"),
                when_not(e(111, "a", "fail"), "ok"),
                when(e(112, "a", "fail"), "ok"),
                when_expr(e(113, "a", "done"), "x > 1"),
                when_expr(e(114, "a", "fail"), "  x > 1 "),
                when_not(e(115, "a", "done"), "ok"),
            ],
        ),
    ]);
    assert_eq!(
        run(&f),
        vec![
            d(
                Code::C011,
                112,
                30,
                "node \"a\": condition ok is already used by the edge to \"done\""
            )
            .with_node("a"),
            d(
                Code::C011,
                114,
                30,
                "node \"a\": condition \"x > 1\" is already used by the edge to \"done\""
            )
            .with_node("a"),
            d(
                Code::C011,
                115,
                30,
                "node \"a\": condition not ok is already used by the edge to \"fail\""
            )
            .with_node("a"),
        ]
    );
}

#[test]
fn conditional_edges_need_a_fallback_or_an_exhaustive_field() {
    let only_when = file(vec![
        tool("a", 10, |_| {}),
        flow(
            "a",
            vec![
                when(e(110, "a", "done"), "ok"),
                when_expr(e(111, "a", "fail"), "x"),
            ],
        ),
    ]);
    assert_eq!(
        run(&only_when),
        vec![
            d(
                Code::C012,
                111,
                3,
                "node \"a\" has conditional edges but no fallback"
            )
            .with_node("a")
            .with_hint("add else or when not ok")
        ]
    );
    for fallback in [
        or_else(e(112, "a", "fail")),
        e(112, "a", "fail"),
        looped(e(112, "a", "a"), "l", 1),
        when_not(e(112, "a", "fail"), "ok"),
    ] {
        let mut f = only_when.clone();
        if let Some(Decl::Workflow(w)) = f.decls.last_mut() {
            w.edges.push(fallback.clone());
        }
        let got: Vec<Code> = run(&f).iter().map(|d| d.code).collect();
        assert!(!got.contains(&Code::C012), "{fallback:?}: {got:?}");
    }
    // Expressions never count as exhaustive.
    let exprs = file(vec![
        tool("a", 10, |_| {}),
        flow(
            "a",
            vec![
                when_expr(e(110, "a", "done"), "x"),
                when_expr(e(111, "a", "fail"), "not x"),
            ],
        ),
    ]);
    assert_eq!(
        run(&exprs),
        vec![
            d(
                Code::C012,
                111,
                3,
                "node \"a\" has conditional edges but no fallback"
            )
            .with_node("a")
            .with_hint("add an else edge")
        ]
    );
}

#[test]
fn when_fields_are_checked_against_the_output_schema() {
    let f = file(vec![
        schema(
            "r",
            1,
            &[("ok", VarType::Bool), ("detail", VarType::String)],
        ),
        tool("a", 10, |t| t.output = out_schema("r", 12)),
        flow(
            "a",
            vec![
                when(e(110, "a", "done"), "ok"),
                when(e(111, "a", "done"), "detail"),
                when_not(e(112, "a", "fail"), "missing"),
                when_expr(
                    e(113, "a", "fail"),
                    "detail == 'x' and input.nope and vars.v == 1",
                ),
                e(114, "a", "fail"),
            ],
        ),
    ]);
    assert_eq!(
        run(&f),
        vec![
            d(
                Code::C013,
                111,
                30,
                "condition field \"detail\" of \"a\" is string, not bool"
            )
            .with_node("a"),
            d(
                Code::C014,
                112,
                30,
                "output schema \"r\" of \"a\" has no field \"missing\""
            )
            .with_node("a"),
            d(
                Code::C014,
                113,
                35,
                "output schema \"r\" of \"a\" has no field \"nope\""
            )
            .with_node("a"),
            d(Code::C033, 113, 35, "unknown var \"v\"").with_node("a"),
        ]
    );
}

#[test]
fn an_unknown_output_schema_or_a_router_source_is_not_checked() {
    let f = file(vec![
        tool("a", 10, |t| t.output = out_schema("verdict", 12)),
        router("r", 20, RouterMode::Condition),
        flow(
            "a",
            vec![
                when(e(110, "a", "r"), "approved"),
                or_else(e(111, "a", "done")),
                when(e(112, "r", "done"), "whatever"),
                when_expr(e(113, "r", "fail"), "status >= 400"),
                or_else(e(114, "r", "done")),
            ],
        ),
    ]);
    assert_eq!(run(&f), vec![]);
}

#[test]
fn else_rules_c015_c123_c124() {
    let f = file(vec![
        tool("a", 10, |_| {}),
        tool("b", 20, |_| {}),
        flow(
            "a",
            vec![
                e(110, "a", "b"),
                or_else(e(111, "a", "fail")),
                when(e(112, "b", "done"), "ok"),
                or_else(e(113, "b", "fail")),
                or_else(e(114, "b", "done")),
            ],
        ),
    ]);
    assert_eq!(
        run(&f),
        vec![
            d(
                Code::C015,
                111,
                3,
                "else edge from \"a\" has no when sibling"
            )
            .with_node("a")
            .with_hint("use a plain edge"),
            d(
                Code::C124,
                111,
                3,
                "node \"a\" has both an else and an unconditional edge"
            )
            .with_node("a"),
            d(Code::C123, 114, 3, "node \"b\" already has an else edge").with_node("b"),
        ]
    );
}

#[test]
fn loop_clause_rules_c005_c026_c903_c145() {
    let f = file(vec![
        tool("a", 10, |_| {}),
        tool("b", 20, |_| {}),
        tool("c", 30, |_| {}),
        flow(
            "a",
            vec![
                looped(e(110, "a", "b"), "r", 2),
                e(111, "a", "c"),
                looped(e(112, "a", "c"), "s", 1),
                e(113, "b", "done"),
                looped(e(114, "c", "a"), "r", 3),
                looped(e(115, "c", "b"), "z", 0),
            ],
        ),
    ]);
    assert_eq!(
        run(&f),
        vec![
            d(
                Code::C903,
                112,
                3,
                "loop edge \"a -> c\" follows an unconditional edge and is never taken"
            )
            .with_node("a")
            .with_hint("declare it first"),
            d(
                Code::C005,
                114,
                50,
                "loop \"r\" has cap 3 here but 2 at line 110"
            )
            .with_node("c"),
            d(
                Code::C145,
                115,
                3,
                "when loop \"z\" is spent, \"c\" has no edge to take"
            )
            .with_node("c"),
            d(Code::C026, 115, 50, "loop \"z\" cap must be at least 1").with_node("c"),
        ]
    );
}

#[test]
fn a_conditional_loop_edge_then_else_is_the_example_5_shape() {
    let f = file(vec![
        schema(
            "tests",
            1,
            &[("passed", VarType::Bool), ("log", VarType::String)],
        ),
        tool("test", 10, |t| t.output = out_schema("tests", 12)),
        tool("fixer", 20, |_| {}),
        flow(
            "test",
            vec![
                when(e(110, "test", "done"), "passed"),
                with(
                    looped(when_not(e(111, "test", "fixer"), "passed"), "fix", 2),
                    &[("log", "{{input.log}}")],
                ),
                or_else(e(112, "test", "fail")),
                e(113, "fixer", "test"),
            ],
        ),
    ]);
    assert_eq!(run(&f), vec![]);
}

// ---- cycles ----

#[test]
fn a_cycle_without_a_loop_edge_is_c019_once_at_its_last_internal_edge() {
    let f = file(vec![
        tool("a", 10, |_| {}),
        tool("b", 20, |_| {}),
        tool("c", 30, |_| {}),
        flow(
            "a",
            vec![
                e(110, "a", "b"),
                when(e(111, "b", "c"), "x"),
                or_else(e(112, "b", "done")),
                e(113, "c", "b"),
                looped(e(114, "c", "a"), "l", 2),
                when(e(115, "c", "c"), "again"),
            ],
        ),
    ]);
    let got: Vec<Diagnostic> = run(&f)
        .into_iter()
        .filter(|d| d.code == Code::C019)
        .collect();
    assert_eq!(
        got,
        vec![
            d(Code::C019, 115, 3, "cycle c -> c has no loop clause")
                .with_node("c")
                .with_hint("add as NAME(N) to its back-edge")
        ]
    );
}

#[test]
fn c019_names_the_cycle_from_the_back_edges_target() {
    let f = file(vec![
        tool("a", 10, |_| {}),
        tool("b", 20, |_| {}),
        tool("c", 30, |_| {}),
        flow(
            "a",
            vec![
                e(110, "a", "b"),
                e(111, "b", "c"),
                when(e(112, "c", "a"), "x"),
                or_else(e(113, "c", "done")),
            ],
        ),
    ]);
    assert_eq!(
        run(&f),
        vec![
            d(
                Code::C019,
                112,
                3,
                "cycle a -> b -> c -> a has no loop clause"
            )
            .with_node("c")
            .with_hint("add as NAME(N) to its back-edge")
        ]
    );
}

#[test]
fn a_long_chain_is_checked_without_recursion() {
    let n = 20_000u32;
    let mut decls: Vec<Decl> = (0..n)
        .map(|i| tool(&format!("t{i}"), 10 + i, |_| {}))
        .collect();
    let mut edges: Vec<Edge> = (0..n - 1)
        .map(|i| e(100_000 + i, &format!("t{i}"), &format!("t{}", i + 1)))
        .collect();
    edges.push(e(200_000, &format!("t{}", n - 1), "t0"));
    decls.push(flow("t0", edges));
    let got = run(&file(decls));
    assert_eq!(got.len(), 1);
    assert_eq!((got[0].code, got[0].span.line), (Code::C019, 200_000));
}

// ---- templates ----

#[test]
fn references_in_prompts_commands_and_with_values() {
    let f = file(vec![
        Decl::Vars(VarsBlock {
            keyword: at(1, 1),
            vars: vec![VarDef {
                name: id("region", 2, 3),
                ty: VarType::String,
                ty_span: at(2, 11),
                enum_values: None,
                default: None,
            }],
        }),
        secrets(vec![
            secret("tok", 4),
            SecretDef {
                as_: Some(wd("file", 6, 9)),
                ..secret("key", 5)
            },
        ]),
        schema(
            "r",
            8,
            &[("ok", VarType::Bool), ("detail", VarType::String)],
        ),
        tool("a", 20, |t| {
            t.output = out_schema("r", 22);
            t.input = Some(id("r", 23, 10));
            t.command = st(
                "x {{vars.regoin}} {{input.nope}} {{secrets.tok.path}} {{secrets.key.path}} {{secrets.nah}} {{secrets.tok.x}}",
                21,
                12,
            );
        }),
        agent("g", 30, |a| {
            a.user = Some(PromptRef::Inline(st(
                "{{outputs.ghost.ok}} {{outputs.a.size}} {{outputs.b.x}} {{loop.nope.max}} {{run.id}}",
                32,
                9,
            )))
        }),
        tool("b", 40, |_| {}),
        flow(
            "a",
            vec![
                with(
                    e(110, "a", "g"),
                    &[("k", "{{input.missing}}"), ("v", "{{outputs.g.x}}")],
                ),
                with(
                    e(111, "g", "b"),
                    &[("k", "{{input.text}}"), ("self", "{{outputs.g.text}}")],
                ),
                e(112, "b", "done"),
            ],
        ),
    ]);
    // Columns: the command's value starts at column 13; each reference's offset is added.
    assert_eq!(
        run(&f),
        vec![
            d(Code::C033, 21, 15, "unknown var \"regoin\"")
                .with_node("a")
                .with_hint("did you mean \"region\"?"),
            d(Code::C034, 21, 31, "input schema \"r\" of \"a\" has no field \"nope\"").with_node("a"),
            d(Code::C095, 21, 46, "secrets.tok.path: \"tok\" is a value secret; only a file secret has a path")
                .with_node("a"),
            d(Code::C093, 21, 88, "unknown secret \"nah\"").with_node("a"),
            d(
                Code::C095,
                21,
                104,
                "secrets.tok.x: no such field; use secrets.tok, or secrets.tok.path for a file secret"
            )
            .with_node("a"),
            d(Code::C029, 32, 10, "outputs.ghost: no node \"ghost\"").with_node("g"),
            d(Code::C031, 32, 31, "output schema \"r\" of \"a\" has no field \"size\"").with_node("g"),
            d(Code::C032, 32, 50, "cannot check \"x\": \"b\" has no output schema").with_node("g"),
            d(Code::C036, 32, 50, "\"b\" never runs before \"g\"").with_node("g"),
            d(Code::C147, 32, 66, "unknown loop \"nope\"").with_node("g"),
            d(Code::C034, 110, 76, "output schema \"r\" of \"a\" has no field \"missing\"").with_node("a"),
            d(Code::C032, 110, 96, "cannot check \"x\": \"g\" has no output schema").with_node("a"),
            d(Code::C036, 110, 96, "\"g\" never runs before \"a\"").with_node("a"),
            d(Code::C032, 111, 76, "cannot check \"text\": \"g\" has no output schema").with_node("g"),
            d(Code::C032, 111, 96, "cannot check \"text\": \"g\" has no output schema").with_node("g"),
        ]
    );
}

#[test]
fn c137_flags_references_inside_shell_quotes() {
    let f = file(vec![
        Decl::Vars(VarsBlock {
            keyword: at(1, 1),
            vars: vec![VarDef {
                name: id("r", 2, 3),
                ty: VarType::String,
                ty_span: at(2, 11),
                enum_values: None,
                default: None,
            }],
        }),
        tool_cmd(
            "a",
            10,
            "make R={{vars.r}} TAG=\"{{vars.r}}\" '{{!vars.r}}'",
        ),
        flow("a", vec![e(110, "a", "done")]),
    ]);
    assert_eq!(
        run(&f),
        vec![
            d(
                Code::C137,
                11,
                36,
                "{{vars.r}} is inside quotes: its value is not protected"
            )
            .with_node("a")
            .with_hint("remove the quotes; the value is quoted for you"),
            d(
                Code::C137,
                11,
                49,
                "{{!vars.r}} is inside quotes: its value is not protected"
            )
            .with_node("a")
            .with_hint("remove the quotes; the value is quoted for you"),
        ]
    );
}

#[test]
fn model_templates_other_than_vars_are_c148_and_not_checked_further() {
    let f = file(vec![
        tool("b", 20, |_| {}),
        agent("a", 10, |a| {
            a.model = Some(st("{{outputs.b.detail}}/{{vars.nope}}", 11, 10))
        }),
        agent("c", 30, |a| a.model = Some(st("{{vars.nope}}", 31, 10))),
        agent("x", 40, |a| a.model = Some(st("${M:-a/b} ${oops", 41, 10))),
        flow(
            "a",
            vec![
                e(110, "a", "b"),
                e(111, "b", "c"),
                e(112, "c", "x"),
                e(113, "x", "done"),
            ],
        ),
    ]);
    assert_eq!(
        run(&f),
        vec![
            d(
                Code::C148,
                11,
                11,
                "model may only use {{vars.…}} templates"
            )
            .with_node("a"),
            d(Code::C033, 31, 11, "unknown var \"nope\"").with_node("c"),
            d(Code::C004, 41, 21, "malformed reference ${oops: missing }").with_node("x"),
        ]
    );
}

#[test]
fn a_named_prompt_is_checked_once_and_per_using_node() {
    let f = file(vec![
        schema("s1", 1, &[("a", VarType::String)]),
        schema("s2", 4, &[("b", VarType::String)]),
        Decl::Prompt(Prompt {
            name: id("p", 8, 8),
            body: st("{{vars.nope}} {{input.a}} {{outputs.y.text}}", 9, 2),
        }),
        agent("x", 10, |a| {
            a.user = Some(PromptRef::Named(id("p", 12, 9)));
            a.input = Some(id("s1", 13, 10));
        }),
        agent("y", 20, |a| {
            a.system = Some(PromptRef::Named(id("p", 21, 11)));
            a.user = Some(PromptRef::Named(id("p", 22, 9)));
            a.input = Some(id("s2", 23, 10));
        }),
        flow("x", vec![e(110, "x", "y"), e(111, "y", "done")]),
    ]);
    let mut got = run(&f);
    // `check::run` removes identical diagnostics; do the same here.
    got.dedup();
    assert_eq!(
        got,
        vec![
            d(Code::C033, 9, 3, "unknown var \"nope\"").with_node("x"),
            // x, which shares the prompt, gets `a`: for y it renders empty (a warning).
            d(
                Code::C149,
                9,
                17,
                "input schema \"s2\" of \"y\" has no field \"a\" (node \"x\", which shares this prompt, has it): it renders empty for \"y\""
            )
            .with_node("y"),
            d(
                Code::C032,
                9,
                29,
                "cannot check \"text\": \"y\" has no output schema"
            )
            .with_node("x"),
            d(Code::C036, 9, 29, "\"y\" never runs before \"x\"").with_node("x"),
            d(Code::C036, 9, 29, "\"y\" never runs before \"y\"").with_node("y"),
        ]
    );
}

#[test]
fn issues_and_host_references_in_every_place() {
    let f = file(vec![
        secrets(vec![SecretDef {
            value: Some(st("${BAD", 3, 12)),
            ..secret("s", 2)
        }]),
        tool_cmd("a", 10, "docker -f '{{json .X}}' {{params.r}} {{vars.x"),
        flow("a", vec![with(e(110, "a", "done"), &[("k", "{{each.x}}")])]),
    ]);
    assert_eq!(
        run(&f),
        vec![
            d(Code::C004, 3, 13, "malformed reference ${BAD: missing }"),
            d(
                Code::C904,
                11,
                24,
                "{{json…}} is not a reference and is kept as written"
            )
            .with_node("a"),
            d(
                Code::C004,
                11,
                37,
                "malformed reference {{params.r}}: namespace \"params\" is not supported yet"
            )
            .with_node("a"),
            d(
                Code::C004,
                11,
                50,
                "malformed reference {{vars.x: missing }} on the same line"
            )
            .with_node("a"),
            d(
                Code::C004,
                110,
                76,
                "malformed reference {{each.x}}: namespace \"each\" is not supported yet"
            )
            .with_node("a"),
        ]
    );
}

#[test]
fn expression_errors_point_at_the_string() {
    let f = file(vec![
        tool("a", 10, |_| {}),
        flow(
            "a",
            vec![
                when_expr(e(110, "a", "done"), "ok =="),
                when_expr(e(111, "a", "done"), "contains(x)"),
                when_expr(e(112, "a", "done"), "secrets.t == 'x'"),
                when_expr(e(113, "a", "done"), "loop.l.count > 1 and run.started"),
                or_else(e(114, "a", "fail")),
            ],
        ),
    ]);
    assert_eq!(
        run(&f),
        vec![
            d(Code::C040, 110, 35, "invalid expression: expected a value after \"==\", found the end").with_node("a"),
            d(Code::C138, 111, 35, "contains() takes 2 argument(s)").with_node("a"),
            d(Code::C040, 112, 35, "invalid expression: secrets cannot be read in an expression").with_node("a"),
            d(
                Code::C004,
                113,
                35,
                "malformed reference loop.l.count: unknown loop field \"count\" (expected iteration, max or previous_output)"
            )
            .with_node("a"),
            d(Code::C004, 113, 35, "malformed reference run.started: run.started does not exist (the run has id, elapsed_seconds, max_duration_seconds, iterations, max_iterations, tokens, max_tokens, cost_usd, max_cost_usd)")
                .with_node("a"),
        ]
    );
}

#[test]
fn outputs_in_with_and_when_may_name_the_source_itself() {
    let f = file(vec![
        schema("r", 1, &[("ok", VarType::Bool)]),
        tool("a", 10, |t| t.output = out_schema("r", 12)),
        tool("b", 20, |_| {}),
        flow(
            "a",
            vec![
                with(
                    when_expr(e(110, "a", "b"), "outputs.a.ok"),
                    &[("k", "{{outputs.a.ok}}")],
                ),
                or_else(e(111, "a", "done")),
                with(e(112, "b", "done"), &[("k", "{{outputs.b.x}}")]),
            ],
        ),
    ]);
    assert_eq!(
        run(&f),
        vec![
            d(
                Code::C032,
                112,
                76,
                "cannot check \"x\": \"b\" has no output schema"
            )
            .with_node("b")
        ]
    );
}

// ---- fan-out ----

fn fan(edges: Vec<Edge>) -> File {
    file(vec![
        router("r", 1, RouterMode::FanOutAll),
        tool("a", 10, |_| {}),
        tool("b", 20, |_| {}),
        awaiting("j", 30),
        tool("m", 40, |_| {}),
        flow("r", edges),
    ])
}

#[test]
fn a_clean_fan_out_draws_nothing() {
    let f = fan(vec![
        e(110, "r", "a"),
        e(111, "r", "b"),
        with(e(112, "a", "j"), &[("x", "1")]),
        with(e(113, "b", "j"), &[("y", "2")]),
        e(114, "j", "m"),
        e(115, "m", "done"),
    ]);
    assert_eq!(run(&f), vec![]);
}

#[test]
fn fan_out_edges_take_no_clause() {
    let f = fan(vec![
        when(e(110, "r", "a"), "ok"),
        looped(or_else(e(111, "r", "b")), "l", 1),
        e(112, "a", "j"),
        e(113, "b", "j"),
        e(114, "j", "m"),
        e(115, "m", "done"),
    ]);
    assert_eq!(
        run(&f),
        vec![
            d(
                Code::C905,
                111,
                30,
                "fan-out router \"r\" takes its edges unconditionally; else is not allowed"
            )
            .with_node("r"),
            d(
                Code::C905,
                111,
                50,
                "fan-out router \"r\" takes its edges unconditionally; as is not allowed"
            )
            .with_node("r"),
        ]
    );
}

#[test]
fn a_fan_out_needs_exactly_one_join() {
    let none = fan(vec![
        e(110, "r", "a"),
        e(111, "r", "b"),
        e(112, "a", "done"),
        e(113, "b", "m"),
        e(114, "m", "done"),
    ]);
    assert_eq!(
        run(&none)
            .into_iter()
            .filter(|d| d.code == Code::C906)
            .collect::<Vec<_>>(),
        vec![
            d(
                Code::C906,
                1,
                8,
                "fan-out \"r\" needs one join with await; found 0"
            )
            .with_node("r")
            .with_hint(
                "the branches all end at done: gather them first in a node with await (a \
                 compute node that maps their outputs, or a join), then go from it to done"
            )
        ]
    );
    let partial = fan(vec![
        e(110, "r", "a"),
        e(111, "r", "b"),
        e(112, "a", "j"),
        e(113, "b", "done"),
        e(114, "j", "done"),
    ]);
    assert_eq!(
        run(&partial),
        vec![
            d(
                Code::C906,
                1,
                8,
                "fan-out \"r\" needs one join with await; found 1"
            )
            .with_node("r")
            .with_hint("branch \"b\" never reaches \"j\""),
            d(
                Code::C016,
                40,
                6,
                "node \"m\" is unreachable from entry \"r\""
            )
            .with_node("m"),
            d(Code::C901, 40, 6, "node \"m\" has no outgoing edge").with_node("m"),
        ]
    );
}

#[test]
fn branches_must_be_separate() {
    let f = fan(vec![
        e(110, "r", "a"),
        e(111, "r", "b"),
        e(112, "a", "m"),
        e(113, "b", "m"),
        e(114, "m", "j"),
        e(115, "j", "done"),
    ]);
    assert_eq!(
        run(&f),
        vec![
            d(
                Code::C907,
                113,
                3,
                "fan-out \"r\": \"m\" is in the branches of both \"a\" and \"b\""
            )
            .with_node("b")
        ]
    );
    let f = fan(vec![
        e(110, "r", "a"),
        e(111, "r", "b"),
        when(e(112, "a", "j"), "ok"),
        or_else(e(113, "a", "done")),
        e(114, "b", "j"),
        e(115, "j", "m"),
        when(e(116, "m", "a"), "again"),
        or_else(e(117, "m", "j")),
    ]);
    assert_eq!(
        run(&f),
        vec![
            d(
                Code::C907,
                113,
                3,
                "fan-out \"r\": branch \"a\" has an edge to done"
            )
            .with_node("a"),
            d(
                Code::C907,
                116,
                3,
                "fan-out \"r\": edge \"m -> a\" enters branch \"a\" from outside the fan-out"
            )
            .with_node("m"),
            d(Code::C019, 117, 3, "cycle j -> m -> j has no loop clause")
                .with_node("m")
                .with_hint("add as NAME(N) to its back-edge"),
            d(
                Code::C907,
                117,
                3,
                "fan-out \"r\": join \"j\" is also entered from \"m\", outside the branches"
            )
            .with_node("m"),
        ]
    );
}

#[test]
fn an_await_that_is_no_join_is_c908() {
    let f = file(vec![
        tool("a", 10, |_| {}),
        awaiting("j", 30),
        flow("a", vec![e(110, "a", "j"), e(111, "j", "done")]),
    ]);
    assert_eq!(
        run(&f),
        vec![
            d(
                Code::C908,
                32,
                10,
                "await on \"j\" has no effect: it is not a fan-out join"
            )
            .with_node("j")
        ]
    );
}

#[test]
fn duplicate_with_keys_c028() {
    let f = file(vec![
        tool("a", 10, |_| {}),
        tool("b", 20, |_| {}),
        tool("t", 30, |_| {}),
        flow(
            "a",
            vec![
                when(e(110, "a", "b"), "ok"),
                with(or_else(e(111, "a", "t")), &[("k", "1")]),
                with(e(112, "b", "t"), &[("k", "2"), ("z", "3")]),
                e(113, "t", "done"),
            ],
        ),
    ]);
    // The `else` edge is not pure, so no clash.
    assert_eq!(run(&f), vec![]);
    let f = file(vec![
        tool("a", 10, |_| {}),
        tool("b", 20, |_| {}),
        tool("t", 30, |_| {}),
        flow(
            "a",
            vec![
                when(e(110, "a", "b"), "ok"),
                with(e(112, "a", "t"), &[("k", "1")]),
                with(e(113, "b", "t"), &[("z", "3"), ("k", "2")]),
                e(114, "t", "done"),
            ],
        ),
    ]);
    // Into a node that is not a join, the taken edge's mapping wins: no clash either.
    assert_eq!(run(&f), vec![]);
    // Into a join, any two edges from different branches clash, whatever their clauses.
    let f = fan(vec![
        e(110, "r", "a"),
        e(111, "r", "b"),
        with(when(e(112, "a", "j"), "ok"), &[("x", "1")]),
        or_else(e(113, "a", "fail")),
        with(e(114, "b", "j"), &[("x", "2")]),
        e(115, "j", "m"),
        e(116, "m", "done"),
    ]);
    assert_eq!(
        run(&f),
        vec![
            d(
                Code::C028,
                114,
                70,
                "node \"j\" receives \"x\" from both \"a\" and \"b\""
            )
            .with_node("b")
        ]
    );
}

#[test]
fn template_diagnostics_underline_the_whole_reference() {
    // `${X` in a command is the container's shell text (§4.3): not checked.
    let f = file(vec![
        tool_cmd("a", 10, "echo {{vars.nope}} ${X"),
        flow("a", vec![e(110, "a", "done")]),
    ]);
    let got: Vec<(Code, Span)> = run_exact(&f).iter().map(|d| (d.code, d.span)).collect();
    assert_eq!(got, vec![(Code::C033, Span::new(11, 18, 13))]);
}

#[test]
fn reach_many_answers_runs_before_over_all_edges() {
    let f = file(vec![
        tool("a", 10, |_| {}),
        tool("b", 20, |_| {}),
        tool("c", 30, |_| {}),
        tool("d", 40, |_| {}),
        tool("x", 50, |_| {}),
        flow(
            "a",
            vec![
                e(110, "a", "b"),
                looped(e(111, "b", "a"), "l", 2),
                e(112, "b", "c"),
                e(113, "c", "done"),
                e(114, "d", "d"),
            ],
        ),
    ]);
    let syms = Symbols::build(&f);
    let g = super::Graph::build(syms.workflow().unwrap(), &syms, &mut Vec::new());
    let pairs = [
        ("a", "c"),
        ("c", "a"),
        ("a", "a"),
        ("b", "b"),
        ("c", "c"),
        ("d", "d"),
        ("x", "x"),
        ("a", "x"),
        ("ghost", "a"),
        ("a", "done"),
    ];
    assert_eq!(
        g.reach_many(&syms, &pairs),
        vec![
            true, false, true, true, false, true, false, false, false, false
        ]
    );
    // More than 64 distinct sources: several chunks.
    let n = 200u32;
    let mut decls: Vec<Decl> = (0..n)
        .map(|i| tool(&format!("t{i}"), 10 + i, |_| {}))
        .collect();
    let edges: Vec<Edge> = (0..n - 1)
        .map(|i| e(1000 + i, &format!("t{i}"), &format!("t{}", i + 1)))
        .collect();
    decls.push(flow("t0", edges));
    let f = file(decls);
    let syms = Symbols::build(&f);
    let g = super::Graph::build(syms.workflow().unwrap(), &syms, &mut Vec::new());
    let names: Vec<String> = (0..n).map(|i| format!("t{i}")).collect();
    let mut pairs = Vec::new();
    let mut want = Vec::new();
    for i in (0..n as usize).step_by(3) {
        for j in (0..n as usize).step_by(7) {
            pairs.push((names[i].as_str(), names[j].as_str()));
            want.push(i < j);
        }
    }
    assert_eq!(g.reach_many(&syms, &pairs), want);
}

#[test]
fn branches_hold_no_loop_edge_no_fan_out_and_joins_are_not_shared() {
    // A loop edge inside a branch.
    let f = fan(vec![
        e(110, "r", "a"),
        e(111, "r", "b"),
        looped(e(112, "a", "m"), "l", 2),
        e(113, "a", "j"),
        e(114, "m", "j"),
        e(115, "b", "j"),
        e(116, "j", "done"),
    ]);
    assert_eq!(
        run(&f),
        vec![
            d(
                Code::C907,
                112,
                3,
                "fan-out \"r\": branch \"a\" holds the loop edge \"a -> m\""
            )
            .with_node("a")
        ]
    );
    // A fan-out inside a branch: only the breach is reported for the outer router.
    let f = file(vec![
        router("r", 1, RouterMode::FanOutAll),
        router("q", 5, RouterMode::FanOutAll),
        tool("a", 10, |_| {}),
        tool("b", 20, |_| {}),
        awaiting("j", 30),
        awaiting("k", 40),
        flow(
            "r",
            vec![
                e(110, "r", "q"),
                e(111, "r", "b"),
                e(112, "q", "a"),
                e(113, "q", "b"),
                e(114, "a", "k"),
                e(115, "b", "k"),
                e(116, "k", "j"),
                e(117, "j", "done"),
            ],
        ),
    ]);
    let got: Vec<(Code, u32)> = codes(&f);
    assert!(got.contains(&(Code::C907, 110)), "{got:?}");
    // Two routers sharing one join.
    let f = file(vec![
        router("r", 1, RouterMode::FanOutAll),
        router("q", 5, RouterMode::FanOutAll),
        tool("a", 10, |_| {}),
        tool("b", 20, |_| {}),
        awaiting("j", 30),
        flow(
            "r",
            vec![
                e(110, "r", "a"),
                e(111, "a", "j"),
                e(112, "j", "q"),
                e(113, "q", "b"),
                e(114, "b", "j"),
            ],
        ),
    ]);
    let got: Vec<Diagnostic> = run(&f)
        .into_iter()
        .filter(|d| d.code == Code::C907)
        .collect();
    assert_eq!(
        got,
        vec![
            d(
                Code::C907,
                114,
                3,
                "fan-out \"r\": join \"j\" is also entered from \"b\", outside the branches"
            )
            .with_node("b"),
            d(
                Code::C907,
                114,
                3,
                "fan-out \"q\": \"j\" is already the join of \"r\""
            )
            .with_node("b"),
        ]
    );
}
