//! `iterion validate FILE [--json]` (DSL.md §8.2–§8.3, ARCHITECTURE.md §4).
use std::path::{Path, PathBuf};

use assert_cmd::Command;
use pretty_assertions::assert_eq;
use serde_json::Value;

fn iterion() -> Command {
    Command::cargo_bin("iterion").unwrap()
}

fn examples() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples")
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

#[test]
fn a_clean_workflow_exits_zero() {
    iterion()
        .arg("validate")
        .arg(examples().join("hello.iter"))
        .assert()
        .code(0)
        .stdout("0 errors, 0 warnings\n");
}

#[test]
fn warnings_alone_exit_zero_and_are_printed() {
    let dir = tempfile::tempdir().unwrap();
    let f = write(
        dir.path(),
        "w.iter",
        "schema empty:\n\ntool a:\n  command: `true`\n\nworkflow w:\n  entry: a\n  a -> done\n",
    );
    let out = iterion()
        .arg("validate")
        .arg(&f)
        .assert()
        .code(0)
        .get_output()
        .stdout
        .clone();
    let out = String::from_utf8(out).unwrap();
    assert!(
        out.contains(": warning[C140]: schema \"empty\" has no fields\n"),
        "{out}"
    );
    assert!(out.ends_with("0 errors, 1 warning\n"), "{out}");
}

#[test]
fn errors_exit_one_with_the_human_form() {
    let dir = tempfile::tempdir().unwrap();
    let f = write(
        dir.path(),
        "w.iter",
        "tool a:\n  command: `true`\n\nworkflow w:\n  entry: a\n  worktree: sometimes\n  a -> done\n",
    );
    let shown = f.display().to_string();
    let out = iterion()
        .arg("validate")
        .arg(&f)
        .assert()
        .code(1)
        .get_output()
        .stdout
        .clone();
    assert_eq!(
        String::from_utf8(out).unwrap(),
        format!(
            "{shown}:6:13: error[C142]: invalid worktree \"sometimes\"; expected none or auto\n  |\n6 |   worktree: sometimes\n  |             ^^^^^^^^^\n\n1 error, 0 warnings\n"
        )
    );
}

#[test]
fn json_output_is_one_document_with_the_spec_shape() {
    let gallery = examples().join("06_gallery.iter");
    let shown = gallery.display().to_string();
    let out = iterion()
        .args(["validate", "--json"])
        .arg(&gallery)
        .assert()
        .code(1)
        .get_output()
        .stdout
        .clone();
    let doc: Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(doc["file"], Value::String(shown.clone()));
    let diags = doc["diagnostics"].as_array().unwrap();
    let errors = diags.iter().filter(|d| d["severity"] == "error").count();
    assert_eq!(doc["errors"].as_u64().unwrap() as usize, errors);
    assert_eq!(
        doc["warnings"].as_u64().unwrap() as usize,
        diags.len() - errors
    );
    for d in diags {
        let obj = d.as_object().unwrap();
        for key in ["code", "severity", "message", "file", "line", "column"] {
            assert!(obj.contains_key(key), "{key} missing in {d}");
        }
        for (k, v) in obj {
            assert!(
                !v.is_null(),
                "{k} is null in {d}: absent fields are omitted"
            );
            assert!(
                [
                    "code", "severity", "message", "file", "line", "column", "node", "hint"
                ]
                .contains(&k.as_str()),
                "unexpected key {k}"
            );
        }
        assert_eq!(d["file"], Value::String(shown.clone()));
    }
    // The network word used as a node-level sandbox mode carries its node and its hint.
    let c044 = diags
        .iter()
        .find(|d| d["code"] == "C044" && d["node"] == "helper")
        .unwrap();
    assert_eq!(
        c044["message"],
        "\"allowlist\" is a network mode, not a sandbox mode"
    );
    assert!(c044["hint"].as_str().unwrap().contains("network:"));
}

#[test]
fn an_unreadable_file_exits_two() {
    iterion()
        .args(["validate", "/nonexistent/flow.iter"])
        .assert()
        .code(2)
        .stdout("")
        .stderr(predicates::str::contains(
            "cannot read /nonexistent/flow.iter",
        ));
    let out = iterion()
        .args(["validate", "--json", "/nonexistent/flow.iter"])
        .assert()
        .code(2)
        .get_output()
        .stdout
        .clone();
    let doc: Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(doc["error"]["code"], "READ_FAILED");
}

#[test]
fn a_file_over_ten_mebibytes_is_refused_with_exit_two() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("big.iter");
    std::fs::write(&f, vec![b'#'; 10 * 1024 * 1024 + 1]).unwrap();
    iterion()
        .arg("validate")
        .arg(&f)
        .assert()
        .code(2)
        .stderr(predicates::str::contains("the limit is 10485760 bytes"));
}

#[test]
fn a_bad_flag_exits_two() {
    iterion()
        .args(["validate", "--frobnicate", "x.iter"])
        .assert()
        .code(2);
}

/// A file of declarations without nodes or a workflow (a library) validates with C150, and
/// `run` refuses it as having nothing to run, exit 2.
#[test]
fn a_library_of_declarations_validates_and_run_refuses_it() {
    let dir = tempfile::tempdir().unwrap();
    let f = write(
        dir.path(),
        "lib.iter",
        "schema verdict:\n  ok: bool\n\nprompt judge:\n  Say whether it is fine.\n",
    );
    let out = iterion().arg("validate").arg(&f).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let shown =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(
        shown.contains("warning[C150]") && shown.contains("0 errors, 1 warning"),
        "{shown}"
    );
    let env = crate::suite::support::Env::new();
    env.write("lib.iter", &std::fs::read_to_string(&f).unwrap());
    let out = env
        .cmd()
        .args(["run", "lib.iter", "--sandbox", "none"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("declares no workflow (C150); nothing was run"),
        "{stderr}"
    );
}
