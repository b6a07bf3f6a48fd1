"""``tf.train``: cluster description and device placement helpers of the chapter.

Book sections: "Multiple Devices Across Multiple Servers" (``ClusterSpec``) and "Sharding
Variables Across Multiple Parameter Servers" (``replica_device_setter``).
"""

from minitf.distributed.cluster_spec import ClusterSpec  # noqa: F401
from minitf.train.coordinator import Coordinator, LooperThread  # noqa: F401
from minitf.train.device_setter import replica_device_setter  # noqa: F401
from minitf.train.queue_runner import (  # noqa: F401
    QueueRunner,
    add_queue_runner,
    start_queue_runners,
)
from minitf.train.session_run_hook import (  # noqa: F401
    SessionRunArgs,
    SessionRunContext,
    SessionRunHook,
    SessionRunValues,
)


def __getattr__(name):  # Server pulls in grpcio: imported on first use only
    if name == "Server":
        from minitf.distributed.server import Server

        return Server
    raise AttributeError("module 'minitf.train' has no attribute %r" % name)
