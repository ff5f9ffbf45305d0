#!/usr/bin/env python3
"""The house rules that no compiler checks (docs/architecture.md, "Rules the build checks").

1. Inside every crate (library, binary and integration-test roots alike), no source file imports
   another that imports it back, directly or through a longer circle. An edge F -> G is a path in
   F (`use crate::a::B`, `super::x`, `self::y`, a child module's name, an inline `crate::a::f()`)
   whose item is *defined* in G; a re-export is followed to the file that defines the item, and
   `mod x;` alone is containment, not an edge; a `macro_rules!` body counts where it is expanded,
   not where it is written.
2. Crates point one way: each crate's iterion dependencies sit on a lower layer (LAYERS below).
3. The sandbox core depends on no container-engine client (bollard, kube, k8s-openapi), not even
   through another iterion crate.
4. The environment is read once, at the edge: no non-test code of the engine, agent, sandbox or
   store crates calls `std::env::var`, `var_os`, `vars` or `vars_os` (they take an
   `iterion_vocab::Environment` from their caller).
5. A crate split into rooms (ROOMS below) imports downwards between them: a file of a room may use
   its own room and the rooms listed before it, never one listed after.

Usage: scripts/check-architecture.py [--repo DIR] [--graph CRATE] [--self-test]. Exits 1 and names every circle
or wrong-way dependency; `--graph CRATE` prints that crate's file graph; `--self-test` breaks
each rule once in a small tree and fails unless every one is reported (scripts/test.sh runs it).

It reads Rust as text (comments and string literals are blanked first) rather than parsing it: a
name it cannot resolve is attributed to the module that was named, which can only add edges, so
it errs towards reporting a circle, never towards hiding one.
"""

from __future__ import annotations

import argparse
import re
import sys
import tomllib
from pathlib import Path

# Lower number = lower layer. A crate may depend only on crates of a strictly lower layer.
LAYERS = {
    "iterion-vocab": 0,
    "iterion-repofile": 0,
    "iterion-test-support": 0,
    "iterion-dsl": 1,
    "iterion-netproxy": 1,
    "iterion-store": 1,
    "iterion-sandbox": 1,
    "iterion-sandbox-docker": 2,
    "iterion-sandbox-kubernetes": 2,
    "iterion-sandbox-namespace": 2,
    "iterion-agent": 2,
    "iterion-engine": 3,
    "iterion-studio": 4,  # the run viewer (crates/studio), served by `iterion studio`
    "iterion": 5,  # the cli crate (crates/cli)
}
ENGINE_CLIENTS = {"bollard", "kube", "k8s-openapi", "kube-client", "kube-runtime"}
CORE = "iterion-sandbox"
# Crates whose logic takes the environment as a value (rule 4).
ENV_FREE = {
    "iterion-engine",
    "iterion-studio",
    "iterion-agent",
    "iterion-sandbox",
    "iterion-sandbox-docker",
    "iterion-sandbox-kubernetes",
    "iterion-store",
}
# Rule 5: the rooms of a crate, bottom first (folders under src/; files directly in src/ are
# the crate's facade and belong to no room).
ROOMS = {
    "iterion-engine": ["records", "sandbox", "executor", "launcher", "preflight"],
}
ENV_READ_RE = re.compile(r"\benv::(?:var|var_os|vars|vars_os)\s*\(")

ITEM_RE = re.compile(
    r"\b(?:fn|struct|enum|trait|type|const|static|union|mod)\s+(r#)?([A-Za-z_]\w*)"
    r"|\bmacro_rules!\s*([A-Za-z_]\w*)"
)
MOD_DECL_RE = re.compile(r"((?:#\[[^\]]*\]\s*)*)(?:pub(?:\([^)]*\))?\s+)?mod\s+([A-Za-z_]\w*)\s*([;{])")
PATH_ATTR_RE = re.compile(r'#\[path\s*=\s*"([^"]+)"\]')
USE_RE = re.compile(r"\buse\s+([^;]+);")
INLINE_PATH_RE = re.compile(r"(?<![\w:])((?:[A-Za-z_]\w*)(?:::[A-Za-z_]\w*)+)")


def blank(src: str) -> str:
    """Comments and string/char literals replaced by spaces (newlines kept); attributes'
    `#[path = "…"]` strings survive because they are needed."""
    out = []
    i, n = 0, len(src)
    while i < n:
        c = src[i]
        if src.startswith("//", i):
            j = src.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif src.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if src.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif src.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            out.append(re.sub(r"[^\n]", " ", src[i:j]))
            i = j
        elif c == "r" and re.match(r'r#*"', src[i:]) and (i == 0 or not (src[i - 1].isalnum() or src[i - 1] == "_")):
            m = re.match(r'r(#*)"', src[i:])
            close = '"' + m.group(1)
            j = src.find(close, i + len(m.group(0)))
            j = n if j < 0 else j + len(close)
            out.append(re.sub(r"[^\n]", " ", src[i:j]))
            i = j
        elif c == '"':
            keep = src[max(0, i - 12):i].rstrip().endswith("=") and "path" in src[max(0, i - 12):i]
            j = i + 1
            while j < n and src[j] != '"':
                j += 2 if src[j] == "\\" else 1
            j += 1
            out.append(src[i:j] if keep else '"' + re.sub(r"[^\n]", " ", src[i + 1:j - 1]) + '"')
            i = j
        elif c == "'" and re.match(r"'(\\.|[^\\'])'", src[i:i + 4]) or (c == "'" and src.startswith("'\\", i)):
            m = re.match(r"'(\\u\{[0-9a-fA-F]+\}|\\.|[^\\'])'", src[i:])
            if m:
                out.append(" " * len(m.group(0)))
                i += len(m.group(0))
            else:
                out.append(c)
                i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def strip_macro_bodies(body: str) -> str:
    """`macro_rules!` bodies blanked: their paths belong to the files that expand them."""
    out, pos = [], 0
    for m in re.finditer(r"\bmacro_rules!\s*[A-Za-z_]\w*\s*[{(\[]", body):
        if m.start() < pos:
            continue
        depth, j = 1, m.end()
        while j < len(body) and depth:
            if body[j] in "{([":
                depth += 1
            elif body[j] in "})]":
                depth -= 1
            j += 1
        out.append(body[pos:m.end()])
        out.append(re.sub(r"[^\n]", " ", body[m.end():j]))
        pos = j
    out.append(body[pos:])
    return "".join(out)


class Module:
    def __init__(self, path: tuple[str, ...], file: Path):
        self.path = path
        self.file = file
        self.children: dict[str, Module] = {}
        self.items: set[str] = set()
        self.uses: dict[str, list[str]] = {}  # local name -> absolute-ish path segments
        self.globs: list[list[str]] = []
        self.refs: list[tuple[list[str], bool]] = []  # (segments, from_use)


def split_use_tree(tree: str) -> list[tuple[list[str], str | None]]:
    """`a::{b, c::{d as e, *}}` -> [(["a","b"], "b"), (["a","c","d"], "e"), (["a","c","*"], None)]."""
    tree = re.sub(r"\s+", "", tree)
    out: list[tuple[list[str], str | None]] = []

    def walk(prefix: list[str], s: str) -> None:
        # split s at top-level commas
        parts, depth, cur = [], 0, ""
        for ch in s:
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
            if ch == "," and depth == 0:
                parts.append(cur)
                cur = ""
            else:
                cur += ch
        if cur:
            parts.append(cur)
        for p in parts:
            if not p:
                continue
            if "{" in p:
                head, _, rest = p.partition("{")
                segs = [x for x in head.split("::") if x]
                walk(prefix + segs, rest[:-1] if rest.endswith("}") else rest)
                continue
            segs_txt, _, alias = p.partition("@as@")
            alias = alias or None
            segs = prefix + [x for x in segs_txt.split("::") if x]
            if segs and segs[-1] == "*":
                out.append((segs, None))
            elif segs and segs[-1] == "self":
                out.append((segs[:-1], alias or (segs[-2] if len(segs) > 1 else None)))
            elif segs:
                out.append((segs, alias or segs[-1]))

    walk([], tree)
    return out


def parse_use(stmt: str) -> list[tuple[list[str], str | None]]:
    # Normalise "x as y" before whitespace is stripped.
    stmt = re.sub(r"\s+as\s+", "@as@", stmt.strip())
    stmt = stmt.lstrip(":")
    return split_use_tree(stmt)


class Crate:
    def __init__(self, name: str, root_dir: Path, roots: list[Path]):
        self.name = name
        self.dir = root_dir
        self.files: dict[Path, str] = {}
        self.trees: list[Module] = []
        for r in roots:
            root = Module((), r)
            self.load(root, r, r.parent, is_root=True)
            self.trees.append(root)

    def load(self, module: Module, file: Path, mod_dir: Path, is_root: bool) -> None:
        text = blank(file.read_text(encoding="utf-8"))
        self.files[file] = text
        self.scan(module, file, text, 0, len(text), mod_dir)

    def scan(self, module: Module, file: Path, text: str, start: int, end: int, mod_dir: Path) -> None:
        """Reads module's body text[start:end]; inline `mod x { … }` bodies recurse."""
        pos = start
        body_parts: list[tuple[int, int]] = []
        for m in MOD_DECL_RE.finditer(text, start, end):
            if m.start() < pos:
                continue
            attrs, name, kind = m.group(1), m.group(2), m.group(3)
            body_parts.append((pos, m.start()))
            if kind == ";":
                pa = PATH_ATTR_RE.search(attrs or "")
                if pa:
                    child_file = (file.parent / pa.group(1)).resolve()
                    child_dir = child_file.parent
                else:
                    cand = [mod_dir / f"{name}.rs", mod_dir / name / "mod.rs"]
                    child_file = next((c for c in cand if c.exists()), None)
                    child_dir = mod_dir / name
                if child_file is None or not child_file.exists():
                    pos = m.end()
                    continue
                child = Module(module.path + (name,), child_file)
                module.children[name] = child
                is_mod_rs = child_file.name == "mod.rs"
                self.load(child, child_file, child_file.parent if is_mod_rs or pa else child_dir, False)
                pos = m.end()
            else:
                depth, j = 1, m.end()
                while j < end and depth:
                    if text[j] == "{":
                        depth += 1
                    elif text[j] == "}":
                        depth -= 1
                    j += 1
                child = Module(module.path + (name,), file)
                module.children[name] = child
                self.scan(child, file, text, m.end(), j - 1, mod_dir / name)
                pos = j
        body_parts.append((pos, end))
        body = "\n".join(text[a:b] for a, b in body_parts)
        for m in ITEM_RE.finditer(body):
            module.items.add(m.group(2) or m.group(3))
        body = strip_macro_bodies(body)
        spans = []
        for m in USE_RE.finditer(body):
            spans.append((m.start(), m.end()))
            for segs, alias in parse_use(m.group(1)):
                if segs[-1] == "*":
                    module.globs.append(segs[:-1])
                    module.refs.append((segs[:-1], True))
                else:
                    if alias and alias != "_":
                        module.uses[alias] = segs
                    module.refs.append((segs, True))
        rest = list(body)
        for a, b in spans:
            rest[a:b] = " " * (b - a)
        for m in INLINE_PATH_RE.finditer("".join(rest)):
            module.refs.append((m.group(1).split("::"), False))

    # -- resolution -------------------------------------------------------------------------
    def absolute(self, module: Module, root: Module, segs: list[str]) -> tuple[Module, list[str]] | None:
        """Where a path starts: (module, remaining segments), or None when it leaves the crate."""
        if not segs:
            return None
        head = segs[0]
        if head == "crate":
            return root, segs[1:]
        if head in ("self", "super"):
            cur = module
            rest = list(segs)
            while rest and rest[0] in ("self", "super"):
                if rest[0] == "super":
                    if not cur.path:
                        return None
                    cur = self.by_path(root, cur.path[:-1])
                rest.pop(0)
            return cur, rest
        if head in module.children:
            return module, segs
        if head in module.uses and module.uses[head] != segs:
            target = module.uses[head]
            start = self.absolute(module, root, target)
            if start is None:
                return None
            m, rest = start
            return m, rest + segs[1:]
        return None

    def by_path(self, root: Module, path: tuple[str, ...]) -> Module:
        cur = root
        for p in path:
            cur = cur.children[p]
        return cur

    def resolve(self, root: Module, module: Module, segs: list[str], seen: set) -> Path:
        """The file that defines the item `segs` names, starting in `module`."""
        key = (module.path, tuple(segs))
        if key in seen or not segs:
            return module.file
        seen = seen | {key}
        head = segs[0]
        if head in module.children:
            return self.resolve(root, module.children[head], segs[1:], seen)
        if head in module.items:
            return module.file
        if head in module.uses:
            start = self.absolute(module, root, module.uses[head])
            if start is not None:
                m, rest = start
                return self.resolve(root, m, rest + segs[1:], seen)
            return module.file
        for g in module.globs:
            start = self.absolute(module, root, g)
            if start is None:
                continue
            m, rest = start
            target = self.walk_module(root, m, rest)
            if target is not None and (head in target.items or head in target.uses or head in target.children):
                return self.resolve(root, target, segs, seen)
        return module.file

    def walk_module(self, root: Module, m: Module, rest: list[str]) -> Module | None:
        for s in rest:
            if s in m.children:
                m = m.children[s]
            elif s in m.uses:
                start = self.absolute(m, root, m.uses[s])
                if start is None:
                    return None
                m2, r2 = start
                m = self.walk_module(root, m2, r2)
                if m is None:
                    return None
            else:
                return None
        return m

    def edges(self) -> dict[Path, dict[Path, str]]:
        graph: dict[Path, dict[Path, str]] = {}
        for root in self.trees:
            stack = [root]
            while stack:
                mod = stack.pop()
                stack.extend(mod.children.values())
                for segs, _from_use in mod.refs:
                    start = self.absolute(mod, root, segs)
                    if start is None:
                        continue
                    m, rest = start
                    target = self.resolve(root, m, rest, set())
                    if target != mod.file:
                        graph.setdefault(mod.file, {}).setdefault(target, "::".join(segs))
        return graph


def sccs(graph: dict[Path, dict[Path, str]]) -> list[list[Path]]:
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]
    nodes = set(graph) | {t for v in graph.values() for t in v}
    sys.setrecursionlimit(10000)

    def strong(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, {}):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(nodes):
        if v not in index:
            strong(v)
    return out


def shown(path: Path, crate_dir: Path) -> str:
    """`path` relative to its crate, or to the repository for a file a `#[path]` pulls in from
    another crate."""
    try:
        return str(path.relative_to(crate_dir))
    except ValueError:
        return str(path.relative_to(crate_dir.parent.parent))


def crate_roots(crate_dir: Path) -> list[Path]:
    roots = []
    for rel in ("src/lib.rs", "src/main.rs"):
        if (crate_dir / rel).exists():
            roots.append(crate_dir / rel)
    for d in ("src/bin", "tests", "benches", "examples"):
        p = crate_dir / d
        if p.is_dir():
            roots.extend(sorted(x for x in p.glob("*.rs")))
    return roots


def check(repo: Path, graph: str | None = None) -> tuple[list[str], int]:
    """Every problem of the tree at `repo`, and how many crates it has; prints `graph`'s file
    graph when asked."""
    problems: list[str] = []

    manifests = {}
    for toml_path in sorted((repo / "crates").glob("*/Cargo.toml")):
        data = tomllib.loads(toml_path.read_text())
        manifests[data["package"]["name"]] = (toml_path.parent, data)

    # 2. layers, 3. the core's closure.
    def iterion_deps(data) -> list[str]:
        return [d for d in data.get("dependencies", {}) if d.startswith("iterion-")]

    for name, (_dir, data) in manifests.items():
        if name not in LAYERS:
            problems.append(f"{name}: not in scripts/check-architecture.py LAYERS (give it a layer)")
            continue
        for dep in iterion_deps(data):
            if LAYERS.get(dep, 99) >= LAYERS[name]:
                problems.append(
                    f"{name} (layer {LAYERS[name]}) depends on {dep} (layer {LAYERS.get(dep)}): "
                    "crates depend only on lower layers"
                )
    if CORE in manifests:
        closure, todo = set(), [CORE]
        while todo:
            c = todo.pop()
            if c in closure or c not in manifests:
                continue
            closure.add(c)
            todo.extend(iterion_deps(manifests[c][1]))
        for c in sorted(closure):
            bad = ENGINE_CLIENTS & set(manifests[c][1].get("dependencies", {}))
            if bad:
                problems.append(f"{CORE} reaches {', '.join(sorted(bad))} through {c}: the core names no engine client")

    # 4. the environment read at the edge only.
    for name in sorted(ENV_FREE & set(manifests)):
        crate_dir = manifests[name][0]
        for f in sorted((crate_dir / "src").rglob("*.rs")):
            if f.name.endswith("_tests.rs") or f.name in ("tests.rs",) or f.name.startswith("test_"):
                continue
            text = blank(f.read_text(encoding="utf-8"))
            cut = re.search(r"#\[cfg\(test\)\]\s*(?:#\[[^\]]*\]\s*)*mod\s+tests\s*\{", text)
            if cut:
                text = text[: cut.start()]
            for m in ENV_READ_RE.finditer(text):
                line = text.count("\n", 0, m.start()) + 1
                problems.append(
                    f"{name}: {f.relative_to(crate_dir)}:{line} reads the process environment; "
                    "take an iterion_vocab::Environment from the caller"
                )

    # 1. file circles.
    for name, (crate_dir, _data) in sorted(manifests.items()):
        crate = Crate(name, crate_dir, crate_roots(crate_dir))
        graph = crate.edges()
        if graph == name:
            for f, ts in sorted(graph.items()):
                for t, via in sorted(ts.items()):
                    print(f"{shown(f, crate_dir)} -> {shown(t, crate_dir)}   ({via})")
        rooms = ROOMS.get(name, [])

        def room_of(path: Path):
            try:
                parts = path.relative_to(crate_dir / "src").parts
            except ValueError:
                return None
            return parts[0] if len(parts) > 1 and parts[0] in rooms else None

        for f, targets in sorted(graph.items()):
            here = room_of(f)
            if here is None:
                continue
            for t, via in sorted(targets.items()):
                there = room_of(t)
                if there is not None and rooms.index(there) > rooms.index(here):
                    problems.append(
                        f"{name}: {shown(f, crate_dir)} (room {here}) uses {shown(t, crate_dir)} "
                        f"(room {there}, above it) via {via}; rooms import downwards: "
                        + " < ".join(rooms)
                    )
        for comp in sccs(graph):
            members = set(comp)
            lines = []
            for f in comp:
                for t, via in sorted(graph.get(f, {}).items()):
                    if t in members:
                        lines.append(f"    {shown(f, crate_dir)} -> {shown(t, crate_dir)}  ({via})")
            problems.append(
                f"{name}: a circle of {len(comp)} files:\n" + "\n".join(lines)
            )

    return problems, len(manifests)


def write_tree(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def manifest(name: str, deps: list[str]) -> str:
    lines = [f'[package]\nname = "{name}"\n', "[dependencies]"]
    lines += [f"{d}.workspace = true" for d in deps]
    return "\n".join(lines) + "\n"


def self_test() -> int:
    """Each rule, broken once in a small tree, is reported; the same tree mended is clean."""
    import tempfile

    clean = {
        "crates/vocab/Cargo.toml": manifest("iterion-vocab", []),
        "crates/vocab/src/lib.rs": "mod a;\nmod b;\npub use a::A;\n",
        "crates/vocab/src/a.rs": "pub struct A;\n",
        "crates/vocab/src/b.rs": "use crate::A;\npub struct B(A);\n",
        "crates/sandbox/Cargo.toml": manifest("iterion-sandbox", ["iterion-vocab"]),
        "crates/sandbox/src/lib.rs": "pub fn f(env: &E) { env.get(\"HOME\"); }\n",
        "crates/engine/Cargo.toml": manifest("iterion-engine", ["iterion-sandbox"]),
        "crates/engine/src/lib.rs": "mod records;\nmod launcher;\n",
        "crates/engine/src/records/mod.rs": "pub(crate) mod sink;\n",
        "crates/engine/src/records/sink.rs": "pub struct Sink;\n",
        "crates/engine/src/launcher/mod.rs": "pub(crate) mod run;\n",
        "crates/engine/src/launcher/run.rs": "use crate::records::sink::Sink;\npub struct Run(Sink);\n",
    }
    broken = {
        # 1: b.rs uses a.rs (through lib's re-export), and a.rs uses b.rs.
        "crates/vocab/src/a.rs": "use crate::b::B;\npub struct A(Box<B>);\n",
        # 2: the bottom layer depends on the engine.
        "crates/vocab/Cargo.toml": manifest("iterion-vocab", ["iterion-engine"]),
        # 3: the core names an engine client; 4: it reads the process environment.
        "crates/sandbox/Cargo.toml": manifest("iterion-sandbox", ["iterion-vocab", "bollard"]),
        "crates/sandbox/src/lib.rs": "pub fn f() { std::env::var(\"HOME\").ok(); }\n",
        # 5: the records room uses the launcher room above it.
        "crates/engine/src/records/sink.rs": "pub struct Sink(crate::launcher::run::Run);\n",
    }
    expected = [
        ("iterion-vocab: a circle of 2 files", "rule 1"),
        ("depends on iterion-engine", "rule 2"),
        ("reaches bollard", "rule 3"),
        ("reads the process environment", "rule 4"),
        ("(room records) uses src/launcher/run.rs", "rule 5"),
    ]
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        write_tree(root, clean)
        found, _ = check(root)
        if found:
            failures.append(f"the clean tree reports: {found}")
        write_tree(root, broken)
        found, _ = check(root)
        for needle, rule in expected:
            if not any(needle in p for p in found):
                failures.append(f"{rule} is not reported (looked for {needle!r} in {found})")
    for f in failures:
        print(f"check-architecture --self-test: {f}", file=sys.stderr)
    if failures:
        return 1
    print(f"check-architecture --self-test: ok ({len(expected)} rules each caught)")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repo", default=Path(__file__).resolve().parent.parent, type=Path)
    ap.add_argument("--graph", metavar="CRATE")
    ap.add_argument("--self-test", action="store_true", help="check that every rule can fail")
    args = ap.parse_args()
    if args.self_test:
        return self_test()
    problems, crates = check(args.repo.resolve(), args.graph)
    for p in problems:
        print(f"check-architecture: {p}")
    if problems:
        print(f"check-architecture: {len(problems)} problem(s)", file=sys.stderr)
        return 1
    print(f"check-architecture: ok ({crates} crates)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
