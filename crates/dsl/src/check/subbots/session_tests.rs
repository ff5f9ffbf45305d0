//! Tests of the child cache (issue #10, `docs/subbots-status.md` item 8): how often each file is
//! read and compiled, and that a cached compile gives the same diagnostics and IR as a
//! [`Reuse::Fresh`] one, which reads and compiles at every subbot node as before the cache.
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use pretty_assertions::assert_eq;

use super::{Reuse, Stats};
use crate::check::Origin;
use crate::{Code, CompileOptions, Diagnostic, compile_file, ir};

/// A file whose entry tool runs one subbot per `sources` entry, in a line, then ends.
fn level(sources: &[String]) -> String {
    let mut text = "tool start:\n  command: `echo`\n\n".to_owned();
    for (i, source) in sources.iter().enumerate() {
        text += &format!("subbot sub{i}:\n  source: \"{source}\"\n\n");
    }
    text += "workflow w:\n  entry: start\n";
    let mut from = "start".to_owned();
    for i in 0..sources.len() {
        text += &format!("  {from} -> sub{i}\n");
        from = format!("sub{i}");
    }
    text + &format!("  {from} -> done\n")
}

const LEAF: &str =
    "tool start:\n  command: `echo`\n\nworkflow w:\n  entry: start\n  start -> done\n";

/// A leaf that does not compile (C008).
const BROKEN: &str =
    "tool start:\n  command: `echo`\n\nworkflow w:\n  entry: nowhere\n  start -> done\n";

/// `level0.iter … level{depth}.iter`: level k names `level{k+1}.iter` `width` times; the last
/// level is `last`.
fn diamond(depth: usize, width: usize, last: &str) -> Vec<(String, String)> {
    let mut files: Vec<(String, String)> = (0..depth)
        .map(|k| {
            let next = vec![format!("level{}.iter", k + 1); width];
            (format!("level{k}.iter"), level(&next))
        })
        .collect();
    files.push((format!("level{depth}.iter"), last.to_owned()));
    files
}

fn write(dir: &Path, files: &[(String, String)]) {
    for (name, text) in files {
        let path = dir.join(name);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).expect("mkdir");
        }
        std::fs::write(&path, text).expect("write");
    }
}

/// Diagnostics and IR: everything a compile hands back.
type Output = (Vec<Diagnostic>, Option<ir::Workflow>);

/// Compiles `root` as `compile_file` does, with the given reuse, and says what the session did.
fn compile_with(root: &Path, reuse: Reuse) -> (Output, Stats) {
    let bytes = crate::load(root).expect("root loads");
    let origin = Origin::root_with(root, reuse, crate::compile_in);
    let (c, _) = crate::compile_in(&bytes, &CompileOptions::default(), Some(&origin));
    ((c.diagnostics, c.workflow), origin.session_stats())
}

/// Compiles the first file both ways, asserts the outputs are equal and returns them.
fn same_both_ways(dir: &Path, files: &[(String, String)]) -> (Output, Stats, Stats) {
    let root = dir.join(&files[0].0);
    let (cached, cached_stats) = compile_with(&root, Reuse::Cached);
    let (fresh, fresh_stats) = compile_with(&root, Reuse::Fresh);
    assert_eq!(cached, fresh, "cached and fresh compiles of {}", files[0].0);
    (cached, cached_stats, fresh_stats)
}

/// `level{k}.iter` → `n` for each k in `levels`, keyed by canonical path.
fn per_level(
    dir: &Path,
    levels: std::ops::RangeInclusive<usize>,
    n: impl Fn(usize) -> usize,
) -> BTreeMap<PathBuf, usize> {
    let canon = std::fs::canonicalize(dir).expect("canonical dir");
    levels
        .map(|k| (canon.join(format!("level{k}.iter")), n(k)))
        .collect()
}

fn codes(out: &Output) -> Vec<(Code, String)> {
    out.0
        .iter()
        .map(|d| (d.code, d.node.clone().unwrap_or_default()))
        .collect()
}

#[test]
fn a_diamond_of_depth_8_reads_and_compiles_each_child_once() {
    let dir = tempfile::tempdir().expect("temp dir");
    let files = diamond(ir::MAX_SUBBOT_DEPTH as usize, 2, LEAF);
    write(dir.path(), &files);
    let (out, cached, fresh) = same_both_ways(dir.path(), &files);
    assert_eq!(out.0, vec![]);
    let once = per_level(dir.path(), 1..=8, |_| 1);
    assert_eq!(
        cached,
        Stats {
            reads: once.clone(),
            compiles: once
        }
    );
    // Without the cache, level k is read and compiled once per path to it: 2^k times.
    let paths = per_level(dir.path(), 1..=8, |k| 1 << k);
    assert_eq!(
        fresh,
        Stats {
            reads: paths.clone(),
            compiles: paths
        }
    );
    // The IR still nests a full copy of each child in each subbot node: 2^8 leaves.
    fn leaves(w: &ir::Workflow) -> usize {
        let subs: Vec<&ir::Workflow> = w
            .nodes
            .iter()
            .filter_map(|n| match &n.body {
                ir::NodeBody::Subbot(s) => s.child.as_deref(),
                _ => None,
            })
            .collect();
        if subs.is_empty() {
            1
        } else {
            subs.into_iter().map(leaves).sum()
        }
    }
    assert_eq!(out.1.as_ref().map(leaves), Some(256));
}

#[test]
fn each_nested_child_equals_the_child_compiled_from_its_own_file() {
    let dir = tempfile::tempdir().expect("temp dir");
    let files = diamond(4, 3, LEAF);
    write(dir.path(), &files);
    let opts = CompileOptions::default();
    for k in 0..4 {
        let parent =
            compile_file(&dir.path().join(format!("level{k}.iter")), &opts).expect("loads");
        let alone = compile_file(&dir.path().join(format!("level{}.iter", k + 1)), &opts)
            .expect("loads")
            .workflow
            .expect("the child compiles alone");
        let nested: Vec<Option<&ir::Workflow>> = parent
            .workflow
            .as_ref()
            .expect("the parent compiles")
            .nodes
            .iter()
            .filter_map(|n| match &n.body {
                ir::NodeBody::Subbot(s) => Some(s.child.as_deref()),
                _ => None,
            })
            .collect();
        assert_eq!(nested, vec![Some(&alone); 3], "level{k}");
    }
}

#[test]
fn a_diamond_whose_leaf_names_the_root_compiles_each_level_once_per_root_subbot() {
    let dir = tempfile::tempdir().expect("temp dir");
    let files = diamond(8, 2, &level(&vec!["level0.iter".to_owned(); 2]));
    write(dir.path(), &files);
    let (out, cached, fresh) = same_both_ways(dir.path(), &files);
    let chain = (0..=8)
        .map(|k| format!("level{k}.iter"))
        .chain(["level0.iter".to_owned()])
        .collect::<Vec<_>>()
        .join(" -> ");
    let messages: Vec<(Code, String)> = out.0.iter().map(|d| (d.code, d.message.clone())).collect();
    assert_eq!(
        messages,
        vec![
            (
                Code::C913,
                format!("subbot \"sub0\": {chain} includes itself")
            ),
            (
                Code::C913,
                format!("subbot \"sub1\": {chain} includes itself")
            ),
        ]
    );
    assert_eq!(
        cached,
        Stats {
            reads: per_level(dir.path(), 1..=8, |_| 1),
            compiles: per_level(dir.path(), 1..=8, |_| 2),
        }
    );
    assert_eq!(fresh.compiles, per_level(dir.path(), 1..=8, |k| 1 << k));
}

#[test]
fn a_cached_outcome_is_not_reused_under_a_chain_that_meets_its_footprint() {
    // x.iter is reached at depth 8 twice: through a1…a7, where naming q.iter is one level too
    // deep (C910), and through q.iter, b2…b7, where naming q.iter is a cycle (C913). A cache
    // keyed by (path, depth) alone would report the C910 twice.
    let dir = tempfile::tempdir().expect("temp dir");
    let mut files = vec![(
        "root.iter".to_owned(),
        level(&["a1.iter".to_owned(), "q.iter".to_owned()]),
    )];
    for k in 1..7 {
        files.push((format!("a{k}.iter"), level(&[format!("a{}.iter", k + 1)])));
    }
    files.push(("a7.iter".to_owned(), level(&["x.iter".to_owned()])));
    files.push(("q.iter".to_owned(), level(&["b2.iter".to_owned()])));
    for k in 2..7 {
        files.push((format!("b{k}.iter"), level(&[format!("b{}.iter", k + 1)])));
    }
    files.push(("b7.iter".to_owned(), level(&["x.iter".to_owned()])));
    files.push(("x.iter".to_owned(), level(&["q.iter".to_owned()])));
    write(dir.path(), &files);
    let (out, cached, _) = same_both_ways(dir.path(), &files);
    assert_eq!(
        codes(&out),
        vec![
            (Code::C910, "sub0".to_owned()),
            (Code::C913, "sub1".to_owned())
        ]
    );
    let x = std::fs::canonicalize(dir.path().join("x.iter")).expect("canonical");
    assert_eq!(cached.compiles.get(&x), Some(&2));
}

#[test]
fn a_file_reached_through_a_symlink_resolves_its_children_from_the_link_directory() {
    let dir = tempfile::tempdir().expect("temp dir");
    let files = vec![
        (
            "root.iter".to_owned(),
            level(&["a/c.iter".to_owned(), "b/c.iter".to_owned()]),
        ),
        ("b/c.iter".to_owned(), level(&["leaf.iter".to_owned()])),
        ("b/leaf.iter".to_owned(), LEAF.to_owned()),
        (
            "a/leaf.iter".to_owned(),
            LEAF.replace("workflow w", "workflow a"),
        ),
    ];
    write(dir.path(), &files);
    std::os::unix::fs::symlink(dir.path().join("b/c.iter"), dir.path().join("a/c.iter"))
        .expect("symlink");
    let (out, cached, _) = same_both_ways(dir.path(), &files);
    assert_eq!(out.0, vec![]);
    let subbot = |w: &ir::Workflow, node: &str| -> Option<ir::Workflow> {
        match &w.node(node)?.body {
            ir::NodeBody::Subbot(s) => s.child.as_deref().cloned(),
            _ => None,
        }
    };
    let leaves: Vec<Option<String>> = ["sub0", "sub1"]
        .into_iter()
        .map(|node| {
            let c = subbot(out.1.as_ref()?, node)?;
            Some(subbot(&c, "sub0")?.name)
        })
        .collect();
    assert_eq!(leaves, vec![Some("a".to_owned()), Some("w".to_owned())]);
    let c = std::fs::canonicalize(dir.path().join("b/c.iter")).expect("canonical");
    assert_eq!(
        (cached.reads.get(&c), cached.compiles.get(&c)),
        (Some(&1), Some(&2)),
        "one read, one compile per directory"
    );
}

/// A diamond of `depth` where level k names level k+1 as `level1.iter`, `./level1.iter` and
/// `sub/../level1.iter`, and level `gone_at` also names a missing file twice.
fn spellings(depth: usize, last: &str, gone_at: usize) -> Vec<(String, String)> {
    (0..depth)
        .map(|k| {
            let mut next = vec![
                format!("level{}.iter", k + 1),
                format!("./level{}.iter", k + 1),
                format!("sub/../level{}.iter", k + 1),
            ];
            if k == gone_at {
                next.extend(["gone.iter".to_owned(), "./gone.iter".to_owned()]);
            }
            (format!("level{k}.iter"), level(&next))
        })
        .chain([
            (format!("level{depth}.iter"), last.to_owned()),
            ("sub/keep".to_owned(), String::new()),
        ])
        .collect()
}

#[test]
fn spellings_of_one_directory_share_a_child_without_errors() {
    let dir = tempfile::tempdir().expect("temp dir");
    let files = spellings(5, LEAF, 0);
    write(dir.path(), &files);
    let (out, cached, _) = same_both_ways(dir.path(), &files);
    assert_eq!(
        codes(&out),
        vec![
            (Code::C910, "sub3".to_owned()),
            (Code::C910, "sub4".to_owned())
        ]
    );
    let once = per_level(dir.path(), 1..=5, |_| 1);
    assert_eq!(cached.compiles, once);
    let gone = dir.path().join("gone.iter");
    assert_eq!(cached.reads.get(&gone), Some(&1), "{:?}", cached.reads);
}

#[test]
fn cached_and_fresh_compiles_agree_on_every_shape() {
    let depth = ir::MAX_SUBBOT_DEPTH as usize;
    let mut shapes: Vec<(&str, Vec<(String, String)>)> = vec![
        ("a diamond one level too deep", diamond(depth + 1, 2, LEAF)),
        ("a diamond with a broken leaf", diamond(depth, 2, BROKEN)),
        (
            "a diamond with a cycle in the middle",
            diamond(depth, 2, LEAF)
                .into_iter()
                .map(|(name, text)| match name.as_str() {
                    "level5.iter" => {
                        let t = level(&["level6.iter".to_owned(), "level2.iter".to_owned()]);
                        (name, t)
                    }
                    _ => (name, text),
                })
                .collect(),
        ),
        (
            "a diamond under several spellings, with a broken leaf",
            spellings(4, BROKEN, 0),
        ),
        (
            // The C910 text of the missing file shows each spelling of the directory.
            "a diamond under several spellings, with a missing file below the root",
            spellings(4, LEAF, 3),
        ),
        (
            // level2.iter is one level shallower through the shortcut, where it fits.
            "a diamond one level too deep, with a shortcut from the root",
            diamond(depth + 1, 2, LEAF)
                .into_iter()
                .map(|(name, text)| match name.as_str() {
                    "level0.iter" => {
                        let t = level(&["level1.iter".to_owned(), "level2.iter".to_owned()]);
                        (name, t)
                    }
                    _ => (name, text),
                })
                .collect(),
        ),
    ];
    // Two files per level, each naming both files of the next level; the last level names the
    // first file of level 3.
    let ladder = |last: &str| -> Vec<(String, String)> {
        let mut files = vec![(
            "root.iter".to_owned(),
            level(&["x1.iter".to_owned(), "y1.iter".to_owned()]),
        )];
        for k in 1..depth {
            let next = vec![format!("x{}.iter", k + 1), format!("y{}.iter", k + 1)];
            files.push((format!("x{k}.iter"), level(&next)));
            files.push((format!("y{k}.iter"), level(&next)));
        }
        files.push((format!("x{depth}.iter"), last.to_owned()));
        files.push((format!("y{depth}.iter"), LEAF.to_owned()));
        files
    };
    shapes.push(("a ladder", ladder(LEAF)));
    // x.iter is reached at the same depth from p.iter (x names p: the cycle is `p -> x -> p`)
    // and from q.iter (p is loaded, then names x: `x -> p -> x`).
    shapes.push((
        "two routes into one cycle",
        vec![
            (
                "root.iter".to_owned(),
                level(&["p.iter".to_owned(), "q.iter".to_owned()]),
            ),
            ("p.iter".to_owned(), level(&["x.iter".to_owned()])),
            ("q.iter".to_owned(), level(&["x.iter".to_owned()])),
            ("x.iter".to_owned(), level(&["p.iter".to_owned()])),
        ],
    ));
    shapes.push((
        "a ladder with a cycle",
        ladder(&level(&["x3.iter".to_owned()])),
    ));
    for (name, files) in shapes {
        let dir = tempfile::tempdir().expect("temp dir");
        write(dir.path(), &files);
        let (out, cached, fresh) = same_both_ways(dir.path(), &files);
        let reads: usize = cached.reads.values().sum();
        assert!(
            cached.reads.values().all(|&n| n == 1),
            "{name}: each file read once"
        );
        assert!(
            reads < fresh.reads.values().sum(),
            "{name}: the cache saved reads"
        );
        assert!(!out.0.is_empty() || out.1.is_some(), "{name}: {out:?}");
    }
}
