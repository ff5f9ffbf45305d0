//! Lexer tests: layout, tokens, strings, block scalars, prompt bodies, positions, recovery.
use pretty_assertions::assert_eq;

use super::*;

/// Every token up to and including EOF.
fn lex_all(src: &str) -> Vec<Token> {
    let mut lx = Lexer::new(src);
    let mut out = Vec::new();
    loop {
        let t = lx.next_token();
        let end = matches!(t.tok, Tok::Eof);
        out.push(t);
        if end || out.len() > 10_000 {
            return out;
        }
    }
}

/// The tokens only.
fn toks(src: &str) -> Vec<Tok> {
    lex_all(src).into_iter().map(|t| t.tok).collect()
}

fn id(s: &str) -> Tok {
    Tok::Ident(s.to_owned())
}

fn int(n: i64) -> Tok {
    Tok::Int {
        value: Some(n),
        text: n.to_string(),
    }
}

/// The first error token's diagnostic.
fn first_error(src: &str) -> Diagnostic {
    lex_all(src)
        .into_iter()
        .find_map(|t| match t.tok {
            Tok::Error(d) => Some(*d),
            _ => None,
        })
        .expect("an error token")
}

/// The value of the first string-like token.
fn first_str(src: &str) -> StrLit {
    lex_all(src)
        .into_iter()
        .find_map(|t| match t.tok {
            Tok::Str(s) | Tok::Block(s) | Tok::PromptBody(s) => Some(s),
            _ => None,
        })
        .expect("a string token")
}

fn err(code: Code, line: u32, col: u32, width: u32, msg: &str) -> Diagnostic {
    Diagnostic::new(code, Span::new(line, col, width), msg)
}

#[test]
fn indentation_becomes_indent_dedent_and_newline() {
    let src = "a:\n  b: 1\n  c:\n    d: x\ne: 2\n";
    assert_eq!(
        toks(src),
        vec![
            id("a"),
            Tok::Colon,
            Tok::Newline,
            Tok::Indent,
            id("b"),
            Tok::Colon,
            int(1),
            Tok::Newline,
            id("c"),
            Tok::Colon,
            Tok::Newline,
            Tok::Indent,
            id("d"),
            Tok::Colon,
            id("x"),
            Tok::Newline,
            Tok::Dedent,
            Tok::Dedent,
            id("e"),
            Tok::Colon,
            int(2),
            Tok::Newline,
            Tok::Eof,
        ]
    );
}

#[test]
fn end_of_file_closes_open_levels_without_a_final_lf() {
    assert_eq!(
        toks("a:\n  b: 1"),
        vec![
            id("a"),
            Tok::Colon,
            Tok::Newline,
            Tok::Indent,
            id("b"),
            Tok::Colon,
            int(1),
            Tok::Newline,
            Tok::Dedent,
            Tok::Eof,
        ]
    );
}

#[test]
fn blank_and_comment_lines_do_not_take_part_in_indentation() {
    let src = "# head\na:\n\n      # deep comment\n  b: 1 # trailing\n\t# tab comment\n  c: 2\n";
    assert_eq!(
        toks(src),
        vec![
            id("a"),
            Tok::Colon,
            Tok::Newline,
            Tok::Indent,
            id("b"),
            Tok::Colon,
            int(1),
            Tok::Newline,
            id("c"),
            Tok::Colon,
            int(2),
            Tok::Newline,
            Tok::Dedent,
            Tok::Eof,
        ]
    );
}

#[test]
fn empty_and_comment_only_files_are_just_eof() {
    assert_eq!(toks(""), vec![Tok::Eof]);
    assert_eq!(toks("\n\n  \n"), vec![Tok::Eof]);
    assert_eq!(toks("# only a comment"), vec![Tok::Eof]);
}

#[test]
fn the_first_token_of_a_line_is_marked() {
    let marks: Vec<(Tok, bool)> = lex_all("a b\n  c\n")
        .into_iter()
        .map(|t| (t.tok, t.bol))
        .collect();
    assert_eq!(
        marks,
        vec![
            (id("a"), true),
            (id("b"), false),
            (Tok::Newline, false),
            (Tok::Indent, false),
            (id("c"), true),
            (Tok::Newline, false),
            (Tok::Dedent, false),
            (Tok::Eof, false),
        ]
    );
}

#[test]
fn brackets_join_lines() {
    let src = "a: [1,\n      2,   # two\n\n  3]\nb: {\nk: x\n}\n";
    assert_eq!(
        toks(src),
        vec![
            id("a"),
            Tok::Colon,
            Tok::LBracket,
            int(1),
            Tok::Comma,
            int(2),
            Tok::Comma,
            int(3),
            Tok::RBracket,
            Tok::Newline,
            id("b"),
            Tok::Colon,
            Tok::LBrace,
            id("k"),
            Tok::Colon,
            id("x"),
            Tok::RBrace,
            Tok::Newline,
            Tok::Eof,
        ]
    );
}

#[test]
fn an_unclosed_bracket_at_end_of_file_is_e002() {
    assert_eq!(
        first_error("a: [1,\n  2\n"),
        err(
            Code::E002,
            2,
            4,
            1,
            "expected \"]\" to close the bracket at line 1, found end of file"
        )
    );
    assert_eq!(
        first_error("x -> y with { a: (\n").message,
        "expected \"}\" to close the bracket at line 1, found end of file"
    );
}

#[test]
fn punctuation_numbers_and_type_list() {
    assert_eq!(
        toks("a -> b = , ( ) string[] string [] 12 3.25 007"),
        vec![
            id("a"),
            Tok::Arrow,
            id("b"),
            Tok::Eq,
            Tok::Comma,
            Tok::LParen,
            Tok::RParen,
            Tok::TypeList,
            id("string"),
            Tok::LBracket,
            Tok::RBracket,
            int(12),
            Tok::Float {
                value: 3.25,
                text: "3.25".into()
            },
            Tok::Int {
                value: Some(7),
                text: "007".into()
            },
            Tok::Newline,
            Tok::Eof,
        ]
    );
}

#[test]
fn an_int_beyond_i64_keeps_its_spelling_and_no_value() {
    assert_eq!(
        toks("99999999999999999999 5m 1."),
        vec![
            Tok::Int {
                value: None,
                text: "99999999999999999999".into()
            },
            int(5),
            id("m"),
            int(1),
            Tok::Error(Box::new(err(Code::E001, 1, 26, 1, "unexpected \".\""))),
            Tok::Newline,
            Tok::Eof,
        ]
    );
}

#[test]
fn any_other_character_is_e001() {
    assert_eq!(
        first_error("a: $x"),
        err(Code::E001, 1, 4, 1, "unexpected \"$\"")
    );
    assert_eq!(
        first_error("a: é"),
        err(Code::E001, 1, 4, 1, "unexpected \"é\"")
    );
    assert_eq!(
        first_error("a\u{0}"),
        err(Code::E001, 1, 2, 1, "unexpected character U+0000")
    );
    assert_eq!(
        first_error("a - b"),
        err(Code::E001, 1, 3, 1, "unexpected \"-\"")
    );
}

#[test]
fn columns_count_chars_and_a_tab_is_one() {
    let spans: Vec<(u32, u32, u32)> = lex_all("x: \"é\u{1F600}\"\t7\n")
        .into_iter()
        .map(|t| (t.span.line, t.span.col, t.span.width))
        .collect();
    // x, :, the string (4 chars wide), 7 after one tab, NEWLINE just past 7, EOF.
    assert_eq!(
        spans,
        vec![
            (1, 1, 1),
            (1, 2, 1),
            (1, 4, 4),
            (1, 9, 1),
            (1, 10, 1),
            (1, 10, 1)
        ]
    );
}

// ----- indentation errors -----------------------------------------------------------------

#[test]
fn a_tab_in_indentation_is_e003_at_the_line_start() {
    assert_eq!(
        first_error("a:\n \tb: 1\n"),
        err(Code::E003, 2, 1, 2, "tab in indentation")
    );
}

#[test]
fn a_dedent_to_an_unknown_width_is_e003() {
    assert_eq!(
        first_error("a:\n    b: 1\n  c: 2\n"),
        err(
            Code::E003,
            3,
            1,
            2,
            "indentation of 2 does not match any outer level"
        )
    );
}

#[test]
fn more_than_100_levels_is_e003() {
    let mut src = String::new();
    for i in 0..150 {
        src.push_str(&" ".repeat(i));
        src.push_str("k:\n");
    }
    assert_eq!(
        first_error(&src),
        err(Code::E003, 102, 1, 101, "more than 100 indentation levels")
    );
}

// ----- comments and the directive ---------------------------------------------------------

#[test]
fn the_strict_escape_directive_is_read_before_the_first_token() {
    for src in [
        "## strict-escape: on\na: 1\n",
        "# intro\n\n##   strict-escape  :   on  \na: 1\n",
        "  ## strict-escape:on\n",
    ] {
        let mut lx = Lexer::new(src);
        while !matches!(lx.next_token().tok, Tok::Eof) {}
        assert!(lx.strict_escape(), "{src:?}");
    }
    for src in [
        "a: 1\n## strict-escape: on\n",
        "# strict-escape: on\n",
        "## strict-escape: off\n",
        "### strict-escape: on\n",
        "## strict-escape: on please\n",
    ] {
        let mut lx = Lexer::new(src);
        while !matches!(lx.next_token().tok, Tok::Eof) {}
        assert!(!lx.strict_escape(), "{src:?}");
    }
}

// ----- quoted strings ---------------------------------------------------------------------

#[test]
fn a_quoted_string_keeps_backslash_pairs_by_default() {
    let mut lx = Lexer::new(r#"a: "x\"y\n\\" "plain""#);
    let mut strings = Vec::new();
    loop {
        match lx.next_token().tok {
            Tok::Str(s) => strings.push(s),
            Tok::Eof => break,
            _ => {}
        }
    }
    assert_eq!(
        strings,
        vec![
            StrLit {
                value: r#"x\"y\n\\"#.into(),
                kind: StrKind::Quoted,
                span: Span::new(1, 4, 10),
                lines: vec![LineStart {
                    value_offset: 0,
                    line: 1,
                    col: 5
                }],
            },
            StrLit {
                value: "plain".into(),
                kind: StrKind::Quoted,
                span: Span::new(1, 15, 7),
                lines: vec![LineStart {
                    value_offset: 0,
                    line: 1,
                    col: 16
                }],
            },
        ]
    );
    assert_eq!(lx.take_backslash_quotes(), vec![Span::new(1, 4, 10)]);
}

#[test]
fn strict_escape_decodes_the_six_escapes() {
    let s = first_str("## strict-escape: on\na: \"\\\"\\\\\\n\\t\\r\\0.\"\n");
    assert_eq!(s.value, "\"\\\n\t\r\0.");
    let mut lx = Lexer::new("## strict-escape: on\na: \"\\\"\"\n");
    while !matches!(lx.next_token().tok, Tok::Eof) {}
    assert_eq!(lx.take_backslash_quotes(), vec![]);
}

#[test]
fn an_unknown_escape_under_strict_escape_is_e005_at_the_backslash() {
    assert_eq!(
        first_error("## strict-escape: on\na: \"a\\qb\"\n"),
        err(Code::E005, 2, 6, 2, "unknown escape \\q")
    );
}

#[test]
fn a_line_break_before_the_closing_quote_is_e004() {
    assert_eq!(
        first_error("a: \"abc\nb: 1\n"),
        err(Code::E004, 1, 4, 1, "unterminated quoted string")
    );
    assert_eq!(
        first_error("a: \"abc\\\"\n"),
        err(Code::E004, 1, 4, 1, "unterminated quoted string")
    );
    assert_eq!(
        first_error("a: \"abc\\"),
        err(Code::E004, 1, 4, 1, "unterminated quoted string")
    );
}

// ----- raw strings ------------------------------------------------------------------------

#[test]
fn a_raw_string_spans_lines_exactly_and_maps_its_lines() {
    let src = "a: `one \\n\n  two\n\nthree` b\n";
    assert_eq!(
        toks(src),
        vec![
            id("a"),
            Tok::Colon,
            Tok::Str(StrLit {
                value: "one \\n\n  two\n\nthree".into(),
                kind: StrKind::Raw,
                span: Span::new(1, 4, 7),
                lines: vec![
                    LineStart {
                        value_offset: 0,
                        line: 1,
                        col: 5
                    },
                    LineStart {
                        value_offset: 7,
                        line: 2,
                        col: 1
                    },
                    LineStart {
                        value_offset: 13,
                        line: 3,
                        col: 1
                    },
                    LineStart {
                        value_offset: 14,
                        line: 4,
                        col: 1
                    },
                ],
            }),
            id("b"),
            Tok::Newline,
            Tok::Eof,
        ]
    );
}

#[test]
fn a_one_line_raw_string_is_as_wide_as_written() {
    let s = first_str("c: `echo '{\"a\":1}'`");
    assert_eq!(
        (s.value.as_str(), s.span),
        ("echo '{\"a\":1}'", Span::new(1, 4, 16))
    );
}

#[test]
fn an_unterminated_raw_string_is_e004_at_the_backtick() {
    assert_eq!(
        toks("a: `x\ny\n"),
        vec![
            id("a"),
            Tok::Colon,
            Tok::Error(Box::new(err(
                Code::E004,
                1,
                4,
                1,
                "unterminated raw string"
            ))),
            Tok::Newline,
            Tok::Eof,
        ]
    );
}

// ----- block scalars ----------------------------------------------------------------------

#[test]
fn a_block_scalar_follows_rules_one_to_five() {
    let src = "a:\n  k: |   # comment\n\n     line one\n       indented # not a comment\n\n     \tx\t\n\n\n  j: 1\n";
    let all = toks(src);
    assert_eq!(
        all,
        vec![
            id("a"),
            Tok::Colon,
            Tok::Newline,
            Tok::Indent,
            id("k"),
            Tok::Colon,
            Tok::Block(StrLit {
                value: "line one\n  indented # not a comment\n\n\tx\t\n".into(),
                kind: StrKind::Block,
                span: Span::new(4, 6, 8),
                lines: vec![
                    LineStart {
                        value_offset: 0,
                        line: 4,
                        col: 6
                    },
                    LineStart {
                        value_offset: 9,
                        line: 5,
                        col: 6
                    },
                    LineStart {
                        value_offset: 36,
                        line: 6,
                        col: 1
                    },
                    LineStart {
                        value_offset: 37,
                        line: 7,
                        col: 6
                    },
                ],
            }),
            Tok::Newline,
            id("j"),
            Tok::Colon,
            int(1),
            Tok::Newline,
            Tok::Dedent,
            Tok::Eof,
        ]
    );
}

#[test]
fn a_block_scalar_may_end_the_file() {
    let s = first_str("k: |\n  a\n  b");
    assert_eq!(s.value, "a\nb\n");
    let s = first_str("k: |\n  a\n\n\n");
    assert_eq!(s.value, "a\n");
}

#[test]
fn a_block_scalar_dedent_closes_nested_levels() {
    assert_eq!(
        toks("a:\n  b:\n    k: |\n      x\nc: 1\n"),
        vec![
            id("a"),
            Tok::Colon,
            Tok::Newline,
            Tok::Indent,
            id("b"),
            Tok::Colon,
            Tok::Newline,
            Tok::Indent,
            id("k"),
            Tok::Colon,
            Tok::Block(StrLit {
                value: "x\n".into(),
                kind: StrKind::Block,
                span: Span::new(4, 7, 1),
                lines: vec![LineStart {
                    value_offset: 0,
                    line: 4,
                    col: 7
                }],
            }),
            Tok::Newline,
            Tok::Dedent,
            Tok::Dedent,
            id("c"),
            Tok::Colon,
            int(1),
            Tok::Newline,
            Tok::Eof,
        ]
    );
}

#[test]
fn a_block_scalar_needs_an_indented_block() {
    assert_eq!(
        first_error("a:\n  k: |\n  j: 1\n"),
        err(
            Code::E002,
            3,
            3,
            1,
            "expected an indented block after \"|\", found a line indented 2 (at most 2)"
        )
    );
    assert_eq!(
        first_error("k: |\n\n"),
        err(
            Code::E002,
            1,
            5,
            1,
            "expected an indented block after \"|\", found end of file"
        )
    );
}

#[test]
fn a_block_scalar_that_ends_between_key_and_content_is_e003() {
    assert_eq!(
        first_error("a:\n  k: |\n      x\n    y\n"),
        err(
            Code::E003,
            4,
            1,
            5,
            "misaligned end of block: indentation 4 is less than the block's 6 but more than 2"
        )
    );
}

#[test]
fn a_tab_in_the_first_c_columns_of_a_block_is_e003() {
    assert_eq!(
        first_error("k: |\n    x\n  \ty\n"),
        err(Code::E003, 3, 1, 3, "tab in indentation")
    );
    assert_eq!(
        first_error("k: |\n\tx\n"),
        err(Code::E003, 2, 1, 1, "tab in indentation")
    );
}

#[test]
fn a_pipe_elsewhere_is_e001() {
    for (src, col) in [
        ("a: | x\n", 4),
        ("a: [|]\n", 5),
        ("a | \n", 3),
        ("a: b |\n", 6),
    ] {
        assert_eq!(
            first_error(src),
            err(Code::E001, 1, col, 1, "unexpected \"|\""),
            "{src:?}"
        );
    }
}

// ----- prompt bodies ----------------------------------------------------------------------

#[test]
fn a_prompt_body_drops_outer_blank_lines_keeps_inner_ones_and_has_no_final_lf() {
    let src = "prompt p:   # note\n\n\n  # Heading\n\n    - item `x\n  ## end\n\n\nagent a:\n";
    assert_eq!(
        toks(src),
        vec![
            id("prompt"),
            id("p"),
            Tok::Colon,
            Tok::PromptBody(StrLit {
                value: "# Heading\n\n  - item `x\n## end".into(),
                kind: StrKind::PromptBody,
                span: Span::new(4, 3, 9),
                lines: vec![
                    LineStart {
                        value_offset: 0,
                        line: 4,
                        col: 3
                    },
                    LineStart {
                        value_offset: 10,
                        line: 5,
                        col: 1
                    },
                    LineStart {
                        value_offset: 11,
                        line: 6,
                        col: 3
                    },
                    LineStart {
                        value_offset: 23,
                        line: 7,
                        col: 3
                    },
                ],
            }),
            Tok::Newline,
            id("agent"),
            id("a"),
            Tok::Colon,
            Tok::Newline,
            Tok::Eof,
        ]
    );
}

#[test]
fn a_prompt_without_indented_lines_has_an_empty_body() {
    let body = StrLit {
        value: String::new(),
        kind: StrKind::PromptBody,
        span: Span::new(1, 10, 1),
        lines: vec![LineStart {
            value_offset: 0,
            line: 1,
            col: 10,
        }],
    };
    assert_eq!(
        toks("prompt p:\n\nx: 1\n"),
        vec![
            id("prompt"),
            id("p"),
            Tok::Colon,
            Tok::PromptBody(body.clone()),
            Tok::Newline,
            id("x"),
            Tok::Colon,
            int(1),
            Tok::Newline,
            Tok::Eof,
        ]
    );
    assert_eq!(
        toks("prompt p:"),
        vec![
            id("prompt"),
            id("p"),
            Tok::Colon,
            Tok::PromptBody(body),
            Tok::Newline,
            Tok::Eof,
        ]
    );
}

#[test]
fn a_prompt_body_may_end_the_file_without_lf() {
    assert_eq!(first_str("prompt p:\n  hi {{x}}").value, "hi {{x}}");
}

#[test]
fn a_prompt_header_needs_indentation_zero_and_nothing_after_the_colon() {
    assert_eq!(
        toks("prompt p: x\n"),
        vec![
            id("prompt"),
            id("p"),
            Tok::Colon,
            id("x"),
            Tok::Newline,
            Tok::Eof
        ]
    );
    assert!(
        !toks("a:\n  prompt p:\n    x\n")
            .iter()
            .any(|t| matches!(t, Tok::PromptBody(_)))
    );
}

#[test]
fn a_misaligned_end_of_a_prompt_body_is_e003() {
    assert_eq!(
        first_error("prompt p:\n    one\n  two\n"),
        err(
            Code::E003,
            3,
            1,
            3,
            "misaligned end of prompt body: indentation 2 is less than the prompt body's 4 but \
             more than 0"
        )
    );
    assert_eq!(
        first_error("prompt p:\n\tone\n"),
        err(Code::E003, 2, 1, 1, "tab in indentation")
    );
}

#[test]
fn span_at_maps_into_a_multi_line_body() {
    let s = first_str("prompt p:\n  first\n\n  x {{vars.a}}\n");
    let offset = s
        .value
        .find("{{")
        .map(|b| s.value[..b].chars().count())
        .unwrap();
    assert_eq!(s.span_at(offset, 2), Span::new(4, 5, 2));
}

// ----- recovery ---------------------------------------------------------------------------

/// The first token after `recover()` once the lexer has produced `skip` tokens.
fn after_recover(src: &str, skip: usize) -> Token {
    let mut lx = Lexer::new(src);
    for _ in 0..skip {
        lx.next_token();
    }
    lx.recover();
    lx.next_token()
}

#[test]
fn recovery_resumes_at_the_next_line_at_indentation_zero() {
    let t = after_recover("a: [1,\n  b\nc: 1\n", 2);
    assert_eq!((t.tok, t.span.line, t.bol), (id("c"), 3, true));
}

#[test]
fn recovery_skips_raw_strings_whose_lines_start_at_column_one() {
    let t = after_recover("x y\n  c: `echo\nnot code\n`\nnext:\n", 1);
    assert_eq!((t.tok, t.span.line), (id("next"), 5));
}

#[test]
fn recovery_skips_prompt_bodies_and_blocks_with_stray_backticks() {
    let t = after_recover("prompt done:\n  use ``` fences\nnext:\n", 1);
    assert_eq!((t.tok, t.span.line), (id("next"), 3));
    let t = after_recover("x y\n  k: |\n    a ` b\n  j: `q`\nnext:\n", 1);
    assert_eq!((t.tok, t.span.line), (id("next"), 5));
}

#[test]
fn recovery_at_the_end_yields_eof() {
    assert_eq!(after_recover("a b c", 1).tok, Tok::Eof);
    assert_eq!(after_recover("a `b\nc", 1).tok, Tok::Eof);
}
