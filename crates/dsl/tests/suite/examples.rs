//! DSL.md §9: every example compiles with exactly the outcome the spec gives, and the diagnostic
//! gallery yields exactly its `# expect:` codes, each on its own line and nowhere else.
use std::collections::BTreeMap;
use std::path::PathBuf;

use iterion_dsl::{CompileOptions, compile};
use pretty_assertions::assert_eq;

fn example(name: &str) -> Vec<u8> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples")
        .join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn codes_by_line(src: &[u8]) -> BTreeMap<u32, Vec<String>> {
    let out = compile(
        src,
        &CompileOptions {
            ask_user_in_sandbox: false,
        },
    );
    let mut got: BTreeMap<u32, Vec<String>> = BTreeMap::new();
    for d in out.diagnostics {
        got.entry(d.span.line)
            .or_default()
            .push(d.code.as_str().to_string());
    }
    for v in got.values_mut() {
        v.sort();
    }
    got
}

#[test]
fn clean_examples_compile_without_any_diagnostic() {
    for name in [
        "hello.iter",
        "01_probe.iter",
        "02_egress_retry.iter",
        "03_secret_agent.iter",
        "04_parallel_review.iter",
        "05_fix_tests.iter",
        "07_rotate_tally.iter",
        "08_human_gate.iter",
        "09_script_tools.iter",
        "10_script_languages.iter",
    ] {
        let out = compile(&example(name), &CompileOptions::default());
        assert_eq!(out.diagnostics, vec![], "{name}");
        let wf = out
            .workflow
            .unwrap_or_else(|| panic!("{name}: no workflow"));
        assert!(!wf.name.is_empty(), "{name}");
    }
}

#[test]
fn the_gallery_yields_exactly_its_expected_codes_line_by_line() {
    let src = example("06_gallery.iter");
    let text = String::from_utf8(src.clone()).unwrap();
    let mut want: BTreeMap<u32, Vec<String>> = BTreeMap::new();
    for (i, line) in text.lines().enumerate() {
        if let Some((_, codes)) = line.split_once("# expect:") {
            let mut codes: Vec<String> = codes.split(',').map(|c| c.trim().to_string()).collect();
            codes.sort();
            want.insert(u32::try_from(i + 1).unwrap(), codes);
        }
    }
    assert!(want.len() >= 30, "the gallery lost its expectations");
    assert_eq!(codes_by_line(&src), want);
}

#[test]
fn the_gallery_produces_no_workflow() {
    let out = compile(&example("06_gallery.iter"), &CompileOptions::default());
    assert!(out.error_count() > 0);
    assert!(out.workflow.is_none());
}
