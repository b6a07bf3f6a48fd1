"""notebooks/conftest.py: each pytest-xdist worker running notebooks under nbval gets its own
``MINITF_STATE_DIR`` and ``TMPDIR`` (tests/test_notebooks.py runs the notebooks two at a time)."""

import importlib.util
import os
import tempfile
from pathlib import Path

import pytest

CONFTEST = Path(__file__).resolve().parents[1] / "notebooks" / "conftest.py"


@pytest.fixture
def workers_conftest(monkeypatch):
    spec = importlib.util.spec_from_file_location("minitf_notebooks_conftest", CONFTEST)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setattr(tempfile, "tempdir", tempfile.tempdir)  # put back after the test
    for name in ("MINITF_STATE_DIR", "TMPDIR", "PYTEST_XDIST_WORKER"):
        monkeypatch.delenv(name, raising=False)
    yield module
    module.pytest_unconfigure(None)


def test_each_worker_gets_a_subfolder_of_the_given_folders(workers_conftest, monkeypatch, tmp_path):
    monkeypatch.setenv("MINITF_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw1")
    workers_conftest.pytest_configure(None)
    assert os.environ["MINITF_STATE_DIR"] == str(tmp_path / "state" / "gw1")
    assert os.environ["TMPDIR"] == str(tmp_path / "tmp" / "gw1")
    assert (tmp_path / "state" / "gw1").is_dir() and (tmp_path / "tmp" / "gw1").is_dir()
    assert tempfile.gettempdir() == str(tmp_path / "tmp" / "gw1")  # the worker's own files too
    workers_conftest.pytest_unconfigure(None)
    assert (tmp_path / "state" / "gw1").is_dir(), "the caller's folders are the caller's to check"


def test_unset_folders_become_private_ones_removed_at_the_end(workers_conftest, monkeypatch):
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw0")
    workers_conftest.pytest_configure(None)
    state, tmp = os.environ["MINITF_STATE_DIR"], os.environ["TMPDIR"]
    assert state != tmp and os.path.isdir(state) and os.path.isdir(tmp)
    assert "gw0" in os.path.basename(state) and "gw0" in os.path.basename(tmp)
    assert not os.path.basename(state).startswith("minitf-")  # not a notebook's leftover
    workers_conftest.pytest_unconfigure(None)
    assert not os.path.exists(state) and not os.path.exists(tmp)


def test_without_xdist_nothing_changes(workers_conftest, monkeypatch, tmp_path):
    monkeypatch.setenv("MINITF_STATE_DIR", str(tmp_path))
    workers_conftest.pytest_configure(None)
    assert os.environ["MINITF_STATE_DIR"] == str(tmp_path)
    assert "TMPDIR" not in os.environ
