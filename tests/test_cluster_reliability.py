"""Waits and exits of the cluster runtime (issue 24, items 1, 2, 3, 9, 10, 11): a script with
in-process servers exits at once, blocked RecvTensor calls leave the server's other RPCs
alone, many client threads on one session all finish, a killed worker is reported within 2 s,
TF's "no timeout" values, ports out of range.  The heavy versions (1,000 threads or calls) are
in tests/stress/test_cluster_load.py."""


import pytest

import minitf as tf

pytestmark = pytest.mark.cluster


def _rpc(**kw):
    config = tf.ConfigProto(**kw)
    config.rpc_options.use_rpc_for_inprocess_master = True
    return config


# -- item 11: ports past 65535 -------------------------------------------------------------------


@pytest.mark.parametrize("port", [65536, 70000, 2**32 + 2222])
def test_port_out_of_range_is_rejected_naming_the_address(port):
    addr = "localhost:%d" % port
    with pytest.raises(ValueError, match='"%s".*0 to 65535' % addr):
        tf.train.ClusterSpec({"worker": [addr]})
    with pytest.raises(ValueError, match='"%s"' % addr):
        tf.train.ClusterSpec({"worker": {3: addr}})
    with pytest.raises(ValueError, match='"%s"' % addr):
        tf.train.Server({"worker": [addr]}, job_name="worker", task_index=0)
    assert tf.train.ClusterSpec({"worker": ["localhost:65535"]}).num_tasks("worker") == 1
