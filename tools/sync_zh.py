"""Keeps the Chinese notebooks' code in step with the English ones (issue 26, 中文版).

Each ``notebooks/zh/X.ipynb`` is the twin of ``notebooks/X.ipynb``: its markdown is written in
Chinese, its code cells are the English notebook's, the same sources in the same order, with the
same cell metadata (the ``tags`` nbval reads: ``raises-exception``, ``nbval-ignore-output`` ...;
``book_section``), run times and view settings aside.
The English notebook is the one source of truth for the code; ``tests/test_zh_twins.py`` fails
when a twin drifts, and this script carries the English code cells over to the twin:

    python tools/sync_zh.py notebooks/03_placing_operations.ipynb [more English notebooks]
    python tools/sync_zh.py --check notebooks/03_placing_operations.ipynb

One code cell is the twin's own: its first code cell, tagged ``zh-language``, holds exactly
``LANGUAGE_SOURCE`` (``minitf.viz.set_language("zh")``: the pictures' legends, titles and buttons
in Chinese).  The kernel cannot know which notebook runs it, so the twin says so in code; this is
the one code difference allowed, the check requires it, and the script keeps (or adds) it.

The twin keeps its markdown; its code cells are replaced by the English ones (source, metadata,
outputs and execution counts, so the twin stays valid for nbval; refresh it with nbconvert
afterwards). When the English notebook gained or lost code cells, the cells are matched by their
source (``difflib``): new English cells go after the twin's cell matched to the English cell
before them, removed ones are dropped. A changed run of cells whose length differs on the two
sides cannot be matched; the script then stops with an error naming the cells and writes nothing.
"""

import argparse
import copy
import difflib
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Cell metadata that only records how a cell was last run or shown: it may differ between twins.
# Everything else must match: the tags nbval acts on (``raises-exception``,
# ``nbval-ignore-output`` ...) and the course's own keys (``book_section``).
VOLATILE_METADATA = ("execution", "ExecuteTime", "collapsed", "scrolled", "jupyter")


LANGUAGE_TAG = "zh-language"
LANGUAGE_SOURCE = (
    'import minitf.viz\n\nminitf.viz.set_language("zh")  # 图例、标题、坐标轴和按钮上的文字用中文'
)


def language_cell():
    """The zh-only first code cell (see the module docstring)."""
    return {
        "cell_type": "code",
        "execution_count": None,
        "metadata": {"tags": [LANGUAGE_TAG]},
        "outputs": [],
        "source": LANGUAGE_SOURCE,
    }


def is_language_cell(cell):
    """True for the twin's zh-language cell (a code cell tagged ``zh-language``)."""
    return cell["cell_type"] == "code" and LANGUAGE_TAG in cell.get("metadata", {}).get("tags", [])


class SyncError(Exception):
    """The twin's code cells cannot be matched to the English notebook's."""


def twin_path(english):
    """``notebooks/zh/X.ipynb`` for ``notebooks/X.ipynb`` (and ``zh/solutions/`` likewise)."""
    english = Path(english).resolve()
    notebooks = _notebooks_dir(english)
    return notebooks / "zh" / english.relative_to(notebooks)


def english_path(twin):
    """``notebooks/X.ipynb`` for the twin ``notebooks/zh/X.ipynb``."""
    twin = Path(twin).resolve()
    zh = next(p for p in twin.parents if p.name == "zh")
    return zh.parent / twin.relative_to(zh)


def _notebooks_dir(english):
    for parent in english.parents:
        if parent.name == "notebooks":
            return parent
    raise SyncError("%s is not inside a notebooks/ folder" % english)


def load(path):
    """The notebook at ``path`` as a dict (nbformat 4 JSON)."""
    return json.loads(Path(path).read_text(encoding="utf-8"))


def save(path, notebook):
    """Writes ``notebook`` the way Jupyter does (indent 1, non-ASCII kept, final newline)."""
    text = json.dumps(notebook, indent=1, ensure_ascii=False) + "\n"
    Path(path).write_text(text, encoding="utf-8")


def source(cell):
    """A cell's source as one string (nbformat allows a string or a list of lines)."""
    text = cell.get("source", "")
    return text if isinstance(text, str) else "".join(text)


def code_signature(cell):
    """What must be equal in a code cell and its twin: the source and the metadata (tags)."""
    meta = cell.get("metadata", {})
    return source(cell), {k: v for k, v in meta.items() if k not in VOLATILE_METADATA}


def code_cells(notebook):
    """The code cells of ``notebook``, in order, the zh-language cell left out."""
    return [c for c in notebook["cells"] if c["cell_type"] == "code" and not is_language_cell(c)]


def language_problems(twin):
    """What is wrong with the twin's zh-language cell ([] when it is the first code cell, alone
    and exactly ``LANGUAGE_SOURCE``)."""
    code = [c for c in twin["cells"] if c["cell_type"] == "code"]
    marked = [i for i, c in enumerate(code) if is_language_cell(c)]
    if marked != [0]:
        return [
            "the first code cell (and no other) must be the zh-language cell %r (at %s)"
            % (LANGUAGE_SOURCE, marked)
        ]
    if source(code[0]) != LANGUAGE_SOURCE:
        return ["the zh-language cell must hold exactly %r" % LANGUAGE_SOURCE]
    return []


def differences(english, twin):
    """Human-readable differences between the code cells of an English notebook and its twin
    ([] when twins: the same code cells, after the twin's zh-language cell)."""
    ours, theirs = code_cells(english), code_cells(twin)
    found = language_problems(twin)
    if any(is_language_cell(c) for c in english["cells"]):
        found.append("the English notebook has a zh-language cell")
    if len(ours) != len(theirs):
        found.append("%d code cells in English, %d in the twin" % (len(ours), len(theirs)))
    for i, (a, b) in enumerate(zip(ours, theirs)):
        (src_a, meta_a), (src_b, meta_b) = code_signature(a), code_signature(b)
        if src_a != src_b:
            first = src_a.splitlines()[:1] or [""]
            found.append("code cell %d differs (English starts %r)" % (i, first[0]))
        elif meta_a != meta_b:
            found.append(
                "code cell %d: metadata %r in English, %r in the twin" % (i, meta_a, meta_b)
            )
    return found


def _match(english_cells, twin_cells):
    """[(English index, twin index or None)] for every English code cell; raises SyncError for
    a changed run of cells whose length differs on the two sides."""
    if len(english_cells) == len(twin_cells):
        return [(i, i) for i in range(len(english_cells))]
    matcher = difflib.SequenceMatcher(
        a=[source(c) for c in english_cells], b=[source(c) for c in twin_cells], autojunk=False
    )
    pairs = []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag in ("equal", "replace") and i2 - i1 == j2 - j1:
            pairs.extend(zip(range(i1, i2), range(j1, j2)))
        elif tag == "delete":  # English cells the twin lacks (twin-only cells are dropped)
            pairs.extend((i, None) for i in range(i1, i2))
        elif tag == "replace":
            raise SyncError(
                "English code cells %d-%d replace the twin's code cells %d-%d, but their numbers "
                "differ (%d and %d): edit the twin by hand so that each changed cell has a "
                "counterpart, then run the script again"
                % (i1, i2 - 1, j1, j2 - 1, i2 - i1, j2 - j1)
            )
    return pairs


def sync(english, twin):
    """The twin notebook with the English code cells in place of its own (a new dict)."""
    english_cells, twin_cells = code_cells(english), code_cells(twin)
    pairs = _match(english_cells, twin_cells)
    kept = {j: copy.deepcopy(english_cells[i]) for i, j in pairs if j is not None}
    new_after = {}  # twin code index (-1: before all) -> English cells inserted after it
    previous = -1
    for i, j in pairs:
        if j is None:
            new_after.setdefault(previous, []).append(copy.deepcopy(english_cells[i]))
        else:
            previous = j
    cells, code_index = list(new_after.get(-1, [])), -1
    for cell in twin["cells"]:
        if is_language_cell(cell):
            continue  # put back below, before the first code cell
        if cell["cell_type"] != "code":
            cells.append(cell)
            continue
        code_index += 1
        if code_index in kept:
            cells.append(kept[code_index])
        cells.extend(new_after.get(code_index, []))
    if not twin_cells:  # nothing to anchor on: the new cells go after the markdown
        cells = [c for c in twin["cells"] if c["cell_type"] != "code"] + new_after.get(-1, [])
    language = next((c for c in twin["cells"] if is_language_cell(c)), None) or language_cell()
    language = dict(copy.deepcopy(language), source=LANGUAGE_SOURCE)
    cells = [c for c in cells if not is_language_cell(c)]
    first_code = next((i for i, c in enumerate(cells) if c["cell_type"] == "code"), len(cells))
    cells.insert(first_code, language)
    result = copy.deepcopy(twin)
    result["cells"] = copy.deepcopy(cells)
    return result


def sync_file(english_file, check_only=False):
    """Brings the twin of ``english_file`` in step; returns the differences found before."""
    english_file = Path(english_file)
    twin_file = twin_path(english_file)
    if not twin_file.exists():
        raise SyncError("%s has no Chinese twin (%s)" % (english_file, twin_file))
    english, twin = load(english_file), load(twin_file)
    found = differences(english, twin)
    if found and not check_only:
        save(twin_file, sync(english, twin))
    return found


def main(argv=None):
    """Command line: sync (or with --check only compare) the twins of the given notebooks."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("english", nargs="+", help="English notebooks (notebooks/X.ipynb)")
    parser.add_argument("--check", action="store_true", help="only report the differences")
    args = parser.parse_args(argv)
    status = 0
    for name in args.english:
        try:
            found = sync_file(name, check_only=args.check)
        except SyncError as e:
            print("%s: %s" % (name, e), file=sys.stderr)
            status = 2
            continue
        verb = "differs" if args.check else "synced"
        for line in found:
            print("%s %s: %s" % (name, verb, line))
        if found:
            status = status or (1 if args.check else 0)
            if not args.check:
                print(
                    "refresh its outputs: jupyter nbconvert --execute --inplace %s"
                    % twin_path(name)
                )
    return status


if __name__ == "__main__":
    sys.exit(main())
