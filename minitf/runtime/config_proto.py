"""``ConfigProto``, ``GPUOptions``, ``RunOptions``, ``RunMetadata``: TF's session options.

Book sections: "Managing the GPU RAM" (``gpu_options.per_process_gpu_memory_fraction``,
``allow_growth``), "Logging placements" (``log_device_placement``), "Soft placement"
(``allow_soft_placement``) and "Parallel Execution" (``inter_op_parallelism_threads`` ...).

They behave like TF's protocol-buffer messages: every field has a proto3 default (0, False, ""),
unknown field names and wrongly typed values are refused, nested messages are created on first
read, and ``print(config)`` shows the set fields in protobuf text format.
"""

from __future__ import annotations

import copy
from typing import Any

_SCALARS = {int: (int,), float: (int, float), bool: (bool, int), str: (str,)}


class Message:
    """A tiny protobuf-like message: subclasses declare ``FIELDS = {name: kind}``.

    kind: a Python scalar type, a Message subclass, ``("repeated", kind)`` or
    ``("map", key type, value type)``.
    """

    # in field-number order, which is the order text format prints them in
    FIELDS: dict[str, Any] = {}
    ENUMS: dict[str, dict[int, str]] = {}  # field -> {number: name} for enum fields

    def __init__(self, **kwargs: Any) -> None:
        for name, value in kwargs.items():
            if name not in self.FIELDS:
                raise ValueError(
                    'Protocol message %s has no "%s" field.' % (type(self).__name__, name)
                )
            kind = self.FIELDS[name]
            if isinstance(kind, type) and issubclass(kind, Message):
                if isinstance(value, dict):
                    value = kind(**value)
                if not isinstance(value, kind):
                    raise TypeError(
                        "Parameter to initialize message field must be instance of "
                        "%s" % kind.__name__
                    )
                self.__dict__[name] = copy.deepcopy(value)  # protobuf copies, never shares
            elif isinstance(kind, tuple) and kind[0] == "map":
                getattr(self, name).update(value)
            elif isinstance(kind, tuple):
                getattr(self, name).extend(value)
            else:
                setattr(self, name, value)

    def __getattr__(self, name: str) -> Any:
        kind = type(self).FIELDS.get(name)
        if kind is None:
            raise AttributeError(
                "Protocol message %s has no field %s" % (type(self).__name__, name)
            )
        if isinstance(kind, tuple):
            value = (
                _TypedDict(kind[1], kind[2], name)
                if kind[0] == "map"
                else _TypedList(kind[1], name)
            )
        elif issubclass(kind, Message):
            value = kind()
        else:
            return kind()
        self.__dict__[name] = value
        return value

    def __setattr__(self, name: str, value: Any) -> None:
        kind = type(self).FIELDS.get(name)
        if kind is None:
            raise AttributeError(
                "Protocol message %s has no field %s" % (type(self).__name__, name)
            )
        if not isinstance(kind, type) or issubclass(kind, Message):
            raise AttributeError(
                'Assignment not allowed to field "%s" in protocol message object.' % name
            )
        self.__dict__[name] = _check_scalar(kind, value, name)

    def HasField(self, name: str) -> bool:
        return name in self.__dict__ and _is_set(self.__dict__[name])

    def ListFields(self) -> list[tuple[str, Any]]:
        return [
            (n, self.__dict__[n])
            for n in self.FIELDS
            if n in self.__dict__ and _is_set(self.__dict__[n])
        ]

    def CopyFrom(self, other: Message) -> None:
        if type(other) is not type(self):
            raise TypeError("Parameter to CopyFrom() must be instance of same class")
        self.__dict__.clear()
        self.MergeFrom(other)

    def MergeFrom(self, other: Message) -> None:
        for name, value in copy.deepcopy(other.ListFields()):
            kind = self.FIELDS[name]
            if isinstance(kind, tuple):
                (getattr(self, name).update if kind[0] == "map" else getattr(self, name).extend)(
                    value
                )
            elif issubclass(kind, Message):
                getattr(self, name).MergeFrom(value)
            else:
                setattr(self, name, value)

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and dict(self.ListFields()) == dict(other.ListFields())

    def __str__(self) -> str:
        return "".join(_text(self, ""))

    def __repr__(self) -> str:
        return str(self)


def _is_set(value):
    if isinstance(value, Message):
        return bool(value.ListFields())
    return bool(value)


def _check_scalar(kind, value, name):
    if isinstance(value, bool) and kind in (int, float):
        raise TypeError("%r has type bool, but expected one of: %s" % (value, kind.__name__))
    if not isinstance(value, _SCALARS[kind]):
        raise TypeError(
            "%r has type %s, but expected one of: %s" % (value, type(value).__name__, kind.__name__)
        )
    return kind(value)


class _TypedList(list):
    def __init__(self, kind, name):
        super().__init__()
        self._kind, self._name = kind, name

    def append(self, value):
        if self._kind is object:
            super().append(value)
        elif isinstance(self._kind, type) and issubclass(self._kind, Message):
            if not isinstance(value, self._kind):
                raise TypeError("%s expects %s" % (self._name, self._kind.__name__))
            super().append(value)
        else:
            super().append(_check_scalar(self._kind, value, self._name))

    def add(self, **kwargs):
        msg = self._kind(**kwargs)
        super().append(msg)
        return msg

    def extend(self, values):
        for v in values:
            self.append(v)


class _TypedDict(dict):
    def __init__(self, key_kind, value_kind, name):
        super().__init__()
        self._kinds, self._name = (key_kind, value_kind), name

    def __setitem__(self, key, value):
        super().__setitem__(
            _check_scalar(self._kinds[0], key, self._name),
            _check_scalar(self._kinds[1], value, self._name),
        )

    def update(self, other=(), **kw):
        for k, v in dict(other, **kw).items():
            self[k] = v


def _fmt(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return '"%s"' % value
    return repr(value)


def _text(msg, indent):
    for name, value in msg.ListFields():
        if name in msg.ENUMS:
            yield "%s%s: %s\n" % (indent, name, msg.ENUMS[name].get(value, value))
            continue
        if isinstance(value, Message):
            yield "%s%s {\n" % (indent, name)
            yield from _text(value, indent + "  ")
            yield "%s}\n" % indent
        elif isinstance(value, dict):
            for k in sorted(value):
                yield "%s%s {\n%s  key: %s\n%s  value: %s\n%s}\n" % (
                    indent,
                    name,
                    indent,
                    _fmt(k),
                    indent,
                    _fmt(value[k]),
                    indent,
                )
        elif isinstance(value, list):
            for item in value:
                if isinstance(item, Message):
                    yield "%s%s {\n" % (indent, name)
                    yield from _text(item, indent + "  ")
                    yield "%s}\n" % indent
                else:
                    yield "%s%s: %s\n" % (indent, name, _fmt(item))
        else:
            yield "%s%s: %s\n" % (indent, name, _fmt(value))


class VirtualDevices(Message):
    """``GPUOptions.Experimental.VirtualDevices``: the logical GPUs made of one visible card, one
    per ``memory_limit_mb`` entry (none: one GPU with the default amount)."""

    FIELDS = {"memory_limit_mb": ("repeated", float)}


class GPUExperimental(Message):
    """``GPUOptions.Experimental`` (the fields minitf reads)."""

    FIELDS = {"virtual_devices": ("repeated", VirtualDevices), "use_unified_memory": bool}
    VirtualDevices = VirtualDevices


class GPUOptions(Message):
    FIELDS = {
        "per_process_gpu_memory_fraction": float,
        "allocator_type": str,
        "deferred_deletion_bytes": int,
        "allow_growth": bool,
        "visible_device_list": str,
        "polling_active_delay_usecs": int,
        "polling_inactive_delay_msecs": int,
        "force_gpu_compatible": bool,
        "experimental": GPUExperimental,
    }
    Experimental = GPUExperimental


class ThreadPoolOptionProto(Message):
    FIELDS = {"num_threads": int, "global_name": str}


class OptimizerOptions(Message):
    FIELDS = {
        "do_common_subexpression_elimination": bool,
        "do_constant_folding": bool,
        "opt_level": int,
        "do_function_inlining": bool,
    }


_TOGGLE = {0: "DEFAULT", 1: "ON", 2: "OFF", 3: "AGGRESSIVE"}
_TOGGLES = (
    "layout_optimizer",
    "constant_folding",
    "arithmetic_optimization",
    "dependency_optimization",
    "loop_optimization",
    "function_optimization",
    "debug_stripper",
    "shape_optimization",
    "remapping",
)


class RewriterConfig(Message):
    """``RewriterConfig`` (TF: ``tensorflow.core.protobuf.rewriter_config_pb2``): which passes of
    TF's graph optimizer, Grappler, run on a step's graph.  Each pass is a ``Toggle``: DEFAULT (0),
    ON (1), OFF (2), AGGRESSIVE (3).  In TF, DEFAULT means on for most passes, dependency
    optimization included, and ``disable_meta_optimizer=True`` turns them all off.

    minitf runs a step's graph as written, as TF does with the meta optimizer disabled, so that
    every node of a graph shows in a trace: its only pass is ``dependency_optimization``
    (``minitf.runtime.dependency_optimizer``), which runs when that field is ON or AGGRESSIVE;
    DEFAULT and OFF both mean off.  The other toggles are accepted and have no effect."""

    DEFAULT, ON, OFF, AGGRESSIVE = 0, 1, 2, 3
    # in TF's field-number order (the order text format prints them in)
    FIELDS = {
        "layout_optimizer": int,
        "constant_folding": int,
        "arithmetic_optimization": int,
        "dependency_optimization": int,
        "loop_optimization": int,
        "function_optimization": int,
        "debug_stripper": int,
        "shape_optimization": int,
        "remapping": int,
        "disable_meta_optimizer": bool,
    }
    ENUMS = {name: _TOGGLE for name in _TOGGLES}


class GraphOptions(Message):
    FIELDS = {
        "optimizer_options": OptimizerOptions,
        "build_cost_model": int,
        "infer_shapes": bool,
        "place_pruned_graph": bool,
        "timeline_step": int,
        "rewrite_options": RewriterConfig,
    }


class RPCOptions(Message):
    FIELDS = {"use_rpc_for_inprocess_master": bool}


class ConfigProto(Message):
    FIELDS = {
        "device_count": ("map", str, int),
        "intra_op_parallelism_threads": int,
        "placement_period": int,
        "device_filters": ("repeated", str),
        "inter_op_parallelism_threads": int,
        "gpu_options": GPUOptions,
        "allow_soft_placement": bool,
        "log_device_placement": bool,
        "use_per_session_threads": bool,
        "graph_options": GraphOptions,
        "operation_timeout_in_ms": int,
        "session_inter_op_thread_pool": ("repeated", ThreadPoolOptionProto),
        "rpc_options": RPCOptions,
        "isolate_session_state": bool,
    }


class RunOptions(Message):
    NO_TRACE, SOFTWARE_TRACE, HARDWARE_TRACE, FULL_TRACE = 0, 1, 2, 3
    FIELDS = {
        "trace_level": int,
        "timeout_in_ms": int,
        "inter_op_thread_pool": int,
        "output_partition_graphs": bool,
        "report_tensor_allocations_upon_oom": bool,
    }
    ENUMS = {
        "trace_level": {0: "NO_TRACE", 1: "SOFTWARE_TRACE", 2: "HARDWARE_TRACE", 3: "FULL_TRACE"}
    }


class StepStats(Message):
    """``dev_stats``: DeviceStepStats per device; ``transfers``: TransferStats (minitf's
    record of cross-device copies).  See ``minitf.runtime.step_stats``."""

    FIELDS = {"dev_stats": ("repeated", object), "transfers": ("repeated", object)}


class RunMetadata(Message):
    FIELDS = {"step_stats": StepStats, "partition_graphs": ("repeated", object)}
