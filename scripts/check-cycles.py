#!/usr/bin/env python3
"""Report import cycles in the crate: between its top-level modules, and
between the files of any one module directory.

Usage:
    scripts/check-cycles.py [SRC_DIR]     check SRC_DIR (default: src/ next to scripts/)
    scripts/check-cycles.py --self-test   check that a planted cycle is found
    scripts/check-cycles.py --graph DIR   print the file graph of module DIR (e.g. agent,
                                          tool/schema), or with DIR `.` the top-level
                                          module graph with the file edges behind each arrow

Exit status: 1 with every cycle printed when there is one, 0 with a
one-line summary otherwise (2 on a usage or self-test failure).

What counts as an edge from file A to file B: A names, outside its
`#[cfg(test)]` items, an item defined in B, through

- a `use crate::...`, `use super::...` or `use self::...` declaration (a
  `use` tree with braces and renames included), or a `use` of a child module
  (`use child::Item` in a `mod.rs`);
- a path in code starting with `crate::`, `super::`, `self::`, or with the
  name of a child module or of a module brought in by `use`.

Names are followed through re-exports to the file that defines them: `use
super::Agent` where the parent re-exports `Agent` from `core.rs` is an edge
to `core.rs`, not to the parent. A re-export alone (a `pub use` whose name
the file does not use itself) is namespace plumbing, not a dependency, and
`mod x;` declarations are not edges. Test code is skipped: `#[cfg(test)]`
items and modules (`mod tests { .. }`, `mod tests;`) and every `tests.rs`.

Graphs checked:
  (a) top-level modules of the crate (`src/x.rs` or `src/x/`), the crate
      root `lib.rs` excluded;
  (b) for every module directory (`src/m/`, `src/m/n/`, ...), its own file
      (`mod.rs`) and each child module, a child directory counting as one
      node.

Standard library only (python3).
"""

import os
import re
import sys
import tempfile

IDENT = r"[A-Za-z_][A-Za-z0-9_]*"


# ---------------------------------------------------------------- lexing


def strip_comments_and_strings(text):
    """The text with comments removed and string/char literals emptied,
    so that paths inside them are not read as code."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            depth, i = 1, i + 2
            while i < n and depth:
                if text.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif text.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    i += 1
            out.append(" ")
        elif c == "r" and re.match(r'r#*"', text[i:]) and (i == 0 or not re.match(r"\w", text[i - 1])):
            m = re.match(r'r(#*)"', text[i:])
            end = '"' + m.group(1)
            j = text.find(end, i + len(m.group(0)))
            i = n if j < 0 else j + len(end)
            out.append('""')
        elif c == "b" and text.startswith('b"', i) and (i == 0 or not re.match(r"\w", text[i - 1])):
            i = skip_string(text, i + 1)
            out.append('""')
        elif c == '"':
            i = skip_string(text, i)
            out.append('""')
        elif c == "'":
            # A char literal ('x', '\n', '\u{..}') or a lifetime ('a).
            m = re.match(r"'(\\u\{[0-9a-fA-F]+\}|\\.|[^\\'])'", text[i:])
            if m:
                i += len(m.group(0))
                out.append("' '")
            else:
                out.append(c)
                i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def skip_string(text, i):
    """Index just past the string literal opening at text[i] == '"'."""
    i += 1
    while i < len(text):
        if text[i] == "\\":
            i += 2
        elif text[i] == '"':
            return i + 1
        else:
            i += 1
    return i


def matching(text, i, open_c, close_c):
    """Index just past the bracket closing the one at text[i]."""
    depth = 0
    while i < len(text):
        if text[i] == open_c:
            depth += 1
        elif text[i] == close_c:
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return i


def item_end(text, i):
    """End of the item starting at i: its `;` or its `{..}` block, whichever
    comes first at depth 0."""
    while i < len(text):
        if text[i] == ";":
            return i + 1
        if text[i] == "{":
            return matching(text, i, "{", "}")
        if text[i] in "([":
            i = matching(text, i, text[i], ")" if text[i] == "(" else "]")
            continue
        i += 1
    return i


CFG_TEST = re.compile(r"#\s*\[\s*cfg\s*\(\s*test\s*\)\s*\]")
ATTR = re.compile(r"\s*#\s*\[")


def drop_test_items(code):
    """Code without `#[cfg(test)]` items; the names of test-only file
    modules (`#[cfg(test)] mod x;`)."""
    test_mods = set()
    while True:
        m = CFG_TEST.search(code)
        if not m:
            return code, test_mods
        i = m.end()
        # Further attributes on the same item.
        while True:
            a = ATTR.match(code, i)
            if not a:
                break
            i = matching(code, a.end() - 1, "[", "]")
        end = item_end(code, i)
        decl = re.match(r"\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+(" + IDENT + r")\s*;", code[i:end])
        if decl:
            test_mods.add(decl.group(1))
        code = code[: m.start()] + " " + code[end:]


# ------------------------------------------------------------ use trees


def parse_use_tree(s):
    """`a::{b, c::d as e, f::*}` -> [(bound name or '*', [segments])]."""
    s = re.sub(r"\s*(::|,|\{|\})\s*", r"\1", s.strip())
    s = re.sub(r"\s+", " ", s)
    out = []

    def walk(prefix, t):
        parts, depth, cur = [], 0, ""
        for ch in t:
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
            if ch == "," and depth == 0:
                parts.append(cur)
                cur = ""
            else:
                cur += ch
        parts.append(cur)
        for p in parts:
            p = p.strip()
            if not p:
                continue
            if "{" in p:
                head, rest = p.split("{", 1)
                walk(prefix + [x for x in head.split("::") if x], rest[: rest.rfind("}")])
                continue
            alias = None
            m = re.match(r"^(.*?) as (" + IDENT + r")$", p)
            if m:
                p, alias = m.group(1), m.group(2)
            segs = prefix + [x for x in p.split("::") if x]
            if segs and segs[-1] == "*":
                out.append(("*", segs[:-1]))
                continue
            if segs and segs[-1] == "self":
                segs = segs[:-1]
            if segs:
                out.append((alias or segs[-1], segs))

    walk([], s)
    return out


USE = re.compile(r"(^|[;{}\s])((?:pub(?:\([^)]*\))?\s+)?)use\s+([^;]*);")


def parse_uses(code):
    """[(bound, segments, is_pub)] of the file's `use` declarations, and the
    code with them blanked out."""
    uses, spans = [], []
    for m in USE.finditer(code):
        is_pub = bool(m.group(2).strip())
        for bound, segs in parse_use_tree(m.group(3)):
            if segs[0] == "::":
                continue
            uses.append((bound, segs, is_pub))
        spans.append((m.start(2), m.end()))
    blanked = list(code)
    for a, b in spans:
        for k in range(a, b):
            if blanked[k] != "\n":
                blanked[k] = " "
    return uses, "".join(blanked)


# ------------------------------------------------------------ the crate


class Module:
    def __init__(self, path, file):
        self.path = path  # tuple of segments; () is the crate root
        self.file = file  # the file that holds it
        self.children = {}  # name -> Module
        self.items = set()  # names defined here
        self.exported = {}  # the root only: `#[macro_export]` name -> file
        self.uses = []  # (bound, segments, is_pub)
        self.code = ""  # code with test items and use declarations blanked


ITEM = re.compile(
    r"(?:^|[;}\s])(?:pub(?:\([^)]*\))?\s+)?(?:unsafe\s+|const\s+|async\s+|extern\s+\"[^\"]*\"\s+)*"
    r"(struct|enum|union|trait|fn|type|const|static|mod)\s+(" + IDENT + r")"
)
MACRO = re.compile(r"macro_rules!\s*(" + IDENT + r")")
# A `#[macro_export]` macro is named from the crate root, defined in its file.
EXPORTED = re.compile(r"#\s*\[\s*macro_export\s*\]\s*macro_rules!\s*(" + IDENT + r")")


def top_level(code):
    """The code at brace depth 0 (item bodies blanked)."""
    out, depth = [], 0
    for ch in code:
        if ch == "}":
            depth -= 1
        out.append(ch if depth == 0 else (" " if ch != "\n" else "\n"))
        if ch == "{":
            depth += 1
    return "".join(out)


def load_crate(src):
    root_file = os.path.join(src, "lib.rs")
    if not os.path.exists(root_file):
        root_file = os.path.join(src, "main.rs")
    modules = {}

    def load(path, file, is_dir_owner):
        mod = Module(path, file)
        modules[path] = mod
        with open(file, encoding="utf-8") as f:
            text = f.read()
        code, test_mods = drop_test_items(strip_comments_and_strings(text))
        top = top_level(code)
        mod.uses, mod.code = parse_uses(code)
        base = os.path.dirname(file) if is_dir_owner else os.path.splitext(file)[0]
        for m in ITEM.finditer(top):
            kind, name = m.group(1), m.group(2)
            mod.items.add(name)
            if kind != "mod":
                continue
            after = top[m.end():].lstrip()
            if not after.startswith(";") or name in test_mods:
                continue  # inline module (its code is this file's) or a test module
            for cand, owner in ((os.path.join(base, name + ".rs"), False),
                                (os.path.join(base, name, "mod.rs"), True)):
                if os.path.exists(cand) and os.path.basename(cand) != "tests.rs":
                    mod.children[name] = load(path + (name,), cand, owner)
                    break
        for m in MACRO.finditer(top):
            mod.items.add(m.group(1))
        for m in EXPORTED.finditer(top):
            modules[()].exported[m.group(1)] = file
        return mod

    load((), root_file, True)
    return modules


def resolve(modules, here, segs, depth=0):
    """The file defining what `segs` names when written in module `here`;
    None for paths outside the crate."""
    if depth > 20 or not segs:
        return None
    cur = modules[here]
    i = 0
    first = segs[0]
    if first == "crate":
        cur, i = modules[()], 1
    elif first in ("super", "self"):
        while i < len(segs) and segs[i] in ("super", "self"):
            if segs[i] == "super":
                if not cur.path:
                    return None
                cur = modules[cur.path[:-1]]
            i += 1
    while i < len(segs):
        s = segs[i]
        if s in cur.children:
            cur = cur.children[s]
            i += 1
            continue
        if s in cur.items:
            return cur.file
        if s in cur.exported:
            return cur.exported[s]
        for bound, target, _ in cur.uses:
            if bound == s and target != segs:
                f = resolve(modules, cur.path, target + segs[i + 1:], depth + 1)
                return f if f else None
        for bound, target, _ in cur.uses:
            if bound == "*":
                f = resolve(modules, cur.path, target + segs[i:], depth + 1)
                if f:
                    return f
        # A name not found at this level: outside the crate when it is the
        # first segment (std, serde, a local), else something generated here.
        return cur.file if i > 0 else None
    return cur.file


CODE_PATH = re.compile(r"(?<![\w:])(" + IDENT + r"(?:\s*::\s*" + IDENT + r")+)")


def edges_of(modules, mod):
    """The files `mod`'s file refers to (itself excluded)."""
    out = set()
    code_names = set(re.findall(IDENT, mod.code))
    for bound, segs, is_pub in mod.uses:
        if is_pub and bound != "*" and bound not in code_names:
            continue  # a re-export, not a dependency
        if is_pub and bound == "*":
            continue
        f = resolve(modules, mod.path, segs)
        if f:
            out.add(f)
    module_names = set(mod.children) | {"crate", "super", "self"}
    for bound, segs, _ in mod.uses:
        if bound and bound != "*":
            module_names.add(bound)
    for m in CODE_PATH.finditer(mod.code):
        segs = [s for s in re.split(r"\s*::\s*", m.group(1)) if s]
        if segs[0] not in module_names:
            continue
        f = resolve(modules, mod.path, segs)
        if f:
            out.add(f)
    out.discard(mod.file)
    return out


# ------------------------------------------------------------ cycles


def find_cycles(nodes, edges):
    """One cycle (as a node list) per strongly connected component with
    more than one node."""
    index, low, stack, on, sccs = {}, {}, [], set(), []
    counter = [0]

    def strong(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
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
                sccs.append(comp)

    sys.setrecursionlimit(10000)
    for v in sorted(nodes):
        if v not in index:
            strong(v)
    cycles = []
    for comp in sccs:
        members = set(comp)
        start = min(comp)
        # Shortest cycle through `start` inside the component (BFS).
        prev, frontier, found = {start: None}, [start], None
        while frontier and not found:
            nxt = []
            for v in frontier:
                for w in sorted(edges.get(v, ())):
                    if w not in members:
                        continue
                    if w == start:
                        found = v
                        break
                    if w not in prev:
                        prev[w] = v
                        nxt.append(w)
                if found:
                    break
            frontier = nxt
        path, v = [], found
        while v is not None:
            path.append(v)
            v = prev[v]
        path.reverse()
        cycles.append((sorted(comp), path + [start]))
    return cycles


def check(src):
    """(cycle reports, summary line)."""
    modules = load_crate(src)
    file_edges = {m.file: edges_of(modules, m) for m in modules.values()}
    module_of = {m.file: m.path for m in modules.values()}
    rel = lambda f: os.path.relpath(f, src)
    reports = []

    # (a) top-level modules.
    tops = {p[0] for p in module_of.values() if p}
    top_edges, why = {}, {}
    for f, targets in sorted(file_edges.items()):
        a = module_of[f]
        if not a:
            continue
        for t in sorted(targets):
            b = module_of[t]
            if b and b[0] != a[0]:
                top_edges.setdefault(a[0], set()).add(b[0])
                why.setdefault((a[0], b[0]), []).append("%s -> %s" % (rel(f), rel(t)))
    for comp, path in find_cycles(tops, top_edges):
        reports.append("cycle between top-level modules: " + " -> ".join(path)
                       + ("  (all of: %s)" % ", ".join(comp) if len(comp) > len(path) - 1 else ""))

    graphs = {".": {a: {"%s (%s)" % (b, "; ".join(why[(a, b)])) for b in bs}
                     for a, bs in top_edges.items()}}

    # (b) the files of each module directory.
    dirs = 0
    for mod in modules.values():
        if not mod.children or not (mod.file.endswith("mod.rs") or mod.path == ()):
            continue
        if mod.path == ():
            continue  # the crate root's files are the top-level modules: (a)
        dirs += 1
        depth = len(mod.path)

        def node(f):
            p = module_of[f]
            if p[:depth] != mod.path:
                return None
            return rel(mod.file) if len(p) == depth else p[depth]

        nodes, dir_edges = set(), {}
        for f, targets in file_edges.items():
            a = node(f)
            if a is None:
                continue
            nodes.add(a)
            for t in targets:
                b = node(t)
                if b is not None and b != a:
                    dir_edges.setdefault(a, set()).add(b)
        label = lambda n: n if n.endswith(".rs") else "%s/%s" % ("/".join(mod.path), n)
        for comp, path in find_cycles(nodes, dir_edges):
            reports.append("cycle between the files of %s/: %s%s" % (
                "/".join(mod.path), " -> ".join(label(n) for n in path),
                "  (all of: %s)" % ", ".join(label(n) for n in comp) if len(comp) > len(path) - 1 else ""))
        graphs["/".join(mod.path)] = dir_edges

    n_edges = sum(len(v) for v in file_edges.values())
    summary = "no import cycle: %d files, %d file edges, %d top-level modules, %d module directories" % (
        len(modules), n_edges, len(tops), dirs)
    return reports, summary, graphs


# ------------------------------------------------------------ self-test


def self_test():
    cases = {
        # A top-level cycle closed by a path in code, one closed by a
        # `#[macro_export]` macro (named from the root, defined in c.rs),
        # and a directory cycle closed through a re-export in mod.rs.
        "cyclic": {
            "lib.rs": "mod a;\nmod b;\nmod c;\nmod d;\nmod m;\npub use crate::a::Y;\n",
            "c.rs": "use crate::d::Z;\n#[macro_export]\nmacro_rules! __mac { () => {} }\npub struct W(Z);\n",
            "d.rs": "pub struct Z;\nfn f() { crate::__mac!(); }\n",
            "a.rs": "use crate::b::X;\npub struct Y(X);\n",
            "b.rs": "pub struct X;\nfn f() -> usize { std::mem::size_of::<crate::Y>() }\n",
            "m/mod.rs": "mod p;\nmod q;\npub use q::Q;\n",
            "m/p.rs": "use super::Q;\npub struct P;\n",
            "m/q.rs": "pub struct Q(super::p::P);\n",
        },
        # The same shapes without a cycle: a re-export alone, paths in
        # comments and strings, and test code are not edges.
        "acyclic": {
            "lib.rs": "mod a;\nmod b;\nmod m;\npub use crate::a::Y;\npub use crate::m::Q;\n",
            "a.rs": "use crate::b::X;\npub struct Y(X);\n",
            "b.rs": "//! see crate::a::Y\npub struct X;\nconst S: &str = \"crate::a::Y\";\n"
                    "#[cfg(test)]\nmod tests {\n    use crate::a::Y;\n}\n#[cfg(test)]\nmod more;\n",
            "b/more.rs": "use crate::a::Y;\n",
            "m/mod.rs": "mod p;\nmod q;\nmod tests;\npub use q::Q;\npub use p::P;\n",
            "m/p.rs": "pub struct P;\n",
            "m/q.rs": "use super::P;\npub struct Q(P);\n",
            "m/tests.rs": "use super::q::Q;\n",
        },
    }
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, files in cases.items():
            root = os.path.join(tmp, name)
            for rel_path, body in files.items():
                path = os.path.join(root, rel_path)
                os.makedirs(os.path.dirname(path), exist_ok=True)
                with open(path, "w", encoding="utf-8") as f:
                    f.write(body)
            results[name] = check(root)
    cyclic = results["cyclic"][0]
    acyclic = results["acyclic"][0]
    ok = True
    want = ["cycle between top-level modules: a -> b -> a",
            "cycle between top-level modules: c -> d -> c",
            "cycle between the files of m/: m/p -> m/q -> m/p"]
    if sorted(cyclic) != sorted(want):
        print("self-test FAILED: expected %r, got %r" % (want, cyclic))
        ok = False
    if acyclic:
        print("self-test FAILED: false cycles %r" % acyclic)
        ok = False
    if ok:
        print("self-test passed: the planted cycles were found, the acyclic tree reported none")
    return 0 if ok else 2


def main(argv):
    if len(argv) > 1 and argv[1] == "--self-test":
        return self_test()
    if len(argv) > 2 and argv[1] == "--graph":
        # The file graph of one module directory, e.g. `--graph agent`.
        src = argv[3] if len(argv) > 3 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src")
        graphs = check(os.path.normpath(src))[2]
        for a, bs in sorted(graphs.get(argv[2], {}).items()):
            print("%s -> %s" % (a, ", ".join(sorted(bs))))
        return 0
    if len(argv) > 1 and argv[1].startswith("-"):
        print(__doc__)
        return 2
    src = argv[1] if len(argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src")
    src = os.path.normpath(src)
    reports, summary, _ = check(src)
    for r in reports:
        print(r)
    if reports:
        print("%d cycle(s)" % len(reports))
        return 1
    print(summary)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
