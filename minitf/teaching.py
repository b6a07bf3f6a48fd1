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
