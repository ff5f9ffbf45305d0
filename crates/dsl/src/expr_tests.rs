use pretty_assertions::assert_eq;
use serde_json::json;

use super::*;

fn path(p: &str) -> Expr {
    Expr::Path(Path {
        segments: p.split('.').map(str::to_string).collect(),
    })
}

fn lit(v: Value) -> Expr {
    Expr::Literal(v)
}

fn cmp(op: CmpOp, l: Expr, r: Expr) -> Expr {
    Expr::Compare(op, Box::new(l), Box::new(r))
}

fn syntax_err(d: &str) -> ExprError {
    ExprError::Syntax {
        detail: d.to_string(),
    }
}

// ----- parsing

#[test]
fn parses_the_examples_of_the_spec() {
    assert_eq!(
        parse("status >= 400 and status < 500"),
        Ok(Expr::And(vec![
            cmp(CmpOp::Ge, path("status"), lit(json!(400))),
            cmp(CmpOp::Lt, path("status"), lit(json!(500))),
        ]))
    );
    assert_eq!(
        parse("manifest != ''"),
        Ok(cmp(CmpOp::Ne, path("manifest"), lit(json!(""))))
    );
    assert_eq!(
        parse("x != null and x > 3"),
        Ok(Expr::And(vec![
            cmp(CmpOp::Ne, path("x"), lit(Value::Null)),
            cmp(CmpOp::Gt, path("x"), lit(json!(3))),
        ]))
    );
}

#[test]
fn precedence_is_or_then_and_then_not_then_comparison() {
    assert_eq!(
        parse("a || b && !c == d or not not e"),
        Ok(Expr::Or(vec![
            path("a"),
            Expr::And(vec![
                path("b"),
                Expr::Not(Box::new(cmp(CmpOp::Eq, path("c"), path("d")))),
            ]),
            Expr::Not(Box::new(Expr::Not(Box::new(path("e"))))),
        ]))
    );
    assert_eq!(
        parse("(a or b) and c"),
        Ok(Expr::And(vec![
            Expr::Or(vec![path("a"), path("b")]),
            path("c")
        ]))
    );
}

#[test]
fn literals_numbers_strings_and_keywords() {
    for (src, want) in [
        ("-3", json!(-3)),
        ("0.25", json!(0.25)),
        ("-1.5", json!(-1.5)),
        ("'it\\'s'", json!("it's")),
        ("\"a\\\"b\\\\c\"", json!("a\"b\\c")),
        ("\"x'y\"", json!("x'y")),
        ("true", json!(true)),
        ("false", json!(false)),
        ("null", Value::Null),
    ] {
        assert_eq!(parse(src), Ok(lit(want)), "{src}");
    }
}

#[test]
fn calls_and_paths() {
    assert_eq!(
        parse("length(outputs.n.items) > 0 and contains(input.tags, 'x')"),
        Ok(Expr::And(vec![
            cmp(
                CmpOp::Gt,
                Expr::Call(Func::Length, vec![path("outputs.n.items")]),
                lit(json!(0))
            ),
            Expr::Call(Func::Contains, vec![path("input.tags"), lit(json!("x"))]),
        ]))
    );
    // A builtin name without parentheses is a field; keywords may follow a dot.
    assert_eq!(parse("length"), Ok(path("length")));
    assert_eq!(parse("input.and"), Ok(path("input.and")));
}

#[test]
fn syntax_errors_are_c040_with_a_detail() {
    for (src, err) in [
        (
            "ok ==",
            syntax_err("expected a value after \"==\", found the end"),
        ),
        ("", syntax_err("the expression is empty")),
        ("   ", syntax_err("the expression is empty")),
        ("a = b", syntax_err("unexpected character '='")),
        ("a | b", syntax_err("unexpected character '|'")),
        ("a & b", syntax_err("unexpected character '&'")),
        ("a b", syntax_err("unexpected \"b\"")),
        ("(a", syntax_err("expected \")\", found the end")),
        ("a)", syntax_err("unexpected \")\"")),
        (
            "a.",
            syntax_err("expected a name after \".\", found the end"),
        ),
        (
            "a.1",
            syntax_err("expected a name after \".\", found number 1"),
        ),
        ("'abc", syntax_err("unterminated string")),
        ("'abc\\", syntax_err("unterminated string")),
        ("and", syntax_err("expected a value, found \"and\"")),
        ("a and", syntax_err("expected a value, found the end")),
        (
            "1 < 2 < 3",
            syntax_err("comparisons do not chain: \"<\" after \"<\""),
        ),
        (
            "a +",
            syntax_err("expected a value after \"+\", found the end"),
        ),
        ("a ^ 1", syntax_err("unexpected character '^'")),
        ("a * * b", syntax_err("expected a value, found \"*\"")),
        ("x[0]", syntax_err("unexpected character '['")),
        ("length(a,)", syntax_err("expected a value, found \")\"")),
        (
            "99999999999999999999",
            syntax_err("number 99999999999999999999 is out of range"),
        ),
    ] {
        let got = parse(src);
        assert_eq!(got, Err(err), "{src}");
        assert_eq!(got.unwrap_err().code(), Code::C040);
    }
}

#[test]
fn other_c040_causes() {
    assert_eq!(
        parse("upper(x) == 'A'"),
        Err(ExprError::UnknownFunction {
            name: "upper".to_string()
        })
    );
    assert_eq!(parse("'a\\qb'"), Err(ExprError::BadEscape { escape: 'q' }));
    assert_eq!(
        parse("join(input.xs, '\\n')")
            .unwrap()
            .eval_compute(&json!({"input": {"xs": ["a", "b"]}})),
        Ok(json!("a\nb"))
    );
    assert_eq!(
        parse("'a\\tb'").unwrap().eval(&json!({})),
        Ok(json!("a\tb"))
    );
    assert_eq!(parse("secrets.token != ''"), Err(ExprError::SecretsPath));
    assert_eq!(parse("x or secrets"), Err(ExprError::SecretsPath));
    for e in [
        ExprError::UnknownFunction { name: "f".into() },
        ExprError::BadEscape { escape: 'n' },
        ExprError::SecretsPath,
        ExprError::TooDeep,
    ] {
        assert_eq!(e.code(), Code::C040);
        assert!(e.to_string().starts_with("invalid expression: "), "{e}");
    }
    // A field of input named `secrets` is fine.
    assert!(parse("input.secrets == 1").is_ok());
}

#[test]
fn wrong_argument_counts_are_c138() {
    for (src, func, found) in [
        ("contains(detail)", Func::Contains, 1),
        ("length()", Func::Length, 0),
        ("length(a, b)", Func::Length, 2),
        ("contains(a, b, c)", Func::Contains, 3),
    ] {
        let err = parse(src).unwrap_err();
        assert_eq!(err, ExprError::Arity { func, found }, "{src}");
        assert_eq!(err.code(), Code::C138);
    }
    assert_eq!(
        parse("length(detail) > 0 and contains(detail)")
            .unwrap_err()
            .to_string(),
        "contains() takes 2 argument(s)"
    );
    assert_eq!(
        parse("length()").unwrap_err().to_string(),
        "length() takes 1 argument(s)"
    );
}

#[test]
fn deep_nesting_is_refused_without_overflowing() {
    let deep_parens = format!("{}x{}", "(".repeat(100_000), ")".repeat(100_000));
    assert_eq!(parse(&deep_parens), Err(ExprError::TooDeep));
    let deep_not = format!("{}x", "not ".repeat(100_000));
    assert_eq!(parse(&deep_not), Err(ExprError::TooDeep));
    let deep_calls = format!("{}x{}", "length(".repeat(100_000), ")".repeat(100_000));
    assert_eq!(parse(&deep_calls), Err(ExprError::TooDeep));
    let at_limit = format!("{}x{}", "(".repeat(MAX_DEPTH), ")".repeat(MAX_DEPTH));
    assert!(parse(&at_limit).is_ok());
}

#[test]
fn long_flat_chains_are_fine() {
    let chain = vec!["x"; 50_000].join(" or ");
    let e = parse(&chain).unwrap();
    assert_eq!(e.paths().len(), 50_000);
    assert_eq!(e.eval(&json!({"input": {"x": false}})), Ok(json!(false)));
}

#[test]
fn paths_lists_every_path_in_source_order() {
    let e = parse("approved and length(vars.v.items) > loop.l.iteration or outputs.n.f == input.g")
        .unwrap();
    let got: Vec<(String, Namespace, bool, Vec<String>)> = e
        .paths()
        .into_iter()
        .map(|p| (p.dotted(), p.namespace(), p.is_bare(), p.rest().to_vec()))
        .collect();
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    assert_eq!(
        got,
        vec![
            ("approved".into(), Namespace::Input, true, s(&["approved"])),
            (
                "vars.v.items".into(),
                Namespace::Vars,
                false,
                s(&["v", "items"])
            ),
            (
                "loop.l.iteration".into(),
                Namespace::Loop,
                false,
                s(&["l", "iteration"])
            ),
            (
                "outputs.n.f".into(),
                Namespace::Outputs,
                false,
                s(&["n", "f"])
            ),
            ("input.g".into(), Namespace::Input, false, s(&["g"])),
        ]
    );
}

// ----- evaluation

fn scope() -> Value {
    json!({
        "vars": {"region": "eu", "limit": 3, "cfg": {"deep": {"on": true}}},
        "input": {
            "ok": true, "no": false, "status": 404, "ratio": 0.5, "name": "héllo",
            "tags": ["a", "b", 2], "obj": {"k": 1}, "nil": null, "big": 9007199254740993u64
        },
        "outputs": {"build": {"detail": "x", "size": 3.0}},
        "loop": {"fix": {"iteration": 1, "max": 3, "previous_output": null}},
        "run": {"id": "r-1"}
    })
}

fn ev(src: &str) -> Result<Value, EvalError> {
    parse(src)
        .unwrap_or_else(|e| panic!("{src}: {e}"))
        .eval(&scope())
}

#[test]
fn paths_resolve_through_namespaces_and_bare_names() {
    for (src, want) in [
        ("ok", json!(true)),
        ("input.ok", json!(true)),
        ("vars.region", json!("eu")),
        ("vars.cfg.deep.on", json!(true)),
        ("outputs.build.detail", json!("x")),
        ("loop.fix.iteration", json!(1)),
        ("run.id", json!("r-1")),
        ("missing", Value::Null),
        ("input.ok.deeper", Value::Null),
        ("outputs.ghost.x", Value::Null),
        ("loop.fix.previous_output.f", Value::Null),
    ] {
        assert_eq!(ev(src), Ok(want), "{src}");
    }
    // Without a namespace object at all, everything is null.
    assert_eq!(parse("x").unwrap().eval(&json!({})), Ok(Value::Null));
    assert_eq!(parse("x").unwrap().eval(&json!(null)), Ok(Value::Null));
}

#[test]
fn equality_semantics() {
    for (src, want) in [
        ("status == 404", true),
        ("status == 404.0", true),
        ("outputs.build.size == 3", true),
        ("ratio == 0.5", true),
        ("status != 404.5", true),
        ("name == 'héllo'", true),
        ("ok == true", true),
        ("nil == null", true),
        ("missing == null", true),
        ("ok == 'true'", false),
        ("status == '404'", false),
        ("nil == false", false),
        ("nil == 0", false),
        ("tags == tags", true),
        ("obj == obj", true),
        ("obj != tags", true),
        ("big == 9007199254740992", false),
        ("big == 9007199254740992.0", false),
    ] {
        assert_eq!(ev(src), Ok(json!(want)), "{src}");
    }
}

#[test]
fn structural_equality_compares_numbers_numerically() {
    assert!(values_equal(
        &json!([1, {"a": 2.0}]),
        &json!([1.0, {"a": 2}])
    ));
    assert!(!values_equal(&json!([1, 2]), &json!([1])));
    assert!(!values_equal(&json!({"a": 1}), &json!({"b": 1})));
    assert!(!values_equal(&json!({"a": 1}), &json!({"a": 1, "b": 2})));
    let mut deep = json!(0);
    for _ in 0..100 {
        deep = json!([deep]);
    }
    assert!(values_equal(&deep, &deep.clone()));
}

#[test]
fn ordering_semantics() {
    for (src, want) in [
        ("status >= 400 and status < 500", true),
        ("status > 403.9", true),
        ("status < 404.1", true),
        ("status <= 404.0", true),
        ("ratio < 1", true),
        ("-1 < ratio", true),
        ("-1.5 < -1", true),
        ("'a' < 'b'", true),
        ("'B' < 'a'", true),
        ("'é' > 'z'", true),
        ("'ab' >= 'ab'", true),
        ("big > 9007199254740992", true),
        ("big > 9007199254740992.0", true),
    ] {
        assert_eq!(ev(src), Ok(json!(want)), "{src}");
    }
}

#[test]
fn ordering_mixed_types_is_an_error() {
    for (src, left, right) in [
        ("status < '500'", "number", "string"),
        ("nil < 1", "null", "number"),
        ("missing > 3", "null", "number"),
        ("ok <= true", "bool", "bool"),
        ("tags > tags", "list", "list"),
    ] {
        let op = ["<=", ">=", "<", ">"]
            .into_iter()
            .find(|o| src.contains(o))
            .unwrap();
        assert_eq!(
            ev(src),
            Err(EvalError::NotOrdered { op, left, right }),
            "{src}"
        );
    }
}

#[test]
fn boolean_operators_require_bools_and_short_circuit() {
    assert_eq!(ev("ok and not no"), Ok(json!(true)));
    assert_eq!(ev("no or ok"), Ok(json!(true)));
    assert_eq!(ev("!ok"), Ok(json!(false)));
    // Short-circuit from the left: the erroring right side is never evaluated.
    assert_eq!(ev("no and (status < 'x')"), Ok(json!(false)));
    assert_eq!(ev("ok or (status < 'x')"), Ok(json!(true)));
    assert_eq!(ev("missing != null and missing > 3"), Ok(json!(false)));
    // …but the left side must be a bool.
    assert_eq!(
        ev("status and ok"),
        Err(EvalError::NotBool {
            op: "and",
            found: "number"
        })
    );
    assert_eq!(
        ev("ok and nil"),
        Err(EvalError::NotBool {
            op: "and",
            found: "null"
        })
    );
    assert_eq!(
        ev("no or 'yes'"),
        Err(EvalError::NotBool {
            op: "or",
            found: "string"
        })
    );
    assert_eq!(
        ev("not missing"),
        Err(EvalError::NotBool {
            op: "not",
            found: "null"
        })
    );
}

#[test]
fn length_counts_scalars_entries_and_null() {
    for (src, want) in [
        ("length(name)", 5),
        ("length(tags)", 3),
        ("length(obj)", 1),
        ("length(nil)", 0),
        ("length(missing)", 0),
        ("length('')", 0),
    ] {
        assert_eq!(ev(src), Ok(json!(want)), "{src}");
    }
    assert_eq!(ev("length(name) == 5.0"), Ok(json!(true)));
    assert_eq!(
        ev("length(status)"),
        Err(EvalError::Length { found: "number" })
    );
    assert_eq!(ev("length(ok)"), Err(EvalError::Length { found: "bool" }));
}

#[test]
fn contains_on_lists_strings_and_null() {
    for (src, want) in [
        ("contains(tags, 'a')", true),
        ("contains(tags, 2.0)", true),
        ("contains(tags, 'z')", false),
        ("contains(name, 'éll')", true),
        ("contains(name, '')", true),
        ("contains(name, 'x')", false),
        ("contains(nil, 'x')", false),
        ("contains(missing, 1)", false),
    ] {
        assert_eq!(ev(src), Ok(json!(want)), "{src}");
    }
    assert_eq!(
        ev("contains(name, 1)"),
        Err(EvalError::Contains {
            a: "string",
            b: "number"
        })
    );
    assert_eq!(
        ev("contains(obj, 'k')"),
        Err(EvalError::Contains {
            a: "map",
            b: "string"
        })
    );
    assert_eq!(
        ev("contains(status, 4)"),
        Err(EvalError::Contains {
            a: "number",
            b: "number"
        })
    );
}

#[test]
fn conditions_must_be_bool() {
    let s = scope();
    assert_eq!(parse("ok").unwrap().eval_condition(&s), Ok(true));
    assert_eq!(
        parse("status").unwrap().eval_condition(&s),
        Err(EvalError::NotACondition { found: "number" })
    );
    assert_eq!(
        parse("missing").unwrap().eval_condition(&s),
        Err(EvalError::NotACondition { found: "null" })
    );
    assert_eq!(
        EvalError::NotACondition { found: "null" }.to_string(),
        "the condition is null, not bool"
    );
}

#[test]
fn int_float_comparison_is_exact() {
    use std::cmp::Ordering::*;
    assert_eq!(int_float_cmp(3, 3.0), Some(Equal));
    assert_eq!(int_float_cmp(3, 3.5), Some(Less));
    assert_eq!(int_float_cmp(-3, -3.5), Some(Greater));
    assert_eq!(int_float_cmp(i128::from(i64::MAX), 1e300), Some(Less));
    assert_eq!(int_float_cmp(i128::from(i64::MIN), -1e300), Some(Greater));
    assert_eq!(int_float_cmp(0, f64::NAN), None);
    // 2^53 + 1 is not representable: the float 2^53 is smaller.
    assert_eq!(
        int_float_cmp(9_007_199_254_740_993, 9_007_199_254_740_992.0),
        Some(Greater)
    );
}

mod props {
    use proptest::prelude::*;
    use serde_json::json;

    use super::super::*;

    proptest! {
        #[test]
        fn parse_and_eval_never_panic(s in "[a-z()!<>=&|'\" .,0-9-]{0,60}") {
            if let Ok(e) = parse(&s) {
                let _ = e.eval(&json!({"input": {"a": 1, "b": "x"}}));
                let _ = e.paths();
            }
        }
    }
}

#[test]
fn the_list_builtins_and_if() {
    use serde_json::json;
    let scope = json!({"input": {"a": ["x", "y"], "b": ["y", "z"], "n": 3}});
    let eval = |src: &str| super::parse(src).unwrap().eval(&scope);
    assert_eq!(
        eval("concat(input.a, input.b, input.none)"),
        Ok(json!(["x", "y", "y", "z"]))
    );
    assert_eq!(
        eval("unique(concat(input.a, input.b))"),
        Ok(json!(["x", "y", "z"]))
    );
    assert_eq!(eval("join(input.a, '+')"), Ok(json!("x+y")));
    assert_eq!(eval("join(input.none, '+')"), Ok(json!("")));
    assert_eq!(eval("if(n > 2, 'big', 'small')"), Ok(json!("big")));
    // Only the chosen branch is evaluated.
    assert_eq!(eval("if(false, input.n < 'x', 1)"), Ok(json!(1)));
    assert_eq!(
        eval("concat(input.n)").unwrap_err().to_string(),
        "concat() needs a list (or null), found number"
    );
    assert_eq!(
        super::parse("concat()").unwrap_err().to_string(),
        "concat() takes at least 1 argument(s)"
    );
    assert_eq!(
        eval("join(input.a, 1)").unwrap_err().to_string(),
        "join() needs a string separator, found number"
    );
}

#[test]
fn compute_entries_take_null_as_false_and_when_expressions_do_not() {
    use serde_json::json;
    let scope = json!({"input": {"ok": true}, "loop": {"l": {"previous_output": null}}});
    let e = super::parse("input.ok && loop.l.previous_output.ok").unwrap();
    assert_eq!(e.eval_compute(&scope), Ok(json!(false)));
    assert!(e.eval(&scope).is_err());
    assert_eq!(
        super::parse("not missing").unwrap().eval_compute(&scope),
        Ok(json!(true))
    );
    // A string is still not a bool.
    assert!(
        super::parse("'yes' && true")
            .unwrap()
            .eval_compute(&scope)
            .is_err()
    );
}

// ----- arithmetic (upstream's `+ - * / %`)

fn arith(op: ArithOp, l: Expr, r: Expr) -> Expr {
    Expr::Arith(op, Box::new(l), Box::new(r))
}

#[test]
fn arithmetic_binds_tighter_than_comparison_and_is_left_associative() {
    assert_eq!(
        parse("loop.review.iteration % 2 == 1"),
        Ok(cmp(
            CmpOp::Eq,
            arith(ArithOp::Rem, path("loop.review.iteration"), lit(json!(2))),
            lit(json!(1))
        ))
    );
    assert_eq!(
        parse("1 - 2 - 3 * 4"),
        Ok(arith(
            ArithOp::Sub,
            arith(ArithOp::Sub, lit(json!(1)), lit(json!(2))),
            arith(ArithOp::Mul, lit(json!(3)), lit(json!(4)))
        ))
    );
    assert_eq!(parse("-3"), Ok(lit(json!(-3))));
    assert_eq!(
        parse("a-1"),
        Ok(arith(ArithOp::Sub, path("a"), lit(json!(1))))
    );
    assert_eq!(parse("-a"), Ok(Expr::Neg(Box::new(path("a")))));
    assert_eq!(
        parse("-a").unwrap().paths(),
        vec![&Path {
            segments: vec!["a".to_string()]
        }]
    );
}

#[test]
fn arithmetic_evaluates_as_upstream() {
    assert_eq!(ev("21 + 21"), Ok(json!(42)));
    assert_eq!(ev("input.status / 100"), Ok(json!(4)));
    assert_eq!(ev("input.status % 100"), Ok(json!(4)));
    assert_eq!(ev("input.ratio * 4"), Ok(json!(2.0)));
    assert_eq!(ev("1 / 4.0"), Ok(json!(0.25)));
    assert_eq!(ev("-input.status"), Ok(json!(-404)));
    assert_eq!(ev("(1 + 2) * 3"), Ok(json!(9)));
    assert_eq!(ev("'run-' + run.id"), Ok(json!("run-r-1")));
    assert_eq!(ev("'n=' + vars.limit"), Ok(json!("n=3")));
    assert_eq!(ev("vars.limit + 1 > 3"), Ok(json!(true)));
}

#[test]
fn arithmetic_errors_are_evaluation_errors() {
    assert_eq!(
        ev("1 / 0"),
        Err(EvalError::Arithmetic("integer division by zero"))
    );
    assert_eq!(
        ev("1 % 0"),
        Err(EvalError::Arithmetic("integer remainder by zero"))
    );
    assert_eq!(
        ev("9223372036854775807 + 1"),
        Err(EvalError::Arithmetic("integer overflow"))
    );
    assert_eq!(
        ev("input.ratio % 2"),
        Err(EvalError::Arithmetic("% needs two integers"))
    );
    assert_eq!(
        ev("input.ok + 1"),
        Err(EvalError::NotArithmetic {
            op: "+",
            also: " or strings",
            left: "bool",
            right: "number"
        })
    );
    assert_eq!(
        ev("input.nil * 2").unwrap_err().to_string(),
        "* needs two numbers, found null and number"
    );
}

#[test]
fn long_arithmetic_chains_are_bounded() {
    let chain = vec!["1"; 100_000].join(" + ");
    assert_eq!(parse(&chain), Err(ExprError::TooDeep));
    let negs = format!("{}x", "-".repeat(100_000));
    assert_eq!(parse(&negs), Err(ExprError::TooDeep));
}

#[test]
fn numeric_and_list_builtins() {
    let scope =
        json!({"input": {"n": [4, 2, 9], "s": ["b", "a"], "mixed": [1, "a"], "x": 7.9, "h": 2.5}});
    let eval = |src: &str| {
        parse(src)
            .unwrap_or_else(|e| panic!("{src}: {e}"))
            .eval_compute(&scope)
    };
    for (src, want) in [
        ("floor(x)", json!(7)),
        ("floor(0 - x)", json!(-8)),
        ("floor(3)", json!(3)),
        ("round(h)", json!(3)),
        ("min(3, 1, 2)", json!(1)),
        ("max(3, 1.5, 2)", json!(3)),
        ("min(n)", json!(2)),
        ("max(n)", json!(9)),
        ("sort(n)", json!([2, 4, 9])),
        ("sort(s)", json!(["a", "b"])),
        ("tail(n, 2)", json!([2, 9])),
        ("tail(n, 9)", json!([4, 2, 9])),
        ("slice(n, 1, 3)", json!([2, 9])),
        ("slice(n, 3, 1)", json!([])),
    ] {
        assert_eq!(eval(src).ok(), Some(want), "{src}");
    }
    assert!(matches!(eval("sort(mixed)"), Err(EvalError::Unsortable)));
    assert!(matches!(
        eval("floor('x')"),
        Err(EvalError::NotANumber { func: "floor", .. })
    ));
    assert!(matches!(
        eval("max(mixed)"),
        Err(EvalError::NotANumber { func: "max", .. })
    ));
}
