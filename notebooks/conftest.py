"""Keeps notebooks that nbval runs at the same time apart (pytest-xdist, ``-n 2 --dist loadfile``).

``tests/test_notebooks.py`` and ``binder/check.sh`` run the notebooks under nbval with
pytest-xdist: each worker process runs whole notebooks (``--dist loadfile`` keeps a notebook's
cells in one worker, hence in one kernel), and the kernels it starts inherit its environment.
Two notebooks running side by side must not meet: the emulated GPU cards of notebook 02 record
the memory each process holds in ``MINITF_STATE_DIR``, and the notebooks' temporary folders go to
``TMPDIR``.  So each worker (``PYTEST_XDIST_WORKER``: ``gw0``, ``gw1``, ...) gets its own
subfolder of both before its first kernel starts.  A worker runs its notebooks one after
another, as the serial run always did.  Without xdist this file changes nothing.
"""

import os
import shutil
import tempfile
from pathlib import Path

_MADE: list[str] = []


def _private_folder(name: str, worker: str) -> str:
    """``$name/<worker>`` when ``$name`` is set (kept for the caller to inspect), else a new
    temporary folder removed when the worker ends."""
    base = os.environ.get(name)
    if base:
        path = Path(base) / worker
        path.mkdir(parents=True, exist_ok=True)
        return str(path)
    path = tempfile.mkdtemp(prefix="nbval-%s-%s-" % (name.lower(), worker))
    _MADE.append(path)
    return path


def pytest_configure(config) -> None:
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if not worker:
        return
    os.environ["MINITF_STATE_DIR"] = _private_folder("MINITF_STATE_DIR", worker)
    os.environ["TMPDIR"] = _private_folder("TMPDIR", worker)
    tempfile.tempdir = None  # this process's own temporary files follow TMPDIR too


def pytest_unconfigure(config) -> None:
    while _MADE:
        shutil.rmtree(_MADE.pop(), ignore_errors=True)
