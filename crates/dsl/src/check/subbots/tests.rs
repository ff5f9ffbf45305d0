//! Tests of the subbot checks (C910–C913) through [`crate::compile_file`], on files written to a
//! temporary directory: the checks read the child files, so they cannot run on trees alone.
use pretty_assertions::assert_eq;

use crate::{Code, CompileOptions, Compiled, compile, compile_file, ir};

/// A child with one required var `goal` and one with a default, ending in a tool.
const CHILD: &str = "\
vars:
  goal: string
  depth: int = 1

tool work:
  command: `echo {{vars.goal}}`

workflow child:
  entry: work
  work -> done
";

/// A parent whose entry tool feeds subbot `sub` (source `src`) with the `with` map `with`.
fn parent(src: &str, with: &str) -> String {
    format!(
        "\
tool start:
  command: `echo hi`

subbot sub:
  source: \"{src}\"

workflow parent:
  entry: start
  start -> sub{with}
  sub -> done
"
    )
}

/// Writes `files` (name, text) into a fresh directory and compiles the first one.
fn compile_in_dir(files: &[(&str, &str)]) -> Compiled {
    let dir = tempfile::tempdir().expect("temp dir");
    for (name, text) in files {
        let path = dir.path().join(name);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).expect("mkdir");
        }
        std::fs::write(&path, text).expect("write");
    }
    compile_file(&dir.path().join(files[0].0), &CompileOptions::default()).expect("root loads")
}

/// (code, line, col, message) of every diagnostic.
fn diags(c: &Compiled) -> Vec<(Code, u32, u32, String)> {
    c.diagnostics
        .iter()
        .map(|d| (d.code, d.span.line, d.span.col, d.message.clone()))
        .collect()
}

fn subbot_child(c: &Compiled) -> Option<&ir::Workflow> {
    let wf = c.workflow.as_ref()?;
    match &wf.node("sub")?.body {
        ir::NodeBody::Subbot(s) => s.child.as_deref(),
        _ => None,
    }
}

#[test]
fn a_clean_child_compiles_into_the_ir() {
    let p = parent("child.iter", " with { goal: \"x\" }");
    let c = compile_in_dir(&[("parent.iter", &p), ("child.iter", CHILD)]);
    assert_eq!(diags(&c), vec![]);
    let child = subbot_child(&c).expect("the child is lowered with the parent");
    assert_eq!(child.name, "child");
    assert_eq!(child.entry, "work");
    let wf = c.workflow.as_ref().expect("workflow");
    assert_eq!(wf.node("sub").map(|n| n.kind), Some(ir::NodeKind::Subbot));
}

#[test]
fn source_is_relative_to_the_parent_files_directory() {
    let p = parent("sub/child.iter", " with { goal: \"x\" }");
    // The grandchild path is relative to `sub/`, not to the root.
    let child = CHILD.replace(
        "workflow child:\n  entry: work\n  work -> done\n",
        "subbot inner:\n  source: \"leaf.iter\"\n\nworkflow child:\n  entry: work\n  work -> inner with { goal: \"y\" }\n  inner -> done\n",
    );
    let c = compile_in_dir(&[
        ("parent.iter", &p),
        ("sub/child.iter", &child),
        ("sub/leaf.iter", CHILD),
    ]);
    assert_eq!(diags(&c), vec![]);
    let grandchild = subbot_child(&c)
        .and_then(|w| w.node("inner"))
        .and_then(|n| match &n.body {
            ir::NodeBody::Subbot(s) => s.child.as_deref(),
            _ => None,
        });
    assert_eq!(grandchild.map(|w| w.name.as_str()), Some("child"));
}

#[test]
fn table_of_subbot_diagnostics() {
    struct Case {
        name: &'static str,
        files: Vec<(&'static str, String)>,
        want: Vec<(Code, u32, u32, String)>,
    }
    let broken_child =
        "tool work:\n  command: `echo`\n\nworkflow child:\n  entry: nowhere\n  work -> done\n";
    let with_goal = " with { goal: \"x\" }";
    let cases = vec![
        Case {
            name: "missing source is C910 at the source value",
            files: vec![("p.iter", parent("absent.iter", with_goal))],
            want: vec![(
                Code::C910,
                5,
                11,
                "subbot \"sub\": cannot read PATH: No such file or directory (os error 2)"
                    .to_owned(),
            )],
        },
        Case {
            name: "a child that does not compile is C910 with its first error",
            files: vec![
                ("p.iter", parent("c.iter", with_goal)),
                ("c.iter", broken_child.to_owned()),
            ],
            want: vec![(
                Code::C910,
                5,
                11,
                "subbot \"sub\": c.iter:5:10: C008 entry \"nowhere\" is not a declared node"
                    .to_owned(),
            )],
        },
        Case {
            name: "a required child var without an input key is C911 at the name",
            files: vec![
                ("p.iter", parent("c.iter", "")),
                ("c.iter", CHILD.to_owned()),
            ],
            want: vec![(
                Code::C911,
                4,
                8,
                "subbot \"sub\": child var \"goal\" has no default and no input".to_owned(),
            )],
        },
        Case {
            name: "an input key naming no child var is C912, a warning",
            files: vec![
                (
                    "p.iter",
                    parent("c.iter", " with { goal: \"x\", colour: \"red\" }"),
                ),
                ("c.iter", CHILD.to_owned()),
            ],
            want: vec![(
                Code::C912,
                4,
                8,
                "subbot \"sub\": child has no var \"colour\"".to_owned(),
            )],
        },
        Case {
            name: "a file naming itself is C913",
            files: vec![("p.iter", parent("p.iter", with_goal))],
            want: vec![(
                Code::C913,
                5,
                11,
                "subbot \"sub\": p.iter -> p.iter includes itself".to_owned(),
            )],
        },
        Case {
            name: "a cycle through a child is C913 at the root too",
            files: vec![
                ("p.iter", parent("c.iter", with_goal)),
                (
                    "c.iter",
                    parent("p.iter", "").replace("workflow parent", "workflow c"),
                ),
            ],
            want: vec![(
                Code::C913,
                5,
                11,
                "subbot \"sub\": p.iter -> c.iter -> p.iter includes itself".to_owned(),
            )],
        },
    ];
    for case in cases {
        let files: Vec<(&str, &str)> = case.files.iter().map(|(n, t)| (*n, t.as_str())).collect();
        let got: Vec<_> = diags(&compile_in_dir(&files))
            .into_iter()
            .map(|(code, line, col, msg)| (code, line, col, redact_path(&msg)))
            .collect();
        assert_eq!(got, case.want, "{}", case.name);
    }
}

/// `cannot read /tmp/xyz/absent.iter: …` → `cannot read PATH: …` (the temp dir varies).
fn redact_path(msg: &str) -> String {
    match (msg.find("cannot read "), msg.rfind(".iter: ")) {
        (Some(a), Some(b)) if b > a => {
            format!("{}cannot read PATH{}", &msg[..a], &msg[b + ".iter".len()..])
        }
        _ => msg.to_owned(),
    }
}

#[test]
fn c910_and_c911_are_errors_and_block_the_ir_but_c912_does_not() {
    let warn = compile_in_dir(&[
        (
            "p.iter",
            &parent("c.iter", " with { goal: \"x\", extra: \"y\" }"),
        ),
        ("c.iter", CHILD),
    ]);
    assert_eq!((warn.error_count(), warn.warning_count()), (0, 1));
    assert!(warn.workflow.is_some());
    let err = compile_in_dir(&[("p.iter", &parent("c.iter", "")), ("c.iter", CHILD)]);
    assert_eq!(err.error_count(), 1);
    assert!(err.workflow.is_none());
}

#[test]
fn an_entry_subbot_without_keys_takes_the_parents_vars() {
    let p = "\
vars:
  goal: string = \"g\"

subbot sub:
  source: \"c.iter\"

workflow parent:
  entry: sub
  sub -> done
";
    let c = compile_in_dir(&[("p.iter", p), ("c.iter", CHILD)]);
    assert_eq!(diags(&c), vec![]);
}

#[test]
fn without_a_file_path_a_subbot_is_c910() {
    let c = compile(parent("c.iter", "").as_bytes(), &CompileOptions::default());
    assert_eq!(
        diags(&c),
        vec![(
            Code::C910,
            5,
            11,
            "subbot \"sub\": cannot load a child without the parent's file path".to_owned()
        )]
    );
}

#[test]
fn children_deeper_than_the_limit_are_c910() {
    // level0.iter -> level1.iter -> … ; each level's subbot names the next file.
    let level = |next: usize| {
        format!(
            "tool start:\n  command: `echo`\n\nsubbot sub:\n  source: \"level{next}.iter\"\n\nworkflow w:\n  entry: start\n  start -> sub\n  sub -> done\n"
        )
    };
    let leaf = "tool start:\n  command: `echo`\n\nworkflow w:\n  entry: start\n  start -> done\n";
    let depth = ir::MAX_SUBBOT_DEPTH as usize;
    let mut texts: Vec<(String, String)> = (0..depth)
        .map(|i| (format!("level{i}.iter"), level(i + 1)))
        .collect();
    texts.push((format!("level{depth}.iter"), leaf.to_owned()));
    let files: Vec<(&str, &str)> = texts
        .iter()
        .map(|(n, t)| (n.as_str(), t.as_str()))
        .collect();
    assert_eq!(
        diags(&compile_in_dir(&files)),
        vec![],
        "depth {depth} is allowed"
    );

    texts.pop();
    texts.push((format!("level{depth}.iter"), level(depth + 1)));
    texts.push((format!("level{}.iter", depth + 1), leaf.to_owned()));
    let files: Vec<(&str, &str)> = texts
        .iter()
        .map(|(n, t)| (n.as_str(), t.as_str()))
        .collect();
    let got = diags(&compile_in_dir(&files));
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0].0, Code::C910);
    assert!(
        got[0].3.contains("children nest deeper than 8"),
        "the innermost reason reaches the root: {}",
        got[0].3
    );
}

#[test]
fn a_subbot_needs_a_source() {
    let src = "subbot sub:\n  output: s\n\nworkflow w:\n  entry: sub\n  sub -> done\n";
    let c = compile(src.as_bytes(), &CompileOptions::default());
    assert_eq!(
        diags(&c),
        vec![(
            Code::E013,
            1,
            8,
            "subbot \"sub\" needs \"source\"".to_owned()
        )]
    );
}

/// A file `level{k}.iter` whose workflow runs `width` subbots in a chain, each naming
/// `level{k+1}.iter`.
fn wide_level(k: usize, width: usize) -> String {
    let mut text = String::new();
    for i in 0..width {
        text.push_str(&format!(
            "subbot s{i}:\n  source: \"level{}.iter\"\n\n",
            k + 1
        ));
    }
    text.push_str(&format!("workflow w{k}:\n  entry: s0\n"));
    for i in 0..width {
        let next = if i + 1 < width {
            format!("s{}", i + 1)
        } else {
            "done".to_owned()
        };
        text.push_str(&format!("  s{i} -> {next}\n"));
    }
    text
}

/// The expanded tree is bounded (`ir::MAX_SUBBOT_RUNS`): a few lines naming the same child ten
/// times per level, six levels deep (10^6 child runs), are C910 at once, not an exponential
/// compile; a tree within the bound compiles and counts its runs.
#[test]
fn a_subbot_tree_past_the_run_bound_is_c910() {
    let leaf = "tool t:\n  command: `true`\n\nworkflow leaf:\n  entry: t\n  t -> done\n";
    let tree = |width: usize, depth: usize| -> Vec<(String, String)> {
        let mut files: Vec<(String, String)> = (0..depth)
            .map(|k| (format!("level{k}.iter"), wide_level(k, width)))
            .collect();
        files.push((format!("level{depth}.iter"), leaf.to_owned()));
        files
    };
    let compiled = |files: &[(String, String)]| {
        let refs: Vec<(&str, &str)> = files
            .iter()
            .map(|(n, t)| (n.as_str(), t.as_str()))
            .collect();
        compile_in_dir(&refs)
    };

    // 3 + 9 + 27 + 81 + 243 = 363 child runs: within the bound.
    let within = compiled(&tree(3, 5));
    assert_eq!(within.error_count(), 0, "{:?}", diags(&within));
    assert_eq!(within.workflow.as_ref().map(|w| w.subbot_runs), Some(363));

    let hostile = compiled(&tree(10, 6));
    let found: Vec<String> = hostile
        .diagnostics
        .iter()
        .filter(|d| d.code == Code::C910)
        .map(|d| d.message.clone())
        .collect();
    assert!(hostile.workflow.is_none());
    assert!(
        found
            .iter()
            .any(|m| m.contains("the subbot tree expands to more than 1000 child runs")),
        "{found:#?}"
    );
}

/// ATTACK: a `source` naming a file that is not a workflow (directly, or through a `.iter`
/// symlink a pull request can carry) is refused before it is read, so no line of it reaches the
/// diagnostics.
#[test]
fn a_source_that_is_not_a_workflow_file_is_never_read() {
    let dir = tempfile::tempdir().expect("temp dir");
    let secret = dir.path().join("token.txt");
    std::fs::write(&secret, "sk-live-SECRETVALUE\n").expect("write");
    std::os::unix::fs::symlink(&secret, dir.path().join("child.iter")).expect("symlink");
    for source in [secret.to_str().expect("utf-8"), "token.txt", "child.iter"] {
        std::fs::write(dir.path().join("p.iter"), parent(source, "")).expect("write");
        let compiled =
            compile_file(&dir.path().join("p.iter"), &CompileOptions::default()).expect("loads");
        let messages: Vec<String> = compiled
            .diagnostics
            .iter()
            .map(|d| d.message.clone())
            .collect();
        assert!(
            messages
                .iter()
                .any(|m| m.contains("is not a .iter or .bot file")
                    && m.starts_with("subbot \"sub\"")),
            "{source}: {messages:#?}"
        );
        assert!(
            !messages.iter().any(|m| m.contains("SECRETVALUE")),
            "{source}: the file's content leaked: {messages:#?}"
        );
    }
}

/// Issue 15 item 15: in a repository (`<outer>/repo` with `.git`), a subbot `source` that
/// resolves outside it — absolute, by `..`, through a symlinked file or a symlinked directory —
/// is C915 naming the source and the root, and nothing outside is read. A child inside (also
/// reached by `..` from a subdirectory, or through an inside symlink) compiles.
#[test]
fn a_repository_workflow_runs_only_children_inside_the_repository() {
    let outer = tempfile::tempdir().expect("temp dir");
    let root = outer.path().join("repo");
    std::fs::create_dir_all(root.join(".git")).expect("git dir");
    std::fs::create_dir_all(root.join("flows/lib")).expect("dirs");
    std::fs::create_dir_all(outer.path().join("host")).expect("host dir");
    std::fs::write(outer.path().join("host/evil.iter"), CHILD).expect("write");
    std::fs::write(root.join("flows/lib/ok.iter"), CHILD).expect("write");
    std::os::unix::fs::symlink(
        outer.path().join("host/evil.iter"),
        root.join("flows/link.iter"),
    )
    .expect("symlink");
    std::os::unix::fs::symlink(outer.path().join("host"), root.join("flows/hostdir"))
        .expect("symlink");
    std::os::unix::fs::symlink("lib/ok.iter", root.join("flows/inside.iter")).expect("symlink");
    let evil = outer.path().join("host/evil.iter");
    let canon_root = root.canonicalize().expect("canon");
    let with = "\n  start -> sub with { goal: \"g\" }";
    let compile_with = |src: &str| {
        let file = root.join("flows/p.iter");
        std::fs::write(&file, parent(src, "").replace("\n  start -> sub", with)).expect("write");
        compile_file(&file, &CompileOptions::default()).expect("root loads")
    };
    let outside = [
        evil.display().to_string(),
        "../../host/evil.iter".to_owned(),
        "lib/../../../host/evil.iter".to_owned(),
        "link.iter".to_owned(),
        "hostdir/evil.iter".to_owned(),
    ];
    for src in &outside {
        let c = compile_with(src);
        let codes: Vec<Code> = c.diagnostics.iter().map(|d| d.code).collect();
        assert_eq!(codes, vec![Code::C915], "{src}: {:#?}", c.diagnostics);
        let message = &c.diagnostics[0].message;
        assert!(
            message.contains(src.as_str())
                && message.contains(&format!("outside the repository {}", canon_root.display())),
            "{src}: {message}"
        );
        assert!(c.workflow.is_none(), "{src}");
    }
    for src in ["lib/ok.iter", "inside.iter", "../flows/lib/ok.iter"] {
        let c = compile_with(src);
        assert_eq!(diags(&c), vec![], "{src}");
        assert!(subbot_child(&c).is_some(), "{src}");
    }
}

/// Issue 15 item 12: a child `.iter` that is a FIFO, or a symlink to `/dev/stdin`, is C910 at
/// once (never read, never waited on) — in a repository and outside one.
#[test]
fn a_child_that_is_a_fifo_or_a_device_is_c910_at_once() {
    let started = std::time::Instant::now();
    for in_repo in [true, false] {
        let dir = tempfile::tempdir().expect("temp dir");
        if in_repo {
            std::fs::create_dir(dir.path().join(".git")).expect("git dir");
        }
        nix_mkfifo(&dir.path().join("fifo.iter"));
        std::os::unix::fs::symlink("/dev/stdin", dir.path().join("stdin.iter")).expect("symlink");
        for src in ["fifo.iter", "stdin.iter"] {
            let file = dir.path().join("p.iter");
            std::fs::write(&file, parent(src, "")).expect("write");
            let c = compile_file(&file, &CompileOptions::default()).expect("root loads");
            let codes: Vec<Code> = c.diagnostics.iter().map(|d| d.code).collect();
            assert!(
                codes == vec![Code::C910] || codes == vec![Code::C915],
                "{in_repo} {src}: {:#?}",
                c.diagnostics
            );
        }
    }
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
}

fn nix_mkfifo(path: &std::path::Path) {
    let status = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .expect("mkfifo");
    assert!(status.success());
}
