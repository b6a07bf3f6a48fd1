"""Chinese labels render in Debian's chromium (issue 26, 中文版).

Book section: "Placing Operations on Devices" (notebook 03's graph and its legend).  The page is
built from the outputs committed in ``notebooks/zh/03_placing_operations.ipynb`` -- the static
HTML/SVG a reader sees on GitHub or in JupyterLab before running anything.  The legend's 图例
must be drawn with a CJK font (fonts-noto-cjk: binder/apt.txt, ``make chromium``): chromium's
own account of the fonts it used for that text (DevTools' ``CSS.getPlatformFontsForNode``)
names a CJK font, and the text has a real width on the page (not an empty box).
"""

import html
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = ROOT / "notebooks" / "zh" / "03_placing_operations.ipynb"
LABEL = "图例"  # GraphView's legend title in Chinese
STEP = 30_000  # ms


def _saved_pictures(notebook):
    """The notebook's committed HTML and SVG outputs, in order."""
    cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
    found = []
    for cell in cells:
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            for mime in ("text/html", "image/svg+xml"):
                if mime in data:
                    text = data[mime]
                    found.append(text if isinstance(text, str) else "".join(text))
                    break
    return found


def test_a_zh_notebook_legend_is_drawn_with_a_cjk_font(browser, tmp_path, screenshot_dir):
    pictures = [p for p in _saved_pictures(NOTEBOOK) if LABEL in p]
    assert pictures, "%s has no saved picture with %s" % (NOTEBOOK.name, LABEL)
    page_file = tmp_path / "zh.html"
    page_file.write_text(
        '<!DOCTYPE html><html lang="zh-CN"><head><meta charset="utf-8"><title>%s</title></head>'
        "<body>%s</body></html>" % (html.escape(NOTEBOOK.name), pictures[0]),
        encoding="utf-8",
    )
    page = browser.new_page(viewport={"width": 1000, "height": 900})
    try:
        page.goto("file://%s" % page_file, timeout=STEP)
        label = page.locator("svg text", has_text=LABEL).first
        label.wait_for(timeout=STEP)
        box = label.bounding_box()
        assert box is not None and box["width"] > 10 and box["height"] > 5, box
        cdp = page.context.new_cdp_session(page)
        cdp.send("DOM.enable")
        cdp.send("CSS.enable")
        root = cdp.send("DOM.getDocument", {"depth": -1, "pierce": True})["root"]["nodeId"]
        ids = cdp.send("DOM.querySelectorAll", {"nodeId": root, "selector": "svg text"})
        fonts = []
        for node_id in ids["nodeIds"]:
            outer = cdp.send("DOM.getOuterHTML", {"nodeId": node_id})["outerHTML"]
            if LABEL in outer:
                used = cdp.send("CSS.getPlatformFontsForNode", {"nodeId": node_id})["fonts"]
                fonts.extend(used)
        cjk = [f for f in fonts if "CJK" in f["familyName"] and f["glyphCount"] >= len(LABEL)]
        assert cjk, "图例 drawn without a CJK font (install fonts-noto-cjk): %s" % fonts
        label.scroll_into_view_if_needed()
        page.screenshot(path=str(screenshot_dir / "zh-03-graph-legend.png"), full_page=True)
    finally:
        page.close()
