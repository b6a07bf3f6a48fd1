"""``tf.train.Saver``: saving variables to V2 checkpoints and restoring them (TF 1.15's
``python/training/saver.py``, its ``BaseSaverBuilder``/``BulkSaverBuilder`` and
``saveable_object_util``).

Book section: "Saving and restoring" (the training chapters' ``saver.save(sess, path)``), and in
the distributed chapter the chief saving a model whose variables live on parameter servers:
with ``sharded=True`` each device's variables get their own ``SaveV2`` on that device's task
CPU, so every ps task writes its own shard, and ``MergeV2Checkpoints`` joins them.  A
partitioned variable (sharded over ps tasks by a partitioner) is saved as slices of one tensor
under its full name, as TF saves it: the checkpoint restores into any partitioning.

The graph a Saver adds (name scope ``save``; ``save_1`` ... for further savers)::

    save/filename/input   Const "model"
    save/filename         PlaceholderWithDefault
    save/Const            PlaceholderWithDefault   <- the checkpoint prefix is fed here
    save/SaveV2           (+ /tensor_names, /shape_and_slices), one input per variable
    save/control_dependency   Identity of save/Const after SaveV2: the save tensor
    save/RestoreV2        on CPU:0, every variable's tensor in one op
    save/Assign, save/Assign_1 ...   colocated with their variables
    save/restore_all      NoOp grouping the assignments
"""

from __future__ import annotations

import logging
import numbers
import os
import time
import uuid
from collections.abc import Iterable

import numpy as np

from minitf.framework import device_spec as pydev
from minitf.framework import errors, graph_io
from minitf.framework.graph import GraphKeys, Tensor, get_default_graph, name_scope
from minitf.lib import file_io
from minitf.lib.protobuf.tf_protos_pb2 import MetaGraphDef, SaverDef
from minitf.ops import array_ops, control_flow_ops, io_ops, state_ops
from minitf.ops.partitioned_variables import PartitionedVariable
from minitf.ops.variables import Variable
from minitf.runtime.session import BaseSession
from minitf.train import checkpoint_management

# TF's GraphKeys.SAVEABLE_OBJECTS: saved with the global variables when var_list is None
SAVEABLE_OBJECTS = "saveable_objects"
_SHARDED_SUFFIX = "_temp_%s/part"


class _Saveable:
    """One variable to save under one key (TF's ``ReferenceVariableSaveable``); a partitioned
    variable's shard is saved as its slice (``slice_spec``) of the full tensor ``name``."""

    def __init__(self, name: str, variable: Variable, slice_spec: str = "") -> None:
        self.name = name
        self.variable = variable
        self.slice_spec = slice_spec
        self.tensor = variable._ref()  # SaveV2 reads the VariableV2 output itself, as in TF
        self.dtype = variable.dtype.base_dtype
        self.device = variable.device

    def restore(self, restored: Tensor) -> Tensor:
        validate = self.variable.shape.is_fully_defined()
        return state_ops.assign(self.tensor, restored, validate_shape=validate)


def _op_list_to_dict(var_list):
    """``{key: variable or [shards]}`` for a list of variables (each under its op name; the
    shards of a partitioned variable under the full variable's name) or a dict of them (TF's
    ``saveable_object_util.op_list_to_dict``)."""
    if isinstance(var_list, dict):
        return {name: _as_saved(v) for name, v in var_list.items()}
    if not isinstance(var_list, (list, tuple, set, frozenset)):
        raise TypeError("Variables to save should be passed in a dict or a list: %s" % var_list)
    out: dict = {}
    for v in var_list:
        if isinstance(v, PartitionedVariable):
            parts = list(v)
        else:
            parts = [_as_variable(v)]
        for part in parts:
            info = part._save_slice_info
            if info is None:
                if part.op.name in out:
                    raise ValueError("At least two variables have the same name: %s" % part.op.name)
                out[part.op.name] = part
                continue
            shards = out.setdefault(info.full_name, [])
            if not isinstance(shards, list):
                raise ValueError("At least two variables have the same name: %s" % info.full_name)
            shards.append(part)
    return out


def _as_saved(v):
    """A dict value: a variable, or a partitioned variable's shards (or the shards listed)."""
    if isinstance(v, (PartitionedVariable, list, tuple)):
        parts = [_as_variable(p) for p in v]
        missing = [p.op.name for p in parts if p._save_slice_info is None]
        if missing:
            raise ValueError("Partitioned variable shards need a SaveSliceInfo: %s" % missing)
        return parts
    return _as_variable(v)


def _as_variable(v):
    if isinstance(v, Variable):
        return v
    raise TypeError("Variable to save is not a Variable: %s" % (v,))


def _saveables(var_list):
    """The saveables in key order (TF's ``validate_and_slice_inputs``): a partitioned
    variable's shards one after another under its name, each with its slice."""
    by_name = _op_list_to_dict(var_list)
    seen = set()
    out = []
    for name in sorted(by_name):
        value = by_name[name]
        for v in value if isinstance(value, list) else [value]:
            if id(v) in seen:
                raise ValueError("The same saveable will be restored with two names: %s" % name)
            seen.add(id(v))
            info = v._save_slice_info if isinstance(value, list) else None
            out.append(_Saveable(name, v, info.spec if info is not None else ""))
    return out


def _set_cpu0(device: str) -> str:
    """TF's ``saveable_object_util.set_cpu0``: the CPU:0 of a device's task."""
    spec = pydev.DeviceSpec.from_string(device).replace(device_type="CPU", device_index=0)
    return spec.to_string()


def _group_by_device(saveables):
    """``[(canonical device, saveables)]`` sorted by device (TF's ``_GroupByDevices``)."""
    per_device: dict[str, list[_Saveable]] = {}
    for s in saveables:
        per_device.setdefault(pydev.canonical_name(s.device), []).append(s)
    return sorted(per_device.items(), key=lambda t: t[0])


def _add_save_ops(filename_tensor, saveables):
    """``SaveV2`` of ``saveables``, and the save tensor: ``filename_tensor`` after it."""
    names = [s.name for s in saveables]
    slices = [s.slice_spec for s in saveables]
    save = io_ops.save_v2(filename_tensor, names, slices, [s.tensor for s in saveables])
    g = filename_tensor.graph
    with g.control_dependencies([save]), name_scope("control_dependency") as scope:
        return array_ops.identity(filename_tensor, name=scope)


def _add_restore_ops(filename_tensor, saveables, name):
    """One ``RestoreV2`` on CPU:0 for every saveable, their ``Assign``s, grouped as ``name``."""
    g = filename_tensor.graph
    with g.device("cpu:0"):
        restored = io_ops.restore_v2(
            filename_tensor,
            [s.name for s in saveables],
            [s.slice_spec for s in saveables],
            [s.dtype for s in saveables],
        )
    assigns = [s.restore(t) for s, t in zip(saveables, restored)]
    return control_flow_ops.group(*assigns, name=name)


def _add_sharded_save_ops(checkpoint_prefix, per_device):
    """One ``SaveV2`` per device group on its CPU:0 writing a temporary shard, then one
    ``MergeV2Checkpoints`` (TF's ``_AddShardedSaveOpsForV2``)."""
    g = checkpoint_prefix.graph
    with g.device("CPU"):
        tmp_prefix = io_ops.string_join([checkpoint_prefix, _SHARDED_SUFFIX % uuid.uuid4().hex])
    num_shards = array_ops.constant(len(per_device), name="num_shards")
    saves, prefixes = [], []
    last_device = None
    for shard, (device, saveables) in enumerate(per_device):
        last_device = device
        with g.device(_set_cpu0(device)):
            filename = io_ops.sharded_filename(tmp_prefix, shard, num_shards)
            prefixes.append(filename)
            saves.append(_add_save_ops(filename, saveables))
    with g.control_dependencies([s.op for s in saves]), g.device(_set_cpu0(last_device)):
        merge = io_ops.merge_v2_checkpoints(prefixes, checkpoint_prefix, delete_old_dirs=True)
        with g.control_dependencies([merge]):
            return array_ops.identity(checkpoint_prefix)


def _add_sharded_restore_ops(filename_tensor, per_device, name):
    g = filename_tensor.graph
    restores = []
    for device, saveables in per_device:
        with g.device(device):
            restores.append(_add_restore_ops(filename_tensor, saveables, "restore_shard"))
    return control_flow_ops.group(*restores, name=name)


def _build_saver_def(saveables, sharded, max_to_keep, hours, name, filename):
    """The ops of a saver and its ``SaverDef`` (TF's ``BaseSaverBuilder._build_internal``)."""
    g = saveables[0].tensor.graph
    with g.as_default(), name_scope(name, "save", [s.tensor for s in saveables]):
        filename_tensor = array_ops.placeholder_with_default(
            filename or "model", shape=(), name="filename"
        )
        filename_tensor = array_ops.placeholder_with_default(
            filename_tensor, shape=(), name="Const"
        )
        if sharded:
            per_device = _group_by_device(saveables)
            save_tensor = _add_sharded_save_ops(filename_tensor, per_device)
            restore_op = _add_sharded_restore_ops(filename_tensor, per_device, "restore_all")
        else:
            save_tensor = _add_save_ops(filename_tensor, saveables)
            restore_op = _add_restore_ops(filename_tensor, saveables, "restore_all")
    return SaverDef(
        filename_tensor_name=filename_tensor.name,
        save_tensor_name=save_tensor.name,
        restore_op_name=restore_op.name,
        max_to_keep=max_to_keep,
        sharded=sharded,
        keep_checkpoint_every_n_hours=hours,
        version=SaverDef.V2,
    )


def _write_meta_graph(path: str, graph, saver_def: SaverDef) -> None:
    """Writes the ``.meta`` file: the graph's ``MetaGraphDef`` (graph_def, collections and the
    ``saver_def``), binary as TF writes it (``framework/graph_io.py``)."""
    file_io.atomic_write_string_to_file(path, graph_io.meta_graph_def(graph, saver_def))


def _as_str(value) -> str:
    """A fetched string (bytes; a 0-d array over a grpc session) as ``str``."""
    if isinstance(value, np.ndarray):
        value = value.item()
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)


def _wrap_restore_error(err: errors.OpError, reason: str) -> errors.OpError:
    """TF's ``_wrap_restore_error_with_msg``: same class, the cause explained first."""
    return type(err)(
        err.node_def,
        err.op,
        "Restoring from checkpoint failed. This is most likely due to %s from the checkpoint. "
        "Please ensure that you have not altered the graph expected based on the checkpoint. "
        "Original error:\n\n%s" % (reason, err.message),
    )


class Saver:
    """``tf.train.Saver``: saves and restores variables (TF 1.15's signature and defaults).

    Only V2 checkpoints are written; ``reshape``, ``restore_sequentially`` and ``builder`` are
    accepted for TF's signature (``reshape=True`` is not supported).
    """

    def __init__(
        self,
        var_list: dict | Iterable | None = None,
        reshape: bool = False,
        sharded: bool = False,
        max_to_keep: int | None = 5,
        keep_checkpoint_every_n_hours: float = 10000.0,
        name: str | None = None,
        restore_sequentially: bool = False,
        saver_def: SaverDef | None = None,
        builder: object = None,
        defer_build: bool = False,
        allow_empty: bool = False,
        write_version: int = SaverDef.V2,
        pad_step_number: bool = False,
        save_relative_paths: bool = False,
        filename: str | None = None,
    ) -> None:
        if defer_build and var_list:
            raise ValueError(
                "If `var_list` is provided then build cannot be deferred. Either set "
                "defer_build=False or var_list=None."
            )
        if reshape:
            raise NotImplementedError("minitf's Saver does not restore with reshape=True")
        if write_version != SaverDef.V2:
            raise ValueError("minitf writes V2 checkpoints only (write_version=SaverDef.V2)")
        self._var_list = var_list
        self._sharded = sharded
        self._max_to_keep = max_to_keep
        self._keep_checkpoint_every_n_hours = keep_checkpoint_every_n_hours
        self._name = name
        self._filename = filename
        self._allow_empty = allow_empty
        self._pad_step_number = pad_step_number
        self._save_relative_paths = save_relative_paths
        self.saver_def = saver_def
        self._is_built = False
        self._is_empty = False
        self._last_checkpoints: list[tuple[str, float]] = []
        self._checkpoints_to_be_deleted: list[tuple[str, float]] = []
        self._next_checkpoint_time = time.time() + keep_checkpoint_every_n_hours * 3600
        self._graph = get_default_graph()
        if saver_def is not None:
            self._check_saver_def()
            self._is_built = True
        elif not defer_build:
            self.build()

    def _check_saver_def(self):
        if not isinstance(self.saver_def, SaverDef):
            raise ValueError("saver_def must be a saver_pb2.SaverDef: %s" % self.saver_def)
        self._sharded = self.saver_def.sharded
        self._max_to_keep = self.saver_def.max_to_keep

    def build(self) -> None:
        """Adds the save and restore ops (done by the constructor unless ``defer_build``)."""
        if self._is_built:
            return
        self._is_built = True
        var_list = self._var_list
        if var_list is None:
            var_list = self._graph.get_collection(GraphKeys.GLOBAL_VARIABLES)
            var_list += self._graph.get_collection(SAVEABLE_OBJECTS)
        if not var_list:
            if self._allow_empty:
                self._is_empty = True
                return
            raise ValueError("No variables to save")
        self.saver_def = _build_saver_def(
            _saveables(var_list),
            self._sharded,
            self._max_to_keep or 0,
            self._keep_checkpoint_every_n_hours,
            self._name,
            self._filename,
        )

    def as_saver_def(self) -> SaverDef | None:
        return self.saver_def

    @property
    def last_checkpoints(self) -> list[str]:
        """The prefixes of the checkpoints still kept, oldest first."""
        return [p for p, _ in self._last_checkpoints]

    def set_last_checkpoints_with_time(self, last_checkpoints_with_time: list) -> None:
        self._last_checkpoints = [(p, float(t)) for p, t in last_checkpoints_with_time]

    def recover_last_checkpoints(self, checkpoint_paths: list[str]) -> None:
        """Takes up the kept checkpoints of an earlier run (those whose files still exist)."""
        mtimes = checkpoint_management.get_checkpoint_mtimes(checkpoint_paths)
        existing = [p for p in checkpoint_paths if os.path.isfile(p + ".index")]
        self.set_last_checkpoints_with_time(list(zip(existing, mtimes)))

    def _record_last_checkpoint(self, path: str) -> None:
        if not self.saver_def.max_to_keep:
            return
        self._last_checkpoints = [p for p in self._last_checkpoints if p[0] != path]
        self._last_checkpoints.append((path, time.time()))
        if len(self._last_checkpoints) > self.saver_def.max_to_keep:
            self._checkpoints_to_be_deleted.append(self._last_checkpoints.pop(0))

    def _maybe_delete_old_checkpoints(self, meta_graph_suffix: str) -> None:
        """Deletes the checkpoint that fell out of ``max_to_keep``, unless it is the first one
        older than ``keep_checkpoint_every_n_hours`` since the last one kept that way."""
        while self._checkpoints_to_be_deleted:
            path, stamp = self._checkpoints_to_be_deleted.pop(0)
            if stamp > self._next_checkpoint_time:
                self._next_checkpoint_time += self._keep_checkpoint_every_n_hours * 3600
                continue
            try:
                checkpoint_management.remove_checkpoint(
                    path, self.saver_def.version, meta_graph_suffix
                )
            except OSError as e:
                logging.warning("Ignoring: %s", e)

    def _checkpoint_file(self, sess, save_path, global_step):
        if global_step is None:
            return save_path
        if not isinstance(global_step, (numbers.Integral, np.integer)):
            global_step = int(sess.run(global_step))
        if self._pad_step_number:
            return "%s-%08d" % (save_path, int(global_step))
        return "%s-%d" % (save_path, int(global_step))

    def save(
        self,
        sess: BaseSession,
        save_path: str,
        global_step: int | Tensor | Variable | None = None,
        latest_filename: str | None = None,
        meta_graph_suffix: str = "meta",
        write_meta_graph: bool = True,
        write_state: bool = True,
        strip_default_attrs: bool = False,
        save_debug_info: bool = False,
    ) -> str | None:
        """Saves the variables as checkpoint ``save_path`` (``save_path-<step>`` with a
        ``global_step``); returns that prefix.  Records it in the directory's state file
        ``latest_filename`` (default ``checkpoint``) and deletes the checkpoints past
        ``max_to_keep``.  The directory must exist."""
        if not self._is_built:
            raise RuntimeError("`build()` should be called before save if defer_build==True")
        latest_filename = latest_filename or "checkpoint"
        if os.path.split(latest_filename)[0]:
            raise ValueError("'latest_filename' must not contain path components")
        save_path = os.fspath(save_path)
        checkpoint_file = self._checkpoint_file(sess, save_path, global_step)
        if global_step is None and os.path.basename(save_path) == latest_filename:
            if not self._sharded:
                raise ValueError(
                    "'latest_filename' collides with 'save_path': '%s' and '%s'"
                    % (latest_filename, save_path)
                )
        if not isinstance(sess, BaseSession):
            raise TypeError("'sess' must be a Session; %s" % sess)
        model_checkpoint_path = None
        if not self._is_empty:
            model_checkpoint_path = self._run_save(
                sess, save_path, checkpoint_file, latest_filename, write_state, meta_graph_suffix
            )
        if write_meta_graph:
            path = checkpoint_management.meta_graph_filename(checkpoint_file, meta_graph_suffix)
            _write_meta_graph(path, sess.graph, self.saver_def or SaverDef())
        return model_checkpoint_path

    def _run_save(self, sess, save_path, checkpoint_file, latest_filename, write_state, suffix):
        parent = os.path.dirname(save_path)
        try:
            path = sess.run(
                self.saver_def.save_tensor_name,
                {self.saver_def.filename_tensor_name: checkpoint_file},
            )
        except (errors.FailedPreconditionError, errors.NotFoundError) as exc:
            if not os.path.isdir(parent or "."):
                raise ValueError(
                    "Parent directory of %s doesn't exist, can't save." % save_path
                ) from None
            raise exc from None
        path = _as_str(path)
        if write_state:
            self._record_last_checkpoint(path)
            checkpoint_management.update_checkpoint_state(
                save_dir=parent,
                model_checkpoint_path=path,
                all_model_checkpoint_paths=self.last_checkpoints,
                latest_filename=latest_filename,
                save_relative_paths=self._save_relative_paths,
            )
            self._maybe_delete_old_checkpoints(suffix)
        return path

    def restore(self, sess: BaseSession, save_path: str | None) -> None:
        """Restores every variable of the saver from checkpoint ``save_path`` (a prefix)."""
        if self._is_empty:
            return
        if save_path is None:
            raise ValueError("Can't load save_path when it is None.")
        save_path = os.fspath(save_path)
        if not checkpoint_management.checkpoint_exists(save_path):
            raise ValueError("The passed save_path is not a valid checkpoint: " + save_path)
        logging.info("Restoring parameters from %s", save_path)
        try:
            sess.run(
                self.saver_def.restore_op_name, {self.saver_def.filename_tensor_name: save_path}
            )
        except errors.NotFoundError as err:
            raise _wrap_restore_error(
                err, "a Variable name or other graph key that is missing"
            ) from None
        except errors.InvalidArgumentError as err:
            raise _wrap_restore_error(
                err, "a mismatch between the current graph and the graph"
            ) from None

    def export_meta_graph(self, filename: str, **unused: object) -> MetaGraphDef:
        """Writes the ``.meta`` file of the default graph (see :func:`_write_meta_graph`)."""
        _write_meta_graph(filename, get_default_graph(), self.saver_def or SaverDef())
        meta = MetaGraphDef()
        with open(filename, "rb") as f:
            meta.ParseFromString(f.read())
        return meta
