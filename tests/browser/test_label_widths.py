"""The boxes minitf sizes for its own text hold that text as chromium draws it, in English and
Chinese.

Book sections: "Multiple Devices Across Multiple Servers" (Figure 12-6's arrows and their
labels) and "Placing Operations on Devices" (the graph picture's legend).  minitf cannot ask a
browser how wide a label will be, so it estimates (``labels.text_width``: a Chinese character a
full em) and places the label's box, and the arrows around it, from the estimate.  Here the
estimate meets the fonts a reader's browser uses (Debian's chromium with fonts-noto-cjk): every
label's drawn text must lie inside the box it was given, so no label runs into an arrow or out
of the legend.
"""

import pytest

import minitf as tf
from minitf.runtime.config_proto import StepStats
from minitf.runtime.step_stats import TransferStats
from minitf.viz import ClusterView, GraphView

STEP = 30_000  # ms: the bound on each wait in the page
SPEC = {"ps": ["h:1", "h:2"], "worker": ["h:3", "h:4"]}


def _traffic():
    def dev(job, task):
        return "/job:%s/replica:0/task:%d/device:CPU:0" % (job, task)

    stats = StepStats()
    pairs = [(("ps", 0), ("worker", 0), 12), (("ps", 1), ("worker", 1), 3_500_000)]
    pairs += [(("worker", 0), ("ps", 1), 40_960), (("worker", 1), ("worker", 0), 4)]
    for i, (s, d, n) in enumerate(pairs):
        stats.transfers.append(TransferStats("t%d:0" % i, "a", "b", dev(*s), dev(*d), n, 0))
    return stats


def _boxes(page, selector):
    """getBBox() of every element ``selector`` matches, in the page's order."""
    return page.evaluate(
        "s => Array.from(document.querySelectorAll(s)).map(e => {"
        " const b = e.getBBox(); return [b.x, b.width, e.textContent]; })",
        selector,
    )


def _page(browser, svg):
    page = browser.new_page(viewport={"width": 1200, "height": 900})
    page.set_content(
        '<!DOCTYPE html><html lang="zh-CN"><head><meta charset="utf-8"></head>'
        "<body>%s</body></html>" % svg,
        timeout=STEP,
    )
    return page


@pytest.mark.parametrize("language", ["en", "zh"])
def test_cluster_arrow_labels_fit_their_boxes(browser, language):
    view = ClusterView(SPEC, None, _traffic(), master="worker/1", language=language)
    page = _page(browser, view.to_svg())
    try:
        drawn = _boxes(page, "polyline + text")  # each arrow's label follows its line
    finally:
        page.close()
    assert [t for _, _, t in drawn] == [a.label for a in view.arrows]
    assert any(not t.isascii() for t in [a.label for a in view.arrows]) == (language == "zh")
    for (x, width, text), arrow in zip(drawn, view.arrows):
        left, _, box_width, _ = arrow.label_box
        assert left <= x and x + width <= left + box_width, (text, x, width, arrow.label_box)


@pytest.mark.parametrize("language", ["en", "zh"])
def test_graph_legend_text_fits_its_box(browser, language):
    with tf.device("/cpu:0"):
        a = tf.Variable(1.0, name="weights")
    with tf.device("/gpu:0"):
        b = tf.multiply(a, 2.0, name="scaled")
    with tf.control_dependencies([b]):
        tf.identity(a, name="after")
    page = _page(browser, GraphView(tf.get_default_graph(), language=language).to_svg())
    try:
        frame = page.evaluate(
            "() => { const r = document.querySelector('#legend rect').getBBox();"
            " return [r.x, r.width]; }"
        )
        texts = _boxes(page, "#legend text")
    finally:
        page.close()
    assert len(texts) >= 5
    for x, width, text in texts:
        assert frame[0] < x and x + width < frame[0] + frame[1], (text, x, width, frame)
