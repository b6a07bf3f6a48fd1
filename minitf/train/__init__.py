"""``tf.train``: cluster description and device placement helpers of the chapter.

Book sections: "Multiple Devices Across Multiple Servers" (``ClusterSpec``) and "Sharding
Variables Across Multiple Parameter Servers" (``replica_device_setter``); "Saving and
restoring" (``Saver``, ``latest_checkpoint`` ...).
"""

from minitf.distributed.cluster_spec import ClusterSpec  # noqa: F401

# -- checkpoints (tf.train.Saver and friends) --------------------------------------------------
from minitf.train.checkpoint_management import (  # noqa: F401
    CheckpointState,
    checkpoint_exists,
    generate_checkpoint_state_proto,
    get_checkpoint_mtimes,
    get_checkpoint_state,
    latest_checkpoint,
    remove_checkpoint,
    update_checkpoint_state,
)
from minitf.train.checkpoint_utils import (  # noqa: F401
    NewCheckpointReader,
    list_variables,
    load_checkpoint,
    load_variable,
)
from minitf.train.device_setter import replica_device_setter  # noqa: F401
from minitf.train.saver import Saver, SaverDef  # noqa: F401


def __getattr__(name):  # Server pulls in grpcio: imported on first use only
    if name == "Server":
        from minitf.distributed.server import Server

        return Server
    raise AttributeError("module 'minitf.train' has no attribute %r" % name)
