"""GraphView's zoom-and-pan box in Debian's chromium: a saved page, and a JupyterLab output.

Book section: "Placing Operations on Devices" (a whole model's graph).  The page is what
``GraphView.save("g.html")`` writes (the same HTML a notebook's output holds); the test works it
as a reader would: the bar's buttons zoom, Ctrl + wheel zooms, dragging pans.  In JupyterLab
the box's script runs in the cell's output (a trusted output of this session).
"""

import pytest
from test_jupyterlab import _cell_output, _open_and_run_all, write_code_notebook

import minitf as tf
from minitf.viz import GraphView

STEP = 30_000  # ms: the bound on each wait in the page


def _wide_graph():
    """Sixty chains side by side: far wider than a 500-pixel page."""
    for i in range(60):
        with tf.device("/cpu:0" if i % 2 else "/gpu:0"):
            tf.square(tf.constant(float(i), name="in%d" % i), name="sq%d" % i)


def _width(page):
    return page.evaluate("parseFloat(document.querySelector('.minitf-zoom-view svg').style.width)")


def test_the_saved_page_zooms_and_pans(browser, tmp_path):
    _wide_graph()
    view = GraphView()
    path = view.save(str(tmp_path / "g.html"))
    page = browser.new_page(viewport={"width": 500, "height": 700})
    try:
        page.goto("file://" + path, timeout=STEP)
        bar = page.locator(".minitf-zoom-bar")
        bar.locator("button", has_text="fit").wait_for(timeout=STEP)
        assert [b.inner_text() for b in bar.locator("button").all()] == [
            "\u2212",
            "+",
            "fit",
            "100%",
        ]
        natural = page.evaluate(
            "document.querySelector('.minitf-zoom-view svg').viewBox.baseVal.width * 4 / 3"
        )
        fitted = _width(page)
        assert fitted < 500 < natural  # a wide graph starts fitted to its box
        bar.locator("button", has_text="+").click()
        assert abs(_width(page) - fitted * 1.25) < 1
        bar.locator("button", has_text="100%").click()
        assert abs(_width(page) - natural) < 1
        assert "100%" in bar.inner_text()
        box = page.locator(".minitf-zoom-view")
        b = box.bounding_box()
        page.mouse.move(b["x"] + 300, b["y"] + 100)
        page.mouse.down()
        page.mouse.move(b["x"] + 100, b["y"] + 100, steps=5)
        page.mouse.up()
        assert box.evaluate("e => e.scrollLeft") >= 150  # dragged 200 px to the left
        page.keyboard.down("Control")
        page.mouse.wheel(0, 300)
        page.keyboard.up("Control")
        page.wait_for_function(
            "w => parseFloat(document.querySelector('.minitf-zoom-view svg').style.width) < w",
            arg=natural - 1,
            timeout=STEP,
        )
    finally:
        page.close()


LAB_CELLS = [
    "import os\n"
    "os.environ['MINITF_STATE_DIR'] = {state_dir!r}\n"
    "import minitf as tf\n"
    "from minitf.viz import GraphView\n"
    "for i in range(60):\n"
    "    with tf.device('/cpu:0' if i % 2 else '/gpu:0'):\n"
    "        tf.square(tf.constant(float(i), name='in%d' % i), name='sq%d' % i)",
    "GraphView(title='sixty chains')",
]


@pytest.mark.slow
def test_the_box_zooms_in_a_jupyterlab_output(browser, jupyterlab, tmp_path):
    from playwright.sync_api import expect

    write_code_notebook(jupyterlab, tmp_path, "zoom.ipynb", LAB_CELLS)
    page = browser.new_page(viewport={"width": 1000, "height": 1000})
    page.set_default_timeout(STEP)
    try:
        _open_and_run_all(page, jupyterlab, "zoom.ipynb", len(LAB_CELLS), len(LAB_CELLS))
        out = _cell_output(page, 1)
        buttons = out.locator(".minitf-zoom-bar button")
        expect(buttons).to_have_count(4, timeout=STEP)  # the script ran in the output
        pic = out.locator(".minitf-zoom-view svg")
        before = pic.evaluate("e => parseFloat(e.style.width)")
        buttons.filter(has_text="+").click()
        expect(out.locator(".minitf-zoom-bar")).to_contain_text("%")
        after = pic.evaluate("e => parseFloat(e.style.width)")
        assert abs(after - before * 1.25) < 1
    finally:
        page.close()
