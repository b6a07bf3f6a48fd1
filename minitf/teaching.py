"""Helpers the notebooks use so their cells show the chapter, not plumbing.

Book sections: "Installation" and "Managing the GPU RAM" (programs run side by side on one
machine), "Parallel Execution" (timing a step).  Nothing here is TensorFlow API: these are
minitf-only conveniences for the course (the book's readers would write them by hand, or use a
shell).  Each helper is small and documented so a learner who wants to see the plumbing can read
it in one sitting:

* :func:`device_check` -- which GPUs this process has, and where they come from (notebook 00);
* :class:`ProgramLab` -- a folder of small TF programs started as real processes on a machine of
  emulated cards, read until they say they are running, and always stopped again; the cards as
  ``nvidia-smi`` would show them (notebooks 01 and 02);
* :func:`software_stack` -- the floors of Figure 12-2 as found on this machine (notebook 01);
* :func:`traced_run`, :func:`threads_used` -- time a step and trace it (notebook 04);
* :func:`run_side_by_side` -- small TF programs started next to each other on their own machine
  of emulated cards, for the chapter's first exercise (notebook 15);
* :func:`free_port`, :func:`local_addresses` -- loopback addresses for a ``ClusterSpec``;
* :func:`in_process_cluster` -- every task of a cluster as a server in this process (07-09).
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from typing import Any

from minitf import config as mconfig
from minitf.distributed.local_cluster import free_port
from minitf.framework import errors
from minitf.runtime import devices

__all__ = [
    "ProgramLab",
    "device_check",
    "free_port",
    "in_process_cluster",
    "local_addresses",
    "run_side_by_side",
    "software_stack",
    "threads_used",
    "traced_run",
]

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def local_addresses(count: int) -> list[str]:
    """``count`` "127.0.0.1:PORT" addresses on ports free right now (for a ClusterSpec)."""
    if count < 0:
        raise ValueError("count must be >= 0, got %r" % (count,))
    return ["127.0.0.1:%d" % free_port() for _ in range(count)]


def device_check() -> None:
    """Prints which GPUs this process has and where that came from (real CUDA cards, emulated
    cards and the setting that asked for them, or none)."""
    cards = devices.machine_gpus()
    if devices.real_cards_in_use():
        print("Real CUDA: minitf found %d NVIDIA card(s):" % len(cards))
        for c in cards:
            print("  card %d: %s, %.1f GiB" % (c.physical_id, c.name, c.memory_limit / 2**30))
    elif cards:
        count, memory = mconfig.emulated_gpus()
        env = os.environ.get("MINITF_EMULATED_GPUS")
        source = "MINITF_EMULATED_GPUS=%s" % env if env else "the default"
        print(
            "No CUDA driver: minitf emulates %d GPU card(s) of %d GiB each (%s)."
            % (count, memory // 2**30, source)
        )
    else:
        print("No GPU at all: this process only has /cpu:0 (zero emulated cards).")
    if "CUDA_VISIBLE_DEVICES" in os.environ:
        print("CUDA_VISIBLE_DEVICES=%r hides some cards." % os.environ["CUDA_VISIBLE_DEVICES"])
    print("This process sees %d GPU device(s)." % len(devices.visible_gpus()))
    if os.environ.get("MINITF_GPU_BACKEND") == "cudasim":
        print("MINITF_GPU_BACKEND=cudasim: GPU ops run numba.cuda kernels in Numba's simulator.")


def software_stack(language: str | None = None) -> list[tuple[str, str, bool]]:
    """Figure 12-2's floors, top to bottom, as ``(floor, what this machine has, present)``;
    ``language``: of their words ("en", "zh"; None: the default of
    :func:`minitf.viz.set_language`)."""
    from minitf.version import __version__
    from minitf.viz import labels

    def t(english: str) -> str:
        return labels.text(english, language)

    cards = devices.machine_gpus()
    real = devices.real_cards_in_use()
    count, memory = mconfig.emulated_gpus()
    if real:
        card_text = t("%d real card(s)") % len(cards)
    elif cards:
        card_text = t("%d emulated card(s) of %d GiB") % (count, memory // 2**30)
    else:
        card_text = t("none")
    kernels = t("numba.cuda kernels on the card" if real else "numpy kernels (emulated cards too)")
    driver_found = devices.cuda_available()  # (also where emulate_gpus(n) replaces the cards)
    driver = t("found" if driver_found else "not found (no NVIDIA driver)")
    return [
        (t("Your code"), "import minitf as tf", True),
        (t("Framework"), t("minitf %s: graph, placer, executor, thread pools") % __version__, True),
        (t("Kernels (cuDNN / CUDA libraries)"), kernels, True),
        (t("CUDA driver"), driver, driver_found),
        (t("GPU cards"), card_text, bool(cards)),
    ]


_CARDS_SEEN = """
import sys
import minitf as tf
from minitf import device_lib

config = tf.ConfigProto()
config.gpu_options.visible_device_list = sys.argv[1]
for d in device_lib.list_local_devices(config):
    if d.device_type == "GPU":
        bus = d.physical_device_desc.split("pci bus id: ")[1].split(",")[0]
        print(d.name, int(bus.split(":")[1], 16) - 1)
"""


class ProgramLab:
    """A temporary folder of small TF programs, run as real processes on ``cards`` emulated
    cards (4 GiB each, the same on every machine: Numba's simulator stands in for a driver).

    The lab's programs share a machine of their own: a record of who holds which card's memory
    (``MINITF_STATE_DIR`` in the folder), so programs of other notebooks, and what the calling
    process holds on its cards, never get in their way.  ``prefix`` names the folder (e.g.
    "minitf-nb01-"); :meth:`cleanup` deletes it.
    """

    def __init__(self, prefix: str, cards: int = 4) -> None:
        if cards < 1:
            raise ValueError("cards must be >= 1, got %r" % (cards,))
        self._folder = tempfile.TemporaryDirectory(prefix=prefix)
        self.folder = self._folder.name
        self.cards = cards

    def write(self, name: str, source: str) -> str:
        """Writes the program ``source`` as ``name`` in the folder; returns ``name``."""
        with open(os.path.join(self.folder, name), "w") as f:
            f.write(source)
        return name

    def env(self, **settings: str) -> dict[str, str]:
        """A program's environment: the lab's cards and record, plus ``settings`` (e.g.
        ``CUDA_VISIBLE_DEVICES="3,2"``).  ``CUDA_VISIBLE_DEVICES`` and ``TF_CPP_MIN_LOG_LEVEL``
        of this process are left out, so every learner's programs print the same logs."""
        env = dict(os.environ, MINITF_EMULATED_GPUS=str(self.cards), PYTHONUNBUFFERED="1")
        env["MINITF_STATE_DIR"] = os.path.join(self.folder, "cards")  # the lab's machine
        env["NUMBA_ENABLE_CUDASIM"] = "1"  # emulated cards even where real ones exist
        env.pop("CUDA_VISIBLE_DEVICES", None)
        env.pop("TF_CPP_MIN_LOG_LEVEL", None)
        env["PYTHONPATH"] = REPO + os.pathsep + env.get("PYTHONPATH", "")
        env.update(settings)
        return env

    def start(self, script: str, **settings: str) -> subprocess.Popen:
        """Starts ``python3 script`` in the folder (its stderr joins its stdout)."""
        return subprocess.Popen(
            [sys.executable, script],
            cwd=self.folder,
            env=self.env(**settings),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )

    @contextlib.contextmanager
    def running(self) -> Iterator[list[subprocess.Popen]]:
        """``with lab.running() as procs:`` -- every program appended to ``procs`` is stopped
        when the block ends, even if it fails."""
        procs: list[subprocess.Popen] = []
        try:
            yield procs
        finally:
            self.stop(procs)

    @staticmethod
    def read_until(proc: subprocess.Popen, marker: str = "running", timeout: float = 30) -> str:
        """What ``proc`` printed up to its line ``marker`` (it then keeps running), or until
        it exited; TimeoutError after ``timeout`` seconds."""
        fd, data = proc.stdout.fileno(), b""
        deadline = time.monotonic() + timeout
        while not any(ln.strip() == marker.encode() for ln in data.splitlines()):
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("no %r from the program after %ss" % (marker, timeout))
            if select.select([fd], [], [], left)[0]:
                chunk = os.read(fd, 65536)
                if not chunk:  # it exited
                    proc.wait()
                    break
                data += chunk
        return data.decode().rstrip("\n")

    @staticmethod
    def stop(procs: list[subprocess.Popen]) -> None:
        """Ends every program: closes its input (it then exits), kills it if it lingers."""
        for p in procs:
            p.stdin.close()
        for p in procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
            p.stdout.close()

    def smi(self, as_json: bool = False) -> Any:
        """``python -m minitf.smi`` (minitf's nvidia-smi) run with the lab's environment: its
        table as text, or with ``as_json`` the cards as data (one dict per card)."""
        cmd = [sys.executable, "-m", "minitf.smi"] + (["--json"] if as_json else [])
        out = subprocess.run(
            cmd, env=self.env(), capture_output=True, text=True, timeout=60, check=True
        )
        return json.loads(out.stdout) if as_json else out.stdout

    def machine(self) -> list[dict[str, Any]]:
        """The cards and who holds their memory, as data (``minitf.smi --json``)."""
        return self.smi(as_json=True)

    @staticmethod
    def held_by(data: list[dict[str, Any]]) -> dict[str, dict[int, int]]:
        """``{program: {card: MiB}}`` from a snapshot of the cards (:meth:`machine`)."""
        out: dict[str, dict[int, int]] = {}
        for card in data:
            for p in card["processes"]:
                out.setdefault(p["name"].split()[-1], {})[card["id"]] = p["memory"] // 2**20
        return out

    def cards_seen(self, visible: str | None = None, session_list: str = "") -> dict[str, int]:
        """``{device name: physical card}`` of a program started with
        ``CUDA_VISIBLE_DEVICES=visible`` (None: unset) whose session config has
        ``gpu_options.visible_device_list=session_list``."""
        env = self.env() if visible is None else self.env(CUDA_VISIBLE_DEVICES=visible)
        out = subprocess.run(
            [sys.executable, "-c", _CARDS_SEEN, session_list],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        if out.returncode:
            raise RuntimeError(out.stderr.strip().splitlines()[-1])
        return {n: int(card) for n, card in (ln.split() for ln in out.stdout.splitlines())}

    def cleanup(self) -> None:
        """Deletes the folder (it also goes when the process exits)."""
        self._folder.cleanup()


def traced_run(graph: Any, fetches: Any, inter: int, intra: int, repeats: int = 5):
    """Runs ``fetches`` in a new session of ``graph`` with its own pools of ``inter`` inter-op
    and ``intra`` intra-op threads: (fastest of ``repeats`` untraced runs in seconds, the
    ``RunMetadata`` of one FULL_TRACE run)."""
    import minitf as tf

    config = tf.ConfigProto(
        inter_op_parallelism_threads=inter,
        intra_op_parallelism_threads=intra,
        use_per_session_threads=True,
    )
    with tf.Session(graph=graph, config=config) as s:
        s.run(fetches)  # warm up (placement, first run)
        best = float("inf")
        for _ in range(repeats):
            start = time.perf_counter()
            s.run(fetches)
            best = min(best, time.perf_counter() - start)
        metadata = tf.RunMetadata()
        options = tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE)
        s.run(fetches, options=options, run_metadata=metadata)
    return best, metadata


def threads_used(metadata: Any, op_type: str = "MatMul") -> list[str]:
    """The names of the threads that ran ``op_type`` ops in a traced step."""
    return sorted(
        {
            ns.thread_name
            for ds in metadata.step_stats.dev_stats
            for ns in ds.node_stats
            if ns.op_type == op_type
        }
    )


# -- programs side by side (notebook 15, exercise 1) -------------------------------------------

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


def run_side_by_side(
    *programs: Mapping[str, str], cards: int = 2, timeout: float = 60.0
) -> list[str]:
    """Starts one small TF program per mapping, in turn, each while the earlier ones still run.

    A program builds a matmul (unpinned: ``/gpu:0`` if it sees a card), opens a session with
    ``config = tf.ConfigProto()`` and runs it once, which is when TF 1.x takes GPU memory; then
    it holds on until every program has started. A mapping's ``"config"`` key holds lines of
    Python that change ``config`` (``"config.gpu_options.allow_growth = True"``); every other
    key is an environment variable of that program (``CUDA_VISIBLE_DEVICES="1"``). The programs
    run in a :class:`ProgramLab` of ``cards`` emulated cards, deleted afterwards.

    Returns what each program said last: ``"running"``, or its error
    (``"ResourceExhaustedError: failed to allocate ..."``). Every program is stopped before this
    returns.
    """
    lab = ProgramLab("minitf-side-by-side-", cards=cards)
    deadline, said = time.monotonic() + timeout, []
    try:
        with lab.running() as procs:
            for i, settings in enumerate(programs):
                code = SIDE_BY_SIDE_PROGRAM.format(config=settings.get("config", ""))
                env = {k: str(v) for k, v in settings.items() if k != "config"}
                procs.append(lab.start(lab.write("program_%d.py" % (i + 1), code), **env))
                out = lab.read_until(procs[-1], timeout=max(deadline - time.monotonic(), 0.01))
                lines = [line for line in out.splitlines() if line.strip()]
                said.append(lines[-1] if lines else "exited with code %s" % procs[-1].returncode)
    finally:
        lab.cleanup()
    return said


# -- an in-process cluster for notebooks 07-09 -------------------------------------------------

_PORT_ATTEMPTS = 5  # clusters started on fresh ports when one picked was taken meanwhile


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

    configs = dict(configs or {})
    servers: dict[str, Any] = {}
    for attempt in range(_PORT_ATTEMPTS):
        spec = ClusterSpec({job: local_addresses(n) for job, n in jobs.items()})
        try:
            for job in spec.jobs:
                for i in spec.task_indices(job):
                    servers["%s/%d" % (job, i)] = Server(spec, job, i, config=configs.get(job))
            break
        except errors.UnknownError as e:
            # a port free when it was picked was taken before its server bound it (another
            # process on the machine): every server goes, and the cluster starts on new ports
            for server in servers.values():
                server.stop()
            servers.clear()
            if "Could not start gRPC server" not in str(e) or attempt == _PORT_ATTEMPTS - 1:
                raise
    try:
        yield servers
    finally:
        for server in servers.values():
            server.stop()
