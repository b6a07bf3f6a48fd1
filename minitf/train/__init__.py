"""``tf.train``: cluster description, device placement and input pipeline helpers of the chapter.

Book sections: "Multiple Devices Across Multiple Servers" (``ClusterSpec``) and "Sharding
Variables Across Multiple Parameter Servers" (``replica_device_setter``).
"""

from minitf.distributed.cluster_spec import ClusterSpec  # noqa: F401
from minitf.train.coordinator import Coordinator, LooperThread  # noqa: F401
from minitf.train.device_setter import replica_device_setter  # noqa: F401
from minitf.train.input import (  # noqa: F401  (TF's python/training/input.py)
    batch,
    batch_join,
    input_producer,
    limit_epochs,
    range_input_producer,
    shuffle_batch,
    shuffle_batch_join,
    slice_input_producer,
    string_input_producer,
)
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
