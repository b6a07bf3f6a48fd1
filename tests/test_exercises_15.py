"""Notebook 15's checks mark answers: each one fails on a wrong answer.

The committed outputs (nbval, tests/test_notebooks.py) show every check saying "Not answered
yet" in ``notebooks/15_exercises.ipynb`` and passing with the answers of
``notebooks/solutions/15_solutions.ipynb``. This test types a wrong answer into each exercise
cell of the learner's notebook (the cells tagged ``exN``), runs the notebook in a fresh kernel
and requires each check (tagged ``checkN``) to end with an ``AssertionError``, while every other
cell, the starting points of the practical exercises included, runs without error.
"""

import nbformat
import pytest
from nbclient import NotebookClient
from test_notebooks import NOTEBOOKS, _nbval_env

pytestmark = [pytest.mark.notebooks, pytest.mark.slow, pytest.mark.cluster]

WRONG = {
    "ex1": 'second_says = "running"\nfix_1 = ({}, {})\nfix_2 = ({}, {})',
    "ex2": 'device_attr_before = ""\ndevice_attr_after = "/device:GPU:0"\n'
    'placed_before_run = False\nplaced_on = "GPU:0"',
    "ex3": 'error_without_soft = "InvalidArgumentError"\n'
    'soft = {"n": "GPU:0", "n/Assign": "CPU:0", "m": "GPU:0"}',
    "ex4": "values = [11.0, 21.0, 31.0]",
    "ex5": 'faster_with = {"four small sums": "intra", "one big matmul": "intra"}',
    "ex6": 'b_reads = "FailedPreconditionError"\nb_reads_after_reset = "FailedPreconditionError"',
    "ex7": "local_without_restore = 5.0\nlocal_after_restore = 5.0\ncluster_without_restore = 5.0",
    # every network on its device, but one after the other in the notebook's own thread
    "ex8": 'configs = [("/cpu:0", 16, 0.5), ("/gpu:0", 32, 0.3), ("/gpu:1", 64, 0.5)]\n'
    "def search(configs):\n    return [train_one(*c) for c in configs]",
    # the right mechanism, with a learning rate at which the model never learns (a diverging one,
    # 1.0, is not certain to diverge: it sometimes reaches 90 %)
    "ex9": "def make_optimizer(optimizer, sync):\n"
    "    if not sync:\n        return optimizer\n"
    "    return tf.train.SyncReplicasOptimizer(optimizer, 2, total_num_replicas=2)\n"
    "def make_hook(net, is_chief, sync):\n"
    "    if not sync:\n        return StalenessHook(net['train_op'])\n"
    "    return net['optimizer'].make_session_run_hook(is_chief, num_tokens=0)\n"
    "sync_learning_rate = 0.0",
    "ex10": "ps_strategy = None",  # round robin: ps/1 gets the three kernels
}


def _tag(cell):
    tags = cell.get("metadata", {}).get("tags", [])
    return tags[0] if tags else None


def test_every_check_of_notebook_15_fails_on_a_wrong_answer(tmp_path, monkeypatch):
    nb = nbformat.read(NOTEBOOKS / "15_exercises.ipynb", as_version=4)
    answered = set()
    for cell in nb.cells:
        if _tag(cell) in WRONG:
            cell.source = WRONG[_tag(cell)]
            answered.add(_tag(cell))
    assert answered == set(WRONG), "exercise cells not found: %s" % sorted(set(WRONG) - answered)
    for name, value in _nbval_env(tmp_path).items():
        monkeypatch.setenv(name, value)
    NotebookClient(
        nb, timeout=300, allow_errors=True, resources={"metadata": {"path": str(NOTEBOOKS)}}
    ).execute()
    outcomes = {}
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        errors = [o for o in cell.outputs if o.output_type == "error"]
        tag = _tag(cell) or "cell %d" % i
        if tag.startswith("check"):
            outcomes[tag] = errors[0].ename if errors else "passed"
        else:
            assert not errors, "%s failed: %s" % (tag, errors[0].evalue)
    expected = {"check%s" % name[2:]: "AssertionError" for name in WRONG}
    assert outcomes == expected
    left = sorted(p.name for p in (tmp_path / "tmp").glob("minitf-*"))
    assert not left, "the notebook left temporary folders behind: %s" % left
