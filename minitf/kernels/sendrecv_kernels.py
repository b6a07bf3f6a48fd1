"""Kernels of ``_Arg``, ``_Send`` and ``_Recv``: values entering a step and crossing devices.

Book sections: "Placing Operations on Devices" and "The Master and Worker Services".  A
``_Send`` leaves its input in the step's rendezvous (``ctx.rendezvous``, see
``framework/rendezvous.py``) under the key of its edge, as a host value; the ``_Recv`` of the
same key is an asynchronous kernel: it asks the rendezvous and completes when the tensor is
there, holding no thread meanwhile, then puts it on its own device (``backend.from_host``).  A
control edge that crosses devices sends an empty float, and a dead tensor (``DEAD``, the
untaken side of a ``tf.cond``) crosses as it is.  ``_Arg`` hands over the value fed for
its index (``ctx.args``).
"""

import time

import numpy as np

from minitf.framework.dead_tensor import DEAD
from minitf.framework.rendezvous import create_key
from minitf.kernels.registry import register


def edge_key(op):
    """The rendezvous key of a ``_Send`` or ``_Recv`` node (from its TF attributes)."""
    return create_key(
        op.get_attr("send_device"),
        op.get_attr("send_device_incarnation"),
        op.get_attr("recv_device"),
        op.get_attr("tensor_name"),
    )


def _send(op, device):
    key = edge_key(op)
    to_host = device.backend.to_host

    def compute(ctx, ins):
        if not ins:
            value = np.float32(0)
        else:
            value = ins[0] if ins[0] is DEAD else to_host(ins[0])
        ctx.rendezvous.send(key, value)
        return ()

    return compute


def producer_of(tensor_name):
    """The op that made a tensor: ``"a"`` for ``"a:0"`` (and for a control edge's ``"^a"``)."""
    return tensor_name.lstrip("^").rsplit(":", 1)[0]


def _recv(op, device):
    key = edge_key(op)
    from_host = device.backend.from_host
    tensor_name = op.get_attr("tensor_name")
    src_node, src_device = producer_of(tensor_name), op.get_attr("send_device")
    name = op.name

    def compute(ctx, ins, done):
        start = time.time_ns() // 1000

        def arrived(value, error):
            if error is not None:
                done(None, error)
                return
            try:
                out = value if value is DEAD else from_host(value)
            except Exception as e:  # noqa: BLE001 - the step reports it as this node's failure
                done(None, e)
                return
            if ctx.tracing:
                ctx.record_transfer(
                    tensor_name,
                    src_node,
                    name,
                    src_device,
                    device.name,
                    int(getattr(value, "nbytes", 0) or 0),
                    start,
                )
            done((out,))

        ctx.rendezvous.recv_async(key, arrived)

    return compute


def _arg(op, device):
    index = op.get_attr("index")
    from_host = device.backend.from_host
    return lambda ctx, ins: (from_host(ctx.args[index]),)


register("_Send", _send, cpu="any", gpu="any", cost="inline")
register("_Recv", _recv, cpu="any", gpu="any", cost="inline", is_async=True)
register("_Arg", _arg, cpu="any", gpu="any", cost="inline")
