use super::*;

#[test]
fn every_driver_command_of_every_section_is_blanked() {
    let names = b"filter.lfs.clean\0filter.lfs.smudge\0diff.evil.textconv\0merge.m.driver\0filter.a.b.process\0core.editor\0";
    let out = driver_overrides(names);
    for want in [
        "filter.lfs.clean=",
        "filter.lfs.smudge=",
        "filter.lfs.process=",
        "filter.lfs.required=false",
        "diff.evil.textconv=",
        "diff.evil.command=",
        "merge.m.driver=",
        "filter.a.b.clean=",
    ] {
        assert!(out.iter().any(|o| o == want), "{want} missing from {out:?}");
    }
    assert!(!out.iter().any(|o| o.starts_with("core.")));
}

#[test]
fn driver_names_that_cannot_be_passed_back_are_skipped() {
    assert!(driver_overrides(b"filter.a=b.clean\0").is_empty());
    assert!(driver_overrides(b"filter.clean\0").is_empty());
}
