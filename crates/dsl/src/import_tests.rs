use pretty_assertions::assert_eq;

use super::*;

#[test]
fn an_import_line_is_one_quoted_path_alone() {
    assert_eq!(import_path("import \"lib/a.bot\""), Some("lib/a.bot"));
    assert_eq!(import_path("import   \"lib/a.bot\"  "), Some("lib/a.bot"));
    assert_eq!(import_path("import \"lib/a.bot\" x"), None);
    assert_eq!(import_path(" import \"lib/a.bot\""), None);
    assert_eq!(import_path("imports \"lib/a.bot\""), None);
    assert_eq!(import_path("import lib/a.bot"), None);
}

#[test]
fn attack_an_import_is_plain_names_inside_the_bot() {
    assert_eq!(resolve("", "lib/a.bot").as_deref(), Ok("lib/a.bot"));
    assert_eq!(resolve("lib", "s.bot").as_deref(), Ok("lib/s.bot"));
    for bad in [
        "../a.bot",
        "lib/../../a.bot",
        "/etc/a.bot",
        "./a.bot",
        "lib//a.bot",
        "lib\\..\\a.bot",
        "c:a.bot",
        "a.md",
        "lib/a\u{7}.bot",
    ] {
        assert!(resolve("lib", bad).is_err(), "{bad}");
    }
}

#[test]
fn a_fragment_keeps_its_own_line_numbers() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("lib")).unwrap();
    std::fs::write(dir.path().join("lib/a.bot"), "dsl: 2\n\nprompt p:\n  hi\n").unwrap();
    let main = dir.path().join("main.bot");
    let text = "dsl: 2\nimport \"lib/a.bot\"\nimport \"lib/a.bot\"\nworkflow w:\n  entry: done\n";
    let unit = expand(text, Some(&main));
    assert!(unit.diagnostics.is_empty(), "{:?}", unit.diagnostics);
    assert_eq!(unit.fragments.len(), 1, "read once");
    let lines: Vec<&str> = unit.text.split('\n').collect();
    assert_eq!(lines[1], "", "the import line is blanked");
    let mut d = Diagnostic::new(Code::C001, Span::new(9, 3, 1), "x");
    assert_eq!(lines[8], "  hi");
    unit.place(&mut d);
    assert_eq!((d.file.as_deref(), d.span.line), (Some("lib/a.bot"), 4));
    let mut d = Diagnostic::new(Code::C001, Span::new(4, 1, 1), "x");
    unit.place(&mut d);
    assert_eq!((d.file, d.span.line), (None, 4));
}

#[test]
fn imports_are_read_in_the_head_only() {
    // An import-looking line inside a script is the script's.
    let text = "dsl: 2\n## c\nimport \"lib/a.bot\"\n\ntool t:\n  script: `\nimport \"./x.js\"\n`\n";
    assert_eq!(imports(text), vec![(3, "lib/a.bot")]);
    let blank = blanked(text, true);
    assert_eq!(
        blank.split('\n').collect::<Vec<_>>()[..7],
        [
            "",
            "## c",
            "",
            "",
            "tool t:",
            "  script: `",
            "import \"./x.js\""
        ]
    );
    assert_eq!(profile(text), Some("2"));
    assert_eq!(profile("## x\nschema s:\n  a: int\ndsl: 2\n"), None);
}
