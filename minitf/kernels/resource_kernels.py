"""The kernel of an op that makes a resource of its device: a queue, a reader, a conditional
accumulator, a dataset iterator (TF's ``ResourceOpKernel``).

Book section: "Sharing State Across Sessions Using Resource Containers".  The op finds or makes
its resource at its first run and hands out the same one at every later run.  Without a
``shared_name`` the resource is private: named ``_<n>_<op name>`` and held by the kernel alone,
so each session (which makes its own kernels) has its own.  With one, it lives in its device's
resource manager under the op's ``container`` (checked as TF checks it) and every op of the
process that names it there gets the same resource, across sessions, until the container is
reset.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from typing import Any

from minitf.framework.resource_mgr import check_container_name
from minitf.kernels.tensor_ops import invalid_argument

_private_ids = itertools.count()  # the process-wide counter of private resource names


def find_or_make(
    op,
    device,
    make: Callable[[str], Any],
    shared_names_public: bool = False,
    check_found: Callable[[Any, str], None] | None = None,
) -> Any:
    """The resource of ``op``: private, or found or made by ``shared_name``.
    ``shared_names_public``: a shared name may not start with ``_`` (the private names' mark;
    queues and accumulators check it); ``check_found(resource, name)`` checks a shared resource
    found against what the op asks for."""
    container = op.get_attr("container")
    shared = op.get_attr("shared_name")
    check_container_name(container)
    if not shared:
        return make("_%d_%s" % (next(_private_ids), op.name))
    if shared_names_public and shared.startswith("_"):
        raise invalid_argument("shared_name cannot start with '_':%s" % shared)
    resource = device.resource_manager.lookup_or_create(container, shared, lambda: make(shared))
    if check_found is not None:
        check_found(resource, shared)
    return resource


def resource_op(find: Callable[[], Any]) -> Callable:
    """The compute function of a resource op: ``find()`` at the first run (under a lock, so two
    steps cannot make two), its resource out at every run."""
    held = []
    lock = threading.Lock()

    def compute(ctx, ins):
        with lock:
            if not held:
                held.append(find())
        return (held[0],)

    return compute
