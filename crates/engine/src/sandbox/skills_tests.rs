use std::os::unix::fs::symlink;

use iterion_dsl::ir::Skill;
use pretty_assertions::assert_eq;

use super::{Mirrored, mirror, unmirror};

fn skill(name: &str, text: &str) -> Skill {
    Skill {
        name: name.to_owned(),
        text: text.to_owned(),
    }
}

#[test]
fn skills_are_written_once_and_the_workspaces_own_entry_wins() {
    let ws = tempfile::tempdir().unwrap();
    let dir = ws.path().join(".claude/skills");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("mine.md"), "the workspace's").unwrap();
    let done = mirror(
        ws.path(),
        &[skill("mine", "the bundle's"), skill("rules", "# Rules\n")],
        None,
    )
    .unwrap();
    assert_eq!(
        done,
        Mirrored {
            written: vec!["rules".into()],
            kept: vec!["mine".into()],
            made_dirs: 0,
        }
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("mine.md")).unwrap(),
        "the workspace's"
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("rules.md")).unwrap(),
        "# Rules\n"
    );
    // A second run (a resume) finds them there.
    let again = mirror(ws.path(), &[skill("rules", "changed")], None).unwrap();
    assert_eq!(again.kept, vec!["rules".to_owned()]);
    assert_eq!(
        std::fs::read_to_string(dir.join("rules.md")).unwrap(),
        "# Rules\n"
    );
}

#[test]
fn attack_a_symlinked_claude_dir_is_never_written_through() {
    // The checkout points .claude at a directory outside the workspace (the operator's own
    // ~/.claude, say): writing through it would plant files there.
    let ws = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    symlink(outside.path(), ws.path().join(".claude")).unwrap();
    let err = mirror(ws.path(), &[skill("rules", "x")], None).unwrap_err();
    assert!(err.contains("symbolic link"), "{err}");
    assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0);

    // The same one level down.
    let ws = tempfile::tempdir().unwrap();
    std::fs::create_dir(ws.path().join(".claude")).unwrap();
    symlink(outside.path(), ws.path().join(".claude/skills")).unwrap();
    let err = mirror(ws.path(), &[skill("rules", "x")], None).unwrap_err();
    assert!(err.contains("symbolic link"), "{err}");
    assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0);
}

#[test]
fn attack_a_symlink_in_a_skills_place_is_kept_not_followed() {
    let ws = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let target = outside.path().join("victim");
    std::fs::write(&target, "precious").unwrap();
    std::fs::create_dir_all(ws.path().join(".claude/skills")).unwrap();
    symlink(&target, ws.path().join(".claude/skills/rules.md")).unwrap();
    let done = mirror(ws.path(), &[skill("rules", "overwritten?")], None).unwrap();
    assert_eq!(done.kept, vec!["rules".to_owned()]);
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "precious");
}

#[test]
fn a_name_that_is_no_plain_file_name_is_refused() {
    let ws = tempfile::tempdir().unwrap();
    for bad in ["../up", ".hidden", ""] {
        assert!(
            mirror(ws.path(), &[skill(bad, "x")], None).is_err(),
            "{bad:?}"
        );
    }
}

#[test]
fn what_was_mirrored_is_taken_back_and_nothing_else() {
    let skills = [skill("rules", "# Rules\n"), skill("style", "short")];
    // A workspace with no .claude: afterwards it has none again.
    let ws = tempfile::tempdir().unwrap();
    let done = mirror(ws.path(), &skills, None).unwrap();
    assert_eq!(done.made_dirs, 2);
    assert!(unmirror(ws.path(), &skills, &done).is_empty());
    assert_eq!(std::fs::read_dir(ws.path()).unwrap().count(), 0);

    // A skill the run changed is its work and stays, with its directories; the unchanged one
    // goes.
    let ws = tempfile::tempdir().unwrap();
    let done = mirror(ws.path(), &skills, None).unwrap();
    let dir = ws.path().join(".claude/skills");
    std::fs::write(dir.join("rules.md"), "# Rules\nedited by the run\n").unwrap();
    assert_eq!(
        unmirror(ws.path(), &skills, &done),
        vec!["rules".to_owned()]
    );
    assert!(dir.join("rules.md").is_file());
    assert!(!dir.join("style.md").exists());

    // A .claude the workspace had (with its own files) is left, and so is its own skill.
    let ws = tempfile::tempdir().unwrap();
    std::fs::create_dir(ws.path().join(".claude")).unwrap();
    std::fs::write(ws.path().join(".claude/settings.json"), "{}").unwrap();
    let done = mirror(ws.path(), &skills, None).unwrap();
    assert_eq!(done.made_dirs, 1);
    unmirror(ws.path(), &skills, &done);
    assert!(ws.path().join(".claude/settings.json").is_file());
    assert!(!ws.path().join(".claude/skills").exists());
}

#[test]
fn attack_a_skills_dir_swapped_for_a_link_is_not_followed_when_taking_back() {
    // The run replaces .claude/skills by a link to a directory of the host holding a file of
    // the same name and bytes: taking back must not delete through it.
    let skills = [skill("rules", "same bytes")];
    let ws = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("rules.md"), "same bytes").unwrap();
    let done = mirror(ws.path(), &skills, None).unwrap();
    std::fs::remove_dir_all(ws.path().join(".claude/skills")).unwrap();
    symlink(outside.path(), ws.path().join(".claude/skills")).unwrap();
    unmirror(ws.path(), &skills, &done);
    assert_eq!(
        std::fs::read_to_string(outside.path().join("rules.md")).unwrap(),
        "same bytes"
    );
    // The same with the file itself swapped for a link to a host file of the same bytes.
    let ws = tempfile::tempdir().unwrap();
    let done = mirror(ws.path(), &skills, None).unwrap();
    let placed = ws.path().join(".claude/skills/rules.md");
    std::fs::remove_file(&placed).unwrap();
    symlink(outside.path().join("rules.md"), &placed).unwrap();
    assert_eq!(
        unmirror(ws.path(), &skills, &done),
        vec!["rules".to_owned()]
    );
    assert!(outside.path().join("rules.md").is_file());
}

#[test]
fn what_is_mirrored_into_a_copy_belongs_to_the_copys_owner() {
    use std::os::unix::fs::MetadataExt;
    // Only root can give a file away: the suite runs as root (as the engine does when it
    // makes an untrusted copy).
    let ws = tempfile::tempdir().unwrap();
    mirror(ws.path(), &[skill("rules", "x")], Some((65532, 65533))).unwrap();
    for rel in [".claude", ".claude/skills", ".claude/skills/rules.md"] {
        let meta = std::fs::symlink_metadata(ws.path().join(rel)).unwrap();
        assert_eq!((meta.uid(), meta.gid()), (65532, 65533), "{rel}");
    }
}

#[test]
fn a_mirror_that_fails_leaves_nothing_behind() {
    // A bad name is found before anything is written.
    let ws = tempfile::tempdir().unwrap();
    let err = mirror(ws.path(), &[skill("rules", "x"), skill("../up", "x")], None).unwrap_err();
    assert!(err.contains("not a skill file name"), "{err}");
    assert_eq!(std::fs::read_dir(ws.path()).unwrap().count(), 0);
    // A write that fails half-way (a name the file system refuses) takes back the first skill
    // and the directories it made.
    let long = "n".repeat(300);
    let err = mirror(ws.path(), &[skill("rules", "x"), skill(&long, "x")], None).unwrap_err();
    assert!(err.contains("bundle skills"), "{err}");
    assert_eq!(std::fs::read_dir(ws.path()).unwrap().count(), 0);
}
