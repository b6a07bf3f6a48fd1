"""``minitf.smi()`` and ``python -m minitf.smi``: an ``nvidia-smi`` for minitf's GPU cards.

Book section: "Managing the GPU RAM".  The section's advice starts with looking at who holds
the memory of each card - ``nvidia-smi`` on a real machine.  This prints the same kind of
table for the machine's cards (``minitf.runtime.devices.machine_gpus()``, emulated or not):
used / total memory per card and the processes holding it, read from the machine-wide
reservation registry of :mod:`minitf.runtime.card_registry`.  ``smi_data()`` returns the same
information as plain data; ``python -m minitf.smi --json`` prints it as JSON.

Two views the blog (seed 003) uses on real machines are here too, minitf-only names in the spirit
of those tools: ``minitf.smi(compact=True)`` (also ``minitf.smi.gpustat()``) prints one line per
card like ``gpustat``; ``minitf.smi.watch(interval, count)`` is the ``watch -n 1 nvidia-smi``
habit, a table refreshed in place (in a notebook, one output that is updated; in a terminal,
``python -m minitf.smi -l 1``).

The module object itself is callable, so ``import minitf.smi; minitf.smi()`` prints the table.
"""

import argparse
import json
import os
import socket
import sys
import threading
import time
import types

from minitf.runtime import card_registry as _registry
from minitf.runtime import devices as _devices
from minitf.runtime.allocator import MiB
from minitf.version import __version__

WIDTH = 79  # the whole line, borders included (nvidia-smi's classic width)
_INNER = WIDTH - 2

# (title, width, alignment) of the fixed columns of each table
_GPU_COLUMNS = [
    ("GPU", 3, ">"),
    ("Name", 20, "<"),
    ("Bus-Id", 12, "<"),
    ("Memory-Usage", 23, ">"),
    ("Type", 8, "<"),
]
_PROC_COLUMNS = [("GPU", 3, ">"), ("PID", 8, ">"), ("Process name", 48, "<"), ("Memory", 10, ">")]


def _mib(nbytes):
    return "%dMiB" % (int(nbytes) // MiB)


def smi_data():
    """The machine's cards and who holds their memory, as plain data
    (``minitf.runtime.devices.card_usage``)."""
    return _devices.card_usage()


def _line(text=""):
    return "|" + text[:_INNER].ljust(_INNER) + "|"


def _rule(ch="-"):
    return "+" + ch * _INNER + "+"


def _row(columns, values):
    cells = []
    for (_, width, align), value in zip(columns, values):
        cells.append(("{:%s%d.%d}" % (align, width, width)).format(str(value)))
    return _line(" " + "  ".join(cells))


def smi_lines(data=None):
    """The table as a list of lines (all ``WIDTH`` characters except the date line)."""
    data = smi_data() if data is None else data
    lines = [time.strftime("%a %b %d %H:%M:%S %Y"), _rule()]
    emulated = bool(data) and all(c["emulated"] for c in data)
    kind = "%d emulated GPU card(s)" % len(data) if emulated else "%d GPU card(s)" % len(data)
    head = " MINITF-SMI %s" % __version__
    lines.append(_line(head + kind.rjust(_INNER - len(head) - 1) + " "))
    lines.append(_line(" Registry: %s" % _registry.state_dir()))
    lines.append("|" + "-" * _INNER + "|")
    lines.append(_row(_GPU_COLUMNS, [c[0] for c in _GPU_COLUMNS]))
    lines.append("|" + "=" * _INNER + "|")
    if not data:
        lines.append(_line(" No GPU card on this machine (MINITF_EMULATED_GPUS=0?)"))
    for c in data:
        usage = "%s / %s" % (_mib(c["memory_used"]).rjust(10), _mib(c["memory_total"]).rjust(10))
        lines.append(
            _row(
                _GPU_COLUMNS,
                [c["id"], c["name"], c["bus_id"], usage, "Emulated" if c["emulated"] else "CUDA"],
            )
        )
    lines.append(_rule())
    lines.append("")
    lines.append(_rule())
    lines.append(_line(" Processes:" + "GPU Memory".rjust(_INNER - 12) + " "))
    lines.append(_row(_PROC_COLUMNS, [c[0] for c in _PROC_COLUMNS]))
    lines.append("|" + "=" * _INNER + "|")
    procs = [(c["id"], p) for c in data for p in c["processes"]]
    if not procs:
        lines.append(_line("  No running processes found"))
    for card_id, p in procs:
        lines.append(_row(_PROC_COLUMNS, [card_id, p["pid"], p["name"], _mib(p["memory"])]))
    lines.append(_rule())
    if emulated:
        lines.append(
            "Note: these cards are emulated by minitf (no CUDA driver): the memory shown is what"
        )
        lines.append("minitf processes have reserved in the registry, not memory of a real card.")
    elif data:
        lines.append(
            "Note: only this process is listed, with what numba holds for it on each card; other"
        )
        lines.append("processes' use of a real card is the driver's to show (nvidia-smi).")
    return lines


def compact_lines(data=None):
    """The ``gpustat``-like view: a header line, then one line per card::

    host  Thu Nov 26 03:00:00 2026  minitf 0.1
    [0] minitf emulated GPU  |   512 /  4096 MB | python3(512M)
    """
    data = smi_data() if data is None else data
    lines = [
        "%s  %s  minitf %s"
        % (socket.gethostname(), time.strftime("%a %b %d %H:%M:%S %Y"), __version__)
    ]
    if not data:
        lines.append("(no GPU card on this machine)")
    for c in data:
        procs = " ".join(
            "%s(%dM)"
            % (os.path.basename(p["name"].split()[0]) if p["name"] else "?", p["memory"] // MiB)
            for p in c["processes"]
        )
        line = "[%d] %-20.20s | %5d / %5d MB" % (
            c["id"],
            c["name"],
            c["memory_used"] // MiB,
            c["memory_total"] // MiB,
        )
        lines.append(line + (" | " + procs if procs else ""))
    return lines


def smi(file=None, compact=False):
    """Prints the nvidia-smi-like table of the machine's cards to ``file`` (default stdout);
    ``compact=True`` prints the one-line-per-card ``gpustat`` view instead."""
    out = sys.stdout if file is None else file
    out.write("\n".join(compact_lines() if compact else smi_lines()) + "\n")


def gpustat(file=None):
    """``minitf.smi(compact=True)``: one line per card, like the ``gpustat`` tool."""
    smi(file, compact=True)


def _notebook_display():
    """A function that shows a frame in a notebook kernel, each call replacing the previous
    frame in place (one display, updated), else None."""
    shell = sys.modules.get("IPython")
    ip = shell.get_ipython() if shell is not None and hasattr(shell, "get_ipython") else None
    if ip is None or getattr(ip, "kernel", None) is None:
        return None
    from IPython.display import display

    handle = []

    def show(frame):
        if handle:
            handle[0].update(frame)
        else:
            handle.append(display(frame, display_id=True))

    return show


class _Frame:
    """One refresh of the live view: text/plain and a <pre> block (static in a saved notebook)."""

    def __init__(self, text):
        self.text = text

    def __repr__(self):
        return self.text

    def _repr_html_(self):
        import html

        return "<pre>%s</pre>" % html.escape(self.text)


def watch(interval=1.0, count=None, compact=False, file=None, stop=None, on_frame=None):
    """``watch -n 1 nvidia-smi``: show the table every ``interval`` seconds, in place.

    Runs in the caller's thread (no thread is started) until ``count`` refreshes were shown,
    ``stop`` (a ``threading.Event``) is set, or the user interrupts (a notebook's stop button).
    In a notebook each refresh replaces the previous one in place; elsewhere each refresh is
    written to ``file`` (default stdout), after a clear-screen when it is a terminal.
    ``on_frame(i)`` is called after refresh ``i`` (e.g. to run a training step between
    refreshes).  Returns the number of refreshes shown.
    """
    if interval < 0:
        raise ValueError("interval must be >= 0 seconds, got %r" % (interval,))
    if count is not None and count < 1:
        raise ValueError("count must be >= 1 or None, got %r" % (count,))
    stop = threading.Event() if stop is None else stop
    display = _notebook_display() if file is None else None
    out = sys.stdout if file is None else file
    shown = 0
    try:
        while not stop.is_set() and (count is None or shown < count):
            frame = _Frame("\n".join(compact_lines() if compact else smi_lines()))
            if display is not None:
                display(frame)
            else:
                clear = "\x1b[H\x1b[2J" if getattr(out, "isatty", lambda: False)() else ""
                out.write(clear + frame.text + "\n")
                out.flush()
            shown += 1
            if on_frame is not None:
                on_frame(shown - 1)
            if count is not None and shown >= count:
                break
            stop.wait(interval)
    except KeyboardInterrupt:
        pass
    return shown


def main(argv=None):
    """``python -m minitf.smi [--json]``."""
    parser = argparse.ArgumentParser(
        prog="python -m minitf.smi",
        description="Show minitf's GPU cards, their memory and the processes holding it "
        "(like nvidia-smi).",
    )
    parser.add_argument(
        "--json", action="store_true", help="print the data as JSON instead of the table"
    )
    parser.add_argument(
        "--reset",
        action="store_true",
        help="forget every reservation of the emulated cards (a damaged registry included); "
        "only when no minitf program is running",
    )
    parser.add_argument("--compact", action="store_true", help="one line per card, like gpustat")
    parser.add_argument(
        "-l",
        "--loop",
        type=float,
        metavar="SEC",
        default=None,
        help="refresh every SEC seconds until interrupted (like nvidia-smi -l)",
    )
    args = parser.parse_args(argv)
    if args.reset:
        _registry.clear()
        print("Emulated GPU registry in %s reset." % _registry.state_dir())
        return 0
    if args.json:
        print(json.dumps(smi_data(), indent=2))
    elif args.loop is not None:
        watch(args.loop, compact=args.compact, file=sys.stdout)
    else:
        smi(compact=args.compact)
    return 0


class _CallableModule(types.ModuleType):
    """Lets ``minitf.smi()`` work whether ``minitf.smi`` is this module or the function."""

    def __call__(self, file=None, compact=False):
        return smi(file, compact)


sys.modules[__name__].__class__ = _CallableModule

if __name__ == "__main__":
    sys.exit(main())
