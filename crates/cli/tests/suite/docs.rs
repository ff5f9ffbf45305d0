//! The user docs in `docs/` against the code: every diagnostic code the compiler can emit has its
//! heading in `docs/language.md`, every `ITERION_*` variable the code reads has its heading in
//! `docs/sandbox.md`, and every command and long flag clap knows has its section in
//! `docs/cli.md`. A new code, variable, command or flag without docs fails here. Each check is a
//! pure function over (names, document) so that the tests below also show it reports a missing
//! name.
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use pretty_assertions::assert_eq;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn doc(name: &str) -> String {
    let path = root().join("docs").join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The text of every Markdown heading of `doc`, without the `#`s and backticks.
fn headings(doc: &str) -> Vec<(usize, String)> {
    let mut in_fence = false;
    let mut out = Vec::new();
    for line in doc.lines() {
        if line.trim_start().starts_with("```") {
            in_fence = !in_fence;
            continue;
        }
        if in_fence || !line.starts_with('#') {
            continue;
        }
        let level = line.chars().take_while(|c| *c == '#').count();
        let text: String = line[level..].chars().filter(|c| *c != '`').collect();
        out.push((level, text.trim().to_owned()));
    }
    out
}

/// The names of `wanted` that no heading of `doc` spells exactly.
fn missing_headings<'a>(wanted: impl IntoIterator<Item = &'a str>, doc: &str) -> Vec<String> {
    let have: BTreeSet<String> = headings(doc).into_iter().map(|(_, t)| t).collect();
    wanted
        .into_iter()
        .filter(|w| !have.contains(*w))
        .map(str::to_owned)
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect()
}

// ---------------------------------------------------------------------------------------------
// docs/language.md: diagnostic codes

/// Every `Code::Xnnn` the dsl crate's sources name (so a variant left out of `Code::ALL` still
/// counts), with `Code::ALL`.
fn emitted_codes() -> BTreeSet<String> {
    let mut codes: BTreeSet<String> = iterion_dsl::Code::ALL
        .iter()
        .map(|c| c.as_str().to_owned())
        .collect();
    for file in rust_files(&root().join("crates/dsl/src")) {
        let text = std::fs::read_to_string(&file).unwrap();
        let mut rest = text.as_str();
        while let Some(at) = rest.find("Code::") {
            rest = &rest[at + "Code::".len()..];
            let name: String = rest
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric())
                .collect();
            let b = name.as_bytes();
            if b.len() == 4
                && (b[0] == b'E' || b[0] == b'C')
                && b[1..].iter().all(u8::is_ascii_digit)
            {
                codes.insert(name);
            }
        }
    }
    codes
}

/// Headings of `doc` that look like a code (`E001`, `C044`).
fn code_headings(doc: &str) -> BTreeSet<String> {
    headings(doc)
        .into_iter()
        .map(|(_, t)| t)
        .filter(|t| {
            let b = t.as_bytes();
            b.len() == 4 && (b[0] == b'E' || b[0] == b'C') && b[1..].iter().all(u8::is_ascii_digit)
        })
        .collect()
}

#[test]
fn docs_language_md_documents_every_diagnostic_code() {
    let codes = emitted_codes();
    assert!(codes.len() >= 78, "the scan found too few codes: {codes:?}");
    let doc = doc("language.md");
    assert_eq!(
        missing_headings(codes.iter().map(String::as_str), &doc),
        Vec::<String>::new(),
        "each code needs a `### CODE` heading in docs/language.md (what triggers it, how to fix it)"
    );
    let stale: Vec<String> = code_headings(&doc).difference(&codes).cloned().collect();
    assert_eq!(
        stale,
        Vec::<String>::new(),
        "docs/language.md documents codes the compiler does not have"
    );
}

#[test]
fn docs_code_check_reports_a_missing_code() {
    let doc = "# Diagnostics\n\n### E001\n\ntext\n\n```\n### C044\n```\n";
    assert_eq!(
        missing_headings(["E001", "C044", "C999"], doc),
        vec!["C044".to_owned(), "C999".to_owned()],
        "a heading inside a code block does not count"
    );
}

// ---------------------------------------------------------------------------------------------
// docs/sandbox.md: environment variables

/// Every `.rs` file under `dir`.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

/// Whether `path` holds tests only (`tests/`, `*_tests.rs`, `tests.rs`, the fixtures crate).
fn is_test_file(path: &Path) -> bool {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    name.ends_with("_tests.rs")
        || name == "tests.rs"
        || path
            .components()
            .any(|c| c.as_os_str() == "tests" || c.as_os_str() == "test-support")
}

/// The `"ITERION_…"` string literals of `text` before its first `#[cfg(test)]` (the house puts
/// a file's unit tests last).
fn iterion_literals(text: &str) -> BTreeSet<String> {
    let code = match text.find("#[cfg(test)]") {
        Some(at) => &text[..at],
        None => text,
    };
    let mut out = BTreeSet::new();
    let mut rest = code;
    while let Some(at) = rest.find("\"ITERION_") {
        rest = &rest[at + 1..];
        let name: String = rest
            .chars()
            .take_while(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == '_')
            .collect();
        // `"ITERION_"` alone is a prefix (the devcontainer env deny class), not a variable.
        if rest[name.len()..].starts_with('"') && !name.ends_with('_') {
            out.insert(name);
        }
    }
    out
}

/// The `ITERION_…` words of a shell script (`${ITERION_X:-…}`, comments included).
fn iterion_words(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut rest = text;
    while let Some(at) = rest.find("ITERION_") {
        let before = text.len() - rest.len() + at;
        rest = &rest[at..];
        let name: String = rest
            .chars()
            .take_while(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == '_')
            .collect();
        rest = &rest[name.len()..];
        let glued = text[..before]
            .chars()
            .next_back()
            .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_');
        if !glued && !name.ends_with('_') {
            out.insert(name);
        }
    }
    out
}

/// Every `ITERION_*` name a non-test source of the workspace's crates names as a literal, and
/// every one the scripts under `scripts/` use.
fn variables_read() -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut stack = vec![root().join("scripts")];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "sh") {
                names.extend(iterion_words(&std::fs::read_to_string(&path).unwrap()));
            }
        }
    }
    let crates = root().join("crates");
    for entry in std::fs::read_dir(&crates).unwrap() {
        let src = entry.unwrap().path().join("src");
        if !src.is_dir() {
            continue;
        }
        for file in rust_files(&src) {
            if is_test_file(file.strip_prefix(&crates).unwrap()) {
                continue;
            }
            names.extend(iterion_literals(&std::fs::read_to_string(&file).unwrap()));
        }
    }
    names
}

#[test]
fn docs_sandbox_md_documents_every_iterion_variable() {
    let names = variables_read();
    // The scan itself must see the variables everyone knows.
    for known in [
        "ITERION_HOME",
        "ITERION_STORE_URL",
        "ITERION_SANDBOX_DEFAULT",
    ] {
        assert!(names.contains(known), "the scan missed {known}: {names:?}");
    }
    assert_eq!(
        missing_headings(names.iter().map(String::as_str), &doc("sandbox.md")),
        Vec::<String>::new(),
        "each ITERION_* variable the code reads needs a heading of its own in docs/sandbox.md \
         (values, default, effect)"
    );
}

#[test]
fn docs_variable_check_reports_a_missing_variable() {
    let source = "const A: &str = \"ITERION_A\";\nlet b = env.get(\"ITERION_B_X\");\n\
                  let f = format!(\"ITERION_GATEWAY_{}\", p);\n\
                  let deny = [\"ITERION_\"];\n\
                  #[cfg(test)]\nmod tests { const T: &str = \"ITERION_TEST_ONLY\"; }\n";
    let names = iterion_literals(source);
    assert_eq!(
        names.iter().map(String::as_str).collect::<Vec<_>>(),
        vec!["ITERION_A", "ITERION_B_X"]
    );
    // A heading for a longer name does not document a shorter one.
    let doc = "## Variables\n\n### `ITERION_A_LONGER`\n\n### `ITERION_B_X`\n";
    assert_eq!(
        missing_headings(names.iter().map(String::as_str), doc),
        vec!["ITERION_A".to_owned()]
    );
    assert!(is_test_file(Path::new(
        "engine/src/executor/input_tests.rs"
    )));
    assert!(is_test_file(Path::new("test-support/src/lib.rs")));
    let script = "# ITERION_DOC_ONLY is read below\nreadonly X=\"${ITERION_CACHE:-/var}\"\n\
                  Y=MY_ITERION_OTHER; Z=ITERION_\n";
    assert_eq!(
        iterion_words(script).into_iter().collect::<Vec<_>>(),
        vec!["ITERION_CACHE".to_owned(), "ITERION_DOC_ONLY".to_owned()]
    );
    assert!(!is_test_file(Path::new("engine/src/executor/input.rs")));
}

// ---------------------------------------------------------------------------------------------
// docs/cli.md: commands and flags

/// Every (command path, its long flags) of `cmd`, hidden commands included; clap's own `help`
/// subcommand and `--help`/`--version` excepted.
fn commands_and_flags(cmd: &clap::Command, prefix: &str, out: &mut Vec<(String, Vec<String>)>) {
    let path = if prefix.is_empty() {
        cmd.get_name().to_owned()
    } else {
        format!("{prefix} {}", cmd.get_name())
    };
    let flags = cmd
        .get_arguments()
        .filter_map(|a| a.get_long())
        .filter(|l| *l != "help" && *l != "version")
        .map(|l| format!("--{l}"))
        .collect();
    out.push((path.clone(), flags));
    for sub in cmd.get_subcommands() {
        if sub.get_name() != "help" {
            commands_and_flags(sub, &path, out);
        }
    }
}

/// The body of the section whose heading is exactly `title`: up to the next heading of the same
/// or a higher level.
fn section<'d>(doc: &'d str, title: &str) -> Option<&'d str> {
    let mut start = None;
    let mut level = 0;
    let mut offset = 0;
    let mut in_fence = false;
    for line in doc.split_inclusive('\n') {
        let here = offset;
        offset += line.len();
        if line.trim_start().starts_with("```") {
            in_fence = !in_fence;
            continue;
        }
        if in_fence || !line.starts_with('#') {
            continue;
        }
        let l = line.chars().take_while(|c| *c == '#').count();
        let text: String = line[l..].chars().filter(|c| *c != '`').collect();
        match start {
            None if text.trim() == title => {
                start = Some(offset);
                level = l;
            }
            Some(s) if l <= level => return Some(&doc[s..here]),
            _ => {}
        }
    }
    start.map(|s| &doc[s..])
}

/// What `doc` lacks: a `## iterion CMD` section per command, and in it a `### --flag` heading
/// per long flag.
fn cli_gaps(commands: &[(String, Vec<String>)], doc: &str) -> Vec<String> {
    let mut gaps = Vec::new();
    for (path, flags) in commands {
        if path == "iterion" {
            continue;
        }
        let Some(body) = section(doc, path) else {
            gaps.push(format!("no `## {path}` section"));
            continue;
        };
        let documented: BTreeSet<String> = headings(body).into_iter().map(|(_, t)| t).collect();
        for flag in flags {
            if !documented.contains(flag) {
                gaps.push(format!("{path}: no `### {flag}` heading"));
            }
        }
    }
    gaps
}

fn the_cli() -> Vec<(String, Vec<String>)> {
    use clap::CommandFactory as _;
    let mut out = Vec::new();
    commands_and_flags(&super::cli_src::args::Cli::command(), "", &mut out);
    out
}

#[test]
fn docs_cli_md_documents_every_command_and_long_flag() {
    let commands = the_cli();
    // The walk must see the commands and flags everyone knows.
    let names: Vec<&str> = commands.iter().map(|(p, _)| p.as_str()).collect();
    for known in [
        "iterion run",
        "iterion sandbox doctor",
        "iterion __egress-bridge",
    ] {
        assert!(names.contains(&known), "the walk missed {known}: {names:?}");
    }
    let run = commands.iter().find(|(p, _)| p == "iterion run").unwrap();
    assert!(run.1.contains(&"--sandbox-env".to_owned()), "{run:?}");
    assert_eq!(
        cli_gaps(&commands, &doc("cli.md")),
        Vec::<String>::new(),
        "docs/cli.md needs a `## iterion CMD` section per command and a `### --flag` heading in \
         it per long flag"
    );
    // The exit codes the binary uses are each explained.
    let cli = doc("cli.md");
    let exits = section(&cli, "Exit codes").expect("an `## Exit codes` section");
    for code in ["| 0 |", "| 1 |", "| 2 |", "| 3 |"] {
        assert!(exits.contains(code), "exit code row {code} missing");
    }
}

#[test]
fn docs_cli_check_reports_a_missing_command_or_flag() {
    let commands = vec![
        ("iterion".to_owned(), vec![]),
        (
            "iterion run".to_owned(),
            vec!["--sandbox".to_owned(), "--sandbox-env".to_owned()],
        ),
        ("iterion ps".to_owned(), vec![]),
        ("iterion logs".to_owned(), vec!["--follow".to_owned()]),
    ];
    let doc = "# CLI\n\n## `iterion run`\n\n### `--sandbox-env`\n\nText.\n\n\
               ## `iterion logs`\n\n```\n### --follow\n```\n\n## `iterion other`\n\n### `--sandbox`\n";
    assert_eq!(
        cli_gaps(&commands, doc),
        vec![
            "iterion run: no `### --sandbox` heading".to_owned(),
            "no `## iterion ps` section".to_owned(),
            "iterion logs: no `### --follow` heading".to_owned(),
        ]
    );
}

// ---------------------------------------------------------------------------------------------
// README.md and docs/: links stay inside the repository and land

/// GitHub's anchor for a heading text: lower case, punctuation dropped, spaces as hyphens.
fn slug(heading: &str) -> String {
    heading
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-' || *c == '_')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The targets of the Markdown links `[text](target)` of `doc`, outside code.
fn link_targets(doc: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut in_fence = false;
    for line in doc.lines() {
        if line.trim_start().starts_with("```") {
            in_fence = !in_fence;
            continue;
        }
        if in_fence {
            continue;
        }
        let mut rest = line;
        while let Some(at) = rest.find("](") {
            rest = &rest[at + 2..];
            if let Some(end) = rest.find(')') {
                out.push(rest[..end].to_owned());
                rest = &rest[end..];
            }
        }
    }
    out
}

/// What is wrong with the links of the document at `path` (text `doc`): a pointer outside the
/// repository, a file that does not exist, an anchor no heading makes.
fn link_problems(path: &Path, doc: &str, repo: &Path) -> Vec<String> {
    let mut problems = Vec::new();
    for needle in ["shared/design", "../shared"] {
        if doc.contains(needle) {
            problems.push(format!("{}: mentions {needle}", path.display()));
        }
    }
    let repo = repo.canonicalize().unwrap();
    for target in link_targets(doc) {
        if target.starts_with("http://") || target.starts_with("https://") {
            continue;
        }
        let (file, anchor) = match target.split_once('#') {
            Some((f, a)) => (f, Some(a)),
            None => (target.as_str(), None),
        };
        let linked = if file.is_empty() {
            path.to_path_buf()
        } else {
            path.parent().unwrap().join(file)
        };
        let Ok(real) = linked.canonicalize() else {
            problems.push(format!("{}: {target}: no such file", path.display()));
            continue;
        };
        if !real.starts_with(&repo) {
            problems.push(format!(
                "{}: {target}: outside the repository",
                path.display()
            ));
            continue;
        }
        if let Some(anchor) = anchor {
            let text = std::fs::read_to_string(&real).unwrap_or_default();
            if !headings(&text).iter().any(|(_, h)| slug(h) == anchor) {
                problems.push(format!("{}: {target}: no such heading", path.display()));
            }
        }
    }
    problems
}

#[test]
fn docs_links_stay_inside_the_repository_and_land() {
    let repo = root();
    let mut files = vec![repo.join("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(repo.join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    files.extend(docs);
    let mut problems = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        problems.extend(link_problems(file, &text, &repo));
    }
    assert_eq!(problems, Vec::<String>::new());
    let readme = std::fs::read_to_string(repo.join("README.md")).unwrap();
    for doc in [
        "language.md",
        "cli.md",
        "sandbox.md",
        "security.md",
        "cloud.md",
        "subbots.md",
    ] {
        assert!(
            readme.contains(&format!("](docs/{doc})")),
            "README.md links docs/{doc}"
        );
    }
}

#[test]
fn docs_link_check_reports_bad_links() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    std::fs::create_dir_all(repo.join("docs")).unwrap();
    std::fs::write(repo.join("docs/a.md"), "# A\n\n## The `--sandbox` flag\n").unwrap();
    std::fs::write(dir.path().join("outside.md"), "# Out\n").unwrap();
    let doc = "See [a](docs/a.md#the---sandbox-flag), [b](docs/a.md#nope), [c](docs/b.md),\n\
               [d](../outside.md), [e](#here), [f](https://example.com/x) and ../shared/design.\n\
               \n## Here\n\n```\n[g](docs/none.md)\n```\n";
    let readme = repo.join("README.md");
    std::fs::write(&readme, doc).unwrap();
    let shown = readme.display().to_string();
    assert_eq!(
        link_problems(&readme, doc, &repo),
        vec![
            format!("{shown}: mentions shared/design"),
            format!("{shown}: mentions ../shared"),
            format!("{shown}: docs/a.md#nope: no such heading"),
            format!("{shown}: docs/b.md: no such file"),
            format!("{shown}: ../outside.md: outside the repository"),
        ]
    );
}

// ---------------------------------------------------------------------------------------------
// docs/cli.md: event types

/// The event types `Event::kind` spells (`crates/engine/src/records/events.rs`): the string of
/// every arm of its match.
fn event_kinds(source: &str) -> BTreeSet<String> {
    let Some(start) = source.find("pub fn kind(&self)") else {
        return BTreeSet::new();
    };
    let body = &source[start..];
    let body = &body[..body.find("\n    }\n").unwrap_or(body.len())];
    body.split("=> \"")
        .skip(1)
        .filter_map(|arm| arm.split_once('"').map(|(kind, _)| kind.to_owned()))
        .collect()
}

#[test]
fn docs_cli_md_documents_every_event_type() {
    let source =
        std::fs::read_to_string(root().join("crates/engine/src/records/events.rs")).unwrap();
    let kinds = event_kinds(&source);
    for known in ["run_started", "sandbox_started", "network_blocked"] {
        assert!(kinds.contains(known), "the scan missed {known}: {kinds:?}");
    }
    let cli = doc("cli.md");
    let events = section(&cli, "iterion events").expect("an `## iterion events` section");
    let missing: Vec<&String> = kinds
        .iter()
        .filter(|k| !events.contains(&format!("`{k}`")))
        .collect();
    assert_eq!(
        missing,
        Vec::<&String>::new(),
        "each event type needs a row in the `iterion events` section of docs/cli.md"
    );
}

#[test]
fn docs_event_scan_reads_the_kind_match_only() {
    let source = "impl Event {\n    pub fn kind(&self) -> &'static str {\n        match self {\n            \
                  Event::A(_) => \"a_b\",\n            Event::C(_) => \"c\",\n        }\n    }\n\n    \
                  pub fn other(&self) -> &str {\n        match self { _ => \"not_a_kind\" }\n    }\n}\n";
    assert_eq!(
        event_kinds(source).into_iter().collect::<Vec<_>>(),
        vec!["a_b".to_owned(), "c".to_owned()]
    );
}

// ---------------------------------------------------------------------------------------------
// docs/: complete examples compile

/// The bodies of the code blocks of `doc` fenced with ```` ```iter ````.
fn iter_examples(doc: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current: Option<String> = None;
    for line in doc.lines() {
        match &mut current {
            None if line.trim_end() == "```iter" => current = Some(String::new()),
            Some(_) if line.trim_start().starts_with("```") => out.extend(current.take()),
            Some(body) => {
                body.push_str(line);
                body.push('\n');
            }
            None => {}
        }
    }
    out
}

#[test]
fn docs_iter_examples_compile_without_errors() {
    let opts = iterion_dsl::CompileOptions {
        ask_user_in_sandbox: true,
    };
    let mut seen = 0;
    for name in ["language.md", "sandbox.md", "cli.md"] {
        for example in iter_examples(&doc(name)) {
            seen += 1;
            let compiled = iterion_dsl::compile(example.as_bytes(), &opts);
            let errors: Vec<String> = compiled
                .diagnostics
                .iter()
                .filter(|d| d.is_error())
                .map(|d| format!("{}:{}: {} {}", d.span.line, d.span.col, d.code, d.message))
                .collect();
            assert_eq!(
                errors,
                Vec::<String>::new(),
                "docs/{name} example:\n{example}"
            );
        }
    }
    assert!(seen >= 2, "the ```iter examples were not found");
}

#[test]
fn docs_example_scan_finds_iter_fences_only() {
    let doc = "```\nnot me\n```\n\n```iter\nworkflow w:\n  entry: a\n```\n\n```iter\nbad ->\n```\n";
    let examples = iter_examples(doc);
    assert_eq!(examples, vec!["workflow w:\n  entry: a\n", "bad ->\n"]);
    let compiled = iterion_dsl::compile(examples[1].as_bytes(), &Default::default());
    assert!(compiled.error_count() > 0, "a broken example is reported");
}
