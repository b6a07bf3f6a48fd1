"""``minitf.smi()`` and ``python -m minitf.smi``: an ``nvidia-smi`` for minitf's GPU cards.

Book section: "Managing the GPU RAM".  The section's advice starts with looking at who holds
the memory of each card - ``nvidia-smi`` on a real machine.  This prints the same kind of
table for the machine's cards (``minitf.runtime.devices.machine_gpus()``, emulated or not):
used / total memory per card and the processes holding it, read from the machine-wide
reservation registry of :mod:`minitf.runtime.card_registry`.  ``smi_data()`` returns the same
information as plain data; ``python -m minitf.smi --json`` prints it as JSON.

The module object itself is callable, so ``import minitf.smi; minitf.smi()`` prints the table.
"""

import argparse
import json
import sys
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
            "Note: only minitf processes are listed; other programs' use of the cards is not shown."
        )
    return lines


def smi(file=None):
    """Prints the nvidia-smi-like table of the machine's cards to ``file`` (default stdout)."""
    out = sys.stdout if file is None else file
    out.write("\n".join(smi_lines()) + "\n")


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
    args = parser.parse_args(argv)
    if args.reset:
        _registry.clear()
        print("Emulated GPU registry in %s reset." % _registry.state_dir())
        return 0
    if args.json:
        print(json.dumps(smi_data(), indent=2))
    else:
        smi()
    return 0


class _CallableModule(types.ModuleType):
    """Lets ``minitf.smi()`` work whether ``minitf.smi`` is this module or the function."""

    def __call__(self, file=None):
        return smi(file)


sys.modules[__name__].__class__ = _CallableModule

if __name__ == "__main__":
    sys.exit(main())
