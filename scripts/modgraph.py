#!/usr/bin/env python3
"""The module graph of Sluice's crates, drawn from their own `use` lines.

For each crate under `crates/`, every source file is a node and an arrow
A -> B says that file A takes a name from file B through a `crate::`,
`super::` or `self::` path (in a `use` item or inline in code). A name that
B only re-exports (`pub use other::Name`) is followed to the file that
defines it. Test modules (`#[cfg(test)] mod ...`, inline or in their own
file) are left out: they may import what they test.

  scripts/modgraph.py --check          exit 1 if a crate has an import
                                       circle or a file over the line limit
  scripts/modgraph.py --mermaid CRATE  the crate's graph as a Mermaid chart
  scripts/modgraph.py                  every crate's files, their code
                                       lines and arrows, circles last

Lines of code: lines that are neither blank nor only a comment, outside
test modules. Written by hand because it needs nothing but Python, runs in
well under a second, and checks the two structural invariants of
ARCHITECTURE.md in `scripts/test.sh`.
"""
import argparse
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
MAX_CODE_LINES = 1000


def strip_comments_and_strings(src):
    """The source with comments, string and char literals blanked (newlines
    kept, so line numbers hold)."""
    out, i, n = [], 0, len(src)
    while i < n:
        c = src[i]
        if src.startswith("//", i):
            j = src.find("\n", i)
            j = n if j < 0 else j
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
            out.append("\n" * src.count("\n", i, j))
            i = j
        elif c == "r" and re.match(r'r#*"', src[i:i + 10]) and not (
            i and (src[i - 1].isalnum() or src[i - 1] == "_")
        ):
            hashes = re.match(r'r(#*)"', src[i:]).group(1)
            end = src.find('"' + hashes, i + 2 + len(hashes))
            end = n if end < 0 else end + 1 + len(hashes)
            out.append('""' + "\n" * src.count("\n", i, end))
            i = end
        elif c == '"':
            j = i + 1
            while j < n and src[j] != '"':
                j += 2 if src[j] == "\\" else 1
            out.append('""' + "\n" * src.count("\n", i, j))
            i = j + 1
        elif c == "'" and re.match(r"'(\\.|[^\\'])'", src[i:i + 4]) or (
            c == "'" and re.match(r"'\\[xu]", src[i:i + 3])
        ):
            j = src.find("'", i + 2)
            out.append("' '")
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def drop_test_modules(code):
    """Blank `#[cfg(test)] mod name { ... }` blocks; return the code and the
    names of test modules kept in files of their own (`#[cfg(test)] mod x;`)."""
    test_files = set(re.findall(r"#\[cfg\(test\)\]\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;", code))
    for m in reversed(list(re.finditer(r"#\[cfg\(test\)\]\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+\w+\s*\{", code))):
        depth, j = 1, m.end()
        while j < len(code) and depth:
            depth += {"{": 1, "}": -1}.get(code[j], 0)
            j += 1
        code = code[: m.start()] + "\n" * code.count("\n", m.start(), j) + code[j:]
    return code, test_files


def expand_use_tree(tree):
    """`a::{b, c::{d, e as f}}` -> ['a::b', 'a::c::d', 'a::c::e']."""
    tree = re.sub(r"\s*([{},]|::)\s*", r"\1", tree.strip())
    i = tree.find("{")
    if i < 0:
        return [tree.split(" as ")[0].strip()]
    prefix, body = tree[:i], tree[i + 1 : tree.rfind("}")]
    parts, depth, cur = [], 0, ""
    for ch in body:
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
            continue
        depth += {"{": 1, "}": -1}.get(ch, 0)
        cur += ch
    parts.append(cur)
    out = []
    for p in parts:
        if p:
            out += [prefix + q for q in expand_use_tree(p)]
    return out


class Crate:
    def __init__(self, src_dir):
        self.src = src_dir
        self.files = {}  # module path tuple -> file
        self.code = {}  # file -> code without comments, strings, tests
        self.tests = set()
        root = src_dir / "lib.rs" if (src_dir / "lib.rs").exists() else src_dir / "main.rs"
        self.walk(root, ())

    def walk(self, path, modpath):
        code, test_mods = drop_test_modules(strip_comments_and_strings(path.read_text()))
        self.files[modpath] = path
        self.code[path] = code
        here = path.parent if path.name in ("lib.rs", "main.rs", "mod.rs") else path.with_suffix("")
        for m in re.finditer(r"(?:^|\n)\s*(?:#\[[^\]]*\]\s*)*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;", code):
            name = m.group(1)
            attrs = code[max(0, m.start() - 200) : m.start() + len(m.group(0))]
            cand = [here / f"{name}.rs", here / name / "mod.rs"]
            pm = re.search(r'#\[path\s*=\s*""\]', attrs)
            child = next((c for c in cand if c.exists()), None)
            if child is None or pm:
                continue
            if name in test_mods:
                self.tests.add(child)
                continue
            self.walk(child, modpath + (name,))

    def module_of(self, path):
        return next(k for k, v in self.files.items() if v == path)

    def resolve(self, modpath, segs, depth=0):
        """The file that defines the item `segs` names, from module `modpath`."""
        if segs and segs[0] == "crate":
            base, segs = (), segs[1:]
        elif segs and segs[0] in ("super", "self"):
            base = modpath
            while segs and segs[0] in ("super", "self"):
                if segs[0] == "super":
                    base = base[:-1]
                segs = segs[1:]
        else:
            return None
        cur = base
        for k, s in enumerate(segs):
            if cur + (s,) in self.files:
                cur = cur + (s,)
                continue
            # s is an item of cur: follow a re-export of it.
            if depth < 8:
                target = self.reexport(cur, s, depth)
                if target is not None:
                    return target
            return self.files[cur]
        return self.files[cur]

    def reexport(self, modpath, name, depth):
        code = self.code[self.files[modpath]]
        for m in re.finditer(r"pub(?:\([^)]*\))?\s+use\s+([^;]+);", code):
            for full in expand_use_tree(m.group(1)):
                segs = full.split("::")
                if segs[-1] == name:
                    if segs[0] not in ("crate", "super", "self"):
                        if modpath + (segs[0],) in self.files:
                            segs = ["self"] + segs
                        else:
                            return None
                    return self.resolve(modpath, segs, depth + 1)
        return None

    def arrows(self):
        edges = {}
        for modpath, path in self.files.items():
            code = self.code[path]
            refs = []
            # A `pub use` hands a name on (a module's face); it is not a use
            # of the name, and draws no arrow.
            private = re.sub(r"pub(?:\([^)]*\))?\s+use\s+[^;]+;", "", code)
            for m in re.finditer(r"\buse\s+([^;]+);", private):
                refs += [r.split("::") for r in expand_use_tree(m.group(1))]
            for m in re.finditer(r"\b((?:crate|super|self)(?:::\w+)+)", private):
                refs.append(m.group(1).split("::"))
            # A bare path through a child module (`child::item`) names it.
            for m in re.finditer(r"(?<![\w:])(\w+)::(\w+)", private):
                if modpath + (m.group(1),) in self.files:
                    refs.append(["self", m.group(1), m.group(2)])
            for segs in refs:
                segs = [s for s in segs if s != "*"]
                # A `use` of a child module declared here (`use self::x` or
                # the first segment a child) names the child.
                if segs and segs[0] not in ("crate", "super", "self") and modpath + (segs[0],) in self.files:
                    segs = ["self"] + segs
                target = self.resolve(modpath, segs)
                if target is not None and target != path:
                    edges.setdefault(path, set()).add(target)
        return edges


def circles(edges):
    """Strongly connected components of more than one file (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
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

    sys.setrecursionlimit(10000)
    for v in list(edges):
        if v not in index:
            visit(v)
    return out


def code_lines(code):
    return sum(1 for line in code.splitlines() if line.strip())


def crates():
    for d in sorted((ROOT / "crates").iterdir()):
        if (d / "src").is_dir():
            yield d.name, Crate(d / "src")


def rel(p):
    return str(p.relative_to(ROOT))


def check():
    bad = 0
    for name, c in crates():
        for comp in circles(c.arrows()):
            bad += 1
            print(f"import circle in {name}: " + " <-> ".join(rel(p) for p in comp))
        for path, code in c.code.items():
            n = code_lines(code)
            if n > MAX_CODE_LINES:
                bad += 1
                print(f"{rel(path)}: {n} lines of code, over {MAX_CODE_LINES}")
    if bad:
        sys.exit(1)
    print("module graph: no import circle, no file over %d lines of code" % MAX_CODE_LINES)


def mermaid(crate_name):
    c = dict(crates())[crate_name]
    ids = {p: "m%d" % i for i, p in enumerate(c.code)}
    print("graph TD")
    for p, i in ids.items():
        label = str(p.relative_to(c.src))
        print(f'  {i}["{label} ({code_lines(c.code[p])})"]')
    for a, bs in sorted(c.arrows().items()):
        for b in sorted(bs):
            print(f"  {ids[a]} --> {ids[b]}")


def report():
    found = []
    for name, c in crates():
        edges = c.arrows()
        print(f"{name}:")
        for p in sorted(c.code, key=lambda p: -code_lines(c.code[p])):
            to = ", ".join(sorted(str(t.relative_to(c.src)) for t in edges.get(p, ())))
            print(f"  {code_lines(c.code[p]):5} {p.relative_to(c.src)}" + (f" -> {to}" if to else ""))
        found += [(name, comp) for comp in circles(edges)]
    for name, comp in found:
        print(f"circle in {name}: " + " <-> ".join(rel(p) for p in comp))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--mermaid", metavar="CRATE")
    a = ap.parse_args()
    if a.check:
        check()
    elif a.mermaid:
        mermaid(a.mermaid)
    else:
        report()


if __name__ == "__main__":
    main()
