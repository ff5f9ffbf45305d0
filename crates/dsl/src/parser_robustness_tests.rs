//! Parser robustness: deep nesting, large files, garbage, token soup. No input may panic,
//! hang or blow the stack.
use pretty_assertions::assert_eq;

use super::parse;
use super::tests::codes;
use crate::diag::Code;

// ----- robustness -------------------------------------------------------------------------

#[test]
fn ten_thousand_nested_brackets_are_one_diagnostic() {
    for (open, close) in [("[", "]"), ("{", "}"), ("(", ")")] {
        for tail in ["", "1", &close.repeat(10_000)] {
            let src = format!(
                "agent a:\n  tools: {}{tail}\n\nworkflow w:\n  entry: a\n  a -> done with {}\n",
                open.repeat(10_000),
                open.repeat(10_000)
            );
            let (_, diags) = parse(&src);
            assert!(
                !diags.is_empty() && diags.len() <= 2,
                "{open}{tail:.3}: {diags:?}"
            );
        }
    }
    let (_, diags) = parse(&"[".repeat(10_000));
    assert_eq!(
        diags.iter().map(|d| d.code).collect::<Vec<_>>(),
        vec![Code::E001]
    );
    let deep = format!("agent a:\n  tools: {}", "[".repeat(40));
    assert_eq!(
        parse(&deep).1.first().map(|d| d.message.clone()),
        Some("unexpected \"[\": values nest at most 32 levels deep".to_owned())
    );
}

#[test]
fn deep_indentation_is_one_e003() {
    let mut src = String::new();
    for i in 0..10_000 {
        src.push_str(&" ".repeat(i % 300));
        src.push_str("k:\n");
    }
    let (_, diags) = parse(&src);
    assert!(!diags.is_empty());
    assert!(
        diags
            .iter()
            .all(|d| matches!(d.code, Code::E001 | Code::E003)),
        "{diags:?}"
    );
}

/// A valid file of about `bytes` bytes: many tools, a long prompt, and one edge per tool.
fn big_file(bytes: usize) -> String {
    let mut nodes = String::new();
    let mut edges = String::new();
    let mut i = 0;
    nodes.push_str("prompt p:\n");
    for _ in 0..1000 {
        nodes.push_str("  Some prompt text with {{vars.x}} and `code` # not a comment\n\n");
    }
    nodes.push('\n');
    while nodes.len() + edges.len() < bytes {
        nodes.push_str(&format!(
            "tool t{i}:\n  command: `echo \"{i}\" | tr a b`\n  sandbox:\n    image: \"img\"\n    env: {{ A: \"1\", B: 2 }}\n\n"
        ));
        edges.push_str(&format!(
            "  t{i} -> t{} when \"x > {i}\" with {{ k: \"{{{{input.v}}}}\" }}\n",
            i + 1
        ));
        i += 1;
    }
    format!("{nodes}workflow w:\n  entry: t0\n{edges}")
}

#[test]
fn a_ten_megabyte_file_parses() {
    let src = big_file(10 * 1024 * 1024);
    let started = std::time::Instant::now();
    let (file, diags) = parse(&src);
    let elapsed = started.elapsed();
    assert_eq!(diags, vec![]);
    assert!(file.decls.len() > 30_000);
    // No timing assertion (ARCHITECTURE §6); printed for `--nocapture` runs.
    eprintln!("10 MiB parsed in {elapsed:?}");
}

#[test]
fn ten_megabytes_of_garbage_stop_at_the_error_cap() {
    let src = "x\n".repeat(5 * 1024 * 1024);
    let (_, diags) = parse(&src);
    assert_eq!(diags.len(), super::MAX_ERRORS);
    let src = format!("a: `{}", "y".repeat(10 * 1024 * 1024));
    assert_eq!(codes(&src), vec![(Code::E001, 1)]);
    let src = format!("tool a:\n  command: \"{}", "é\\".repeat(3 * 1024 * 1024));
    assert_eq!(codes(&src), vec![(Code::E004, 2)]);
}

#[test]
fn binary_garbage_and_odd_text_never_panic() {
    let mut inputs: Vec<Vec<u8>> = vec![
        vec![0xFF, 0xFE, 0x00],
        b"\xEF\xBB\xBF".to_vec(),
        b"\r\r\n\r".to_vec(),
        b"\t\t\tagent\t:\n\t".to_vec(),
        b"prompt p:\n\t\n  \t x".to_vec(),
        b"`".to_vec(),
        b"\"".to_vec(),
        b"k: |".to_vec(),
        b"prompt".to_vec(),
        b"workflow w:\n  a -> b with { k: \"x\", ".to_vec(),
        b"vars:\n  x: string = [[[".to_vec(),
        b"## strict-escape: on\nsecrets:\n  s: \"\\".to_vec(),
    ];
    let mut state: u32 = 12345;
    for len in [1usize, 7, 64, 1000, 10_000] {
        let mut bytes = Vec::with_capacity(len);
        for _ in 0..len {
            state = state.wrapping_mul(1_103_515_245).wrapping_add(12345);
            bytes.push((state >> 16) as u8);
        }
        inputs.push(bytes.clone());
        inputs.push(
            bytes
                .iter()
                .map(|b| b"ab :[]{}\n \t\"`|#-"[usize::from(*b) % 16])
                .collect(),
        );
    }
    for input in inputs {
        let (_, diags) = crate::parse(&input);
        for d in &diags {
            assert!(
                d.span.line >= 1 && d.span.col >= 1 && d.span.width >= 1,
                "{d:?}"
            );
        }
    }
}

mod soup {
    use proptest::prelude::*;

    /// Pieces of `.iter` text, including every troublesome character class.
    const PIECES: &[&str] = &[
        "a",
        "x1",
        "agent",
        "judge",
        "tool",
        "router",
        "workflow",
        "prompt",
        "schema",
        "vars",
        "secrets",
        "human",
        "dsl",
        "entry",
        "model",
        "user",
        "system",
        "command",
        "tools",
        "sandbox",
        "network",
        "build",
        "budget",
        "mode",
        "env",
        "max_duration",
        "when",
        "not",
        "else",
        "as",
        "with",
        "done",
        "fail",
        "true",
        "false",
        "string[]",
        "int",
        "0",
        "1",
        "42",
        "99999999999999999999",
        "1.5",
        ":",
        "->",
        "=",
        ",",
        "[",
        "]",
        "{",
        "}",
        "(",
        ")",
        "|",
        "-",
        ".",
        "\"x\"",
        "\"a\\\"b\"",
        "\"\\q\"",
        "\"open",
        "\"",
        "`raw`",
        "`",
        "`multi\nline`",
        "{{",
        "}}",
        "{{vars.x}}",
        "${X}",
        "#",
        "# c",
        "## strict-escape: on",
        "\n",
        "\n",
        "\n",
        " ",
        " ",
        "  ",
        "    ",
        "\t",
        "é",
        "\u{0}",
        "\u{feff}",
        "\\",
    ];

    proptest! {
        #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

        #[test]
        fn token_soup_never_panics_and_terminates(
            picks in proptest::collection::vec(0..PIECES.len(), 0..200)
        ) {
            let src: String = picks.iter().filter_map(|i| PIECES.get(*i)).copied().collect();
            let (file, diags) = super::parse(&src);
            let lines = u32::try_from(src.lines().count()).unwrap_or(u32::MAX);
            for d in &diags {
                prop_assert!(d.code.is_parse_stage());
                prop_assert!(d.span.line >= 1 && d.span.line <= lines + 1, "{:?}", d);
                prop_assert!(d.span.col >= 1 && d.span.width >= 1);
            }
            // Deterministic.
            prop_assert_eq!(super::parse(&src), (file, diags));
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
            let _ = crate::parse(&bytes);
        }
    }
}
