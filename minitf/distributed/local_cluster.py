"""``LocalCluster({"ps": 2, "worker": 3})``: the tasks of a cluster as subprocess servers.

Book section: "Multiple Devices Across Multiple Servers" (a cluster of real processes on one
machine; minitf only: TF leaves starting its tasks to you).

How the tasks find each other: the parent picks a free port per task on 127.0.0.1
(:func:`free_port`: drawn at random and held by a socket that does not listen, so that no other
draw takes it), writes the whole cluster into every child's command line, and each child binds
its own entry (``python -m minitf.server --cluster <json> --job j --task i``) beside the held
socket.  Each child prints its bound address on one stdout line, which the parent waits for.
(A child that cannot bind all the same exits, and the cluster is started again on fresh
ports.)

No orphans: on Linux every child sets ``PR_SET_PDEATHSIG = SIGKILL`` for itself as it starts
(it dies with its parent; set in the child, not in a ``preexec_fn``, so spawning runs no Python
between fork and exec next to gRPC's threads), and a watchdog thread in the child exits when
its stdin (a pipe from the parent) closes; ``stop()`` / the context manager terminate and reap
every child.  Linux sends the death signal when the *thread* that started the child exits, so
every child is started by one daemon thread of this module (:class:`_Spawner`) that lives while
any cluster does: a cluster started from a short-lived thread outlives that thread, and its
children still die with the process.
"""

from __future__ import annotations

import ctypes
import json
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Mapping
from concurrent.futures import Future
from typing import Any, Literal

from minitf.distributed.cluster_spec import ClusterSpec

_PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """Asks Linux to SIGKILL this process when its parent dies (called by the child)."""
    if sys.platform != "linux":
        return
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except OSError:
        pass


class _Spawner:
    """The one thread that starts every LocalCluster child (their death signal is tied to it).

    It runs while at least one cluster holds it (:meth:`hold`/:meth:`release`) and ends with
    the last one, so no thread is left behind once every cluster has stopped.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._requests: deque[tuple[list[str], dict[str, Any], Future]] = deque()
        self._holders = 0
        self._thread: threading.Thread | None = None

    def hold(self) -> None:
        with self._cond:
            self._holders += 1
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="minitf-cluster-spawner", daemon=True
                )
                self._thread.start()

    def release(self) -> None:
        with self._cond:
            self._holders -= 1
            self._cond.notify_all()

    def popen(self, cmd: list[str], **kwargs: Any) -> subprocess.Popen:
        """``subprocess.Popen(cmd, **kwargs)`` run by the spawner thread (callers hold it)."""
        if threading.current_thread() is self._thread:
            return subprocess.Popen(cmd, **kwargs)
        done: Future = Future()
        with self._cond:
            self._requests.append((cmd, kwargs, done))
            self._cond.notify_all()
        return done.result(timeout=60)

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._requests and self._holders > 0:
                    self._cond.wait()
                if not self._requests:
                    self._thread = None  # the last cluster stopped: so does this thread
                    return
                cmd, kwargs, done = self._requests.popleft()
            try:
                done.set_result(subprocess.Popen(cmd, **kwargs))
            except BaseException as e:  # noqa: BLE001 - handed to the caller
                done.set_exception(e)


_spawner = _Spawner()


#: the lowest port :func:`free_port` draws from (below it: ports other services are known for)
LOWEST_PICKED_PORT = 10000
_DRAWS = 64  # ports tried at random before falling back to one the kernel picks


def ephemeral_ports() -> tuple[int, int]:
    """The range the kernel takes ports from for ``bind(port 0)`` and outgoing connections
    (Linux's ``net.ipv4.ip_local_port_range``; IANA's 49152-65535 where it cannot be read)."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low, high = (int(v) for v in f.read().split())
        return low, high
    except (OSError, ValueError):
        return 49152, 65535


#: ports handed out and still held (oldest first): the sockets that hold them
_held: OrderedDict[tuple[str, int], socket.socket] = OrderedDict()
_held_lock = threading.Lock()
HELD_PORTS = 64  # the oldest is let go when more are held
#: Linux lets a server bind a port beside a socket that holds it without listening (both with
#: SO_REUSEADDR); BSD's and Windows' rules differ, so elsewhere a port is let go at once
HOLDS_PORTS = sys.platform.startswith("linux")


def _hold(host: str, port: int) -> int:
    """Binds a TCP socket to ``host:port`` (0: a port the kernel picks) and keeps it, never
    listening, among the last :data:`HELD_PORTS` handed out; returns the port, or raises
    OSError when something else has it.

    The bind is made without ``SO_REUSEADDR``, so it fails while any other socket has the
    port, a socket held by another process's draw included; the option is set only after
    it, and then a server, which sets it too (gRPC does), binds and listens beside the held
    socket, in this process or in a child.  Only on Linux (:data:`HOLDS_PORTS`): elsewhere
    the socket is closed at once, and the port is free but not kept."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.bind((host, port))
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    except OSError:
        s.close()
        raise
    port = s.getsockname()[1]
    if not HOLDS_PORTS:
        s.close()
        return port
    with _held_lock:
        _held[(host, port)] = s
        while len(_held) > HELD_PORTS:
            _held.popitem(last=False)[1].close()
    return port


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port on ``host`` for a server to bind later, kept from every other draw meanwhile.

    Drawn at random below the kernel's ephemeral range: a port the kernel hands out for
    ``bind(0)`` may be handed out again, before the server binds it, to another process doing
    the same (a Jupyter kernel's five ports are picked that way) or to an outgoing connection;
    below the range only another draw like this one could take it, and the port stays bound
    (:func:`_hold`) so that none does, however long the server takes to start (a notebook may
    draw its cluster's ports cells before it starts the servers).  Where that range leaves no
    room below it, the kernel picks (``bind(0)``)."""
    low = ephemeral_ports()[0]
    if low - LOWEST_PICKED_PORT >= 1000:
        draw = random.SystemRandom()
        for _ in range(_DRAWS):
            try:
                return _hold(host, draw.randrange(LOWEST_PICKED_PORT, low))
            except OSError:  # held: draw again
                pass
    return _hold(host, 0)


class LocalCluster:
    """Starts one subprocess server per task; ``.cluster_spec``, ``.targets``,
    ``.target(job, task)``, ``.stop()``, ``.kill(job, task)``, ``.restart(job, task)``.
    ``config``: a ConfigProto whose ``inter_op_parallelism_threads`` and
    ``intra_op_parallelism_threads`` every task's server takes (as ``tf.train.Server(config=...)``):
    the sizes of its worker's inter-op and intra-op pools.
    ``job_env``: extra environment variables per job, e.g. ``{"ps": {"CUDA_VISIBLE_DEVICES": ""}}``
    to start the parameter servers without GPUs, as the book advises (with ``cpu_only=False``)."""

    def __init__(
        self,
        jobs: Mapping[str, int],
        host: str = "127.0.0.1",
        cpu_only: bool = True,
        env: Mapping[str, str] | None = None,
        start_timeout: float = 30.0,
        config: Any = None,
        job_env: Mapping[str, Mapping[str, str]] | None = None,
    ) -> None:
        self._jobs = dict(jobs)
        self._job_env = {job: dict(extra) for job, extra in (job_env or {}).items()}
        unknown = sorted(set(self._job_env) - set(self._jobs))
        if unknown:
            raise ValueError("job_env names jobs that are not in the cluster: %s" % unknown)
        # what a task's server takes of the ConfigProto (its worker's pool sizes)
        self._inter = int(getattr(config, "inter_op_parallelism_threads", 0) or 0)
        self._intra = int(getattr(config, "intra_op_parallelism_threads", 0) or 0)
        self._host = host
        self._cpu_only = cpu_only
        self._env = dict(os.environ if env is None else env)
        self._timeout = start_timeout
        self._procs: dict[tuple[str, int], subprocess.Popen] = {}
        self._holds_spawner = False
        for attempt in range(3):
            spec = {
                job: ["%s:%d" % (host, free_port(host)) for _ in range(n)]
                for job, n in self._jobs.items()
            }
            self._spec = spec
            try:
                for job, n in self._jobs.items():
                    for i in range(n):
                        self._procs[(job, i)] = self._spawn(job, i)
                for key in list(self._procs):
                    self._wait_ready(key)
                break
            except RuntimeError:
                self.stop()
                if attempt == 2:
                    raise
        self.cluster_spec = ClusterSpec(self._spec)

    def _spawn(self, job, task):
        cmd = [
            sys.executable,
            "-m",
            "minitf.server",
            "--cluster",
            json.dumps(self._spec),
            "--job",
            job,
            "--task",
            str(task),
            "--watch-stdin",
            "--parent-pid",
            str(os.getpid()),
        ]
        if self._cpu_only:
            cmd.append("--cpu-only")
        if self._inter:
            cmd += ["--inter-op-threads", str(self._inter)]
        if self._intra:
            cmd += ["--intra-op-threads", str(self._intra)]
        env = dict(self._env)
        env.update(self._job_env.get(job, {}))
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
        if not self._holds_spawner:
            _spawner.hold()
            self._holds_spawner = True
        return _spawner.popen(
            cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env
        )

    def _wait_ready(self, key):
        proc = self._procs[key]
        import select

        deadline = time.monotonic() + self._timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise RuntimeError("task %s/%d did not start in time" % key)
            r, _, _ = select.select([proc.stdout], [], [], remaining)
            if r:
                line = proc.stdout.readline().decode("utf-8", "replace")
                if not line:
                    raise RuntimeError(
                        "task %s/%d exited while starting (rc %s)" % (key[0], key[1], proc.poll())
                    )
                if line.startswith("minitf-server "):
                    return line.rsplit(" ", 1)[1].strip()

    @property
    def targets(self) -> dict[str, str]:
        return {
            "%s/%d" % (job, i): "grpc://" + addr
            for job, addrs in self._spec.items()
            for i, addr in enumerate(addrs)
        }

    def target(self, job: str, task: int = 0) -> str:
        return "grpc://" + self._spec[job][task]

    def pid(self, job: str, task: int = 0) -> int:
        return self._procs[(job, task)].pid

    def kill(self, job: str, task: int = 0) -> None:
        """SIGKILLs one task (fault tests)."""
        p = self._procs[(job, task)]
        p.kill()
        p.wait(10)

    def restart(self, job: str, task: int = 0) -> None:
        """Starts a killed task again on the same port."""
        self.kill(job, task) if self._procs[(job, task)].poll() is None else None
        self._close_pipes(self._procs[(job, task)])
        self._procs[(job, task)] = self._spawn(job, task)
        self._wait_ready((job, task))

    @staticmethod
    def _close_pipes(p):
        for f in (p.stdin, p.stdout):
            try:
                if f is not None:
                    f.close()
            except OSError:
                pass

    def stop(self) -> None:
        procs, self._procs = list(self._procs.values()), {}
        for p in procs:
            if p.poll() is None:
                p.terminate()
        deadline = time.monotonic() + 5
        for p in procs:
            try:
                p.wait(max(deadline - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(5)
            self._close_pipes(p)
        if getattr(self, "_holds_spawner", False):
            self._holds_spawner = False
            _spawner.release()

    def __enter__(self) -> LocalCluster:
        return self

    def __exit__(self, *exc: Any) -> Literal[False]:
        self.stop()
        return False

    def __del__(self):
        try:
            self.stop()
        except Exception:  # noqa: BLE001
            pass
