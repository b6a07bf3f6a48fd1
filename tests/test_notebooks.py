"""The teaching notebooks run top to bottom and still print what their committed outputs say.

Runs ``pytest --nbval`` on ``notebooks/`` in a child process (pytest recurses into
``notebooks/solutions/``, the exercises' answers, and every other subfolder: the test requires
each notebook found there): every code cell is executed in a fresh kernel per notebook and its
outputs are compared with the committed ones, after the sanitizers of
``notebooks/nbval_sanitize.cfg`` (pids, dates, pictures).  The child gets a private
``MINITF_STATE_DIR`` (emulated-card memory reservations never meet other processes'), a private
``TMPDIR``, and the environment the committed outputs were made in: two emulated GPUs, no real
CUDA card, nothing hidden by ``CUDA_VISIBLE_DEVICES``.

Most of a notebook's time is waiting (kernel and cluster start-ups, timeouts, training
subprocesses), so the child runs several notebooks at once with pytest-xdist:
``--dist loadfile`` keeps each notebook's cells in one worker and so in one kernel, and
``notebooks/conftest.py`` gives each worker its own subfolder of ``MINITF_STATE_DIR`` and
``TMPDIR`` (``MINITF_NBVAL_WORKERS`` overrides the number of workers; 1 runs them one by one).

To refresh a notebook's outputs after a deliberate change::

    MINITF_STATE_DIR=$(mktemp -d) NUMBA_ENABLE_CUDASIM=1 \\
        jupyter nbconvert --to notebook --execute --inplace notebooks/03_placing_operations.ipynb
"""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.notebooks, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
TIMEOUT_S = 900
# notebooks mostly wait, so more workers than cores would still gain, but the cells that train or
# time things are written for 2 cores: two at a time is what the committed outputs allow for
WORKERS = int(os.environ.get("MINITF_NBVAL_WORKERS", "2"))


def _nbval_env(tmp_path):
    env = dict(os.environ)
    for name in ("MINITF_EMULATED_GPUS", "CUDA_VISIBLE_DEVICES", "MINITF_GPU_BACKEND"):
        env.pop(name, None)
    env["MINITF_STATE_DIR"] = str(tmp_path / "state")
    (tmp_path / "tmp").mkdir()
    env["TMPDIR"] = str(tmp_path / "tmp")  # the notebooks' temporary folders end up in here
    env["NUMBA_ENABLE_CUDASIM"] = "1"  # emulated cards even on a CUDA machine, as committed
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def test_notebooks_match_their_committed_outputs(tmp_path):
    try:
        import nbval  # noqa: F401
    except ImportError:
        pytest.fail(
            "nbval is not installed: the notebooks cannot be checked (it belongs to the "
            "test dependencies)"
        )
    if WORKERS > 1:
        try:
            import xdist  # noqa: F401
        except ImportError:
            pytest.fail(
                "pytest-xdist is not installed: the notebooks cannot run side by side (it "
                "belongs to the test dependencies; MINITF_NBVAL_WORKERS=1 runs them one by one)"
            )
    names = sorted(
        p.relative_to(NOTEBOOKS).as_posix()
        for p in NOTEBOOKS.rglob("*.ipynb")
        if ".ipynb_checkpoints" not in p.parts
    )
    assert names, "no notebook found in %s" % NOTEBOOKS
    assert any(n.startswith("solutions/") for n in names), "no solutions notebook found"
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "--nbval",
        "--nbval-current-env",
        "--nbval-sanitize-with",
        "notebooks/nbval_sanitize.cfg",
        "-q",
        "-rA",
        "-p",
        "no:cacheprovider",
        "notebooks/",  # pytest recurses: notebooks/solutions/ too
    ]
    if WORKERS > 1:  # whole notebooks to each worker (nbval: one kernel per notebook)
        cmd[3:3] = ["-n", str(WORKERS), "--dist", "loadfile"]
    proc = subprocess.run(
        cmd, cwd=ROOT, env=_nbval_env(tmp_path), capture_output=True, text=True, timeout=TIMEOUT_S
    )
    report = proc.stdout + proc.stderr
    assert proc.returncode == 0, "nbval failed (exit %d):\n%s" % (proc.returncode, report[-20000:])
    passed = set(re.findall(r"^PASSED notebooks/([^:\s]+\.ipynb)::Cell \d+", proc.stdout, re.M))
    missing = [n for n in names if n not in passed]
    assert not missing, "notebooks not collected by nbval: %s\n%s" % (missing, report[-5000:])
    if WORKERS > 1:  # notebooks/conftest.py gave each worker that ran notebooks its own folders
        # (on a loaded machine, e.g. this suite itself under -n 2, one worker may take every
        # notebook before the other starts: a folder per worker that ran one, none shared)
        workers = sorted(p.name for p in (tmp_path / "state").iterdir())
        assert workers and set(workers) <= {"gw%d" % i for i in range(WORKERS)}, workers
    left = sorted(p.name for p in (tmp_path / "tmp").rglob("minitf-*"))  # workers' subfolders
    assert not left, "the notebooks left temporary folders behind: %s" % left
