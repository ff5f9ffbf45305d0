use std::os::unix::fs::PermissionsExt;

use super::*;

#[tokio::test]
async fn the_copy_keeps_content_and_links_and_drops_privilege_bits_hooks_and_config() {
    let src = tempfile::tempdir().unwrap();
    let dst_parent = tempfile::tempdir().unwrap();
    let dst = dst_parent.path().join("copy");
    let s = src.path();
    std::fs::create_dir_all(s.join("dir/sub")).unwrap();
    std::fs::write(s.join("dir/sub/f.txt"), "hello").unwrap();
    std::fs::write(s.join("suid"), "x").unwrap();
    std::fs::set_permissions(s.join("suid"), std::fs::Permissions::from_mode(0o4755)).unwrap();
    std::os::unix::fs::symlink("/etc/shadow", s.join("link")).unwrap();
    nix::unistd::mkfifo(
        &s.join("fifo"),
        nix::sys::stat::Mode::from_bits_truncate(0o644),
    )
    .unwrap();
    std::fs::create_dir_all(s.join(".git/hooks")).unwrap();
    std::fs::write(s.join(".git/hooks/pre-commit"), "evil").unwrap();
    std::fs::write(
        s.join(".git/config"),
        "[remote \"o\"]\n\turl = https://token@host/x\n",
    )
    .unwrap();
    std::fs::write(s.join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();

    let stats = copy_workspace(s, &dst, None).await.unwrap();
    assert_eq!(
        std::fs::read_to_string(dst.join("dir/sub/f.txt")).unwrap(),
        "hello"
    );
    assert_eq!(
        std::fs::metadata(dst.join("suid"))
            .unwrap()
            .permissions()
            .mode()
            & 0o7777,
        0o755
    );
    assert_eq!(
        std::fs::read_link(dst.join("link")).unwrap(),
        Path::new("/etc/shadow")
    );
    assert!(!dst.join("fifo").exists());
    assert!(!dst.join(".git/hooks").exists());
    assert_eq!(
        std::fs::read_to_string(dst.join(".git/config")).unwrap(),
        MINIMAL_GIT_CONFIG
    );
    assert_eq!(
        std::fs::read_to_string(dst.join(".git/HEAD")).unwrap(),
        "ref: refs/heads/main\n"
    );
    assert_eq!(stats.skipped, 1);
}

#[tokio::test]
async fn attack_a_gitfile_naming_a_key_dir_copies_nothing_of_it() {
    let src = tempfile::tempdir().unwrap();
    let keys = tempfile::tempdir().unwrap();
    std::fs::write(keys.path().join("id_rsa"), "PRIVATE").unwrap();
    std::fs::write(
        src.path().join(".git"),
        format!("gitdir: {}\n", keys.path().display()),
    )
    .unwrap();
    let dst_parent = tempfile::tempdir().unwrap();
    let dst = dst_parent.path().join("copy");
    copy_workspace(src.path(), &dst, None).await.unwrap();
    assert!(!dst.join(".git").exists());
}
