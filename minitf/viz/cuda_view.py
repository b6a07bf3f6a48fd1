"""Pictures and instruments for the CUDA programming lesson (notebook 01b).

Book section: "Installation" (what a GPU build runs: CUDA kernels), taught as the blog of seed
003 does.  Three pictures and one instrument:

* :class:`ThreadMap`: which CUDA thread (block, thread) computed which element of a small
  output, from the indices a kernel wrote there (SVG);
* :class:`ReductionTree`: the rounds of a shared-memory tree reduction of ``n`` values (SVG);
* :class:`MemoryOverTime`: a card's used memory sampled during a training run (SVG), from the
  same data ``minitf.smi()`` prints;
* :func:`counting_array`: a device array of Numba's CUDA simulator that counts the global-memory
  reads kernels make from it (the simulator only: on a real card reads cannot be counted from
  Python), and :func:`naive_matmul_reads` / :func:`tiled_matmul_reads`, what those counts should
  be.
"""

from __future__ import annotations

import threading
from xml.sax.saxutils import escape

import numpy as np

from minitf.viz import labels

BLOCK_COLORS = ("#cfe0f3", "#fbd9b5", "#cdeac4", "#e6d3ea", "#f9ecb0", "#cbe7e5")


def naive_matmul_reads(m: int, n: int, k: int) -> int:
    """Global reads of a one-thread-per-output matmul: a row of A and a column of B each."""
    return 2 * m * n * k


def tiled_matmul_reads(m: int, n: int, k: int, tile: int) -> int:
    """Global reads of minitf's tiled matmul: every block loads, per step along k, the parts
    of a TILE x TILE tile of A and of B that lie inside the matrices (the rest is zero-filled
    without a read).  For sizes that are multiples of TILE it is ``2 * m * n * k / tile``."""
    reads = 0
    for r0 in range(0, m, tile):
        rows = min(tile, m - r0)
        for c0 in range(0, n, tile):
            cols = min(tile, n - c0)
            for k0 in range(0, k, tile):
                depth = min(tile, k - k0)
                reads += rows * depth + depth * cols
    return reads


def counting_array(host: np.ndarray):
    """A copy of ``host`` on the simulated card that counts reads: ``arr.reads`` is the number
    of element reads kernels made from it (a thread reading ``a[i, j]`` is one read).

    Only under Numba's simulator (``NUMBA_ENABLE_CUDASIM=1``), whose device arrays are Python
    objects; raises ``RuntimeError`` on a real card."""
    from minitf.kernels import cuda as minitf_cuda

    if not minitf_cuda.SIMULATOR:
        raise RuntimeError(
            "counting_array needs Numba's CUDA simulator (NUMBA_ENABLE_CUDASIM=1): "
            "a real card's reads cannot be counted from Python"
        )
    from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray

    class CountingArray(FakeCUDAArray):
        """A simulator device array whose element reads are counted (threads share it)."""

        def __init__(self, ary):
            super().__init__(ary)
            self.__dict__["_lock"] = threading.Lock()
            self.__dict__["reads"] = 0

        def __getitem__(self, idx):
            with self._lock:
                self.__dict__["reads"] += 1
            return super().__getitem__(idx)

    return CountingArray(np.ascontiguousarray(host).copy())


def _svg(width: int, height: int, body: list[str]) -> str:
    return (
        '<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" '
        'font-family="monospace" font-size="10">%s</svg>' % (width, height, "".join(body))
    )


class ThreadMap:
    """One cell per output element, coloured by the block that computed it and labelled with
    the thread's ``threadIdx`` (x, y) and its global index ``cuda.grid(2)``; with ``grid_dim``
    the launch's threads that fall outside the array are drawn too, dashed ("idle").

    ``block`` and ``thread``: int arrays of shape (rows, cols, 2) holding the (x, y) of
    ``blockIdx`` and ``threadIdx`` each element's thread wrote there."""

    CELL = 52

    def __init__(
        self,
        block: np.ndarray,
        thread: np.ndarray,
        block_dim: tuple[int, int],
        grid_dim: tuple[int, int] | None = None,
        language: str | None = None,
    ):
        self.language = labels.resolve(language)
        self.block = np.asarray(block)
        self.thread = np.asarray(thread)
        self.block_dim = block_dim
        self.grid_dim = grid_dim
        if self.block.shape != self.thread.shape or self.block.ndim != 3:
            raise ValueError("block and thread must both have shape (rows, cols, 2)")

    def _idle(self, r: int, c: int) -> str:
        s = self.CELL
        bx, tx = divmod(c, self.block_dim[0])
        by, ty = divmod(r, self.block_dim[1])
        x, y = 30 + c * s, 30 + r * s
        return (
            '<rect x="%d" y="%d" width="%d" height="%d" fill="white" stroke="#999" '
            'stroke-dasharray="4 3"/><text x="%d" y="%d" fill="#999">b(%d,%d)</text>'
            '<text x="%d" y="%d" fill="#999">t(%d,%d)</text>'
            '<text x="%d" y="%d" fill="#999">%s</text>'
            % (
                x,
                y,
                s,
                s,
                x + 4,
                y + 14,
                bx,
                by,
                x + 4,
                y + 28,
                tx,
                ty,
                x + 4,
                y + 42,
                labels.text("idle", self.language),
            )
        )

    def _cell(self, r: int, c: int) -> str:
        s = self.CELL
        bx, by = (int(v) for v in self.block[r, c])
        tx, ty = (int(v) for v in self.thread[r, c])
        gx, gy = bx * self.block_dim[0] + tx, by * self.block_dim[1] + ty
        nbx = int(self.block[..., 0].max()) + 1
        color = BLOCK_COLORS[(by * nbx + bx) % len(BLOCK_COLORS)]
        x, y = 30 + c * s, 30 + r * s
        return (
            '<rect x="%d" y="%d" width="%d" height="%d" fill="%s" stroke="#666"/>'
            '<text x="%d" y="%d">b(%d,%d)</text><text x="%d" y="%d">t(%d,%d)</text>'
            '<text x="%d" y="%d" fill="#555">g(%d,%d)</text>'
            % (x, y, s, s, color, x + 4, y + 14, bx, by, x + 4, y + 28, tx, ty,
               x + 4, y + 42, gx, gy)
        )  # fmt: skip

    def _repr_svg_(self) -> str:
        rows, cols = self.block.shape[:2]
        all_rows, all_cols = rows, cols
        if self.grid_dim is not None:
            all_cols = max(cols, self.grid_dim[0] * self.block_dim[0])
            all_rows = max(rows, self.grid_dim[1] * self.block_dim[1])
        body = [
            '<text x="30" y="12">out[row, col]: b = blockIdx (x, y), t = threadIdx (x, y),</text>'
            '<text x="30" y="24">g = cuda.grid(2) = (col, row)</text>'
        ]
        body += [
            self._cell(r, c) if r < rows and c < cols else self._idle(r, c)
            for r in range(all_rows)
            for c in range(all_cols)
        ]
        width = max(40 + all_cols * self.CELL, 380)
        return _svg(width, 40 + all_rows * self.CELL, body)


class ReductionTree:
    """The rounds of a shared-memory tree sum of ``n`` values (``n`` a power of two): in the
    round with stride ``half`` thread ``t < half`` adds ``buf[t + half]`` into ``buf[t]``, then
    every thread waits at ``cuda.syncthreads()``."""

    def __init__(self, values, language: str | None = None):
        self.language = labels.resolve(language)
        self.values = [float(v) for v in values]
        n = len(self.values)
        if n < 2 or n & (n - 1):
            raise ValueError("ReductionTree needs a power of two >= 2 of values, got %d" % n)

    def rounds(self) -> list[list[float]]:
        """``buf`` after each round (the first entry is the loaded values)."""
        buf = list(self.values)
        out = [list(buf)]
        half = len(buf) // 2
        while half > 0:
            for t in range(half):
                buf[t] += buf[t + half]
            out.append(list(buf[: max(half, 1)]))
            half //= 2
        return out

    def _repr_svg_(self) -> str:
        w, h = 46, 40
        rounds = self.rounds()
        body = []
        for level, buf in enumerate(rounds):
            y = 20 + level * h
            label = (
                labels.text("load", self.language)
                if level == 0
                else "half=%d" % (len(rounds[level - 1]) // 2)
            )
            body.append('<text x="4" y="%d">%s</text>' % (y + 14, label))
            for t, v in enumerate(buf):
                x = 60 + t * w
                body.append(
                    '<rect x="%d" y="%d" width="%d" height="20" fill="%s" stroke="#666"/>'
                    '<text x="%d" y="%d">%g</text>'
                    % (x, y, w - 4, BLOCK_COLORS[level % 6], x + 4, y + 14, v)
                )
                if level > 0:
                    half = len(rounds[level - 1]) // 2
                    for src in (t, t + half):
                        body.append(
                            '<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#999"/>'
                            % (60 + src * w + 20, y - h + 20, x + 20, y)
                        )
        return _svg(70 + len(self.values) * w, 30 + len(rounds) * h, body)


class MemoryOverTime:
    """Used memory of each card over a run, one line per card: ``samples`` is a list of
    ``(step, cards)`` with ``cards`` as ``minitf.smi.smi_data()`` returns them."""

    def __init__(
        self,
        samples,
        title: str = "GPU memory used (MiB) per training step",
        language: str | None = None,
    ):
        self.language = labels.resolve(language)
        self.samples = list(samples)
        self.title = labels.text(title, self.language)
        if not self.samples:
            raise ValueError("MemoryOverTime needs at least one sample")

    def series(self) -> dict[int, list[tuple[int, float]]]:
        """{card id: [(step, MiB used)]}."""
        out: dict[int, list[tuple[int, float]]] = {}
        for step, cards in self.samples:
            for c in cards:
                out.setdefault(c["id"], []).append((step, c["memory_used"] / float(1 << 20)))
        return out

    def _repr_svg_(self) -> str:
        w, h, left, top = 520, 200, 60, 30
        series = self.series()
        steps = [s for s, _ in self.samples]
        top_mib = max([v for pts in series.values() for _, v in pts] + [1.0])
        x0, x1 = min(steps), max(max(steps), min(steps) + 1)

        def pos(step, mib):
            return left + (step - x0) * w / (x1 - x0), top + h - mib * h / top_mib

        step = escape(labels.text("step %d", self.language))
        body = [
            '<text x="%d" y="16">%s</text>' % (left, escape(self.title)),
            '<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#666"/>'
            % (left, top, w, h),
            '<text x="4" y="%d">%.0f MiB</text><text x="4" y="%d">0</text>'
            % (top + 10, top_mib, top + h),
            ('<text x="%d" y="%d">' + step + '</text><text x="%d" y="%d">' + step + "</text>")
            % (left, top + h + 14, x0, left + w - 50, top + h + 14, x1),
        ]
        for i, (card, pts) in enumerate(sorted(series.items())):
            color = ("#4e79a7", "#f28e2b", "#59a14f", "#b07aa1")[i % 4]
            path = " ".join("%.1f,%.1f" % pos(s, v) for s, v in pts)
            body.append(
                '<polyline points="%s" fill="none" stroke="%s" stroke-width="2"/>'
                '<text x="%d" y="%d" fill="%s">GPU %d</text>'
                % (path, color, left + w + 6, top + 12 + 14 * i, color, card)
            )
        return _svg(left + w + 60, top + h + 24, body)
