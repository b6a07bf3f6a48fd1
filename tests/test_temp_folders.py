"""Notebooks and test runs leave no ``minitf-*`` folder in the temporary directory (issue 24,
item 13).

Book section: "Managing the GPU RAM" (each notebook keeps its emulated cards' registry in a
private temporary folder).  A notebook holds its folders as ``tempfile.TemporaryDirectory``
objects, deleted by its last cell or when the kernel exits; the registry gives nothing back
into a folder that is already gone (it used to re-create it at exit); the test run's own
registry folder is removed by ``tests/conftest.py`` at exit.
"""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _env(tmp_path):
    env = dict(os.environ, TMPDIR=str(tmp_path), NUMBA_ENABLE_CUDASIM="1")
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("MINITF_STATE_DIR", None)
    return env


def _left(tmp_path):
    return sorted(p.name for p in tmp_path.glob("minitf-*"))


def test_notebooks_use_folders_deleted_at_exit():
    for path in sorted((ROOT / "notebooks").rglob("*.ipynb")):
        cells = json.loads(path.read_text())["cells"]
        code = "".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
        assert "mkdtemp" not in code, "%s makes a folder nobody removes" % path.name
        # a kernel that is killed (nbval stops its kernels so) runs no exit handler: the last
        # cell removes the folders too
        last = "".join(cells[-1]["source"])
        for name in re.findall(r"^\s*(\w+) = tempfile\.TemporaryDirectory\(", code, re.M):
            assert name in last and ".cleanup()" in last, (path.name, name)


NOTEBOOK_SETUP = """
import os, tempfile
import minitf as tf
STATE_FOLDER = tempfile.TemporaryDirectory(prefix="minitf-nb99-")
os.environ["MINITF_STATE_DIR"] = STATE_FOLDER.name
tf.config.emulate_gpus(1)
with tf.device("/gpu:0"):
    x = tf.constant(1.0) * 2.0
sess = tf.Session()           # reserves card memory in the folder, given back at exit
print(sess.run(x), len(os.listdir(STATE_FOLDER.name)) > 0)
"""


def test_a_notebook_kernel_leaves_no_folder(tmp_path):
    out = subprocess.run(
        [sys.executable, "-c", NOTEBOOK_SETUP],
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["2.0", "True"]
    assert _left(tmp_path) == []


@pytest.mark.slow
def test_a_test_run_leaves_no_folder(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-k", "parse"]
        + ["tests/test_device_name_utils.py"],
        cwd=ROOT,
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stdout[-3000:]
    assert _left(tmp_path) == []
