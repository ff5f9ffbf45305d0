//! "No input makes the front end panic or hang" (issue 2): hostile inputs each get diagnostics in
//! bounded time. Time is not asserted (benchmarks own that); finishing at all is the assertion.
use iterion_dsl::{CompileOptions, Severity, compile};

fn has_error(src: &[u8]) -> bool {
    compile(src, &CompileOptions::default())
        .diagnostics
        .iter()
        .any(|d| d.severity == Severity::Error)
}

#[test]
fn ten_thousand_deep_brackets_are_a_diagnostic_not_a_stack_overflow() {
    let mut src = b"tool a:\n  command: ".to_vec();
    src.extend(std::iter::repeat_n(b'[', 10_000));
    src.push(b'\n');
    assert!(has_error(&src));
    let mut src = b"workflow w:\n  entry: a\n  a -> done with ".to_vec();
    src.extend(std::iter::repeat_n(b'{', 10_000));
    assert!(has_error(&src));
}

#[test]
fn deep_indentation_is_e003() {
    let mut src = String::new();
    for i in 0..150 {
        src.push_str(&" ".repeat(i * 2));
        src.push_str(&format!("k{i}:\n"));
    }
    let out = compile(src.as_bytes(), &CompileOptions::default());
    assert!(
        out.diagnostics
            .iter()
            .any(|d| d.code.as_str() == "E003" || d.code.as_str() == "E001")
    );
}

#[test]
fn a_ten_megabyte_file_compiles() {
    let unit = "tool t{}:\n  command: `echo '{{}}'`\n\n";
    let mut src = String::new();
    let mut i = 0;
    while src.len() < 10 * 1024 * 1024 - 200 {
        src.push_str(&unit.replace("{}", &i.to_string()));
        i += 1;
    }
    src.push_str("workflow w:\n  entry: t0\n  t0 -> done\n");
    let out = compile(src.as_bytes(), &CompileOptions::default());
    // Every other node is unreachable (C016) and has no edge (C901); the point is that it ends.
    assert!(out.error_count() > 0);
}

#[test]
fn binary_garbage_and_odd_text_get_diagnostics() {
    let cases: Vec<Vec<u8>> = vec![
        (0u8..=255).collect(),
        b"\x00\x01\x02tool".to_vec(),
        b"tool a:\n \t command: `x`\n".to_vec(),
        b"tool a:\n    command: `x`\n  output: y\n".to_vec(),
        b"\"".to_vec(),
        b"`".to_vec(),
        b"key: |\n".to_vec(),
        b"{{{{".to_vec(),
        "tool \u{1F600}:\n".as_bytes().to_vec(),
    ];
    for src in cases {
        assert!(has_error(&src), "{:?}", String::from_utf8_lossy(&src));
    }
    // A prompt body is free text: a lone quote in it is text, and a file of one prompt is a
    // library (C150, a warning), not a workflow.
    let out = compile(b"prompt p:\n  \"unterminated\n", &CompileOptions::default());
    assert_eq!(
        out.diagnostics
            .iter()
            .map(|d| d.code.as_str())
            .collect::<Vec<_>>(),
        vec!["C150"]
    );
    assert!(out.workflow.is_none());
}

#[test]
fn the_empty_file_has_no_workflow() {
    let out = compile(b"", &CompileOptions::default());
    assert_eq!(
        out.diagnostics
            .iter()
            .map(|d| d.code.as_str())
            .collect::<Vec<_>>(),
        ["C006"]
    );
}
