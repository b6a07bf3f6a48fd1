"""``tf.train.import_meta_graph`` and ``tf.train.export_meta_graph``: a model rebuilt from the
``.meta`` file a Saver writes beside each checkpoint, without the code that built it.

Book section: "Saving and restoring models" (chapter 9; chapter 12's Supervisor and
MonitoredTrainingSession write the same files).  A ``.meta`` file is TF's ``MetaGraphDef``:
the GraphDef, the collections (a ``node_list`` of op or tensor names, or for the variable
collections a ``bytes_list`` of ``VariableDef`` protos) and the ``SaverDef`` naming the Saver's
filename tensor, save tensor and restore op.  Importing rebuilds each node as an Operation of
the default graph (``distributed/wire/graphs.import_graph_def``, the import a worker does), puts
the collections back (one ``Variable`` object per variable, in every collection it was in) and
returns a Saver that uses the imported save and restore ops, as TF's ``python/training/
saver.py`` and ``python/framework/meta_graph.py`` do.

minitf's ``.meta`` files are TF's format: TensorFlow 1.15 imports them, restores their
checkpoints and runs their train ops.  The other way round needs each node's output types,
which TF infers from its op registry and minitf cannot: minitf writes them as an
``_output_types`` attr (TF ignores attrs that start with ``_``) and imports only files that
have it.  Attrs without an AttrValue form (a dataset's functions) are not written, so a graph
with a ``tf.data`` pipeline cannot be imported.
"""

from __future__ import annotations

import logging
import os
from typing import Any

from google.protobuf import text_format
from google.protobuf.message import DecodeError

from minitf.distributed import protocol_pb2 as wire_pb
from minitf.distributed.wire.graphs import attr_to_proto as wire_attr
from minitf.distributed.wire.graphs import import_graph_def, topological
from minitf.framework import errors, graph_io
from minitf.framework.graph import GraphKeys, get_default_graph
from minitf.lib import file_io
from minitf.lib.protobuf.tf_protos_pb2 import GraphDef, MetaGraphDef, SaverDef, VariableDef
from minitf.ops.variables import Variable, prepend_scope
from minitf.train.saver import Saver

#: the collections TF writes as VariableDef protos (``ops.register_proto_function``'s keys)
VARIABLE_COLLECTIONS = frozenset(
    {
        GraphKeys.GLOBAL_VARIABLES,
        GraphKeys.TRAINABLE_VARIABLES,
        GraphKeys.LOCAL_VARIABLES,
        GraphKeys.MODEL_VARIABLES,
        "moving_average_variables",
    }
)


def read_meta_graph_file(filename: str) -> MetaGraphDef:
    """The MetaGraphDef in ``filename``, binary as a Saver writes it or in text format."""
    if not os.path.exists(filename):
        raise OSError("File %s does not exist." % filename)
    with open(filename, "rb") as f:
        content = f.read()
    meta = MetaGraphDef()
    try:
        meta.ParseFromString(content)
        return meta
    except DecodeError:
        pass
    try:
        text_format.Merge(content.decode("utf-8"), meta)
    except (UnicodeDecodeError, text_format.ParseError) as e:
        raise OSError("Cannot parse file %s: %s." % (filename, e)) from None
    return meta


def _scoped_input(name: str, scope: str | None) -> str:
    if name.startswith("^"):
        return "^" + prepend_scope(name[1:], scope)
    return prepend_scope(name, scope)


def _node_attrs(node: Any, scope: str | None) -> dict:
    """The minitf values of ``node``'s attrs (``_class`` groups put under ``scope``)."""
    attrs = {}
    for key, value in node.attr.items():
        try:
            attrs[key] = graph_io.attr_from_proto(value, key)
        except ValueError as e:
            raise errors.InvalidArgumentError(None, None, "Node %s: %s." % (node.name, e)) from None
    if scope and "_class" in attrs:
        attrs["_class"] = [
            b"loc:@" + prepend_scope(g[len(b"loc:@") :].decode(), scope).encode()
            for g in attrs["_class"]
        ]
    return attrs


def _wire_graph_def(graph_def: GraphDef, clear_devices: bool, scope: str | None):
    """``graph_def`` (TF's format, as a ``.meta`` holds it) as the GraphDef a worker imports,
    in topological order: each name, input and colocation group under ``scope``, and no
    devices with ``clear_devices``."""
    nodes = []
    for node in graph_def.node:
        if "_output_types" not in node.attr:
            raise errors.InvalidArgumentError(
                None,
                None,
                "Node %s has no _output_types attr: minitf imports the .meta files it writes "
                "(it cannot infer the output types of a graph written by TensorFlow)" % node.name,
            )
        msg = wire_pb.NodeDef(
            name=prepend_scope(node.name, scope),
            op=node.op,
            input=[_scoped_input(i, scope) for i in node.input],
            device="" if clear_devices else node.device,
        )
        for key, value in _node_attrs(node, scope).items():
            msg.attr[key].CopyFrom(wire_attr(value, "attr %s of node %s" % (key, node.name)))
        nodes.append(msg)
    return wire_pb.GraphDef(node=topological(nodes))


def _restore_collections(meta: MetaGraphDef, graph: Any, scope: str | None) -> None:
    """Adds the collections of ``meta`` to ``graph``: one Variable per ``VariableDef`` (the
    same object in every variable collection that holds it), graph elements by name, and the
    values of other lists as they are."""
    variables: dict[bytes, Variable] = {}  # by the VariableDef's bytes
    for key in sorted(meta.collection_def):
        coll = meta.collection_def[key]
        kind = coll.WhichOneof("kind")
        if kind == "node_list":
            for name in coll.node_list.value:
                graph.add_to_collection(key, graph.as_graph_element(prepend_scope(name, scope)))
        elif kind == "bytes_list" and key in VARIABLE_COLLECTIONS:
            for raw in coll.bytes_list.value:
                if raw not in variables:
                    variables[raw] = Variable.from_proto(VariableDef.FromString(raw), scope)
                graph.add_to_collection(key, variables[raw])
        elif kind is not None:  # int64, float and other bytes lists: the values as they are
            for value in getattr(coll, kind).value:
                graph.add_to_collection(key, value)


def _imported_saver(meta: MetaGraphDef, scope: str | None) -> Saver | None:
    """TF's ``_create_saver_from_imported_meta_graph``: a Saver on the imported save and
    restore ops, else a new one when there are variables, else None."""
    if meta.HasField("saver_def"):
        saver_def = SaverDef()
        saver_def.CopyFrom(meta.saver_def)
        for field in ("filename_tensor_name", "save_tensor_name", "restore_op_name"):
            setattr(saver_def, field, prepend_scope(getattr(saver_def, field), scope))
        return Saver(saver_def=saver_def)
    if get_default_graph().get_collection(GraphKeys.GLOBAL_VARIABLES, scope):
        return Saver()
    logging.getLogger("minitf").info(
        "Saver not created because there are no variables in the graph to restore"
    )
    return None


def import_meta_graph(
    meta_graph_or_file: MetaGraphDef | str,
    clear_devices: bool = False,
    import_scope: str | None = None,
    **unused: Any,
) -> Saver | None:
    """``tf.train.import_meta_graph``: the graph, collections and Saver of a ``.meta`` file (or
    a MetaGraphDef) added to the default graph; returns the Saver to restore a checkpoint
    with (None when the graph has no variables and no SaverDef).  ``clear_devices`` drops
    every device the file names; ``import_scope`` puts every name under that scope."""
    if isinstance(meta_graph_or_file, MetaGraphDef):
        meta = meta_graph_or_file
    else:
        meta = read_meta_graph_file(os.fspath(meta_graph_or_file))
    graph = get_default_graph()
    import_graph_def(_wire_graph_def(meta.graph_def, clear_devices, import_scope), graph)
    _restore_collections(meta, graph, import_scope)
    return _imported_saver(meta, import_scope)


def export_meta_graph(
    filename: str | None = None,
    graph: Any = None,
    saver_def: SaverDef | None = None,
    **unused: Any,
) -> MetaGraphDef:
    """``tf.train.export_meta_graph``: the MetaGraphDef of ``graph`` (the default graph), with
    its collections and ``saver_def``; written to ``filename`` when one is given."""
    graph = get_default_graph() if graph is None else graph
    meta = graph_io.meta_graph_def_proto(graph, saver_def)
    if filename:
        file_io.atomic_write_string_to_file(filename, meta.SerializeToString())
    return meta
