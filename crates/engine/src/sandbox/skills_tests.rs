use std::os::unix::fs::symlink;

use iterion_dsl::ir::Skill;
use pretty_assertions::assert_eq;

use super::{Mirrored, mirror};

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
    )
    .unwrap();
    assert_eq!(
        done,
        Mirrored {
            written: vec!["rules".into()],
            kept: vec!["mine".into()],
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
    let again = mirror(ws.path(), &[skill("rules", "changed")]).unwrap();
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
    let err = mirror(ws.path(), &[skill("rules", "x")]).unwrap_err();
    assert!(err.contains("symbolic link"), "{err}");
    assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0);

    // The same one level down.
    let ws = tempfile::tempdir().unwrap();
    std::fs::create_dir(ws.path().join(".claude")).unwrap();
    symlink(outside.path(), ws.path().join(".claude/skills")).unwrap();
    let err = mirror(ws.path(), &[skill("rules", "x")]).unwrap_err();
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
    let done = mirror(ws.path(), &[skill("rules", "overwritten?")]).unwrap();
    assert_eq!(done.kept, vec!["rules".to_owned()]);
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "precious");
}

#[test]
fn a_name_that_is_no_plain_file_name_is_refused() {
    let ws = tempfile::tempdir().unwrap();
    for bad in ["../up", ".hidden", ""] {
        assert!(mirror(ws.path(), &[skill(bad, "x")]).is_err(), "{bad:?}");
    }
}
