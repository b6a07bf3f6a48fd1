"""Helpers the notebooks use so their cells show the chapter, not plumbing.

Nothing here is TensorFlow API: these are minitf-only conveniences for the course (the book's
readers would write them by hand, or use a shell). Each helper is small and documented so a
learner who wants to see the plumbing can read it in one sitting.
"""

from __future__ import annotations

from minitf.distributed.local_cluster import free_port

__all__ = ["free_port", "local_addresses"]


def local_addresses(count: int) -> list[str]:
    """``count`` "127.0.0.1:PORT" addresses on ports free right now (for a ClusterSpec)."""
    if count < 0:
        raise ValueError("count must be >= 0, got %r" % (count,))
    return ["127.0.0.1:%d" % free_port() for _ in range(count)]


# -- an in-process cluster for notebooks 07-09 (appended by the 06-09 fidelity work) -----------
import contextlib  # noqa: E402
from collections.abc import Iterator, Mapping  # noqa: E402
from typing import Any  # noqa: E402


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


__all__ += ["in_process_cluster"]
