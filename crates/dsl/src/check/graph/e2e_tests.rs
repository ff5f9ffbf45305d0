//! End-to-end tests of the graph, template and expression checks: source text through
//! `crate::compile`, DSL.md §9 fixtures and fragments. Only the codes this module owns are
//! compared, so these tests do not depend on the declaration checks.
use std::collections::BTreeMap;

use pretty_assertions::assert_eq;

use crate::{Code, CompileOptions, Diagnostic, compile};

/// The codes `check/graph*` emits.
const OURS: &[Code] = &[
    Code::C001,
    Code::C004,
    Code::C005,
    Code::C006,
    Code::C007,
    Code::C008,
    Code::C010,
    Code::C011,
    Code::C012,
    Code::C013,
    Code::C014,
    Code::C015,
    Code::C016,
    Code::C019,
    Code::C026,
    Code::C028,
    Code::C029,
    Code::C031,
    Code::C032,
    Code::C033,
    Code::C034,
    Code::C036,
    Code::C040,
    Code::C093,
    Code::C095,
    Code::C123,
    Code::C124,
    Code::C137,
    Code::C138,
    Code::C145,
    Code::C147,
    Code::C148,
    Code::C149,
    Code::C150,
    Code::C901,
    Code::C903,
    Code::C904,
    Code::C905,
    Code::C906,
    Code::C907,
    Code::C908,
    Code::C920,
];

fn diags(src: &str) -> Vec<Diagnostic> {
    compile(
        src.as_bytes(),
        &CompileOptions {
            ask_user_in_sandbox: false,
        },
    )
    .diagnostics
}

/// Our (code, line) pairs, sorted.
fn ours(src: &str) -> Vec<(Code, u32)> {
    let mut v: Vec<(Code, u32)> = diags(src)
        .iter()
        .filter(|d| OURS.contains(&d.code))
        .map(|d| (d.code, d.span.line))
        .collect();
    v.sort();
    v
}

/// Every diagnostic's (code, line), sorted.
fn all(src: &str) -> Vec<(Code, u32)> {
    let mut v: Vec<(Code, u32)> = diags(src).iter().map(|d| (d.code, d.span.line)).collect();
    v.sort();
    v
}

const GALLERY: &str = include_str!("../../../../../examples/06_gallery.iter");

#[test]
fn the_gallery_draws_exactly_our_expected_codes_per_line() {
    let mut want: BTreeMap<u32, Vec<&str>> = BTreeMap::new();
    for (i, line) in GALLERY.lines().enumerate() {
        if let Some((_, codes)) = line.split_once("# expect:") {
            for c in codes.split(',').map(str::trim) {
                if OURS.iter().any(|o| o.as_str() == c) {
                    want.entry(u32::try_from(i + 1).unwrap())
                        .or_default()
                        .push(c);
                }
            }
        }
    }
    let mut got: BTreeMap<u32, Vec<&str>> = BTreeMap::new();
    for (code, line) in ours(GALLERY) {
        got.entry(line).or_default().push(code.as_str());
    }
    for v in want.values_mut().chain(got.values_mut()) {
        v.sort();
    }
    assert_eq!(got, want);
}

#[test]
fn the_gallery_messages_of_our_codes() {
    let got: Vec<(u32, &str, String, Option<String>)> = diags(GALLERY)
        .into_iter()
        .filter(|d| OURS.contains(&d.code))
        .map(|d| (d.span.line, d.code.as_str(), d.message, d.node))
        .collect();
    let s = |x: &str| x.to_string();
    let n = |x: &str| Some(x.to_string());
    assert_eq!(
        got,
        vec![
            (
                30,
                "C137",
                s("{{vars.region}} is inside quotes: its value is not protected"),
                n("build")
            ),
            (
                36,
                "C095",
                s(
                    "secrets.api_token.path: \"api_token\" is a value secret; only a file secret has a path"
                ),
                n("publish")
            ),
            (36, "C093", s("unknown secret \"nope\""), n("publish")),
            (41, "C033", s("unknown var \"regoin\""), n("gatekeeper")),
            (
                41,
                "C029",
                s("outputs.ghost: no node \"ghost\""),
                n("gatekeeper")
            ),
            (
                47,
                "C148",
                s("model may only use {{vars.…}} templates"),
                n("reviewer")
            ),
            (
                54,
                "C031",
                s("output schema \"result\" of \"build\" has no field \"size\""),
                n("helper")
            ),
            (
                57,
                "C901",
                s("node \"sink\" has no outgoing edge"),
                n("sink")
            ),
            (
                59,
                "C034",
                s("input schema \"result\" of \"sink\" has no field \"nope\""),
                n("sink")
            ),
            (
                59,
                "C036",
                s("\"orphan\" never runs before \"sink\""),
                n("sink")
            ),
            (
                61,
                "C908",
                s("await on \"sink\" has no effect: it is not a fan-out join"),
                n("sink")
            ),
            (
                63,
                "C016",
                s("node \"orphan\" is unreachable from entry \"build\""),
                n("orphan")
            ),
            (
                77,
                "C011",
                s("node \"build\": condition ok is already used by the edge to \"publish\""),
                n("build")
            ),
            (78, "C138", s("contains() takes 2 argument(s)"), n("build")),
            (
                79,
                "C013",
                s("condition field \"detail\" of \"build\" is string, not bool"),
                n("build")
            ),
            (
                80,
                "C012",
                s("node \"build\" has conditional edges but no fallback"),
                n("build")
            ),
            (
                80,
                "C014",
                s("output schema \"result\" of \"build\" has no field \"missing_field\""),
                n("build")
            ),
            (
                82,
                "C015",
                s("else edge from \"publish\" has no when sibling"),
                n("publish")
            ),
            (
                82,
                "C124",
                s("node \"publish\" has both an else and an unconditional edge"),
                n("publish")
            ),
            (
                83,
                "C145",
                s("when loop \"review_round\" is spent, \"gatekeeper\" has no edge to take"),
                n("gatekeeper")
            ),
            (
                83,
                "C026",
                s("loop \"review_round\" cap must be at least 1"),
                n("gatekeeper")
            ),
            (
                86,
                "C019",
                s("cycle reviewer -> helper -> reviewer has no loop clause"),
                n("helper")
            ),
            (
                87,
                "C010",
                s("node \"helper\" already has an unconditional edge (to \"reviewer\")"),
                n("helper")
            ),
        ]
    );
}

#[test]
fn the_clean_examples_draw_nothing_at_all() {
    for (name, src) in [
        ("hello", include_str!("../../../../../examples/hello.iter")),
        ("01", include_str!("../../../../../examples/01_probe.iter")),
        (
            "02",
            include_str!("../../../../../examples/02_egress_retry.iter"),
        ),
        (
            "03",
            include_str!("../../../../../examples/03_secret_agent.iter"),
        ),
        (
            "04",
            include_str!("../../../../../examples/04_parallel_review.iter"),
        ),
        (
            "05",
            include_str!("../../../../../examples/05_fix_tests.iter"),
        ),
    ] {
        assert_eq!(all(src), vec![], "{name}");
    }
}

// ---- §9.6 fragments for our codes ----

const TOOLS: &str =
    "tool a:\n  command: `true`\n\ntool b:\n  command: `true`\n\ntool c:\n  command: `true`\n\n";

#[test]
fn fragment_c001() {
    let src =
        format!("{TOOLS}workflow w:\n  entry: a\n  a -> ghost\n  a -> b\n  b -> c\n  c -> done\n");
    assert_eq!(all(&src), vec![(Code::C001, 12)]);
}

#[test]
fn fragment_c004() {
    let src = "agent x:\n  model: \"anthropic/claude-sonnet-4-5\"\n  user: \"{{vars.x\"\n\nworkflow w:\n  entry: x\n  x -> done\n";
    assert_eq!(all(src), vec![(Code::C004, 3)]);
    let src =
        "tool a:\n  command: `cat {{params.report}}`\n\nworkflow w:\n  entry: a\n  a -> done\n";
    assert_eq!(all(src), vec![(Code::C004, 2)]);
    let d = &diags(src)[0];
    assert_eq!(
        (d.span.col, d.message.as_str()),
        (
            17,
            "malformed reference {{params.report}}: namespace \"params\" is not supported yet"
        )
    );
}

#[test]
fn fragment_c005() {
    let src = format!(
        "{TOOLS}workflow w:\n  entry: a\n  a -> b as r(2)\n  a -> c\n  b -> done\n  c -> a as r(3)\n  c -> done\n"
    );
    assert_eq!(all(&src), vec![(Code::C005, 15)]);
}

#[test]
fn fragments_c006_c007_c008() {
    assert_eq!(all("tool a:\n  command: `true`\n"), vec![(Code::C006, 1)]);
    let src = "tool a:\n  command: `true`\n\nworkflow w:\n  entry: a\n  a -> done\n\nworkflow v:\n  entry: a\n  a -> done\n";
    assert_eq!(all(src), vec![(Code::C007, 8)]);
    assert_eq!(
        all("tool a:\n  command: `true`\n\nworkflow w:\n  a -> done\n"),
        vec![(Code::C008, 4)]
    );
    assert_eq!(
        all("tool a:\n  command: `true`\n\nworkflow w:\n  entry: ghost\n  a -> done\n"),
        vec![(Code::C008, 5)]
    );
}

#[test]
fn fragment_c040() {
    let src = "tool a:\n  command: `true`\n\nworkflow w:\n  entry: a\n  a -> done when \"ok ==\"\n  a -> fail else\n";
    assert_eq!(all(src), vec![(Code::C040, 6)]);
    // The anchor is the opening quote of the expression's string.
    assert_eq!(diags(src)[0].span.col, 18);
}

#[test]
fn fragment_c123() {
    let src = "tool a:\n  command: `true`\n\nworkflow w:\n  entry: a\n  a -> done when \"true\"\n  a -> fail else\n  a -> done else\n";
    assert_eq!(all(src), vec![(Code::C123, 8)]);
}

#[test]
fn fragment_c147() {
    let src = "tool a:\n  command: `echo {{loop.nope.iteration}}`\n\nworkflow w:\n  entry: a\n  a -> done\n";
    assert_eq!(all(src), vec![(Code::C147, 2)]);
}

#[test]
fn fragment_c903() {
    let src = format!(
        "{TOOLS}workflow w:\n  entry: a\n  a -> b\n  b -> done\n  a -> c as l(2)\n  c -> done\n"
    );
    assert_eq!(all(&src), vec![(Code::C903, 14)]);
}

#[test]
fn fragment_c904() {
    let src = "tool a:\n  command: `docker inspect -f '{{json .Config}}' x`\n\nworkflow w:\n  entry: a\n  a -> done\n";
    assert_eq!(all(src), vec![(Code::C904, 2)]);
    let d = &diags(src)[0];
    assert_eq!(
        (d.span.col, d.message.as_str()),
        (32, "{{json…}} is not a reference and is kept as written")
    );
}

const FAN: &str = "router r:\n  mode: fan_out_all\n\ntool a:\n  command: `true`\n\ntool b:\n  command: `true`\n\ntool j:\n  await: wait_all\n  command: `true`\n\n";

#[test]
fn fragment_c905() {
    let src = format!(
        "{FAN}workflow w:\n  entry: r\n  r -> a else\n  r -> b\n  a -> j\n  b -> j\n  j -> done\n"
    );
    assert_eq!(all(&src), vec![(Code::C905, 16)]);
    // `when` chooses whether a branch starts.
    let src = format!(
        "{FAN}workflow w:\n  entry: r\n  r -> a when ok\n  r -> b\n  a -> j\n  b -> j\n  j -> done\n"
    );
    assert_eq!(all(&src), vec![]);
}

#[test]
fn fragment_c906() {
    let src =
        format!("{FAN}workflow w:\n  entry: r\n  r -> a\n  r -> b\n  a -> done\n  b -> fail\n");
    // (Branches that all end at `done` are upstream's implicit join: `converge` rewrites them.)
    // `j` is declared but unused: unreachable, edgeless and an await that joins nothing.
    assert_eq!(
        all(&src),
        vec![
            (Code::C016, 10),
            (Code::C901, 10),
            (Code::C906, 1),
            (Code::C908, 11)
        ]
    );
}

#[test]
fn fragment_c907() {
    let src = format!(
        "{FAN}tool m:\n  command: `true`\n\nworkflow w:\n  entry: r\n  r -> a\n  r -> b\n  a -> m\n  b -> m\n  m -> j\n  j -> done\n"
    );
    assert_eq!(all(&src), vec![(Code::C907, 22)]);
}

#[test]
fn fragment_c028() {
    // Into a node that is not a join, the taken edge's mapping wins: two sources may map one
    // key (upstream's workflows do).
    let src = "router r:\n  mode: condition\n\ntool a:\n  command: `echo '{\"ok\":true}'`\n\ntool b:\n  command: `true`\n\ntool t:\n  command: `true`\n\nworkflow w:\n  entry: a\n  a -> b when ok\n  a -> r else\n  b -> t with { k: \"1\" }\n  r -> t with { k: \"2\" }\n  t -> done\n";
    assert_eq!(all(src), vec![]);
    // Into a join, two branches mapping one key clash, anchored at the later key.
    let join = "router r:\n  mode: fan_out_all\n\ntool a:\n  command: `true`\n\ntool b:\n  command: `true`\n\ntool t:\n  await: wait_all\n  command: `true`\n\nworkflow w:\n  entry: r\n  r -> a\n  r -> b\n  a -> t with { k: \"1\" }\n  b -> t with { k: \"2\" }\n  t -> done\n";
    assert_eq!(all(join), vec![(Code::C028, 19)]);
    assert_eq!(diags(join)[0].span.col, 17);
}

#[test]
fn fragment_c032() {
    let src = "tool t:\n  command: `echo '{\"x\":1}'`\n\ntool u:\n  command: `echo {{outputs.t.x}}`\n\nworkflow w:\n  entry: t\n  t -> u\n  u -> done\n";
    assert_eq!(all(src), vec![(Code::C032, 5)]);
}

// ---- spans inside the various string forms ----

#[test]
fn references_in_block_scalars_and_prompt_bodies_point_at_their_source_line() {
    let src = "prompt p:\n  first line\n    {{vars.nope}} indented\n\nagent x:\n  model: \"anthropic/claude-sonnet-4-5\"\n  user: p\n\ntool t:\n  command: |\n    echo one\n    echo \"{{vars.gone}}\"\n\nworkflow w:\n  entry: x\n  x -> t\n  t -> done\n";
    let got: Vec<(Code, u32, u32)> = diags(src)
        .iter()
        .map(|d| (d.code, d.span.line, d.span.col))
        .collect();
    assert_eq!(
        got,
        vec![
            (Code::C033, 3, 5),
            (Code::C033, 12, 11),
            (Code::C137, 12, 11)
        ]
    );
}

#[test]
fn hostile_expressions_and_templates_finish() {
    let deep = "(".repeat(5000);
    let src = format!(
        "tool a:\n  command: `{}`\n\nworkflow w:\n  entry: a\n  a -> done when \"{deep}x\"\n  a -> fail else\n",
        "{{vars.x".repeat(2000)
    );
    let got = all(&src);
    assert!(got.contains(&(Code::C040, 6)), "{got:?}");
    assert!(got.contains(&(Code::C004, 2)), "{got:?}");
}

// ---- hostile sizes stay (near) linear ----

#[test]
fn a_long_chain_of_outputs_references_is_batched() {
    let n = 20_000;
    let mut src = String::new();
    for i in 0..n {
        src.push_str(&format!(
            "tool t{i}:\n  command: `echo {{{{outputs.t{}.x}}}}`\n\n",
            (i + 1) % n
        ));
    }
    src.push_str("workflow w:\n  entry: t0\n");
    for i in 0..n - 1 {
        src.push_str(&format!("  t{i} -> t{}\n", i + 1));
    }
    src.push_str(&format!("  t{} -> done\n", n - 1));
    let got = ours(&src);
    // Every t(i+1) runs after t(i), except t0 which no edge reaches: C036 only at t(n-1).
    assert_eq!(
        got.iter().filter(|(c, _)| *c == Code::C036).count(),
        n - 1,
        "{:?}",
        &got[..3]
    );
}

#[test]
fn many_fan_outs_into_one_long_region_stay_linear() {
    let (routers, chain) = (3_000, 3_000);
    let mut src = String::new();
    for i in 0..routers {
        src.push_str(&format!("router r{i}:\n  mode: fan_out_all\n\n"));
    }
    for i in 0..chain {
        src.push_str(&format!("tool c{i}:\n  command: `true`\n\n"));
    }
    src.push_str("tool j:\n  await: wait_all\n  command: `true`\n\nworkflow w:\n  entry: r0\n");
    for i in 0..routers {
        src.push_str(&format!("  r{i} -> c0\n"));
        if i + 1 < routers {
            src.push_str(&format!("  r{i} -> r{}\n", i + 1));
        }
    }
    for i in 0..chain - 1 {
        src.push_str(&format!("  c{i} -> c{}\n", i + 1));
    }
    src.push_str(&format!("  c{} -> j\n  j -> done\n", chain - 1));
    let got = ours(&src);
    assert!(got.iter().any(|(c, _)| *c == Code::C907), "{:?}", &got[..3]);
}

#[test]
fn many_edges_from_and_into_one_node_stay_linear() {
    let n = 20_000;
    let mut src = String::from("tool a:\n  command: `true`\n\ntool t:\n  command: `true`\n\n");
    for i in 0..n {
        src.push_str(&format!("tool s{i}:\n  command: `true`\n\n"));
    }
    src.push_str("workflow w:\n  entry: a\n");
    for i in 0..n {
        src.push_str(&format!(
            "  a -> s{i} when ok\n  s{i} -> t with {{ k: \"{i}\" }}\n"
        ));
    }
    src.push_str("  a -> done else\n  t -> done\n");
    let got = ours(&src);
    assert_eq!(got.iter().filter(|(c, _)| *c == Code::C011).count(), n - 1);
    // Into a node that is not a join the taken edge's mapping wins: no C028.
    assert_eq!(got.iter().filter(|(c, _)| *c == Code::C028).count(), 0);
}

#[test]
fn a_long_prompt_with_many_references_stays_linear() {
    let n = 50_000;
    let body: String = (0..n)
        .map(|i| format!("  line {i} {{{{vars.v{i}}}}}\n"))
        .collect();
    let src = format!(
        "prompt p:\n{body}\nagent x:\n  model: \"anthropic/claude-sonnet-4-5\"\n  user: p\n\nworkflow w:\n  entry: x\n  x -> done\n"
    );
    let got = ours(&src);
    assert_eq!(got.len(), n);
    assert_eq!(
        got.last(),
        Some(&(Code::C033, u32::try_from(n + 1).unwrap()))
    );
}

/// Issue 19: a router's input is its predecessor's output, so its conditions are checked
/// against every predecessor's output schema (C920, a warning), unless the edge maps the field.
#[test]
fn a_router_condition_reading_a_field_a_predecessor_cannot_have_warns_c920() {
    let src = "schema verdict:\n  ok: bool\n\nschema other:\n  note: string\n\ntool check:\n  command: `true`\n  output: verdict\n\ntool side:\n  command: `true`\n  output: other\n\nrouter gate:\n  mode: condition\n\nworkflow r:\n  entry: check\n  check -> side when not ok\n  check -> gate\n  side -> gate\n  gate -> done when ok\n  gate -> fail when \"input.note == 'x'\"\n  gate -> fail\n";
    let got: Vec<(Code, u32, String)> = diags(src)
        .into_iter()
        .filter(|d| d.code == Code::C920)
        .map(|d| (d.code, d.span.line, d.message))
        .collect();
    assert_eq!(
        got,
        vec![
            (
                Code::C920,
                23,
                "router \"gate\" reads input.ok, which its input from \"side\" cannot have: output schema \"other\" of \"side\" has no field \"ok\"".to_owned()
            ),
            (
                Code::C920,
                24,
                "router \"gate\" reads input.note, which its input from \"check\" cannot have: output schema \"verdict\" of \"check\" has no field \"note\"".to_owned()
            ),
        ]
    );
    // Mapping the field on the edge from `side` makes it something `side`'s input has.
    let mapped = src.replace("  side -> gate\n", "  side -> gate with { ok: false }\n");
    assert_eq!(
        diags(&mapped)
            .iter()
            .filter(|d| d.code == Code::C920)
            .map(|d| d.span.line)
            .collect::<Vec<_>>(),
        vec![24]
    );
}

#[test]
fn await_on_a_router_is_e012_with_a_hint_naming_the_join() {
    let src = "tool a:\n  command: `true`\n\nrouter r:\n  await: wait_all\n\nworkflow w:\n  entry: a\n  a -> r\n  r -> done\n";
    let e012: Vec<Diagnostic> = diags(src)
        .into_iter()
        .filter(|d| d.code == Code::E012)
        .collect();
    assert_eq!(e012.len(), 1, "{e012:?}");
    assert_eq!(
        e012[0].hint.as_deref(),
        Some(
            "await belongs on the join, the node where a fan_out_all router's branches meet (await: wait_all or best_effort), not on the router"
        )
    );
}

#[test]
fn a_loop_cap_may_be_one_reference_resolved_at_run_time() {
    let base = "vars:\n  n: int = 2\n\nschema s:\n  n: int\n\ntool t:\n  command: `echo '{\"n\": 1}'`\n  output: s\n\nworkflow w:\n  entry: t\n";
    // One reference to a var, an output or the source's output: accepted, lowered as a template.
    for cap in ["{{vars.n}}", "{{outputs.t.n}}", "{{input.n}}"] {
        let src = format!("{base}  t -> t as again(\"{cap}\")\n  t -> done\n");
        let compiled = compile(
            src.as_bytes(),
            &CompileOptions {
                ask_user_in_sandbox: false,
            },
        );
        assert_eq!(all(&src), [], "{cap}");
        let wf = compiled.workflow.unwrap();
        let l = wf.edges[0].loop_.as_ref().unwrap();
        assert_eq!((l.cap, l.cap_template.as_deref()), (0, Some(cap)));
    }
    // Text around it, two references, a loop or a secret reference, an unknown var: refused.
    for (cap, code) in [
        ("at most {{vars.n}}", Code::C026),
        ("{{vars.n}}{{vars.n}}", Code::C026),
        ("{{loop.again.iteration}}", Code::C026),
        ("{{vars.m}}", Code::C033),
    ] {
        let src = format!("{base}  t -> t as again(\"{cap}\")\n  t -> done\n");
        assert_eq!(ours(&src).first().map(|p| p.0), Some(code), "{cap}");
    }
    // One loop, a literal cap on one edge and a template on another: C005.
    let src = format!(
        "{base}  t -> t as again(\"{{{{vars.n}}}}\") when \"false\"\n  t -> t as again(2)\n  t -> done\n"
    );
    assert!(ours(&src).contains(&(Code::C005, 14)), "{:?}", ours(&src));
}

#[test]
fn two_branches_mapping_one_key_to_the_same_context_free_text_is_no_c028() {
    let head = "vars:\n  dir: string = \".\"\n\ntool a:\n  command: `true`\n\ntool b:\n  command: `true`\n\ntool c:\n  await: wait_all\n  command: `true`\n\nrouter pick:\n  mode: fan_out_all\n\nworkflow w:\n  entry: pick\n  pick -> a\n  pick -> b\n";
    let tail = "  c -> done\n";
    let same = format!(
        "{head}  a -> c with {{ dir: \"{{{{vars.dir}}}}\" }}\n  b -> c with {{ dir: \"{{{{vars.dir}}}}\" }}\n{tail}"
    );
    assert!(
        !ours(&same).iter().any(|p| p.0 == Code::C028),
        "{:?}",
        ours(&same)
    );
    // Different text, or text reading `input` (each source's own output), still clashes.
    for (x, y) in [("{{vars.dir}}", "other"), ("{{input.x}}", "{{input.x}}")] {
        let src = format!(
            "{head}  a -> c with {{ dir: \"{x}\" }}\n  b -> c with {{ dir: \"{y}\" }}\n{tail}"
        );
        assert!(
            ours(&src).iter().any(|p| p.0 == Code::C028),
            "{x} {y}: {:?}",
            ours(&src)
        );
    }
}

#[test]
fn an_input_field_an_incoming_with_maps_is_no_c034_though_the_schema_lacks_it() {
    let head = "schema req:\n  plan: string\n\nprompt ask:\n  Plan: {{input.plan}} Review: {{input.review}}\n\n\
                tool a:\n  command: `true`\n\nagent b:\n  model: \"anthropic/m\"\n  input: req\n  user: ask\n\n\
                workflow w:\n  entry: a\n";
    let mapped = format!("{head}  a -> b with {{ plan: \"p\", review: \"r\" }}\n  b -> done\n");
    assert!(
        !ours(&mapped).iter().any(|p| p.0 == Code::C034),
        "{:?}",
        ours(&mapped)
    );
    let unmapped = format!("{head}  a -> b with {{ plan: \"p\" }}\n  b -> done\n");
    assert_eq!(
        ours(&unmapped)
            .into_iter()
            .filter(|p| p.0 == Code::C034)
            .count(),
        1,
        "{:?}",
        ours(&unmapped)
    );
}

#[test]
fn a_budgets_max_iterations_bounds_a_cycle_without_a_loop_clause_unless_only_routers_loop() {
    let body = "tool a:\n  command: `true`\n\ntool b:\n  command: `true`\n\n\
                workflow w:\n  entry: a\n{budget}  a -> b\n  b -> a when \"true\"\n  b -> done\n";
    let plain = body.replace("{budget}", "");
    assert!(
        ours(&plain).contains(&(Code::C019, 10)),
        "{:?}",
        ours(&plain)
    );
    let bounded = body.replace("{budget}", "  budget:\n    max_iterations: 50\n");
    assert!(
        !ours(&bounded).iter().any(|p| p.0 == Code::C019),
        "{:?}",
        ours(&bounded)
    );
    // Routers are not counted: a cycle of routers alone is still unbounded.
    let routers = "router r:\n  mode: fan_out_all\n\nrouter s:\n  mode: fan_out_all\n\ntool t:\n  command: `true`\n\n\
                   workflow w:\n  entry: r\n  budget:\n    max_iterations: 50\n  r -> s\n  s -> r\n  s -> t\n  t -> done\n";
    assert!(
        ours(routers).iter().any(|p| p.0 == Code::C019),
        "{:?}",
        ours(routers)
    );
}

#[test]
fn a_shared_prompt_reading_a_field_only_one_of_its_nodes_gets_is_c149_for_the_other() {
    let src = "schema req:\n  plan: string\n\nprompt ask:\n  Plan: {{input.plan}} Review: {{input.review}}\n\n\
               tool a:\n  command: `true`\n\n\
               agent b:\n  model: \"anthropic/m\"\n  input: req\n  user: ask\n\n\
               agent c:\n  model: \"anthropic/m\"\n  input: req\n  user: ask\n\n\
               workflow w:\n  entry: a\n  a -> b with { plan: \"p\", review: \"r\" }\n  b -> c with { plan: \"q\" }\n  c -> done\n";
    let got = diags(src);
    let picked: Vec<(Code, Option<&str>)> = got
        .iter()
        .filter(|d| matches!(d.code, Code::C034 | Code::C149))
        .map(|d| (d.code, d.node.as_deref()))
        .collect();
    assert_eq!(picked, vec![(Code::C149, Some("c"))], "{got:?}");
    assert_eq!(Code::C149.severity(), crate::Severity::Warning);
}

#[test]
fn a_file_of_declarations_without_a_workflow_is_a_c150_warning_and_an_empty_one_c006() {
    let library = "schema s:\n  a: string\n\nprompt p:\n  hello\n";
    let got = diags(library);
    assert_eq!(
        got.iter().map(|d| (d.code, d.severity)).collect::<Vec<_>>(),
        vec![(Code::C150, crate::Severity::Warning)],
        "{got:?}"
    );
    let compiled = compile(
        library.as_bytes(),
        &CompileOptions {
            ask_user_in_sandbox: false,
        },
    );
    assert!(compiled.workflow.is_none());
    assert_eq!(ours("## only a comment\n"), vec![(Code::C006, 1)]);
}

#[test]
fn a_fail_node_needs_an_upper_snake_code_of_its_own_and_no_edge_leaves_it() {
    let src = "fail a:\n  message: \"m\"\n\nfail b:\n  code: lower\n\nfail c:\n  code: BUDGET_EXCEEDED\n\nfail d:\n  code: MINE\n  resumable: true\n\ntool t:\n  command: `true`\n\nworkflow w:\n  entry: t\n  t -> a when \"1 > 2\"\n  t -> b when \"1 > 3\"\n  t -> c when \"1 > 4\"\n  t -> d else\n  d -> done\n";
    let codes: Vec<(Code, String)> = diags(src)
        .into_iter()
        .filter(|d| matches!(d.code, Code::C045 | Code::C046))
        .map(|d| (d.code, d.message))
        .collect();
    assert_eq!(
        codes,
        [
            (Code::C045, "fail node \"a\" has no code".to_owned()),
            (
                Code::C045,
                "fail code \"lower\" is not UPPER_SNAKE".to_owned()
            ),
            (
                Code::C045,
                "fail code \"BUDGET_EXCEEDED\" is one of the engine's own failure codes".to_owned()
            ),
            (
                Code::C046,
                "fail node \"d\" ends the run: no edge may leave it".to_owned()
            ),
        ]
    );
}

#[test]
fn a_fan_out_each_needs_over_and_one_unconditional_edge_and_its_properties_stay_on_it() {
    let head = "tool gen:\n  command: `true`\n\ntool h:\n  command: `true`\n\ncompute c:\n  await: wait_all\n  expr:\n    n: \"1\"\n\n";
    let cases = [
        (
            "router r:\n  mode: fan_out_each\n\nworkflow w:\n  entry: gen\n  gen -> r\n  r -> h\n  h -> c\n  c -> done\n",
            vec![(Code::C047, "fan_out_each router \"r\" has no over")],
        ),
        (
            "router r:\n  mode: fan_out_each\n  over: \"a {{outputs.gen.x}}\"\n  depends_on: deps\n\nworkflow w:\n  entry: gen\n  gen -> r\n  r -> h when \"1 > 0\"\n  h -> c\n  c -> done\n",
            vec![
                (
                    Code::C047,
                    "over of \"r\" must be exactly one {{…}} reference",
                ),
                (Code::C047, "depends_on of \"r\" needs key"),
                (
                    Code::C049,
                    "fan_out_each router \"r\" takes its edge for every item; when is not allowed",
                ),
            ],
        ),
        (
            "router r:\n  mode: fan_out_all\n  over: \"{{outputs.gen.x}}\"\n  as: t\n\nworkflow w:\n  entry: gen\n  gen -> r\n  r -> h\n  h -> c\n  c -> done\n",
            vec![
                (
                    Code::C048,
                    "\"over\" is only valid on a fan_out_each router",
                ),
                (Code::C048, "\"as\" is only valid on a fan_out_each router"),
            ],
        ),
    ];
    for (tail, want) in cases {
        let src = format!("{head}{tail}");
        let got: Vec<(Code, String)> = diags(&src)
            .into_iter()
            .filter(|d| matches!(d.code, Code::C047 | Code::C048 | Code::C049))
            .map(|d| (d.code, d.message))
            .collect();
        let want: Vec<(Code, String)> = want.into_iter().map(|(c, m)| (c, m.to_owned())).collect();
        assert_eq!(got, want, "{tail}");
    }
}
