use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use iterion_dsl::ir::Workflow;
use pretty_assertions::assert_eq;

use super::*;

fn workflow(decls: &str) -> Workflow {
    let src =
        format!("{decls}\ntool t:\n  command: `true`\n\nworkflow w:\n  entry: t\n  t -> done\n");
    let compiled = iterion_dsl::compile(src.as_bytes(), &Default::default());
    compiled.workflow.expect("the test workflow compiles")
}

const DECLS: &str = "attachments:\n  spec: file\n  logo: image\n";

fn source(name: &str, path: &Path) -> AttachmentSource {
    AttachmentSource {
        name: name.to_owned(),
        path: path.to_owned(),
    }
}

#[test]
fn staged_files_are_copied_read_only_with_their_size_hash_and_type() {
    let src = tempfile::tempdir().unwrap();
    let spec = src.path().join("my spec;$(rm).txt");
    std::fs::write(&spec, "hello").unwrap();
    let logo = src.path().join("logo.png");
    std::fs::write(&logo, b"\x89PNG\r\n\x1a\nrest").unwrap();
    let staged = stage(
        &workflow(DECLS),
        &[source("spec", &spec), source("logo", &logo)],
    )
    .unwrap();
    let home = tempfile::tempdir().unwrap();
    let dir = run_dir(home.path(), "r1");
    let records = staged.copy_into(&dir).unwrap();
    assert_eq!(
        records[0],
        AttachmentRecord {
            name: "spec".into(),
            file: "my_spec___rm_.txt".into(),
            size: 5,
            sha256: "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824".into(),
            mime: "text/plain".into(),
        }
    );
    assert_eq!(records[1].mime, "image/png");
    let copy = dir.join("spec").join("my_spec___rm_.txt");
    assert_eq!(std::fs::read_to_string(&copy).unwrap(), "hello");
    assert_eq!(
        std::fs::metadata(&copy).unwrap().permissions().mode() & 0o777,
        0o444
    );
    assert_eq!(load(&dir), records);
    let scope = scope(&records, CONTAINER_DIR);
    assert_eq!(
        scope["spec"]["path"],
        "/run/iterion/attachments/spec/my_spec___rm_.txt"
    );
    assert_eq!(scope["logo"]["size"], 12);
}

#[test]
fn a_symlink_as_the_source_is_refused() {
    let src = tempfile::tempdir().unwrap();
    let secret = src.path().join("id_rsa");
    std::fs::write(&secret, "PRIVATE").unwrap();
    let link = src.path().join("spec.txt");
    std::os::unix::fs::symlink(&secret, &link).unwrap();
    let err = stage(&workflow(DECLS), &[source("spec", &link)]).unwrap_err();
    assert!(matches!(err, AttachmentError::Symlink { .. }), "{err}");
}

#[test]
fn a_symlinked_directory_on_the_way_is_refused() {
    let src = tempfile::tempdir().unwrap();
    let real = src.path().join("real");
    std::fs::create_dir(&real).unwrap();
    std::fs::write(real.join("spec.txt"), "x").unwrap();
    std::os::unix::fs::symlink(&real, src.path().join("docs")).unwrap();
    let err = stage(
        &workflow(DECLS),
        &[source("spec", &src.path().join("docs/spec.txt"))],
    )
    .unwrap_err();
    match err {
        AttachmentError::Symlink { link, .. } => assert_eq!(link, src.path().join("docs")),
        other => panic!("{other}"),
    }
}

#[test]
fn a_directory_or_fifo_is_not_a_regular_file() {
    let src = tempfile::tempdir().unwrap();
    let fifo = src.path().join("fifo");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
    for path in [src.path().to_owned(), fifo] {
        let err = stage(&workflow(DECLS), &[source("spec", &path)]).unwrap_err();
        assert!(matches!(err, AttachmentError::NotRegular { .. }), "{err}");
    }
}

#[test]
fn a_file_over_the_bound_is_refused_before_it_is_read() {
    let src = tempfile::tempdir().unwrap();
    let big = src.path().join("big.bin");
    let file = std::fs::File::create(&big).unwrap();
    file.set_len(MAX_FILE_BYTES + 1).unwrap();
    let err = stage(&workflow(DECLS), &[source("spec", &big)]).unwrap_err();
    assert!(matches!(err, AttachmentError::TooLarge { .. }), "{err}");
}

#[test]
fn names_must_be_declared_once_and_required_ones_given() {
    let src = tempfile::tempdir().unwrap();
    let f = src.path().join("a.txt");
    std::fs::write(&f, "a").unwrap();
    let wf = workflow(DECLS);
    let err = stage(&wf, &[source("nope", &f)]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "--attach nope: the workflow declares no attachment \"nope\" (declared: spec, logo)"
    );
    let err = stage(&wf, &[source("spec", &f), source("spec", &f)]).unwrap_err();
    assert!(matches!(err, AttachmentError::Duplicate { .. }), "{err}");
    let required = workflow("attachments:\n  spec: file\n    required: true\n");
    let err = stage(&required, &[]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "attachment spec is required; pass --attach spec=PATH"
    );
}

#[test]
fn the_declared_types_are_enforced() {
    let src = tempfile::tempdir().unwrap();
    let text = src.path().join("a.txt");
    std::fs::write(&text, "plain").unwrap();
    let err = stage(&workflow(DECLS), &[source("logo", &text)]).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "--attach logo: {} looks like text/plain, and the attachment accepts image/*",
            text.display()
        )
    );
    let pdf_only = workflow("attachments:\n  spec: file\n    accept_mime: [\"application/pdf\"]\n");
    assert!(stage(&pdf_only, &[source("spec", &text)]).is_err());
    let pdf = src.path().join("a.pdf");
    std::fs::write(&pdf, "%PDF-1.7").unwrap();
    assert!(stage(&pdf_only, &[source("spec", &pdf)]).is_ok());
}

#[test]
fn hostile_file_names_become_plain_ones() {
    for (given, kept) in [
        ("../../etc/passwd", "passwd"),
        ("..", "attachment"),
        (".bashrc", "_bashrc"),
        ("a\nb\u{1b}[31m.txt", "a_b__31m.txt"),
        ("é.txt", "_.txt"),
    ] {
        assert_eq!(safe_file_name(Path::new(given)), kept, "{given:?}");
    }
    assert_eq!(safe_file_name(Path::new(&"x".repeat(300))).len(), 100);
}

#[test]
fn the_cli_argument_is_name_equals_path() {
    let cwd = Path::new("/work");
    assert_eq!(
        AttachmentSource::parse("spec=docs/a.pdf", cwd).unwrap(),
        source("spec", Path::new("/work/docs/a.pdf"))
    );
    assert!(AttachmentSource::parse("spec", cwd).is_err());
    assert!(AttachmentSource::parse("=x", cwd).is_err());
}
