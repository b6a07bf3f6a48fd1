"""How big minitf's modules and functions are (standard library only: ``ast``).

Prints the lines of every module of ``minitf/`` grouped by subpackage (largest first within a
group, with the group's total), the longest functions and methods (``module:function  lines``,
a function's lines running from its ``def`` to its last line, nested functions included) and
how many functions are longer than 60 lines.

    python tools/size_report.py [--top 15] [--max-function-lines N] [PACKAGE_DIR]

With ``--max-function-lines N`` it exits with status 1, naming them, when any function is
longer than N lines.
"""

import argparse
import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LONG_FUNCTION = 60


def modules(package_dir):
    """{dotted module name: (path, group)} of every ``.py`` file under ``package_dir``; the group
    is the first-level subpackage (``minitf.distributed`` for ``minitf.distributed.wire.chunks``),
    or the package itself for its top-level modules."""
    found = {}
    for path in sorted(package_dir.rglob("*.py")):
        parts = list(path.relative_to(package_dir.parent).with_suffix("").parts)
        group = ".".join(parts[:2]) if len(parts) > 2 else parts[0]
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = (path, group)
    return found


def functions(tree):
    """(qualified name, lines) of every function and method of a module, nested ones too."""
    out = []

    def visit(node, prefix):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                name = prefix + child.name
                out.append((name, child.end_lineno - child.lineno + 1))
                visit(child, name + ".")
            elif isinstance(child, ast.ClassDef):
                visit(child, prefix + child.name + ".")
            else:
                visit(child, prefix)

    visit(tree, "")
    return out


def report(package_dir, top):
    """The report's lines, and [(module:function, lines)] longest first."""
    sizes, funcs, groups = {}, [], {}
    for module, (path, group) in modules(package_dir).items():
        text = path.read_text(encoding="utf-8")
        sizes[module] = len(text.splitlines())
        groups.setdefault(group, []).append((module, sizes[module]))
        funcs += [
            ("%s:%s" % (module, name), n)
            for name, n in functions(ast.parse(text, filename=str(path)))
        ]

    width = max(len(m) for m in sizes) + 2
    lines = ["lines per module of %s/" % package_dir.name]
    for group in sorted(groups):
        members = sorted(groups[group], key=lambda mn: (-mn[1], mn[0]))
        total = sum(n for _, n in members)
        label = group + ("/ (top level)" if group == package_dir.name else "/")
        lines.append("  %-*s %7d" % (width, label, total))
        lines += ["    %-*s %7d" % (width - 2, m, n) for m, n in members]
    lines.append("  %-*s %7d  in %d modules" % (width, "total", sum(sizes.values()), len(sizes)))

    funcs.sort(key=lambda fn: (-fn[1], fn[0]))
    lines.append("")
    lines.append("longest functions (def to last line)")
    fwidth = max(len(f) for f, _ in funcs[:top]) + 2 if funcs else 0
    lines += ["  %-*s %5d" % (fwidth, f, n) for f, n in funcs[:top]]
    over = [fn for fn in funcs if fn[1] > LONG_FUNCTION]
    lines.append("functions over %d lines: %d" % (LONG_FUNCTION, len(over)))
    return lines, funcs


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("package_dir", nargs="?", default=str(ROOT / "minitf"), type=Path)
    ap.add_argument("--top", type=int, default=15, help="how many functions to list (15)")
    ap.add_argument(
        "--max-function-lines",
        type=int,
        metavar="N",
        help="exit 1 when a function is longer than N lines",
    )
    args = ap.parse_args(argv)
    lines, funcs = report(args.package_dir, args.top)
    print("\n".join(lines))
    if args.max_function_lines is not None:
        too_long = [fn for fn in funcs if fn[1] > args.max_function_lines]
        if too_long:
            print(
                "\nlonger than %d lines (--max-function-lines):" % args.max_function_lines,
                file=sys.stderr,
            )
            for f, n in too_long:
                print("  %s  %d" % (f, n), file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
