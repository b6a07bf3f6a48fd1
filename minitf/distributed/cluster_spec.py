"""``tf.train.ClusterSpec``: the jobs and tasks of a cluster and their network addresses.

Book section: "Multiple Devices Across Multiple Servers".  A cluster is a set of tasks grouped
in named jobs (by convention ``"ps"`` for parameter servers and ``"worker"`` for compute); each
task is a server at a ``host:port`` address.  reference/tf1_semantics.md §6.1 is the spec.
"""

from __future__ import annotations

from typing import Any


def _check_port(job: str, index: int, addr: str) -> None:
    """Rejects a numeric port past 65535 (TF takes it modulo 65536 without a word)."""
    port = addr.rpartition(":")[2]
    if port.isdigit() and int(port) > 65535:
        raise ValueError(
            'Task %d of job %r has address "%s", whose port %s is out of range: a port is a '
            "number from 0 to 65535" % (index, job, addr[:200], port[:20])
        )


class ClusterSpec:
    """``ClusterSpec({"ps": ["host:2221"], "worker": ["host:2222", "host:2223"]})``.

    Accepts a dict of job name to a list/tuple of addresses (task i = index i) or to a dict
    ``{task index: address}`` (sparse jobs), or another ClusterSpec.
    """

    _cluster: dict[str, dict[int, str]]  # job -> {task index: "host:port"}

    def __init__(self, cluster: ClusterSpec | dict[str, Any]) -> None:
        if isinstance(cluster, ClusterSpec):
            self._cluster = {job: dict(tasks) for job, tasks in cluster._cluster.items()}
            return
        if not isinstance(cluster, dict):
            raise TypeError(
                "`cluster` must be a dictionary mapping one or more job names to "
                "lists of network addresses, or a `ClusterDef` protocol buffer"
            )
        self._cluster = {}
        for job, tasks in cluster.items():
            if not isinstance(job, str):
                raise TypeError("Job names must be strings, got %r" % (job,))
            if isinstance(tasks, (list, tuple)):
                table = {i: addr for i, addr in enumerate(tasks)}
            elif isinstance(tasks, dict):
                table = {}
                for index, addr in tasks.items():
                    if not isinstance(index, int) or isinstance(index, bool) or index < 0:
                        raise TypeError(
                            "Task indices must be integers >= 0, got %r in job %r" % (index, job)
                        )
                    table[index] = addr
            else:
                raise TypeError(
                    "The tasks for job %r must be a list or a dictionary from "
                    "integers to strings." % job
                )
            for index, addr in table.items():
                if not isinstance(addr, str):
                    raise TypeError(
                        "Task %d of job %r has address %r; addresses are "
                        '"host:port" strings' % (index, job, addr)
                    )
                _check_port(job, index, addr)
            self._cluster[job] = table

    def __bool__(self) -> bool:
        return bool(self._cluster)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, ClusterSpec):
            other = other.as_dict()
        return self.as_dict() == other

    def __ne__(self, other: object) -> bool:
        return not self == other

    __hash__ = None  # type: ignore[assignment]  # unhashable, as in TF

    def __str__(self) -> str:
        return "ClusterSpec(%r)" % {job: self.as_dict()[job] for job in sorted(self._cluster)}

    __repr__ = __str__

    @property
    def jobs(self) -> list[str]:
        """Job names in the order given."""
        return list(self._cluster)

    def _job(self, job_name):
        try:
            return self._cluster[job_name]
        except KeyError:
            raise ValueError("No such job in cluster: %r" % job_name) from None

    def num_tasks(self, job_name: str) -> int:
        return len(self._job(job_name))

    def task_indices(self, job_name: str) -> list[int]:
        return sorted(self._job(job_name))

    def task_address(self, job_name: str, task_index: int) -> str:
        job = self._job(job_name)
        try:
            return job[task_index]
        except KeyError:
            raise ValueError("No task with index %r in job %r" % (task_index, job_name)) from None

    def job_tasks(self, job_name: str) -> list[str | None]:
        """Addresses by task index, ``None`` for the holes of a sparse job."""
        job = self._job(job_name)
        if not job:
            return []
        return [job.get(i) for i in range(max(job) + 1)]

    def as_dict(self) -> dict[str, list[str] | dict[int, str]]:
        """job -> list of addresses when indices are 0..n-1, else job -> {index: address}."""
        out: dict[str, list[str] | dict[int, str]] = {}
        for job, tasks in self._cluster.items():
            if sorted(tasks) == list(range(len(tasks))):
                out[job] = [tasks[i] for i in range(len(tasks))] if tasks else {}
            else:
                out[job] = dict(tasks)
        return out

    def as_cluster_def(self) -> dict[str, list[dict[str, Any]]]:
        """A plain ``{"job": [{"name": job, "tasks": {index: address}}]}`` record, jobs sorted
        by name (the shape of TF's ClusterDef proto)."""
        return {
            "job": [
                {"name": job, "tasks": dict(sorted(self._cluster[job].items()))}
                for job in sorted(self._cluster)
            ]
        }
