#!/usr/bin/env python3
"""Count the code lines of Rust files: non-blank lines that are not `//`
comments (doc comments included), outside `#[cfg(test)]` modules.

    scripts/code-lines.py src/agent/*.rs        # one line per file
    scripts/code-lines.py --over 500 src/**/*.rs

The same rule is pinned for src/agent/ by the unit test
`agent::tests::no_agent_file_over_650_code_lines`.
"""
import sys


def code_lines(text):
    n = 0
    skip_depth = None  # brace depth of a #[cfg(test)] module being skipped
    depth = 0
    pending_cfg_test = False
    for line in text.splitlines():
        t = line.strip()
        if skip_depth is None and pending_cfg_test and t.startswith("mod ") and t.endswith("{"):
            skip_depth = depth
        if t == "#[cfg(test)]":
            pending_cfg_test = True
            continue
        elif not t.startswith("#["):
            pending_cfg_test = pending_cfg_test and t.startswith("mod ")
        counted = skip_depth is None and t and not t.startswith("//")
        # Braces in strings or comments are rare in this crate's code lines;
        # only the module's own braces matter here.
        if not t.startswith("//"):
            depth += t.count("{") - t.count("}")
        if skip_depth is not None and depth <= skip_depth:
            skip_depth = None
            pending_cfg_test = False
            continue
        if counted:
            n += 1
    return n


def main(argv):
    over = 0
    if argv[:1] == ["--over"]:
        over, argv = int(argv[1]), argv[2:]
    total = 0
    for path in argv:
        with open(path, encoding="utf-8") as f:
            n = code_lines(f.read())
        total += n
        if n > over:
            print(f"{n:6} {path}")
    print(f"{total:6} total")


if __name__ == "__main__":
    main(sys.argv[1:])
