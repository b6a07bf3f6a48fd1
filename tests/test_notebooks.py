"""The teaching notebooks run top to bottom and still print what their committed outputs say.

Runs ``pytest --nbval`` on ``notebooks/`` in a child process (pytest recurses into
``notebooks/solutions/``, the exercises' answers, and the test requires those too): every code
cell is executed in a fresh kernel per notebook and its outputs are compared with the committed
ones, after the sanitizers of ``notebooks/nbval_sanitize.cfg`` (pids, dates, pictures).  The
child gets a private ``MINITF_STATE_DIR`` (emulated-card memory reservations never meet other
processes'), a private ``TMPDIR``, and the environment the committed outputs were made in: two
emulated GPUs, no real CUDA card, nothing hidden by ``CUDA_VISIBLE_DEVICES``.

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
    names = sorted(
        p.relative_to(NOTEBOOKS).as_posix()
        for pattern in ("*.ipynb", "solutions/*.ipynb")
        for p in NOTEBOOKS.glob(pattern)
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
    proc = subprocess.run(
        cmd, cwd=ROOT, env=_nbval_env(tmp_path), capture_output=True, text=True, timeout=TIMEOUT_S
    )
    report = proc.stdout + proc.stderr
    assert proc.returncode == 0, "nbval failed (exit %d):\n%s" % (proc.returncode, report[-20000:])
    passed = set(re.findall(r"^PASSED notebooks/([^:\s]+\.ipynb)::Cell \d+", proc.stdout, re.M))
    missing = [n for n in names if n not in passed]
    assert not missing, "notebooks not collected by nbval: %s\n%s" % (missing, report[-5000:])
    left = sorted(p.name for p in (tmp_path / "tmp").glob("minitf-*"))
    assert not left, "the notebooks left temporary folders behind: %s" % left
