#!/usr/bin/env python3
"""Check that ARCHITECTURE.md still maps the crate: its files, its imports,
its public surface and its Cargo features.

Usage:
    scripts/check-architecture.py [ROOT]   check ROOT (default: the crate next to scripts/):
                                           ROOT/ARCHITECTURE.md against ROOT/src and ROOT/Cargo.toml
    scripts/check-architecture.py --self-test
                                           check that each kind of drift is found in small
                                           synthetic trees, and that a true map passes

Exit status: 1 with every discrepancy printed, each saying what to add or
remove and where; 0 with a one-line summary otherwise (2 on a usage or
self-test failure).

What is checked:

1. Files. Every file of the crate's module tree (the files `lib.rs`
   reaches through `mod x;`, as scripts/check-cycles.py loads them) is
   named in the "Modules" table, and so is every directory holding one;
   every file and directory the table names exists. A row's module cell
   (`x/` or `x.rs`) names that directory or file under src/; in the files
   column, `y.rs` and `y/` are under the row's directory (src/ for a file
   row), and inside the parentheses right after a `y/` under that
   directory. A directory named counts for its `mod.rs`. Bare names
   (`reply`) do not count: write `reply.rs`.
   Not in the map, on purpose: `lib.rs` (the "Public surface" section is
   its map) and test code, i.e. `tests.rs` and every file declared by a
   `#[cfg(test)] mod x;` (`test_util.rs`) or named by a `#[path = ".."]`
   (`#[path = "rules_tests.rs"] mod tests;`): they are the unit tests of the
   module they sit in, and naming them would make every new test file a
   map edit. A .rs file under src/ that is neither in the module tree nor
   test code is reported too: it is not compiled, so there is nothing to map.
2. Layers. Every top-level module declared in src/lib.rs (inline `pub mod
   x { .. }` re-export namespaces and test modules aside) is in the layer
   diagram, and the diagram names nothing else; no module imports a module
   of a higher row, and an import within a row is drawn as an arrow
   (`a ─► b` or `b ◄─ a`), every arrow an import. The "imports" table lists, per module, the crate
   modules it imports, and must equal what the code imports: check-cycles'
   edges (names followed through re-exports to the defining file, test code
   skipped) plus re-exports, since `pub use crate::web::fetch` needs `web`
   as much as a `use` does. A module without a row imports nothing.
3. Public surface. Every root re-export of src/lib.rs (`pub use crate::..`
   at the top level, not `#[doc(hidden)]`) is named in the first row of the
   "Public surface" table (`pikuri::*`), which names nothing else; every
   `pub mod` of src/lib.rs (not `#[doc(hidden)]`) has a `pikuri::x` row, and
   every such row a `pub mod`.
4. Features. Every Cargo feature of Cargo.toml's [features] but `default`
   and the internal `_`-prefixed ones is named, in backticks, in the
   paragraph of ARCHITECTURE.md that says "Cargo features".

The Rust lexing (comments, strings, `#[cfg(test)]` items, `use` trees,
name resolution) is scripts/check-cycles.py's, imported from it.

Standard library only (python3).
"""

import importlib.util
import os
import re
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
DOC = "ARCHITECTURE.md"
ARROWS = ("\u2500\u25ba", "\u25c4\u2500")  # `a ─► b` and `b ◄─ a`: a imports b
ARROW = "|".join(ARROWS)


def load_check_cycles():
    spec = importlib.util.spec_from_file_location("check_cycles", os.path.join(HERE, "check-cycles.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


cc = load_check_cycles()
IDENT = cc.IDENT


# ------------------------------------------------------------ the document


def sections(text):
    """{"## heading": [lines]} of the document's level-2 sections."""
    out, cur = {}, None
    for line in text.splitlines():
        if line.startswith("## "):
            cur = line[3:].strip()
            out[cur] = []
        elif cur is not None:
            out[cur].append(line)
    return out


def split_row(line):
    """The cells of a table row; a `|` inside backticks is text."""
    cells, cur, tick = [], "", False
    for ch in line.strip().strip("|"):
        if ch == "`":
            tick = not tick
        if ch == "|" and not tick:
            cells.append(cur.strip())
            cur = ""
        else:
            cur += ch
    cells.append(cur.strip())
    return cells


def tables(lines):
    """Every table in `lines`, as a list of body rows (lists of cells),
    header and rule dropped."""
    out, cur = [], None
    for line in lines:
        if line.lstrip().startswith("|"):
            if cur is None:
                cur = []
                out.append(cur)
            cells = split_row(line)
            if all(re.fullmatch(r":?-+:?", c) for c in cells if c):
                continue
            cur.append(cells)
        else:
            cur = None
    return [t[1:] for t in out]  # the header row


def ticks(cell):
    return re.findall(r"`([^`]*)`", cell)


def drop_parens(s):
    out, depth = [], 0
    for ch in s:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth = max(0, depth - 1)
        elif depth == 0:
            out.append(ch)
    return "".join(out)


def find_section(secs, prefix, problems):
    for name, lines in secs.items():
        if name.lower().startswith(prefix.lower()):
            return lines
    problems.append("%s has no section \"## %s...\": the check needs it" % (DOC, prefix))
    return []


# ------------------------------------------------------------ the crate


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def lib_items(src):
    """From src/lib.rs: (file modules, pub mod namespaces, root re-exports),
    each without the `#[doc(hidden)]` ones where the set is public."""
    code, test_mods = cc.drop_test_items(cc.strip_comments_and_strings(read(os.path.join(src, "lib.rs"))))
    top = cc.top_level(code)
    file_mods, namespaces = set(), set()
    item = re.compile(r"((?:#\s*\[[^\]]*\]\s*)*)(pub(?:\([^)]*\))?\s+)?mod\s+(" + IDENT + r")\s*([;{])")
    for m in item.finditer(top):
        attrs, is_pub, name, end = m.group(1), m.group(2), m.group(3), m.group(4)
        hidden = "doc" in attrs and "hidden" in attrs
        if end == ";" and name not in test_mods:
            file_mods.add(name)
        if is_pub and is_pub.strip() == "pub" and not hidden:
            namespaces.add(name)
    reexports = set()
    use = re.compile(r"((?:#\s*\[[^\]]*\]\s*)*)pub\s+use\s+([^;]*);")
    for m in use.finditer(top):
        if "hidden" in m.group(1):
            continue
        # `top` blanks braces' insides: the tree is read from `code`.
        tree = code[m.start(2):code.find(";", m.start(2))]
        for bound, segs in cc.parse_use_tree(tree):
            if segs and segs[0] == "crate" and bound != "*":
                reexports.add(bound)
    return file_mods, namespaces, reexports


def imports(src):
    """(modules, {top module: {top modules it imports}}, {(a, b): [file edges]})."""
    modules = cc.load_crate(src)
    rel = lambda f: os.path.relpath(f, src)
    out, why = {}, {}
    module_of = {m.file: m.path for m in modules.values()}
    for mod in modules.values():
        if not mod.path:
            continue
        targets = set(cc.edges_of(modules, mod))
        for bound, segs, is_pub in mod.uses:
            if is_pub:  # a re-export: check-cycles leaves it out, a layer does not
                f = cc.resolve(modules, mod.path, segs)
                if f:
                    targets.add(f)
        a = mod.path[0]
        out.setdefault(a, set())
        for f in targets:
            b = module_of.get(f)
            if b and b[0] != a:
                out[a].add(b[0])
                why.setdefault((a, b[0]), []).append("%s -> %s" % (rel(mod.file), rel(f)))
    return modules, out, why


def features(cargo_toml):
    """The [features] keys of Cargo.toml."""
    out, inside = [], False
    for line in read(cargo_toml).splitlines():
        s = line.strip()
        if s.startswith("["):
            inside = s == "[features]"
            continue
        m = re.match(r"^([A-Za-z0-9_-]+)\s*=", s)
        if inside and m:
            out.append(m.group(1))
    return out


# ------------------------------------------------------------ checks


def orphans(src, modules):
    """The .rs files under src/ that are neither in the module tree nor
    test code (`tests.rs`, a file or directory declared by `#[cfg(test)]
    mod x;`) nor named by a `#[path = ".."]` (which check-cycles does not
    follow: such a file is taken for test code)."""
    tree = {m.file for m in modules.values()}
    tests = set()
    for mod in modules.values():
        owner = mod.path == () or os.path.basename(mod.file) == "mod.rs"
        base = os.path.dirname(mod.file) if owner else os.path.splitext(mod.file)[0]
        text = read(mod.file)
        _, test_mods = cc.drop_test_items(cc.strip_comments_and_strings(text))
        tests.update(os.path.join(base, name) for name in test_mods)
        # `#[path = "x_tests.rs"] mod tests;`: relative to the file's directory.
        for target in re.findall(r'#\s*\[\s*path\s*=\s*"([^"]+)"\s*\]', text):
            tests.add(os.path.splitext(os.path.normpath(os.path.join(os.path.dirname(mod.file), target)))[0])
    out = []
    for d, _, names in os.walk(src):
        for name in names:
            f = os.path.join(d, name)
            if not name.endswith(".rs") or f in tree or name == "tests.rs":
                continue
            stem = os.path.splitext(f)[0]
            if any(stem == t or f.startswith(t + os.sep) for t in tests):
                continue
            out.append(f)
    return out


def check_files(src, modules, mod_lines, problems):
    """1. The Modules table against the module tree."""
    rel = lambda p: os.path.relpath(p, src).replace(os.sep, "/")
    named_files, named_dirs = {}, {}  # path -> the row that names it
    rows = [r for t in tables(mod_lines) for r in t]
    if not rows:
        problems.append("%s: the \"Modules\" section has no table" % DOC)
    for cells in rows:
        if len(cells) < 2:
            continue
        row = cells[0]
        ctx = src
        for tok in ticks(cells[0]):
            if tok.endswith("/"):
                ctx = os.path.join(src, tok.rstrip("/"))
                named_dirs[ctx] = row
            elif tok.endswith(".rs"):
                named_files[os.path.join(src, tok)] = row
        # The files column: a stack of directories, pushed by `y/ (`.
        stack, depth, pending, i, cell = [(0, ctx)], 0, None, 0, cells[1]
        while i < len(cell):
            ch = cell[i]
            if ch == "`":
                j = cell.find("`", i + 1)
                j = len(cell) if j < 0 else j
                tok = cell[i + 1:j]
                i = j + 1
                base = stack[-1][1]
                if tok.endswith(".rs") and re.fullmatch(r"[\w/]+\.rs", tok):
                    path = os.path.join(base, tok)
                    named_files[path] = row
                    if "/" in tok:
                        named_dirs[os.path.dirname(path)] = row
                elif re.fullmatch(r"[\w/]+/", tok):
                    path = os.path.join(base, tok.rstrip("/"))
                    named_dirs[path] = row
                    pending = path
                else:
                    pending = None
                continue
            if ch == "(":
                depth += 1
                if pending:
                    stack.append((depth, pending))
            elif ch == ")":
                if stack[-1][0] == depth and depth > 0:
                    stack.pop()
                depth -= 1
            if not ch.isspace():
                pending = None
            i += 1

    def where(path):
        """The row a file or directory under src/ belongs in, as advice."""
        parent = os.path.dirname(path)
        if parent == src:
            return "add a row for `%s` to the \"Modules\" table" % (
                rel(path) + ("/" if os.path.isdir(path) else ""))
        top = os.path.join(src, rel(path).split("/")[0])
        inner = os.path.relpath(parent, top)
        name = os.path.basename(path) + ("/" if os.path.isdir(path) else "")
        if inner == ".":
            return "name `%s` in the files column of the `%s/` row" % (name, rel(top))
        return "name `%s` in the files column of the `%s/` row, inside the parentheses after `%s/`" % (
            name, rel(top), inner.replace(os.sep, "/"))

    tree = {m.file for m in modules.values() if m.path}
    stray = orphans(src, modules)
    for f in sorted(stray):
        problems.append("src/%s is not part of the crate: no `mod` declares it (outside test code)."
                        " Declare it, then map it, or delete it" % rel(f))
    dirs = set()
    for f in tree:
        d = os.path.dirname(f)
        while d != src and d.startswith(src):
            dirs.add(d)
            d = os.path.dirname(d)
    for d in sorted(dirs):
        if d not in named_dirs:
            problems.append("src/%s/ is missing from %s's Modules table: %s" % (rel(d), DOC, where(d)))
    for f in sorted(tree):
        if f in named_files:
            continue
        if os.path.basename(f) == "mod.rs":
            continue  # named with its directory, or reported with it
        problems.append("src/%s is missing from %s's Modules table: %s" % (rel(f), DOC, where(f)))
    for f, row in sorted(named_files.items()):
        if not os.path.isfile(f):
            problems.append("%s's Modules table names src/%s (row %s), which does not exist: remove it"
                            " (or rename it to the file that replaced it)" % (DOC, rel(f), row))
        elif f not in tree and f not in stray and not os.path.basename(f) == "mod.rs":
            problems.append("%s's Modules table names src/%s (row %s), which is test code: remove it" % (
                DOC, rel(f), row))
    for d, row in sorted(named_dirs.items()):
        if not os.path.isdir(d):
            problems.append("%s's Modules table names src/%s/ (row %s), which does not exist: remove it"
                            " (or rename it)" % (DOC, rel(d), row))
    return len(tree), len(dirs)


def check_layers(file_mods, actual, why, layer_lines, problems):
    """2. The layer diagram and the imports table against the imports."""
    text = "\n".join(layer_lines)
    m = re.search(r"```text\n(.*?)```", text, re.S)
    row_of, rows, arrows = {}, [], set()
    if not m:
        problems.append("%s: the \"Layers\" section has no ```text layer diagram" % DOC)
    else:
        for line in m.group(1).splitlines():
            words = re.findall(ARROW + "|" + IDENT + r"/?", drop_parens(line))
            if not words:
                continue
            rows.append(words[0])
            for k, w in enumerate(words[1:], 1):
                if w in ARROWS:
                    if 1 < k < len(words) - 1 and words[k - 1] not in ARROWS and words[k + 1] not in ARROWS:
                        a, b = words[k - 1].rstrip("/"), words[k + 1].rstrip("/")
                        arrows.add((a, b) if w == ARROWS[0] else (b, a))
                    continue
                row_of[w.rstrip("/")] = len(rows) - 1
    for name in sorted(file_mods - set(row_of)):
        deps = sorted(actual.get(name, ()))
        placed = [row_of[d] for d in deps if d in row_of]
        if not rows:
            where = "add it"
        elif not deps:
            where = "add it to the bottom row, `%s` (it imports none)" % rows[-1]
        else:
            # Rows are drawn top first: the module sits at or above its
            # highest import.
            where = "add it to row `%s` or one above it (it imports %s)" % (
                rows[min(placed)] if placed else rows[-1], ", ".join(deps))
        problems.append("top-level module `%s` (src/lib.rs) is missing from %s's layer diagram: %s" % (
            name, DOC, where))
    for name in sorted(set(row_of) - file_mods):
        problems.append("%s's layer diagram names `%s`, which is not a top-level module of src/lib.rs:"
                        " remove it (row `%s`)" % (DOC, name, rows[row_of[name]]))
    for a in sorted(actual):
        for b in sorted(actual[a]):
            if a in row_of and b in row_of and row_of[b] < row_of[a]:  # drawn top row first
                problems.append("`%s` (layer row `%s`) imports `%s` (row `%s`, above it): imports must point"
                                " down; move one of them in %s's layer diagram (%s)" % (
                                    a, rows[row_of[a]], b, rows[row_of[b]], DOC, why[(a, b)][0]))
            elif a in row_of and b in row_of and row_of[b] == row_of[a] and (a, b) not in arrows:
                problems.append("`%s` imports `%s`, in its own layer row `%s`: draw the arrow (`%s %s %s`) in"
                                " %s's layer diagram, or move `%s` up a row (%s)" % (
                                    a, b, rows[row_of[a]], a, ARROWS[0], b, DOC, a, why[(a, b)][0]))
    for a, b in sorted(arrows):
        if b not in actual.get(a, ()):
            problems.append("%s's layer diagram draws `%s %s %s`, but `%s` does not import `%s`: remove the"
                            " arrow" % (DOC, a, ARROWS[0], b, a, b))

    claimed = {}
    body = [r for t in tables(layer_lines) for r in t]
    if not body:
        problems.append("%s: the \"Layers\" section has no imports table" % DOC)
    for cells in body:
        if len(cells) < 2:
            continue
        names = ticks(cells[0])
        deps = set()
        for part in drop_parens(cells[1]).split(","):
            part = part.strip().strip("`").strip()
            if part and not re.fullmatch(IDENT, part):
                problems.append("%s's imports table, row %s: cannot read `%s`: write module names separated"
                                " by commas, notes in parentheses" % (DOC, cells[0], part))
            elif part:
                deps.add(part)
        for name in names:
            if name in claimed:
                problems.append("%s's imports table has two rows for `%s`: keep one" % (DOC, name))
            claimed[name] = deps
    for name in sorted(set(claimed) - file_mods):
        problems.append("%s's imports table has a row for `%s`, which is not a top-level module of"
                        " src/lib.rs: remove the row" % (DOC, name))
    for name in sorted(file_mods):
        have = actual.get(name, set())
        if name not in claimed:
            if have:
                problems.append("%s's imports table has no row for `%s`, which imports %s: add the row"
                                " `| `%s` | %s |`" % (DOC, name, ", ".join(sorted(have)), name,
                                                      ", ".join(sorted(have))))
            continue
        say = claimed[name]
        for b in sorted(have - say):
            problems.append("%s's imports table, row `%s`: add `%s` (%s)" % (DOC, name, b, why[(name, b)][0]))
        for b in sorted(say - have):
            problems.append("%s's imports table, row `%s`: remove `%s` (no file of `%s` imports it)" % (
                DOC, name, b, name))


def check_surface(namespaces, reexports, surface_lines, problems):
    """3. The Public surface table against lib.rs."""
    body = next(iter(tables(surface_lines)), [])
    rows = {}
    for cells in body:
        for tok in ticks(cells[0]):
            if tok.startswith("pikuri::"):
                rows[tok[len("pikuri::"):]] = cells
    if "*" not in rows:
        problems.append("%s's Public surface table has no `pikuri::*` row" % DOC)
    else:
        listed = {t.rstrip("!") for t in ticks(rows["*"][1]) if re.fullmatch(IDENT + "!?", t)}
        for name in sorted(reexports - listed):
            problems.append("root re-export `%s` (src/lib.rs) is missing from the `pikuri::*` row of %s's"
                            " Public surface table: add it" % (name, DOC))
        for name in sorted(listed - reexports):
            problems.append("the `pikuri::*` row of %s's Public surface table names `%s`, which src/lib.rs"
                            " does not re-export at the root: remove it" % (DOC, name))
    for name in sorted(namespaces - set(rows)):
        problems.append("`pub mod %s` (src/lib.rs) has no row in %s's Public surface table: add a"
                        " `pikuri::%s` row" % (name, DOC, name))
    for name in sorted(set(rows) - namespaces - {"*"}):
        problems.append("%s's Public surface table has a `pikuri::%s` row, but src/lib.rs has no public"
                        " `pub mod %s`: remove the row" % (DOC, name, name))


def check_features(feats, doc_text, problems):
    """4. The features paragraph against Cargo.toml."""
    paras = [p for p in re.split(r"\n\s*\n", doc_text) if "Cargo features" in p]
    if not paras:
        problems.append("%s has no paragraph that says \"Cargo features\"" % DOC)
        return
    named = set(ticks(paras[0]))
    for f in feats:
        if f == "default" or f.startswith("_"):
            continue
        if f not in named:
            problems.append("Cargo feature `%s` (Cargo.toml) is missing from %s's features paragraph"
                            " (\"...Cargo features...\"): name it, in backticks, with what it gates" % (f, DOC))


def check(root):
    """(problems, summary line)."""
    src = os.path.join(root, "src")
    doc_text = read(os.path.join(root, DOC))
    secs = sections(doc_text)
    problems = []
    modules, actual, why = imports(src)
    file_mods, namespaces, reexports = lib_items(src)
    n_files, n_dirs = check_files(src, modules, find_section(secs, "Modules", problems), problems)
    check_layers(file_mods, actual, why, find_section(secs, "Layers", problems), problems)
    check_surface(namespaces, reexports, find_section(secs, "Public surface", problems), problems)
    feats = features(os.path.join(root, "Cargo.toml"))
    check_features(feats, doc_text, problems)
    summary = ("%s maps the crate: %d files in %d directories, %d top-level modules and their imports,"
               " %d root re-exports, %d namespaces, %d features" % (
                   DOC, n_files, n_dirs, len(file_mods), len(reexports), len(namespaces),
                   len([f for f in feats if f != "default" and not f.startswith("_")])))
    return problems, summary


# ------------------------------------------------------------ self-test

# A crate whose map is true: a directory with a nested directory, a file
# row, a test file and a test module left out, an import through a
# re-export, a hidden module and a hidden re-export.
GOOD = {
    "Cargo.toml": "[package]\nname = \"x\"\n\n[features]\ndefault = [\"net\"]\nnet = []\n_bench = []\n\n"
                  "[dependencies]\n",
    "src/lib.rs": "mod a;\nmod b;\npub mod ns;\n#[cfg(test)]\nmod test_util;\n#[doc(hidden)]\npub mod __h;\n"
                  "pub use crate::a::{A, make};\npub use crate::b::B;\n"
                  "pub mod extra {\n    pub use crate::b::B2;\n}\n"
                  "#[cfg(fuzzing)]\n#[doc(hidden)]\npub use crate::a::fuzz_me;\n",
    "src/a/mod.rs": "mod deep;\nmod one;\n#[cfg(test)]\nmod tests;\npub struct A(crate::b::B);\npub fn make() {}\n"
                    "pub fn fuzz_me() {}\n",
    "src/a/one.rs": "pub struct One;\n",
    "src/a/tests.rs": "use crate::ns::N;\n",
    "src/a/deep/mod.rs": "mod inner;\n",
    "src/a/deep/inner.rs": "pub struct Inner;\n",
    "src/b.rs": "pub struct B;\npub struct B2;\n",
    "src/ns.rs": "pub use crate::a::A as N;\n",
    "src/__h.rs": "pub fn h() -> crate::b::B { crate::b::B }\n",
    "src/test_util.rs": "use crate::a::A;\n",
    "ARCHITECTURE.md": """# Architecture

## Public surface

| path | what | where |
|---|---|---|
| `pikuri::*` | `A`, `make`, `B` | private |
| `pikuri::ns` | `N` | `ns.rs` |
| `pikuri::extra` | `B2` | re-exports |

The periphery is gated by Cargo features: `net` (the network).

## Layers, bottom up

```text
top     ns   __h
middle  a/   (the middle)
bottom  b
```

| module | imports (crate modules) |
|---|---|
| `a` | b |
| `ns` | a (`A`, re-exported) |
| `__h` | b |

## Modules

| module | files | job |
|---|---|---|
| `a/` | `one.rs` (the one), `deep/` (`inner.rs` (the inner) and more) | a |
| `b.rs` | `B` | b |
| `ns.rs` | `N` | ns |
| `__h.rs` | | hooks |
""",
}


def drift(edits):
    """GOOD with `edits` applied: {path: None (delete) | text | (old, new)}."""
    files = dict(GOOD)
    for path, e in edits.items():
        if e is None:
            del files[path]
        elif isinstance(e, tuple):
            assert e[0] in files[path], (path, e[0])
            files[path] = files[path].replace(e[0], e[1], 1)
        else:
            files[path] = e
    return files


MD = "ARCHITECTURE.md"
TOP_MIDDLE = "top     ns   __h\nmiddle  a/   (the middle)"
CASES = {
    "true map": ({}, []),
    "new file": ({"src/a/two.rs": "pub struct Two;\n", "src/a/mod.rs": ("mod one;", "mod one;\nmod two;")},
                 ["src/a/two.rs is missing from ARCHITECTURE.md's Modules table: name `two.rs` in the files"
                  " column of the `a/` row"]),
    "new file in a nested directory": (
        {"src/a/deep/more.rs": "pub struct More;\n", "src/a/deep/mod.rs": "mod inner;\nmod more;\n"},
        ["src/a/deep/more.rs is missing from ARCHITECTURE.md's Modules table: name `more.rs` in the files"
         " column of the `a/` row, inside the parentheses after `deep/`"]),
    "new directory": (
        {"src/a/sub/mod.rs": "pub struct S;\n", "src/a/mod.rs": ("mod one;", "mod one;\nmod sub;")},
        ["src/a/sub/ is missing from ARCHITECTURE.md's Modules table: name `sub/` in the files column of"
         " the `a/` row"]),
    "removed file": ({"src/a/one.rs": None, "src/a/mod.rs": ("mod one;\n", "")},
                     ["ARCHITECTURE.md's Modules table names src/a/one.rs (row `a/`), which does not exist:"
                      " remove it (or rename it to the file that replaced it)"]),
    "new top-level module": (
        {"src/c.rs": "pub fn c() -> crate::b::B { crate::b::B }\n", "src/lib.rs": ("mod b;", "mod b;\nmod c;")},
        ["src/c.rs is missing from ARCHITECTURE.md's Modules table: add a row for `c.rs` to the \"Modules\""
         " table",
         "top-level module `c` (src/lib.rs) is missing from ARCHITECTURE.md's layer diagram: add it to row"
         " `bottom` or one above it (it imports b)",
         "ARCHITECTURE.md's imports table has no row for `c`, which imports b: add the row `| `c` | b |`"]),
    "new leaf module": ({"src/d.rs": "pub fn d() {}\n", "src/lib.rs": ("mod b;", "mod b;\nmod d;"),
                         MD: ("| `b.rs` | `B` | b |", "| `b.rs` | `B` | b |\n| `d.rs` | | d |")},
                        ["top-level module `d` (src/lib.rs) is missing from ARCHITECTURE.md's layer diagram:"
                         " add it to the bottom row, `bottom` (it imports none)"]),
    "removed top-level module": (
        {"src/__h.rs": None, "src/lib.rs": ("#[doc(hidden)]\npub mod __h;\n", "")},
        ["ARCHITECTURE.md's Modules table names src/__h.rs (row `__h.rs`), which does not exist: remove it"
         " (or rename it to the file that replaced it)",
         "ARCHITECTURE.md's layer diagram names `__h`, which is not a top-level module of src/lib.rs:"
         " remove it (row `top`)",
         "ARCHITECTURE.md's imports table has a row for `__h`, which is not a top-level module of src/lib.rs:"
         " remove the row"]),
    "new import": ({"src/b.rs": ("pub struct B2;", "pub struct B2;\nfn f() { crate::ns::n() }"),
                    "src/ns.rs": "pub use crate::a::A as N;\npub fn n() {}\n"},
                   ["ARCHITECTURE.md's imports table has no row for `b`, which imports ns: add the row"
                    " `| `b` | ns |`",
                    "`b` (layer row `bottom`) imports `ns` (row `top`, above it): imports must point down;"
                    " move one of them in ARCHITECTURE.md's layer diagram (b.rs -> ns.rs)"]),
    "import within a row, not drawn": (
        {MD: (TOP_MIDDLE, "top     ns   __h   a/\nmiddle  (the middle)")},
        ["`ns` imports `a`, in its own layer row `top`: draw the arrow (`ns \u2500\u25ba a`) in ARCHITECTURE.md's"
         " layer diagram, or move `ns` up a row (ns.rs -> a/mod.rs)"]),
    "import within a row, drawn": ({MD: (TOP_MIDDLE, "top     __h  ns \u2500\u25ba a/\nmiddle")}, []),
    "import within a row, drawn backwards": ({MD: (TOP_MIDDLE, "top     a/ \u25c4\u2500 ns   __h\nmiddle")},
                                             []),
    "arrow without an import": ({MD: ("top     ns   __h", "top     ns   __h \u2500\u25ba ns")},
                                ["ARCHITECTURE.md's layer diagram draws `__h \u2500\u25ba ns`, but `__h` does not"
                                 " import `ns`: remove the arrow"]),
    "import gone": ({"src/__h.rs": "pub fn h() {}\n"},
                    ["ARCHITECTURE.md's imports table, row `__h`: remove `b` (no file of `__h` imports it)"]),
    "import claimed missing": ({MD: ("| `a` | b |", "| `a` | |")},
                               ["ARCHITECTURE.md's imports table, row `a`: add `b` (a/mod.rs -> b.rs)"]),
    "new root re-export": ({"src/lib.rs": ("pub use crate::b::B;", "pub use crate::b::{B, B2};")},
                           ["root re-export `B2` (src/lib.rs) is missing from the `pikuri::*` row of"
                            " ARCHITECTURE.md's Public surface table: add it"]),
    "root re-export gone": ({"src/lib.rs": ("pub use crate::a::{A, make};", "pub use crate::a::A;")},
                            ["the `pikuri::*` row of ARCHITECTURE.md's Public surface table names `make`,"
                             " which src/lib.rs does not re-export at the root: remove it"]),
    "new namespace": ({"src/lib.rs": ("pub mod extra {", "pub mod more {}\npub mod extra {")},
                      ["`pub mod more` (src/lib.rs) has no row in ARCHITECTURE.md's Public surface table:"
                       " add a `pikuri::more` row"]),
    "namespace gone": ({"src/lib.rs": ("pub mod extra {\n    pub use crate::b::B2;\n}\n", "")},
                       ["ARCHITECTURE.md's Public surface table has a `pikuri::extra` row, but src/lib.rs"
                        " has no public `pub mod extra`: remove the row"]),
    "orphan file": ({"src/a/stray.rs": "pub struct Stray;\n"},
                    ["src/a/stray.rs is not part of the crate: no `mod` declares it (outside test code). Declare"
                     " it, then map it, or delete it"]),
    "file no longer declared": ({"src/a/mod.rs": ("mod one;\n", "")},
                                ["src/a/one.rs is not part of the crate: no `mod` declares it (outside test"
                                 " code). Declare it, then map it, or delete it"]),
    "test module behind #[path]": ({"src/b_tests.rs": "use crate::b::B;\n",
                                    "src/b.rs": ("pub struct B2;", "pub struct B2;\n#[cfg(test)]\n"
                                                 "#[path = \"b_tests.rs\"]\nmod tests;")}, []),
    "test file named": ({MD: ("`one.rs` (the one)", "`one.rs` (the one), `tests.rs`")},
                        ["ARCHITECTURE.md's Modules table names src/a/tests.rs (row `a/`), which is test code:"
                         " remove it"]),
    "new test module, not mapped": ({"src/a/more_tests.rs": "use crate::b::B;\n",
                                     "src/a/fixtures/mod.rs": "mod data;\n",
                                     "src/a/fixtures/data.rs": "pub const D: u8 = 0;\n",
                                     "src/a/mod.rs": ("mod one;", "mod one;\n#[cfg(test)]\nmod more_tests;\n"
                                                      "#[cfg(test)]\nmod fixtures;")}, []),
    "unreadable imports claim": ({MD: ("| `a` | b |", "| `a` | b; ns |")},
                                 ["ARCHITECTURE.md's imports table, row `a`: cannot read `b; ns`: write module"
                                  " names separated by commas, notes in parentheses",
                                  "ARCHITECTURE.md's imports table, row `a`: add `b` (a/mod.rs -> b.rs)"]),
    "new feature": ({"Cargo.toml": ("net = []", "net = []\ntls = []")},
                    ["Cargo feature `tls` (Cargo.toml) is missing from ARCHITECTURE.md's features paragraph"
                     " (\"...Cargo features...\"): name it, in backticks, with what it gates"]),
}


def self_test():
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        for name, (edits, want) in CASES.items():
            root = os.path.join(tmp, re.sub(r"\W+", "_", name))
            for rel_path, body in drift(edits).items():
                path = os.path.join(root, rel_path)
                os.makedirs(os.path.dirname(path), exist_ok=True)
                with open(path, "w", encoding="utf-8") as f:
                    f.write(body)
            got = check(root)[0]
            if sorted(got) != sorted(want):
                ok = False
                print("self-test FAILED, case %r:" % name)
                for p in sorted(set(want) - set(got)):
                    print("  expected: %s" % p)
                for p in sorted(set(got) - set(want)):
                    print("  got:      %s" % p)
    if ok:
        print("self-test passed: %d cases, each drift reported as expected, the true map passes" % len(CASES))
    return 0 if ok else 2


def main(argv):
    if len(argv) > 1 and argv[1] == "--self-test":
        return self_test()
    if len(argv) > 1 and argv[1].startswith("-"):
        print(__doc__)
        return 2
    root = os.path.normpath(argv[1] if len(argv) > 1 else os.path.join(HERE, ".."))
    problems, summary = check(root)
    for p in problems:
        print(p)
    if problems:
        print("%d discrepanc%s between %s and the code" % (len(problems), "y" if len(problems) == 1 else "ies",
                                                          os.path.join(root, DOC)))
        return 1
    print(summary)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
