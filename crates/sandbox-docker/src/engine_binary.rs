//! The engine-binary check of Prepare (SANDBOX.md §4.3 step 6, §8.4): the `iterion` the engine
//! binds at `/run/iterion/bin/iterion` must be a regular, executable ELF for the image's
//! architecture, or every in-sandbox command would fail later with a less helpful `exec format
//! error`. [`elf_problem`] judges a header (pure); [`check_engine_binary`] reads it.

use std::path::Path;

use iterion_sandbox::{EngineMount, Error, Result, Spec};
use tokio::io::AsyncReadExt;

/// The purpose the engine gives the engine-binary mount (SANDBOX.md §8 step M8).
pub const ENGINE_BINARY_PURPOSE: &str = "engine-binary";

/// The ELF `e_machine` of an image architecture, for the architectures we know.
fn machine_of(architecture: &str) -> Option<(u16, &'static str)> {
    match architecture {
        "amd64" | "x86_64" => Some((0x3E, "x86_64")),
        "arm64" | "aarch64" => Some((0xB7, "aarch64")),
        "386" | "i386" => Some((0x03, "x86")),
        "arm" => Some((0x28, "arm")),
        "riscv64" => Some((0xF3, "riscv64")),
        "s390x" => Some((0x16, "s390x")),
        "ppc64le" => Some((0x15, "ppc64")),
        _ => None,
    }
}

/// Why the first bytes `header` of the engine binary cannot run in an image of `architecture`,
/// or `None`. An architecture we do not know is not judged.
pub fn elf_problem(header: &[u8], architecture: &str) -> Option<String> {
    if header.len() < 20 || header[..4] != [0x7f, b'E', b'L', b'F'] {
        return Some("not an ELF executable (a Linux build of iterion is needed)".to_owned());
    }
    let machine = match header[5] {
        1 => u16::from_le_bytes([header[18], header[19]]),
        2 => u16::from_be_bytes([header[18], header[19]]),
        _ => return Some("ELF header with an unknown byte order".to_owned()),
    };
    let (want, name) = machine_of(architecture)?;
    (machine != want).then(|| {
        format!("built for ELF machine {machine:#x}, but the image is {architecture} ({name})")
    })
}

/// The spec's engine-binary mount, if the engine planned one.
pub(crate) fn engine_binary_mount(spec: &Spec) -> Option<&EngineMount> {
    spec.engine_mounts
        .iter()
        .find(|mount| mount.purpose == ENGINE_BINARY_PURPOSE)
}

/// Checks the spec's engine binary (if any) against the image's architecture.
///
/// # Errors
///
/// [`Error::EngineBinary`] naming the binary (and `ITERION_BIN`, which chooses it).
pub(crate) async fn check_engine_binary(spec: &Spec, architecture: &str) -> Result<()> {
    let Some(mount) = engine_binary_mount(spec) else {
        return Ok(());
    };
    let path = Path::new(&mount.source);
    let refuse = |reason: String| Error::EngineBinary {
        path: path.to_owned(),
        reason,
    };
    let meta = tokio::fs::metadata(path)
        .await
        .map_err(|e| refuse(format!("cannot read it: {e}")))?;
    use std::os::unix::fs::PermissionsExt;
    if !meta.is_file() || meta.permissions().mode() & 0o111 == 0 {
        return Err(refuse("not a regular executable file".to_owned()));
    }
    let mut header = [0u8; 20];
    let mut file = tokio::fs::File::open(path)
        .await
        .map_err(|e| refuse(format!("cannot read it: {e}")))?;
    let mut read = 0;
    while read < header.len() {
        match file.read(&mut header[read..]).await {
            Ok(0) => break,
            Ok(n) => read += n,
            Err(e) => return Err(refuse(format!("cannot read it: {e}"))),
        }
    }
    match elf_problem(&header[..read], architecture) {
        None => Ok(()),
        Some(reason) => Err(refuse(reason)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use iterion_sandbox::EngineMountKind;
    use pretty_assertions::assert_eq;

    fn header(class_data: u8, machine: u16) -> Vec<u8> {
        let mut h = vec![0x7f, b'E', b'L', b'F', 2, class_data, 1, 0];
        h.extend([0; 10]);
        let bytes = if class_data == 1 {
            machine.to_le_bytes()
        } else {
            machine.to_be_bytes()
        };
        h.extend(bytes);
        h
    }

    #[test]
    fn an_elf_header_is_judged_against_the_image_architecture() {
        let rows = [
            (header(1, 0x3E), "amd64"),
            (header(1, 0xB7), "arm64"),
            (header(1, 0x3E), "arm64"),
            (header(2, 0x16), "s390x"),
            (header(1, 0x3E), "mips64"),
            (b"#!/bin/sh\necho not elf\n".to_vec(), "amd64"),
            (header(9, 0x3E), "amd64"),
        ];
        let got: Vec<Option<String>> = rows.iter().map(|(h, a)| elf_problem(h, a)).collect();
        assert_eq!(
            got,
            vec![
                None,
                None,
                Some("built for ELF machine 0x3e, but the image is arm64 (aarch64)".to_owned()),
                None,
                None,
                Some("not an ELF executable (a Linux build of iterion is needed)".to_owned()),
                Some("ELF header with an unknown byte order".to_owned()),
            ]
        );
    }

    #[tokio::test]
    async fn the_engine_binary_must_be_an_executable_elf_for_the_image() {
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("iterion.sh");
        std::fs::write(&script, "#!/bin/sh\n").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        let plain = dir.path().join("not-executable");
        std::fs::write(&plain, header(1, 0x3E)).unwrap();
        let this_binary = std::env::current_exe().unwrap();
        let arch = match std::env::consts::ARCH {
            "x86_64" => "amd64",
            "aarch64" => "arm64",
            other => other,
        };
        let spec_with = |source: &Path| Spec {
            engine_mounts: vec![EngineMount {
                kind: EngineMountKind::Bind,
                source: source.display().to_string(),
                target: "/run/iterion/bin/iterion".to_owned(),
                read_only: true,
                purpose: ENGINE_BINARY_PURPOSE.to_owned(),
            }],
            ..Spec::default()
        };
        let mut got = Vec::new();
        for path in [
            this_binary.as_path(),
            &script,
            &plain,
            &dir.path().join("missing"),
        ] {
            got.push(
                check_engine_binary(&spec_with(path), arch)
                    .await
                    .map_err(|e| {
                        (
                            e.code(),
                            e.to_string()
                                .replace(&dir.path().display().to_string(), "<tmp>"),
                        )
                    })
                    .err()
                    .map(|(code, text)| {
                        (
                            code,
                            text.split(": cannot read it")
                                .next()
                                .unwrap_or_default()
                                .to_owned(),
                        )
                    }),
            );
        }
        assert_eq!(
            (check_engine_binary(&Spec::default(), arch).await.ok(), got),
            (
                Some(()),
                vec![
                    None,
                    Some((
                        "SANDBOX_SETUP_FAILED",
                        "sandbox: engine binary <tmp>/iterion.sh (ITERION_BIN): not an ELF executable (a Linux build of iterion is needed)".to_owned()
                    )),
                    Some((
                        "SANDBOX_SETUP_FAILED",
                        "sandbox: engine binary <tmp>/not-executable (ITERION_BIN): not a regular executable file".to_owned()
                    )),
                    Some((
                        "SANDBOX_SETUP_FAILED",
                        "sandbox: engine binary <tmp>/missing (ITERION_BIN)".to_owned()
                    )),
                ]
            )
        );
    }
}
