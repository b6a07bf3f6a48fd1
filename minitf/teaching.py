"""Helpers the notebooks use so their cells show the chapter, not plumbing.

Nothing here is TensorFlow API: these are minitf-only conveniences for the course (the book's
readers would write them by hand, or use a shell): free ports and addresses for cluster specs,
and :func:`run_side_by_side`, which starts small TF programs next to each other on the emulated
cards (book section "Managing the GPU RAM"). Each helper is small and documented so a
learner who wants to see the plumbing can read it in one sitting.
"""

from __future__ import annotations

import contextlib
import os
import select
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from typing import Any

from minitf.distributed.local_cluster import free_port

__all__ = ["free_port", "in_process_cluster", "local_addresses", "run_side_by_side"]


def local_addresses(count: int) -> list[str]:
    """``count`` "127.0.0.1:PORT" addresses on ports free right now (for a ClusterSpec)."""
    if count < 0:
        raise ValueError("count must be >= 0, got %r" % (count,))
    return ["127.0.0.1:%d" % free_port() for _ in range(count)]


# -- programs side by side (notebook 15, exercise 1; notebook 02 starts such programs by hand) -

SIDE_BY_SIDE_PROGRAM = """
import sys
import minitf as tf

config = tf.ConfigProto()
{config}
x = tf.random_uniform([64, 64], seed=1)
y = tf.reduce_sum(tf.matmul(x, x))     # unpinned: on /gpu:0 when the program sees a card
try:
    with tf.Session(config=config) as sess:
        sess.run(y)                    # the first run takes the GPU memory
        print("running", flush=True)
        sys.stdin.read()               # hold it until run_side_by_side closes our input
except tf.errors.OpError as e:
    print("%s: %s" % (type(e).__name__, str(e).splitlines()[0]), flush=True)
    sys.exit(1)
"""
"""The program :func:`run_side_by_side` starts; ``{config}`` becomes lines that set ``config``."""


def _program_env(settings: Mapping[str, str], cards: int, state_dir: str) -> dict[str, str]:
    env = dict(os.environ, MINITF_EMULATED_GPUS=str(cards), PYTHONUNBUFFERED="1")
    env["MINITF_STATE_DIR"] = state_dir  # the programs' machine: its cards' registry
    env["NUMBA_ENABLE_CUDASIM"] = "1"  # emulated cards even on a machine with real ones
    env.pop("CUDA_VISIBLE_DEVICES", None)
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = repo + os.pathsep + env.get("PYTHONPATH", "")
    env.update({k: str(v) for k, v in settings.items() if k != "config"})
    return env


def _said(proc: subprocess.Popen, deadline: float) -> str:
    """The last line ``proc`` printed once it said "running" or exited."""
    fd, data = proc.stdout.fileno(), b""
    while b"running\n" not in data:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("a program did not report before the deadline")
        if select.select([fd], [], [], left)[0]:
            chunk = os.read(fd, 65536)
            if not chunk:  # it exited
                proc.wait()
                break
            data += chunk
    lines = [line for line in data.decode().splitlines() if line.strip()]
    return lines[-1] if lines else "exited with code %s" % proc.returncode


def _stop(procs: list[subprocess.Popen]) -> None:
    for p in procs:
        p.stdin.close()
    for p in procs:
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
        p.stdout.close()


def run_side_by_side(
    *programs: Mapping[str, str], cards: int = 2, timeout: float = 60.0
) -> list[str]:
    """Starts one small TF program per mapping, in turn, each while the earlier ones still run.

    A program builds a matmul (unpinned: ``/gpu:0`` if it sees a card), opens a session with
    ``config = tf.ConfigProto()`` and runs it once, which is when TF 1.x takes GPU memory; then
    it holds on until every program has started. A mapping's ``"config"`` key holds lines of
    Python that change ``config`` (``"config.gpu_options.allow_growth = True"``); every other
    key is an environment variable of that program (``CUDA_VISIBLE_DEVICES="1"``). The programs
    share a machine of their own with ``cards`` emulated cards (a private card registry, deleted
    afterwards), so what the calling process holds on its cards never gets in their way.

    Returns what each program said: ``"running"``, or its error (``"ResourceExhaustedError:
    failed to allocate ..."``). Every program is stopped before this returns.
    """
    if cards < 1:
        raise ValueError("cards must be >= 1, got %r" % (cards,))
    machine = tempfile.TemporaryDirectory(prefix="minitf-side-by-side-")
    deadline, procs, said = time.monotonic() + timeout, [], []
    try:
        for settings in programs:
            code = SIDE_BY_SIDE_PROGRAM.format(config=settings.get("config", ""))
            procs.append(
                subprocess.Popen(
                    [sys.executable, "-c", code],
                    env=_program_env(settings, cards, machine.name),
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                )
            )
            said.append(_said(procs[-1], deadline))
    finally:
        _stop(procs)
        machine.cleanup()
    return said


# -- an in-process cluster for notebooks 07-09 (appended by the 06-09 fidelity work) -----------


@contextlib.contextmanager
def in_process_cluster(
    jobs: Mapping[str, int], configs: Mapping[str, Any] | None = None
) -> Iterator[dict[str, Any]]:
    """Every task of ``jobs`` (e.g. ``{"ps": 1, "worker": 2}``) as a ``tf.train.Server`` inside
    this process, on free ports of 127.0.0.1; yields ``{"ps/0": server, ...}`` and stops them all
    when the block ends, even on an error.

    Tasks in one process are what the book's footnote allows for tests; their masters print the
    placement log into the notebook.  ``configs``: a ``ConfigProto`` per job, e.g.
    ``{"ps": tf.ConfigProto(device_count={"GPU": 0})}`` for a GPU-less parameter server (the
    in-process form of starting it with ``CUDA_VISIBLE_DEVICES=""``).  TF1 has no equivalent:
    a script there starts each ``tf.train.Server`` itself and can never stop it.
    """
    from minitf.distributed.cluster_spec import ClusterSpec
    from minitf.distributed.server import Server

    spec = ClusterSpec({job: local_addresses(n) for job, n in jobs.items()})
    configs = dict(configs or {})
    servers: dict[str, Any] = {}
    try:
        for job in spec.jobs:
            for i in spec.task_indices(job):
                servers["%s/%d" % (job, i)] = Server(spec, job, i, config=configs.get(job))
        yield servers
    finally:
        for server in servers.values():
            server.stop()
