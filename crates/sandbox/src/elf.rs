//! How an ELF executable is linked, judged by its `PT_INTERP` program header (SANDBOX.md §8.4,
//! §11.2 `engine_binary_link`).
//!
//! Why it matters: the engine binds its own binary into every docker/podman sandbox. A dynamically
//! linked one names an interpreter (`/lib64/ld-linux-x86-64.so.2`) that must exist in the image
//! with a compatible libc; a static one (`-C target-feature=+crt-static`, a static-pie) runs in any
//! image of its architecture, busybox included. Only the program headers are read, with every
//! offset bounds-checked: the input may be any file.

use std::io::Read;
use std::path::Path;

/// How an executable is linked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkKind {
    /// No `PT_INTERP`: runs without a dynamic loader.
    Static,
    /// A `PT_INTERP` names the loader the image must provide.
    Dynamic,
    /// Not an ELF file, or headers we could not read.
    Unknown,
}

impl LinkKind {
    /// The label the doctor prints (`static`, `dynamic`, `unknown`).
    pub fn as_str(self) -> &'static str {
        match self {
            LinkKind::Static => "static",
            LinkKind::Dynamic => "dynamic",
            LinkKind::Unknown => "unknown",
        }
    }
}

impl std::fmt::Display for LinkKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

const PT_INTERP: u32 = 3;
/// The 64-bit ELF header's size (the 32-bit one is smaller): enough to find the program headers.
const HEADER_BYTES: usize = 64;
/// A program-header table larger than this is not read.
const MAX_TABLE_BYTES: u64 = 64 * 1024;

/// The link kind of an ELF image whose first bytes are `bytes` (enough to cover the program
/// header table; [`link_kind_of`] reads exactly that much).
pub fn link_kind(bytes: &[u8]) -> LinkKind {
    program_headers_have_interp(bytes).map_or(LinkKind::Unknown, |interp| {
        if interp {
            LinkKind::Dynamic
        } else {
            LinkKind::Static
        }
    })
}

/// The link kind of the file at `path` (blocking): reads the ELF header, then the program-header
/// table it points at — a few hundred bytes, not the binary. The CLI asks this at start-up.
pub fn link_kind_of(path: &Path) -> LinkKind {
    read_headers(path).map_or(LinkKind::Unknown, |bytes| link_kind(&bytes))
}

/// The file's first bytes through the end of its program-header table.
fn read_headers(path: &Path) -> Option<Vec<u8>> {
    let mut file = std::fs::File::open(path).ok()?;
    let mut bytes = Vec::with_capacity(HEADER_BYTES);
    (&mut file)
        .take(HEADER_BYTES as u64)
        .read_to_end(&mut bytes)
        .ok()?;
    let end = table_end(&bytes)?;
    let more = end.saturating_sub(bytes.len() as u64);
    if more > MAX_TABLE_BYTES {
        return None;
    }
    file.take(more).read_to_end(&mut bytes).ok()?;
    Some(bytes)
}

/// Where the program-header table ends, per the ELF header in `b`.
fn table_end(b: &[u8]) -> Option<u64> {
    let layout = Layout::of(b)?;
    let bytes = layout.entsize.checked_mul(layout.phnum)?;
    u64::try_from(layout.phoff.checked_add(bytes)?).ok()
}

/// What the ELF header says about the program-header table.
struct Layout {
    little: bool,
    phoff: usize,
    entsize: usize,
    phnum: usize,
}

/// The unsigned `n`-byte integer at `at`, in the file's byte order; `None` past the end.
fn uint_at(b: &[u8], little: bool, at: usize, n: usize) -> Option<u64> {
    let raw = b.get(at..at.checked_add(n)?)?;
    let fold = |v: u64, byte: &u8| (v << 8) | u64::from(*byte);
    Some(if little {
        raw.iter().rev().fold(0, fold)
    } else {
        raw.iter().fold(0, fold)
    })
}

impl Layout {
    fn of(b: &[u8]) -> Option<Layout> {
        if b.get(..4)? != [0x7f, b'E', b'L', b'F'] {
            return None;
        }
        let little = match b.get(5)? {
            1 => true,
            2 => false,
            _ => return None,
        };
        let at = |offset, n| uint_at(b, little, offset, n);
        let (phoff, entsize, phnum) = match b.get(4)? {
            2 => (at(0x20, 8)?, at(0x36, 2)?, at(0x38, 2)?),
            1 => (at(0x1C, 4)?, at(0x2A, 2)?, at(0x2C, 2)?),
            _ => return None,
        };
        Some(Layout {
            little,
            phoff: usize::try_from(phoff).ok()?,
            entsize: usize::try_from(entsize).ok()?,
            phnum: usize::try_from(phnum).ok()?,
        })
    }
}

fn program_headers_have_interp(b: &[u8]) -> Option<bool> {
    let layout = Layout::of(b)?;
    if layout.entsize < 4 {
        return None;
    }
    for i in 0..layout.phnum {
        let at = layout.phoff.checked_add(i.checked_mul(layout.entsize)?)?;
        if uint_at(b, layout.little, at, 4)? == u64::from(PT_INTERP) {
            return Some(true);
        }
    }
    Some(false)
}

/// The loader a dynamically linked ELF names (its `PT_INTERP`, e.g.
/// `/lib64/ld-linux-x86-64.so.2`), when `bytes` holds the headers and the string. `None` for a
/// static binary, a non-ELF file, or a string outside `bytes` or not valid UTF-8. The doctor asks
/// the image for this path: without it the bound binary cannot start (`exec …: no such file or
/// directory`).
pub fn interpreter(bytes: &[u8]) -> Option<String> {
    let layout = Layout::of(bytes)?;
    let wide = bytes.get(4)? == &2;
    for i in 0..layout.phnum {
        let at = layout.phoff.checked_add(i.checked_mul(layout.entsize)?)?;
        if uint_at(bytes, layout.little, at, 4)? != u64::from(PT_INTERP) {
            continue;
        }
        let (offset, size) = if wide {
            (
                uint_at(bytes, layout.little, at.checked_add(8)?, 8)?,
                uint_at(bytes, layout.little, at.checked_add(32)?, 8)?,
            )
        } else {
            (
                uint_at(bytes, layout.little, at.checked_add(4)?, 4)?,
                uint_at(bytes, layout.little, at.checked_add(16)?, 4)?,
            )
        };
        let start = usize::try_from(offset).ok()?;
        let end = start.checked_add(usize::try_from(size).ok()?)?;
        let raw = bytes.get(start..end)?;
        let text = raw.split(|b| *b == 0).next()?;
        return std::str::from_utf8(text)
            .ok()
            .filter(|t| t.starts_with('/'))
            .map(str::to_owned);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    /// A minimal 64-bit little-endian ELF header followed by program headers of `types`.
    fn elf64(types: &[u32]) -> Vec<u8> {
        let mut b = vec![0u8; 64];
        b[..4].copy_from_slice(&[0x7f, b'E', b'L', b'F']);
        b[4] = 2;
        b[5] = 1;
        b[0x20..0x28].copy_from_slice(&64u64.to_le_bytes());
        b[0x36..0x38].copy_from_slice(&56u16.to_le_bytes());
        b[0x38..0x3A].copy_from_slice(&(types.len() as u16).to_le_bytes());
        for t in types {
            let mut ph = vec![0u8; 56];
            ph[..4].copy_from_slice(&t.to_le_bytes());
            b.extend(ph);
        }
        b
    }

    /// A minimal 32-bit big-endian ELF with program headers of `types`.
    fn elf32_be(types: &[u32]) -> Vec<u8> {
        let mut b = vec![0u8; 52];
        b[..4].copy_from_slice(&[0x7f, b'E', b'L', b'F']);
        b[4] = 1;
        b[5] = 2;
        b[0x1C..0x20].copy_from_slice(&52u32.to_be_bytes());
        b[0x2A..0x2C].copy_from_slice(&32u16.to_be_bytes());
        b[0x2C..0x2E].copy_from_slice(&(types.len() as u16).to_be_bytes());
        for t in types {
            let mut ph = vec![0u8; 32];
            ph[..4].copy_from_slice(&t.to_be_bytes());
            b.extend(ph);
        }
        b
    }

    #[test]
    fn the_interpreter_header_decides_the_link_kind() {
        let mut truncated = elf64(&[6, 1, 3]);
        truncated.truncate(64 + 56 + 10);
        let mut huge_offset = elf64(&[]);
        huge_offset[0x20..0x28].copy_from_slice(&u64::MAX.to_le_bytes());
        huge_offset[0x38..0x3A].copy_from_slice(&1u16.to_le_bytes());
        let rows: Vec<(&str, Vec<u8>)> = vec![
            ("dynamic 64-bit", elf64(&[6, 3, 1, 1, 2])),
            ("static-pie 64-bit", elf64(&[6, 1, 1, 2, 7])),
            ("dynamic 32-bit big-endian", elf32_be(&[3])),
            ("static 32-bit big-endian", elf32_be(&[1, 1])),
            ("headers cut short", truncated),
            ("offset past the end", huge_offset),
            ("a shell script", b"#!/bin/sh\necho hi\n".to_vec()),
            ("empty", Vec::new()),
        ];
        let got: Vec<(&str, LinkKind)> = rows.iter().map(|(n, b)| (*n, link_kind(b))).collect();
        assert_eq!(
            got,
            vec![
                ("dynamic 64-bit", LinkKind::Dynamic),
                ("static-pie 64-bit", LinkKind::Static),
                ("dynamic 32-bit big-endian", LinkKind::Dynamic),
                ("static 32-bit big-endian", LinkKind::Static),
                ("headers cut short", LinkKind::Unknown),
                ("offset past the end", LinkKind::Unknown),
                ("a shell script", LinkKind::Unknown),
                ("empty", LinkKind::Unknown),
            ]
        );
    }

    #[test]
    fn real_binaries_on_this_host_are_judged() {
        // The test binary itself is a normal (dynamic) Rust build on glibc hosts.
        let me = std::env::current_exe().unwrap();
        assert_eq!(link_kind_of(&me), LinkKind::Dynamic);
        assert_eq!(
            link_kind_of(Path::new("/nonexistent/iterion")),
            LinkKind::Unknown
        );
        if let Some(bin) = std::env::var_os("ITERION_STATIC_BIN") {
            assert_eq!(link_kind_of(Path::new(&bin)), LinkKind::Static);
        }
    }

    #[test]
    fn interpreter_reads_the_loader_a_dynamic_build_names_and_none_for_a_static_one() {
        let exe = std::fs::read("/proc/self/exe").unwrap();
        let loader = interpreter(&exe);
        match link_kind(&exe) {
            LinkKind::Dynamic => {
                let loader = loader.unwrap();
                assert!(std::path::Path::new(&loader).exists(), "{loader}");
            }
            LinkKind::Static | LinkKind::Unknown => assert_eq!(loader, None),
        }
        assert_eq!(interpreter(&elf64(&[1, 6])), None);
        assert_eq!(interpreter(b"not an elf"), None);
    }
}
