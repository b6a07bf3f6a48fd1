"""The ops the runtime adds to a step's graph: ``_Arg`` (a fed value), ``_Send`` and ``_Recv``.

Book sections: "Placing Operations on Devices" and "The Master and Worker Services".  No user
builds these: ``runtime/subgraph.py`` turns each fed tensor into an ``_Arg`` node and
``runtime/graph_partition.py`` puts a ``_Send``/``_Recv`` pair on every edge that crosses from one
device (or task) to another.  They show up in step stats and timelines, as in TF.
"""

from minitf.ops.op_def import register_op

SEND_OP = "_Send"
RECV_OP = "_Recv"
ARG_OP = "_Arg"

register_op(SEND_OP, is_stateful=True)
register_op(RECV_OP, is_stateful=True, type_attr="tensor_type")
register_op(ARG_OP, is_stateful=True)
