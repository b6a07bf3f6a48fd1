"""What TF calls distributed_runtime: cluster specs (servers come with the cluster issue)."""


def __getattr__(name):  # grpcio is imported on first use only
    if name == "LocalCluster":
        from minitf.distributed.local_cluster import LocalCluster
        return LocalCluster
    if name == "Server":
        from minitf.distributed.server import Server
        return Server
    raise AttributeError("module 'minitf.distributed' has no attribute %r" % name)
