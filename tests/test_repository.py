"""The repository stands on its own: no tracked file points outside it.

A clone with nothing beside it must pass ``make test``, so no tracked text file may name an
absolute path into the project workspace (the folder the clones live in) nor a sibling folder
of the clone (``..`` followed by the shared folder's name): test data lives in ``tests/data``
and is read through paths relative to the test file.
"""

import re
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Spelled with a character class so that this file does not match itself.
OUTSIDE = [
    ("absolute path into the workspace", re.compile(r"(?<![\w.:/~-])/w[o]rk/")),
    ("path to a folder beside the clone", re.compile(r"\.\./sh[a]red\b")),
]
# Not under version control (the .gitignore entries and tool caches), for the walk without git.
UNTRACKED_DIRS = {
    ".git",
    ".venv",
    "__pycache__",
    "build",
    "dist",
    ".pytest_cache",
    ".hypothesis",
    ".ipynb_checkpoints",
    ".ruff_cache",
}
BINARY_SUFFIXES = {".png", ".jpg", ".jpeg", ".gif", ".ico", ".pdf", ".whl", ".gz", ".zip"}


def tracked_files():
    """The files git tracks; without git (or outside a checkout), every file of the tree except
    the untracked folders above."""
    git = shutil.which("git")
    if git:
        r = subprocess.run([git, "ls-files", "-z"], cwd=ROOT, capture_output=True, timeout=60)
        if r.returncode == 0:
            return [ROOT / name for name in r.stdout.decode().split("\0") if name]
    return [
        p
        for p in ROOT.rglob("*")
        if p.is_file()
        and not any(
            part in UNTRACKED_DIRS or part.endswith(".egg-info")
            for part in p.relative_to(ROOT).parts
        )
    ]


def text_of(path):
    """The file's text, or None for a binary file."""
    if path.suffix.lower() in BINARY_SUFFIXES:
        return None
    data = path.read_bytes()
    if b"\0" in data:
        return None
    return data.decode("utf-8", errors="replace")


def test_tracked_files_are_found():
    files = tracked_files()
    names = {p.relative_to(ROOT).as_posix() for p in files}
    assert {"pyproject.toml", "README.md", "minitf/__init__.py", "tests/conftest.py"} <= names


def test_no_tracked_file_points_outside_the_repository():
    found = []
    for path in sorted(tracked_files()):
        if not path.is_file():  # deleted in the work tree, not yet committed
            continue
        text = text_of(path)
        if text is None:
            continue
        for number, line in enumerate(text.splitlines(), 1):
            for what, pattern in OUTSIDE:
                if pattern.search(line):
                    found.append(
                        "%s:%d: %s: %s"
                        % (path.relative_to(ROOT).as_posix(), number, what, line.strip()[:120])
                    )
    assert not found, "files that depend on what lies outside the repository:\n" + "\n".join(found)


def test_the_design_doc_names_every_module_and_no_other():
    """docs/design.md's module map stays true: every module of the package is named there (by
    its path under minitf/), and every path it names exists."""
    text = (ROOT / "docs" / "design.md").read_text()
    text = text.split("## Module map", 1)[1].split("\n## ", 1)[0]
    modules = {
        str(p.relative_to(ROOT / "minitf"))
        for p in (ROOT / "minitf").rglob("*.py")
        if "__pycache__" not in p.parts
    }
    named = set(re.findall(r"`((?:[a-z_]+/)*[a-z_0-9]+\.py)`", text))
    named = {n[len("minitf/") :] if n.startswith("minitf/") else n for n in named}
    assert sorted(modules - named) == [], "modules missing from docs/design.md"
    assert sorted(named - modules) == [], "docs/design.md names modules that do not exist"


def test_every_notebook_is_committed_as_run_top_to_bottom_in_one_kernel():
    """nbval compares outputs but passes a notebook saved with none: a notebook whose code cells
    are not numbered 1, 2, ..., n was saved unexecuted, partly executed or out of order."""
    import json

    notebooks = sorted(
        p for p in (ROOT / "notebooks").rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts
    )
    assert notebooks
    wrong = {}
    for path in notebooks:
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        counts = [c.get("execution_count") for c in cells if c["cell_type"] == "code"]
        if counts != list(range(1, len(counts) + 1)):
            wrong[path.relative_to(ROOT).as_posix()] = counts
    assert not wrong, "refresh these notebooks with nbconvert --execute: %s" % wrong
