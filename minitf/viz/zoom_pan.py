"""A picture in a box that zooms and pans, for graphs too big to read at one size.

Book section: "Placing Operations on Devices" (a whole model's graph, Figure 12-1 made large).

:func:`zoom_pan_html` wraps an SVG element in plain HTML that needs no kernel and no library:

* without JavaScript (an untrusted notebook, GitHub) the box scrolls: the scroll bars pan;
* with it (a trusted notebook, nbviewer, an exported HTML page) a small bar adds zoom buttons
  (-, +, fit, 100%), Ctrl (or Cmd) + wheel zooms around the pointer and dragging pans.

The text is the same for the same picture (no random ids: the script finds its box through
``document.currentScript``), so a notebook's saved output only changes when the picture does.
"""

import json

from minitf.viz import labels

__all__ = ["zoom_pan_html", "MAX_HEIGHT_PX"]

MAX_HEIGHT_PX = 640

_SCRIPT = """(function () {
  var box = document.currentScript && document.currentScript.parentNode;
  var view = box && box.querySelector(".minitf-zoom-view");
  var pic = view && view.querySelector("svg");
  if (!pic || !pic.viewBox || !pic.viewBox.baseVal) { return; }
  var vb = pic.viewBox.baseVal, W = vb.width * 4 / 3, H = vb.height * 4 / 3, z = 1;
  var bar = box.querySelector(".minitf-zoom-bar"), shown = document.createElement("span");
  function zoom(nz, cx, cy) {
    nz = Math.max(0.02, Math.min(8, nz));
    var r = nz / z, sx = (view.scrollLeft + cx) * r - cx, sy = (view.scrollTop + cy) * r - cy;
    z = nz;
    pic.style.width = W * z + "px";
    pic.style.height = H * z + "px";
    view.scrollLeft = sx;
    view.scrollTop = sy;
    shown.textContent = " " + Math.round(z * 100) + "%% ";
  }
  function fit() { return Math.min(1, (view.clientWidth - 4) / W, (%(height)d - 4) / H); }
  function button(text, title, act) {
    var b = document.createElement("button");
    b.textContent = text;
    b.title = title;
    b.style.cssText = "margin-right:3px;padding:0 6px;font:12px sans-serif;cursor:pointer";
    b.onclick = act;
    bar.appendChild(b);
  }
  var mid = function () { return [view.clientWidth / 2, view.clientHeight / 2]; };
  button("\\u2212", %(zoom_out)s, function () { var m = mid(); zoom(z / 1.25, m[0], m[1]); });
  button("+", %(zoom_in)s, function () { var m = mid(); zoom(z * 1.25, m[0], m[1]); });
  button(%(fit)s, %(whole)s, function () { zoom(fit(), 0, 0); });
  button("100%%", %(natural)s, function () { zoom(1, 0, 0); });
  bar.appendChild(shown);
  bar.appendChild(document.createTextNode(%(hint)s));
  view.addEventListener("wheel", function (e) {
    if (!(e.ctrlKey || e.metaKey)) { return; }
    e.preventDefault();
    var r = view.getBoundingClientRect();
    zoom(z * Math.exp(-e.deltaY * 0.002), e.clientX - r.left, e.clientY - r.top);
  }, {passive: false});
  var drag = null;
  view.addEventListener("pointerdown", function (e) {
    if (e.button !== 0) { return; }
    drag = [e.clientX, e.clientY, view.scrollLeft, view.scrollTop];
    view.setPointerCapture(e.pointerId);
    view.style.cursor = "grabbing";
  });
  view.addEventListener("pointermove", function (e) {
    if (!drag) { return; }
    view.scrollLeft = drag[2] - (e.clientX - drag[0]);
    view.scrollTop = drag[3] - (e.clientY - drag[1]);
  });
  var end = function () { drag = null; view.style.cursor = "grab"; };
  view.addEventListener("pointerup", end);
  view.addEventListener("pointercancel", end);
  view.style.cursor = "grab";
  zoom(W > view.clientWidth && view.clientWidth > 0 ? fit() : 1, 0, 0);
})();"""


# The bar's words (``%(key)s`` in the script), in English; minitf.viz.labels translates them.
BAR_WORDS = {
    "zoom_out": "zoom out",
    "zoom_in": "zoom in",
    "fit": "fit",
    "whole": "the whole graph",
    "natural": "natural size",
    "hint": "drag to pan, Ctrl + wheel to zoom",
}


def zoom_pan_html(svg: str, max_height_px: int = MAX_HEIGHT_PX, language: str | None = None) -> str:
    """``svg`` (an ``<svg>`` element) inside a scrolling box with zoom and pan controls, their
    words in ``language`` (None: the default of :func:`minitf.viz.set_language`)."""
    words = {k: json.dumps(labels.text(v, language)) for k, v in BAR_WORDS.items()}
    return (
        '<div class="minitf-zoom">'
        '<div class="minitf-zoom-bar" style="font:12px sans-serif;color:#555;margin:2px 0"></div>'
        '<div class="minitf-zoom-view" style="overflow:auto;max-width:100%%;max-height:%dpx;'
        'border:1px solid #ddd">%s</div>'
        "<script>%s</script></div>"
        % (max_height_px, svg, _SCRIPT % dict(words, height=max_height_px))
    )
