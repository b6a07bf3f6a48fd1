"""Figure 12-2, the software stack under TensorFlow, drawn from what this machine has.

Book section: "Installation".  TensorFlow reaches a GPU through a tower of software: your code,
the framework, the CUDA libraries (cuDNN, cuBLAS) its GPU kernels call, the driver, the card.
:class:`StackView` draws one box per floor, top to bottom, greyed out where the floor is missing
here (an emulated card has no driver below it); the floors come from
``minitf.teaching.software_stack()``.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

from minitf.viz import labels
from minitf.viz.files import SavesToFile

WIDTH, FLOOR, GAP = 560, 34, 6
PRESENT, MISSING = "#cfe3f7", "#eeeeee"


class StackView(SavesToFile):
    """``floors``: ``(name, what this machine has, present)`` from top to bottom; SVG
    (``_repr_svg_``, ``save("x.svg")``); ``language``: of the default title ("en", "zh"; None:
    the default of :func:`minitf.viz.set_language`)."""

    def __init__(
        self,
        floors: Sequence[tuple[str, str, bool]],
        title: str | None = None,
        language: str | None = None,
    ) -> None:
        self.language = labels.resolve(language)
        self.floors = [(str(n), str(w), bool(ok)) for n, w, ok in floors]
        default = labels.text("Figure 12-2: the software stack", self.language)
        self.title = labels.text(title, self.language) if title is not None else default

    def to_svg(self) -> str:
        height = 40 + len(self.floors) * (FLOOR + GAP)
        out = [
            '<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" '
            'font-family="sans-serif" font-size="12">' % (WIDTH, height),
            '<text x="10" y="20" font-size="14" font-weight="bold">%s</text>' % escape(self.title),
        ]
        for i, (name, what, ok) in enumerate(self.floors):
            y = 32 + i * (FLOOR + GAP)
            out.append(
                '<rect x="10" y="%d" width="%d" height="%d" rx="4" fill="%s" stroke="#555"%s/>'
                % (
                    y,
                    WIDTH - 20,
                    FLOOR,
                    PRESENT if ok else MISSING,
                    "" if ok else ' stroke-dasharray="4,3"',
                )
            )
            out.append('<text x="20" y="%d" font-weight="bold">%s</text>' % (y + 21, escape(name)))
            out.append(
                '<text x="250" y="%d" fill="%s">%s</text>'
                % (y + 21, "#000" if ok else "#777", escape(what))
            )
        out.append("</svg>")
        return "\n".join(out)

    def _repr_svg_(self) -> str:
        return self.to_svg()
