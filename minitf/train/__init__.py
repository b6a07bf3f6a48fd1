"""``tf.train``: cluster description and device placement helpers of the chapter.

Book sections: "Multiple Devices Across Multiple Servers" (``ClusterSpec``) and "Sharding
Variables Across Multiple Parameter Servers" (``replica_device_setter``).  ``summary_iterator``
reads event files back; ``SummaryWriter`` is the pre-1.0 name of ``tf.summary.FileWriter``, gone
from TF 1.15 and kept here for the blog posts that use it.
"""

from minitf.distributed.cluster_spec import ClusterSpec  # noqa: F401
from minitf.summary.writer import FileWriter as SummaryWriter  # noqa: F401  (pre-1.0 name)
from minitf.summary.writer import summary_iterator  # noqa: F401
from minitf.train.device_setter import replica_device_setter  # noqa: F401


def __getattr__(name):  # Server pulls in grpcio: imported on first use only
    if name == "Server":
        from minitf.distributed.server import Server

        return Server
    raise AttributeError("module 'minitf.train' has no attribute %r" % name)
