"""What TF calls distributed_runtime: cluster specs, servers, the master and worker services,
and the ``GRPC_SESSION`` behind ``tf.Session("grpc://host:port")``.

Book sections: "Multiple Devices Across Multiple Servers" to "Sharing State Across Sessions
Using Resource Containers".  Importing this package registers that session factory with the
runtime (as TF's gRPC session library does when it loads); grpcio itself is imported on first
use only.
"""

import os

from minitf.runtime.session import SessionFactory, register_session_factory

# gRPC reads this when it loads (every module of this package imports it after this line): no
# INFO lines (GOAWAY ...) in notebooks.
os.environ.setdefault("GRPC_VERBOSITY", "ERROR")


def is_grpc_target(target):
    """Whether a session target names a master over gRPC (``grpc://host:port``)."""
    if isinstance(target, bytes):
        return target.startswith(b"grpc://")
    return isinstance(target, str) and target.startswith("grpc://")


def _new_grpc_session(target, graph, config):
    from minitf.distributed.grpc_session import GrpcSession

    return GrpcSession(target, graph, config)


def _reset_grpc(target, containers=None, config=None):
    from minitf.distributed.grpc_session import reset

    return reset(target, containers, config)


register_session_factory(
    SessionFactory("GRPC_SESSION", is_grpc_target, _new_grpc_session, _reset_grpc)
)


def __getattr__(name):  # grpcio is imported on first use only
    if name == "LocalCluster":
        from minitf.distributed.local_cluster import LocalCluster

        return LocalCluster
    if name == "Server":
        from minitf.distributed.server import Server

        return Server
    raise AttributeError("module 'minitf.distributed' has no attribute %r" % name)
