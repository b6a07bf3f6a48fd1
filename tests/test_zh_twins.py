"""The Chinese notebooks (notebooks/zh/, issue 26) are twins of the English ones.

One source of truth for the code: each ``notebooks/zh/X.ipynb`` has exactly the code cells of
``notebooks/X.ipynb`` (sources in order, and the cell tags nbval reads) after one zh-only first
code cell, tagged ``zh-language``, that sets the pictures' language
(``minitf.viz.set_language("zh")``: the kernel cannot tell which notebook it runs), its prose
is in Chinese,
and its relative links lead to files that exist.  ``tools/sync_zh.py`` carries code changes from
an English notebook to its twin; it is tested here on temporary copies.
"""

import importlib.util
import json
import re
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
ZH = NOTEBOOKS / "zh"
TWINS = sorted(p for p in ZH.rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts)
CJK = re.compile(r"[\u4e00-\u9fff]")
LINK = re.compile(r"\]\(([^)\s]+)\)")
CODE_SPAN = re.compile(r"```.*?```|`[^`\n]*`", re.S)  # links are not looked for in code


def _load_sync():
    spec = importlib.util.spec_from_file_location("sync_zh", ROOT / "tools" / "sync_zh.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


sync_zh = _load_sync()


def _ids(paths):
    return [p.relative_to(ZH).as_posix() for p in paths]


def test_the_chinese_edition_has_its_first_notebooks():
    names = set(_ids(TWINS))
    assert {"00_start_here.ipynb", "01_devices_and_installation.ipynb"} <= names, names


@pytest.mark.parametrize("twin", TWINS, ids=_ids(TWINS))
def test_each_zh_notebook_has_exactly_the_code_cells_of_its_english_twin(twin):
    english = sync_zh.english_path(twin)
    assert english.exists(), "%s has no English notebook %s" % (twin, english)
    found = sync_zh.differences(sync_zh.load(english), sync_zh.load(twin))
    assert not found, "%s drifted from %s (python tools/sync_zh.py %s): %s" % (
        twin.relative_to(ROOT),
        english.relative_to(ROOT),
        english.relative_to(ROOT),
        found,
    )


@pytest.mark.parametrize("twin", TWINS, ids=_ids(TWINS))
def test_each_zh_notebook_is_written_in_chinese(twin):
    english = {sync_zh.source(c) for c in sync_zh.load(sync_zh.english_path(twin))["cells"]}
    markdown = [c for c in sync_zh.load(twin)["cells"] if c["cell_type"] == "markdown"]
    assert markdown
    untranslated = [sync_zh.source(c)[:60] for c in markdown if sync_zh.source(c) in english]
    assert not untranslated, "markdown copied from the English notebook: %s" % untranslated
    without_chinese = [
        sync_zh.source(c)[:60] for c in markdown if not CJK.search(sync_zh.source(c))
    ]
    assert not without_chinese, "markdown cells without Chinese: %s" % without_chinese


@pytest.mark.parametrize("twin", TWINS, ids=_ids(TWINS))
def test_each_zh_notebook_links_to_files_that_exist(twin):
    broken = []
    for cell in sync_zh.load(twin)["cells"]:
        if cell["cell_type"] != "markdown":
            continue
        for target in LINK.findall(CODE_SPAN.sub("", sync_zh.source(cell))):
            if re.match(r"[a-z]+:", target) or target.startswith("#"):
                continue
            if not (twin.parent / target.split("#")[0]).exists():
                broken.append(target)
    assert not broken, "%s links to missing files: %s" % (twin.relative_to(ROOT), broken)


def test_every_zh_markdown_page_links_to_files_that_exist():
    for page in (ROOT / "README.zh.md", ROOT / "docs" / "glossary.zh.md"):
        text = page.read_text(encoding="utf-8")
        assert CJK.search(text), page
        broken = [
            t
            for t in LINK.findall(CODE_SPAN.sub("", text))
            if not re.match(r"[a-z]+:", t) and not (page.parent / t.split("#")[0]).exists()
        ]
        assert not broken, "%s links to missing files: %s" % (page.name, broken)


def test_readme_zh_binder_link_opens_the_chinese_start_notebook():
    text = (ROOT / "README.zh.md").read_text(encoding="utf-8")
    assert "?urlpath=lab/tree/notebooks/zh/00_start_here.ipynb" in text
    assert (ZH / "00_start_here.ipynb").exists()
    assert "make lab" in text and "make test" in text


# ---------------------------------------------------------------- tools/sync_zh.py on copies


def _code(src, tags=None):
    cell = {
        "cell_type": "code",
        "execution_count": None,
        "metadata": {},
        "outputs": [],
        "source": src,
    }
    if tags:
        cell["metadata"]["tags"] = tags
    return cell


def _md(src):
    return {"cell_type": "markdown", "metadata": {}, "source": src}


def _notebook(cells):
    return {"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}


@pytest.fixture
def copies(tmp_path):
    """A temporary notebooks/ folder holding notebook 00 and its zh twin."""
    (tmp_path / "notebooks" / "zh").mkdir(parents=True)
    english = tmp_path / "notebooks" / "00_start_here.ipynb"
    twin = tmp_path / "notebooks" / "zh" / "00_start_here.ipynb"
    shutil.copy(NOTEBOOKS / "00_start_here.ipynb", english)
    shutil.copy(ZH / "00_start_here.ipynb", twin)
    return english, twin


def test_sync_carries_a_changed_english_code_cell_to_the_twin(copies):
    english, twin = copies
    nb = sync_zh.load(english)
    cell = sync_zh.code_cells(nb)[1]
    cell["source"] = "tf.test.gpu_device_name()  # changed in English only\n"
    cell["metadata"]["tags"] = ["nbval-ignore-output"]
    sync_zh.save(english, nb)
    markdown_before = [c for c in sync_zh.load(twin)["cells"] if c["cell_type"] == "markdown"]
    assert sync_zh.differences(sync_zh.load(english), sync_zh.load(twin))

    assert sync_zh.main([str(english)]) == 0

    after = sync_zh.load(twin)
    assert sync_zh.differences(sync_zh.load(english), after) == []
    assert [c for c in after["cells"] if c["cell_type"] == "markdown"] == markdown_before
    assert sync_zh.main(["--check", str(english)]) == 0


def test_sync_check_reports_a_drifted_twin_and_leaves_it(copies, capsys):
    english, twin = copies
    nb = sync_zh.load(english)
    sync_zh.code_cells(nb)[0]["source"] += "print('new line')\n"
    sync_zh.save(english, nb)
    before = twin.read_bytes()
    assert sync_zh.main(["--check", str(english)]) == 1
    assert "code cell 0 differs" in capsys.readouterr().out
    assert twin.read_bytes() == before


LANG = sync_zh.LANGUAGE_SOURCE


def _lang():
    return _code(LANG, tags=["zh-language"])


def test_sync_puts_a_new_english_cell_after_the_matching_one_and_drops_a_removed_one():
    english = _notebook(
        [_md("A"), _code("a = 1\n"), _code("new = 2\n"), _md("B"), _code("c = 3\n")]
    )
    twin = _notebook([_md("甲"), _lang(), _code("a = 1\n"), _md("乙"), _code("c = 3\n")])
    synced = sync_zh.sync(english, twin)
    assert [sync_zh.source(c) for c in synced["cells"]] == [
        "甲",
        LANG,
        "a = 1\n",
        "new = 2\n",
        "乙",
        "c = 3\n",
    ]
    twin = _notebook(
        [_md("甲"), _code("a = 1\n"), _md("乙"), _code("gone = 0\n"), _code("c = 3\n")]
    )
    removed = sync_zh.sync(_notebook([_code("a = 1\n"), _code("c = 3\n")]), twin)
    assert [sync_zh.source(c) for c in removed["cells"]] == [
        "甲",
        LANG,
        "a = 1\n",
        "乙",
        "c = 3\n",
    ]


def test_the_zh_language_cell_is_the_one_allowed_difference_and_sync_keeps_or_adds_it():
    english = _notebook([_md("A"), _code("a = 1\n")])
    twin = _notebook([_md("甲"), _lang(), _code("a = 1\n")])
    assert sync_zh.differences(english, twin) == []
    missing = _notebook([_md("甲"), _code("a = 1\n")])
    assert "zh-language" in sync_zh.differences(english, missing)[0]
    moved = _notebook([_md("甲"), _code("a = 1\n"), _lang()])
    assert "zh-language" in sync_zh.differences(english, moved)[0]
    edited = _notebook(
        [_md("甲"), _code(LANG + "\nb = 2\n", tags=["zh-language"]), _code("a = 1\n")]
    )
    assert "exactly" in sync_zh.differences(english, edited)[0]
    copied = _notebook([_md("A"), _lang(), _code("a = 1\n")])
    assert "English notebook has a zh-language cell" in sync_zh.differences(copied, twin)[-1]
    for broken in (missing, moved, edited):
        fixed = sync_zh.sync(english, broken)
        assert sync_zh.differences(english, fixed) == []
        assert [sync_zh.source(c) for c in fixed["cells"]] == ["甲", LANG, "a = 1\n"]


@pytest.mark.parametrize("english", sorted(NOTEBOOKS.glob("*.ipynb")), ids=lambda p: p.name)
def test_english_notebooks_leave_the_language_at_its_english_default(english):
    text = english.read_text(encoding="utf-8")
    assert "zh-language" not in text and "set_language" not in text


def test_sync_fails_clearly_when_changed_cells_cannot_be_matched(copies, capsys):
    english = _notebook([_code("a = 1\n"), _code("x = 1\n"), _code("y = 2\n"), _code("z = 3\n")])
    twin = _notebook([_md("甲"), _code("a = 1\n"), _code("old = 0\n")])
    with pytest.raises(sync_zh.SyncError, match="numbers differ"):
        sync_zh.sync(english, twin)
    english_file, twin_file = copies
    sync_zh.save(english_file, english)
    sync_zh.save(twin_file, twin)
    assert sync_zh.main([str(english_file)]) == 2
    assert "numbers differ" in capsys.readouterr().err
    assert json.loads(twin_file.read_text(encoding="utf-8")) == twin  # nothing written


def test_twin_and_english_paths_map_onto_each_other():
    twin = sync_zh.twin_path(NOTEBOOKS / "solutions" / "02_solutions.ipynb")
    assert twin == ZH / "solutions" / "02_solutions.ipynb"
    assert sync_zh.english_path(twin) == NOTEBOOKS / "solutions" / "02_solutions.ipynb"
