use super::*;

#[test]
fn paths_are_quoted_so_no_name_can_end_a_command() {
    assert_eq!(quote_path(b"a b/c"), b"\"a b/c\"".to_vec());
    assert_eq!(
        quote_path(b"x\"\ny\\z\x01"),
        b"\"x\\\"\\ny\\\\z\\001\"".to_vec()
    );
}

#[test]
fn ls_tree_records_parse_with_any_path_bytes() {
    let out = b"100644 blob aaaa\ta b\x00160000 commit bbbb\tsub\x00120000 blob cccc\tl\nk\x00";
    let map = parse_ls_tree(out);
    assert_eq!(map.len(), 3);
    assert_eq!(map[&b"sub".to_vec()].mode, "160000");
    assert_eq!(map[&b"l\nk".to_vec()].object, "cccc");
}

#[test]
fn attack_every_spelling_of_dot_git_is_recognised() {
    for name in [
        ".git",
        ".GIT",
        ".Git",
        ".git.",
        ".git ",
        ".git. .",
        "git~1",
        "GIT~1",
        ".g\u{200c}it",
        "\u{feff}.git",
    ] {
        assert!(is_git_dir_name(name.as_bytes()), "{name:?}");
    }
    for name in [".github", ".gitx", "git", "a.git", ".gitignore"] {
        assert!(!is_git_dir_name(name.as_bytes()), "{name:?}");
    }
}
