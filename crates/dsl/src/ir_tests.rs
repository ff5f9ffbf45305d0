//! Unit tests of `ir::lower` on trees built by hand.
use std::collections::BTreeMap;

use pretty_assertions::assert_eq;
use serde_json::json;

use super::lower::lower;
use super::*;
use crate::ast::{
    self, Decl, Edge as AstEdge, LoopClause, NetworkBlock, SandboxDecl, Value as V, When, WithMap,
};
use crate::ir::test_builders::{
    agent, at, block, file, hosts, id, schema, secret, secrets, st, tool, wd, workflow,
};

fn edge(from: &str, to: &str, line: u32, f: impl FnOnce(&mut AstEdge)) -> AstEdge {
    let mut e = AstEdge {
        from: id(from, line, 3),
        to: id(to, line, 10),
        when: None,
        else_: None,
        loop_: None,
        with: None,
    };
    f(&mut e);
    e
}

#[test]
fn no_workflow_lowers_to_none() {
    assert_eq!(lower(&file(vec![tool("t", 1, |_| {})])), None);
}

#[test]
fn a_minimal_workflow_takes_every_default() {
    let f = file(vec![
        tool("a", 1, |_| {}),
        workflow(|w| w.edges = vec![edge("a", "done", 103, |_| {})]),
    ]);
    assert_eq!(
        lower(&f),
        Some(Workflow {
            name: "w".into(),
            entry: "a".into(),
            vars: vec![],
            secrets: vec![],
            schemas: BTreeMap::new(),
            nodes: vec![Node {
                id: "a".into(),
                kind: NodeKind::Tool,
                await_mode: None,
                body: NodeBody::Tool(ToolNode {
                    command: "echo hi".into(),
                    script: None,
                    publish: None,
                    input: None,
                    output: None,
                }),
            }],
            edges: vec![Edge {
                from: "a".into(),
                to: Target::Done,
                condition: Condition::None,
                loop_: None,
                with: vec![],
                line: 103,
            }],
            loops: BTreeMap::new(),
            worktree: Worktree::None,
            repo_devbox: None,
            budget: Budget::default(),
            sandbox: Sandbox {
                mode: SandboxMode::Inherit,
                ..Sandbox::default()
            },
            declared_sandbox_fields: vec![],
            subbot_runs: 0,
            mcp_servers: BTreeMap::new(),
            cursors: BTreeMap::new(),
            presets: BTreeMap::new(),
            attachments: vec![],
            skills: vec![],
            manifest: None,
        })
    );
}

/// The declared fields of a workflow whose `sandbox:` (workflow block) is `wf_sandbox` and whose
/// agent `a` has `node_sandbox` (each a block of lines, indented by the caller, or empty).
fn declared(wf_sandbox: &str, node_sandbox: &str) -> Vec<String> {
    let src = format!(
        "agent a:\n  model: \"openai/gpt-4o\"\n  user: \"hi\"\n{node_sandbox}\n\
         workflow w:\n  entry: a\n{wf_sandbox}\n  a -> done\n"
    );
    let compiled = crate::compile(src.as_bytes(), &crate::CompileOptions::default());
    let Some(workflow) = compiled.workflow else {
        panic!("{src}\ndoes not compile: {:?}", compiled.diagnostics)
    };
    workflow.declared_sandbox_fields
}

#[test]
fn declared_sandbox_fields_are_read_as_written() {
    let none: [&str; 0] = [];
    let table: &[(&str, &str, &[&str])] = &[
        ("", "", &none),
        ("  sandbox: auto", "", &none),
        ("  sandbox:\n    mode: auto", "", &none),
        ("  sandbox: none", "", &["mode=none"]),
        // `image:` alone is not `mode=inline` (the IR's default for a block).
        ("  sandbox:\n    image: \"alpine\"", "", &["image"]),
        (
            "  sandbox:\n    mode: inline\n    image: \"alpine\"\n    user: \"1000\"",
            "",
            &["mode=inline", "image", "user"],
        ),
        (
            "  sandbox:\n    mode: auto\n    env:\n      A: \"1\"",
            "",
            &["env"],
        ),
        (
            "  sandbox:\n    mode: auto\n    host_state: auto",
            "",
            &none,
        ),
        (
            "  sandbox:\n    mode: auto\n    host_state: none",
            "",
            &["host_state"],
        ),
        (
            "  sandbox:\n    mode: auto\n    post_create: \"true\"",
            "",
            &["post_create"],
        ),
        (
            "  sandbox:\n    mode: auto\n    workspace_folder: \"/w\"",
            "",
            &["workspace_folder"],
        ),
        (
            "  sandbox:\n    mode: auto\n    mounts: [\"type=volume,source=v,target=/v\"]",
            "",
            &["mounts"],
        ),
        (
            "  sandbox:\n    mode: auto\n    network:\n      mode: allowlist\n      rules: [\"example.com\"]",
            "",
            &["network"],
        ),
        // An agent's own block is reported under its name, after the workflow's fields.
        (
            "  sandbox: none",
            "  sandbox:\n    image: \"alpine\"",
            &["mode=none", "a.image"],
        ),
        ("", "  sandbox: auto", &none),
    ];
    for (wf, node, want) in table {
        assert_eq!(declared(wf, node), *want, "workflow {wf:?}, node {node:?}");
    }
}

#[test]
fn vars_from_both_blocks_are_typed_json_in_declaration_order() {
    let var = |name: &str, ty, default| ast::VarDef {
        name: id(name, 2, 3),
        ty,
        ty_span: at(2, 10),
        enum_values: None,
        default,
    };
    let s = |v: &str| V::Str(st(v, 2, 20));
    let f = file(vec![
        Decl::Vars(ast::VarsBlock {
            keyword: at(1, 1),
            vars: vec![
                var("region", ast::VarType::String, Some(s("eu"))),
                var(
                    "word",
                    ast::VarType::String,
                    Some(V::Ident(id("eu", 2, 20))),
                ),
                var("n", ast::VarType::Int, Some(V::Int(3, at(2, 20)))),
                var("ratio", ast::VarType::Float, Some(V::Int(2, at(2, 20)))),
                var("flag", ast::VarType::Bool, Some(V::Bool(false, at(2, 20)))),
                var(
                    "list",
                    ast::VarType::StringList,
                    Some(V::List(vec![s("a"), V::Ident(id("b", 2, 25))], at(2, 20))),
                ),
                var("list2", ast::VarType::StringList, Some(s("[\"x\"]"))),
                var("cfg", ast::VarType::Json, Some(s("{\"k\": [1, null]}"))),
                var("required", ast::VarType::Int, None),
            ],
        }),
        tool("a", 10, |_| {}),
        workflow(|w| {
            w.vars = Some(ast::VarsBlock {
                keyword: at(102, 3),
                vars: vec![var(
                    "late",
                    ast::VarType::Float,
                    Some(V::Float(0.5, at(2, 20))),
                )],
            });
        }),
    ]);
    let wf = lower(&f).unwrap();
    let got: Vec<(String, ValueType, Option<serde_json::Value>)> = wf
        .vars
        .iter()
        .map(|v| (v.name.clone(), v.ty, v.default.clone()))
        .collect();
    assert_eq!(
        got,
        vec![
            ("region".into(), ValueType::String, Some(json!("eu"))),
            ("word".into(), ValueType::String, Some(json!("eu"))),
            ("n".into(), ValueType::Int, Some(json!(3))),
            ("ratio".into(), ValueType::Float, Some(json!(2.0))),
            ("flag".into(), ValueType::Bool, Some(json!(false))),
            (
                "list".into(),
                ValueType::StringList,
                Some(json!(["a", "b"]))
            ),
            ("list2".into(), ValueType::StringList, Some(json!(["x"]))),
            ("cfg".into(), ValueType::Json, Some(json!({"k": [1, null]}))),
            ("required".into(), ValueType::Int, None),
            ("late".into(), ValueType::Float, Some(json!(0.5))),
        ]
    );
    assert!(wf.var("required").is_some_and(Var::is_required));
    assert!(wf.var("region").is_some_and(|v| !v.is_required()));
}

#[test]
fn secrets_take_their_defaults_and_sanitised_mount_paths() {
    let mut value = secret("api", 3);
    value.value = Some(st("${API_TOKEN}", 4, 12));
    value.hosts = Some(hosts(&["api.example.com"], 5));
    let mut file_default = secret("_registry.token_", 6);
    file_default.as_ = Some(wd("file", 7, 9));
    file_default.env = Some(st("REGISTRY_TOKEN_FILE", 8, 10));
    file_default.optional = Some(ast::BoolLit {
        value: true,
        span: at(9, 15),
    });
    let mut file_custom = secret("signing", 10);
    file_custom.as_ = Some(wd("file", 11, 9));
    file_custom.mount_path = Some(st("/etc/keys/signing.pem", 12, 17));
    let f = file(vec![
        secrets(vec![value, file_default, file_custom]),
        tool("a", 20, |_| {}),
        workflow(|_| {}),
    ]);
    assert_eq!(
        lower(&f).unwrap().secrets,
        vec![
            Secret {
                name: "api".into(),
                value: "${API_TOKEN}".into(),
                delivery: Delivery::Value,
                hosts: vec!["api.example.com".into()],
                optional: false,
            },
            Secret {
                name: "_registry.token_".into(),
                value: "${_registry.token_}".into(),
                delivery: Delivery::File {
                    mount_path: "/run/iterion/secrets/registry.token".into(),
                    env: Some("REGISTRY_TOKEN_FILE".into()),
                },
                hosts: vec![],
                optional: true,
            },
            Secret {
                name: "signing".into(),
                value: "${signing}".into(),
                delivery: Delivery::File {
                    mount_path: "/etc/keys/signing.pem".into(),
                    env: None,
                },
                hosts: vec![],
                optional: false,
            },
        ]
    );
}

#[test]
fn agents_resolve_named_prompts_dedup_tools_and_default_their_steps() {
    let f = file(vec![
        Decl::Prompt(ast::Prompt {
            name: id("sys", 1, 8),
            body: st("You audit.", 2, 3),
        }),
        schema(
            "out",
            3,
            &[
                ("ok", ast::VarType::Bool),
                ("tags", ast::VarType::StringList),
            ],
        ),
        agent("a", 10, |a| {
            a.system = Some(ast::PromptRef::Named(id("sys", 13, 11)));
            a.user = Some(ast::PromptRef::Inline(st("Audit {{input.x}}", 14, 9)));
            a.output = Some(id("out", 15, 11));
            a.tools = Some(ast::WordList {
                items: vec![wd("grep", 16, 11), wd("bash", 16, 17), wd("grep", 16, 23)],
                span: at(16, 10),
            });
            a.interaction = Some((ast::Interaction::Ask, at(17, 16)));
            a.await_ = Some((ast::AwaitMode::BestEffort, at(18, 10)));
        }),
        Decl::Node(ast::Node {
            kind: ast::NodeKind::Judge,
            kind_span: at(20, 1),
            name: id("j", 20, 7),
            body: ast::NodeBody::Agent({
                let mut p = crate::ir::test_builders::agent_props(20);
                p.user = None;
                p.tool_max_steps = Some(ast::IntLit {
                    value: 7,
                    span: at(23, 19),
                });
                p
            }),
        }),
        Decl::Node(ast::Node {
            kind: ast::NodeKind::Router,
            kind_span: at(30, 1),
            name: id("r", 30, 8),
            body: ast::NodeBody::Router(ast::RouterProps {
                mode: ast::RouterMode::Condition,
                ..ast::RouterProps::default()
            }),
        }),
        // A second declaration of `a` (C041) never reaches the IR.
        tool("a", 40, |_| {}),
        workflow(|_| {}),
    ]);
    let wf = lower(&f).unwrap();
    assert_eq!(
        wf.nodes,
        vec![
            Node {
                id: "a".into(),
                kind: NodeKind::Agent,
                await_mode: Some(AwaitMode::BestEffort),
                body: NodeBody::Agent(AgentNode {
                    model: "anthropic/claude-sonnet-4-5".into(),
                    system: Some("You audit.".into()),
                    user: "Audit {{input.x}}".into(),
                    input: None,
                    output: Some("out".into()),
                    tools: vec![Tool::Grep, Tool::Bash],
                    tool_max_steps: 50,
                    interaction: Interaction::Ask,
                    backend: Backend::Claw,
                    session: Session::Fresh,
                    reasoning_effort: None,
                    max_tokens: None,
                    provider: None,
                    publish: None,
                    readonly: false,
                    mcp_servers: vec![],
                    mcp_tools: vec![],
                    unavailable_tools: vec![],
                    permission: None,
                    cursors: vec![],
                }),
            },
            Node {
                id: "j".into(),
                kind: NodeKind::Judge,
                await_mode: None,
                body: NodeBody::Agent(AgentNode {
                    model: "anthropic/claude-sonnet-4-5".into(),
                    system: None,
                    user: INPUT_ONLY_PROMPT.into(),
                    input: None,
                    output: None,
                    tools: vec![],
                    tool_max_steps: 7,
                    interaction: Interaction::None,
                    backend: Backend::Claw,
                    session: Session::Fresh,
                    reasoning_effort: None,
                    max_tokens: None,
                    provider: None,
                    publish: None,
                    readonly: false,
                    mcp_servers: vec![],
                    mcp_tools: vec![],
                    unavailable_tools: vec![],
                    permission: None,
                    cursors: vec![],
                }),
            },
            Node {
                id: "r".into(),
                kind: NodeKind::Router,
                await_mode: None,
                body: NodeBody::Router(RouterNode {
                    mode: RouterMode::Condition,
                    ..RouterNode::default()
                }),
            },
        ]
    );
    assert!(wf.has_ask_interaction());
    assert_eq!(
        wf.schemas,
        BTreeMap::from([(
            "out".to_owned(),
            Schema {
                fields: vec![
                    SchemaField {
                        name: "ok".into(),
                        ty: ValueType::Bool,
                        enum_values: None,
                    },
                    SchemaField {
                        name: "tags".into(),
                        ty: ValueType::StringList,
                        enum_values: None,
                    },
                ]
            }
        )])
    );
}

#[test]
fn edges_carry_targets_conditions_loops_and_typed_mappings() {
    let f = file(vec![
        tool("a", 1, |_| {}),
        tool("b", 3, |_| {}),
        workflow(|w| {
            w.edges = vec![
                edge("a", "b", 110, |e| {
                    e.when = Some(When::Expr {
                        text: st("status >= 400", 110, 20),
                        span: at(110, 15),
                    });
                    e.with = Some(WithMap {
                        entries: vec![
                            (id("ok", 110, 40), V::Str(st("{{input.ok}}", 110, 44))),
                            (id("n", 110, 60), V::Int(3, at(110, 63))),
                            (id("r", 110, 66), V::Float(0.5, at(110, 69))),
                            (id("f", 110, 74), V::Bool(true, at(110, 77))),
                        ],
                        span: at(110, 35),
                    });
                }),
                edge("a", "done", 111, |e| {
                    e.when = Some(When::Field {
                        negated: true,
                        field: id("ok", 111, 25),
                        span: at(111, 15),
                    });
                }),
                edge("a", "fail", 112, |e| e.else_ = Some(at(112, 15))),
                edge("b", "a", 113, |e| {
                    e.loop_ = Some(LoopClause {
                        name: id("retry", 113, 18),
                        cap: 3,
                        cap_template: None,
                        span: at(113, 15),
                    });
                }),
                edge("b", "fail", 114, |_| {}),
            ];
        }),
    ]);
    let wf = lower(&f).unwrap();
    let node = |n: &str| Target::Node(n.into());
    assert_eq!(
        wf.edges,
        vec![
            Edge {
                from: "a".into(),
                to: node("b"),
                condition: Condition::Expr("status >= 400".into()),
                loop_: None,
                with: vec![
                    Mapping {
                        key: "ok".into(),
                        value: MappingValue::Template("{{input.ok}}".into())
                    },
                    Mapping {
                        key: "n".into(),
                        value: MappingValue::Int(3)
                    },
                    Mapping {
                        key: "r".into(),
                        value: MappingValue::Float(0.5)
                    },
                    Mapping {
                        key: "f".into(),
                        value: MappingValue::Bool(true)
                    },
                ],
                line: 110,
            },
            Edge {
                from: "a".into(),
                to: Target::Done,
                condition: Condition::Field {
                    name: "ok".into(),
                    negated: true
                },
                loop_: None,
                with: vec![],
                line: 111,
            },
            Edge {
                from: "a".into(),
                to: Target::Fail,
                condition: Condition::Else,
                loop_: None,
                with: vec![],
                line: 112,
            },
            Edge {
                from: "b".into(),
                to: node("a"),
                condition: Condition::None,
                loop_: Some(LoopRef {
                    name: "retry".into(),
                    cap: 3,
                    cap_template: None,
                }),
                with: vec![],
                line: 113,
            },
            Edge {
                from: "b".into(),
                to: Target::Fail,
                condition: Condition::None,
                loop_: None,
                with: vec![],
                line: 114,
            },
        ]
    );
    assert_eq!(wf.loops, BTreeMap::from([("retry".to_owned(), 3)]));
    let from_a: Vec<u32> = wf.outgoing("a").map(|e| e.line).collect();
    assert_eq!(from_a, vec![110, 111, 112]);
}

#[test]
fn worktree_budget_and_an_inline_sandbox_with_every_field() {
    let f = file(vec![
        tool("a", 1, |_| {}),
        workflow(|w| {
            w.worktree = Some(wd("auto", 102, 13));
            w.budget = Some(ast::Budget {
                key: at(103, 3),
                max_duration: Some(st("${LIMIT:-45m}", 104, 19)),
                max_iterations: Some(ast::IntLit {
                    value: 8,
                    span: at(105, 21),
                }),
                ..Default::default()
            });
            w.sandbox = Some(block(106, |b| {
                b.build = Some(ast::BuildBlock {
                    key: at(107, 5),
                    dockerfile: None,
                    context: Some(st("docker", 108, 16)),
                    args: Some(ast::MapValue {
                        entries: vec![ast::MapEntry {
                            key: id("V", 109, 14),
                            value: st("1", 109, 17),
                        }],
                        span: at(109, 11),
                    }),
                });
                b.user = Some(st("1000:1000", 110, 11));
                b.workspace_folder = Some(st("/workspace", 111, 23));
                b.host_state = Some(wd("none", 112, 17));
                b.post_create = Some(st("make deps", 113, 18));
                b.env = Some(ast::MapValue {
                    entries: vec![ast::MapEntry {
                        key: id("A", 114, 12),
                        value: st("1", 114, 15),
                    }],
                    span: at(114, 10),
                });
                b.mounts = Some(ast::StrList {
                    items: vec![st("source=cache,target=/cache,type=volume", 115, 13)],
                    span: at(115, 12),
                });
                b.network = Some(NetworkBlock {
                    key: at(116, 5),
                    mode: None,
                    preset: Some(st("iterion-default", 117, 15)),
                    rules: Some(ast::StrList {
                        items: vec![st("!gist.github.com", 118, 15)],
                        span: at(118, 14),
                    }),
                    inherit: Some(wd("append", 119, 16)),
                });
            }));
        }),
    ]);
    let wf = lower(&f).unwrap();
    assert_eq!(wf.worktree, Worktree::Auto);
    assert_eq!(
        wf.budget,
        Budget {
            max_duration: Some("${LIMIT:-45m}".into()),
            max_iterations: Some(8),
            ..Default::default()
        }
    );
    assert_eq!(
        wf.sandbox,
        Sandbox {
            mode: SandboxMode::Inline,
            image: None,
            build: Some(Build {
                dockerfile: "Dockerfile".into(),
                context: Some("docker".into()),
                args: BTreeMap::from([("V".to_owned(), "1".to_owned())]),
            }),
            user: Some("1000:1000".into()),
            workspace_folder: Some("/workspace".into()),
            host_state: HostState::None,
            post_create: Some("make deps".into()),
            env: BTreeMap::from([("A".to_owned(), "1".to_owned())]),
            mounts: vec!["source=cache,target=/cache,type=volume".into()],
            network: Some(Network {
                mode: NetworkMode::Allowlist,
                mode_defaulted: true,
                preset: Some(NetworkPreset::IterionDefault),
                rules: vec!["!gist.github.com".into()],
                inherit: Some(NetworkInherit::Append),
            }),
        }
    );
}

#[test]
fn short_sandbox_forms_and_explicit_block_modes() {
    let lowered = |decl: SandboxDecl| {
        let f = file(vec![
            tool("a", 1, |_| {}),
            workflow(|w| w.sandbox = Some(decl)),
        ]);
        lower(&f).unwrap().sandbox
    };
    for (word, mode) in [("none", SandboxMode::None), ("auto", SandboxMode::Auto)] {
        assert_eq!(
            lowered(SandboxDecl::Short(wd(word, 102, 12))),
            Sandbox {
                mode,
                ..Sandbox::default()
            }
        );
    }
    let auto_block = block(102, |b| {
        b.mode = Some(wd("auto", 103, 11));
        b.host_state = Some(wd("auto", 104, 17));
        b.network = Some(NetworkBlock {
            key: at(105, 5),
            mode: Some(wd("denylist", 106, 13)),
            preset: None,
            rules: None,
            inherit: None,
        });
    });
    assert_eq!(
        lowered(auto_block),
        Sandbox {
            mode: SandboxMode::Auto,
            host_state: HostState::Auto,
            network: Some(Network {
                mode: NetworkMode::Denylist,
                mode_defaulted: false,
                preset: None,
                rules: vec![],
                inherit: None,
            }),
            ..Sandbox::default()
        }
    );
}

#[test]
fn the_ir_round_trips_through_json_with_stable_spellings() {
    let f = file(vec![
        tool("a", 1, |_| {}),
        workflow(|w| {
            w.sandbox = Some(block(102, |b| {
                b.image = Some(st("debian", 103, 12));
                b.network = Some(NetworkBlock {
                    key: at(104, 5),
                    mode: Some(wd("allowlist", 105, 13)),
                    preset: Some(st("iterion-default", 106, 15)),
                    rules: None,
                    inherit: None,
                });
            }));
            w.edges = vec![edge("a", "done", 110, |e| {
                e.when = Some(When::Field {
                    negated: false,
                    field: id("ok", 110, 20),
                    span: at(110, 15),
                });
            })];
        }),
    ]);
    let wf = lower(&f).unwrap();
    let value = serde_json::to_value(&wf).unwrap();
    assert_eq!(
        value["sandbox"]["network"],
        json!({"mode": "allowlist", "mode_defaulted": false, "preset": "iterion-default",
               "rules": [], "inherit": null})
    );
    assert_eq!(value["sandbox"]["mode"], json!("inline"));
    assert_eq!(
        value["edges"][0],
        json!({"from": "a", "to": "done", "condition": {"field": {"name": "ok", "negated": false}},
               "loop": null, "with": [], "line": 110})
    );
    assert_eq!(
        value["nodes"][0],
        json!({"id": "a", "kind": "tool", "await": null,
               "body": {"tool": {"command": "echo hi", "input": null, "output": null}}})
    );
    let back: Workflow = serde_json::from_value(value).unwrap();
    assert_eq!(back, wf);
}

#[test]
fn a_value_secret_serialises_with_its_delivery_tag() {
    let s = Secret {
        name: "k".into(),
        value: "${K}".into(),
        delivery: Delivery::File {
            mount_path: "/run/iterion/secrets/k".into(),
            env: None,
        },
        hosts: vec![],
        optional: false,
    };
    assert_eq!(
        serde_json::to_value(&s).unwrap()["delivery"],
        json!({"as": "file", "mount_path": "/run/iterion/secrets/k", "env": null})
    );
    assert_eq!(
        serde_json::to_value(Delivery::Value).unwrap(),
        json!({"as": "value"})
    );
}
