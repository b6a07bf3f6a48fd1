"""Graph, Operation and Tensor: building a dataflow graph without running it.

Book sections: "Placing Operations on Devices" (``tf.device`` blocks and device functions are
applied here, when an op is created; the placer only reads ``op.device`` later) and "Control
Dependencies" (``tf.control_dependencies`` adds control inputs here).

Nothing in this module executes anything: an :class:`Operation` is a node with a type, inputs,
attributes and a *requested* device string.  Sessions (``minitf.runtime.session``) place and run
graphs.
"""

from __future__ import annotations

import contextlib
import re
import sys
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, NoReturn

from minitf.framework import device_spec as pydev
from minitf.framework import dtypes as dtypes_mod
from minitf.framework import tensor_shape
from minitf.framework.dtypes import DType
from minitf.framework.tensor_shape import TensorShape

# What the annotations below call these (all Any: kept simple, and the last two live in layers
# above this one, which this module must not import):
DTypeLike = Any  # a DType or what dtypes.as_dtype converts: np.float32, "float32", float ...
ShapeLike = Any  # a TensorShape or what tensor_shape.as_shape converts: [2, None], (3,) ...
SessionLike = Any  # a tf.Session (minitf.runtime)
OpDefLike = Any  # an OpDef of minitf.ops.op_def, or None

_VALID_OP_NAME = re.compile(r"^[A-Za-z0-9.][A-Za-z0-9_.\-/>]*$")
_VALID_SCOPE_NAME = re.compile(r"^[A-Za-z0-9_.\-/>]*$")
_PACKAGE_DIR = __file__.rsplit("/framework/", 1)[0]


class GraphKeys:
    """Standard collection names (TF1 ``tf.GraphKeys``)."""

    GLOBAL_VARIABLES = "variables"
    VARIABLES = "variables"
    LOCAL_VARIABLES = "local_variables"
    TRAINABLE_VARIABLES = "trainable_variables"
    MODEL_VARIABLES = "model_variables"
    QUEUE_RUNNERS = "queue_runners"
    GLOBAL_STEP = "global_step"
    INIT_OP = "init_op"
    LOCAL_INIT_OP = "local_init_op"
    READY_OP = "ready_op"
    READY_FOR_LOCAL_INIT_OP = "ready_for_local_init_op"
    SUMMARY_OP = "summary_op"
    SAVERS = "savers"
    TRAIN_OP = "train_op"
    SUMMARIES = "summaries"
    COND_CONTEXT = "cond_context"
    UPDATE_OPS = "update_ops"
    REGULARIZATION_LOSSES = "regularization_losses"


def _user_frame():
    """(filename, lineno) of the innermost frame outside minitf: where the learner built the op."""
    f = sys._getframe(2)
    while f is not None and f.f_code.co_filename.startswith(_PACKAGE_DIR):
        f = f.f_back
    if f is None:
        return ("<unknown>", 0)
    where = (f.f_code.co_filename, f.f_lineno)
    return _FRAMES.setdefault(where, where)  # shared: a loop's ops all come from one line


#: The (filename, lineno) pairs ops were built at, one tuple each (bounded by the code's size).
_FRAMES: dict = {}


class NodeDef:
    """A plain record of an op, shaped like TF's ``NodeDef`` proto (name, op, input, device,
    attr)."""

    __slots__ = ("name", "op", "input", "device", "attr")

    def __init__(
        self,
        name: str,
        op: str,
        input: list[str],  # noqa: A002 - NodeDef's fields
        device: str,
        attr: dict[str, Any],
    ) -> None:
        self.name, self.op, self.input, self.device, self.attr = name, op, input, device, attr

    def __str__(self) -> str:
        lines = ['name: "%s"' % self.name, 'op: "%s"' % self.op]
        lines += ['input: "%s"' % i for i in self.input]
        if self.device:
            lines.append('device: "%s"' % self.device)
        for k in sorted(self.attr):
            lines.append('attr { key: "%s" value: %s }' % (k, _attr_text(self.attr[k])))
        return "\n".join(lines)

    __repr__ = __str__


def _attr_text(v):
    if isinstance(v, dtypes_mod.DType):
        return v.enum_name
    if isinstance(v, tensor_shape.TensorShape):
        return "shape %s" % (v,)
    if isinstance(v, (list, tuple)):
        return "[%s]" % ", ".join(_attr_text(x) for x in v)
    if isinstance(v, bytes):
        return '"%s"' % v.decode("utf-8", "replace")
    if isinstance(v, str):
        return '"%s"' % v
    if hasattr(v, "shape") and hasattr(v, "dtype"):
        return "tensor<%s %s>" % (v.dtype, tuple(v.shape))
    return repr(v)


class Tensor:
    """One output of an :class:`Operation`: a symbolic handle, named ``"<op name>:<index>"``."""

    __slots__ = ("_op", "_value_index", "_dtype", "_shape", "__weakref__")
    __array_priority__ = 100  # numpy scalars defer to Tensor operators (np.float32(2) * t)

    def __init__(self, op: Operation, value_index: int, dtype: DType, shape: TensorShape) -> None:
        self._op = op
        self._value_index = value_index
        self._dtype = dtype
        self._shape = shape

    @property
    def op(self) -> Operation:
        return self._op

    @property
    def value_index(self) -> int:
        return self._value_index

    @property
    def dtype(self) -> DType:
        return self._dtype

    @property
    def graph(self) -> Graph:
        return self._op._graph

    @property
    def name(self) -> str:
        return "%s:%d" % (self._op._name, self._value_index)

    @property
    def device(self) -> str:
        return self._op._device

    @property
    def shape(self) -> TensorShape:
        return self._shape

    def get_shape(self) -> TensorShape:
        return self._shape

    def set_shape(self, shape: ShapeLike) -> None:
        self._shape = self._shape.merge_with(tensor_shape.as_shape(shape))

    def consumers(self) -> list[Operation]:
        """Operations that take this tensor as a data input, in creation order."""
        return [op for op in self._op._graph._ops if any(t is self for t in op._inputs)]

    def eval(self, feed_dict: dict | None = None, session: SessionLike = None) -> Any:
        """Runs the graph up to this tensor in ``session`` (default: the default session)."""
        return _session_for(self, session, "evaluate tensor").run(self, feed_dict)

    def _as_node_def_input(self):
        return self._op._name if self._value_index == 0 else self.name

    def __repr__(self) -> str:
        return "<tf.Tensor '%s' shape=%s dtype=%s>" % (self.name, self._shape, self._dtype.name)

    def __str__(self) -> str:
        """TF's: no ``shape=`` part when even the rank is unknown."""
        shape = ", shape=%s" % self._shape if self._shape.ndims is not None else ""
        dev = ", device=%s" % self._op._device if self._op._device else ""
        return 'Tensor("%s"%s, dtype=%s%s)' % (self.name, shape, self._dtype.name, dev)

    def __bool__(self) -> NoReturn:
        raise TypeError(
            "Using a `tf.Tensor` as a Python `bool` is not allowed. Use `if t is not None:` "
            "instead of `if t:` to test if a tensor is defined, and use TensorFlow ops such as "
            "tf.cond to execute subgraphs conditioned on the value of a tensor."
        )

    def __iter__(self) -> NoReturn:
        raise TypeError(
            "Tensor objects are only iterable when eager execution is enabled. "
            "To iterate over this tensor use tf.map_fn."
        )

    __hash__ = object.__hash__

    def __eq__(self, other: object) -> bool:  # TF1: identity, so tensors can be dict keys
        return self is other

    def __ne__(self, other: object) -> bool:
        return self is not other


def _session_for(obj, session, what):
    if session is None:
        session = get_default_session()
        if session is None:
            verb = "eval" if _kind(obj) == "tensor" else "run"
            raise ValueError(
                "Cannot %s using `%s()`: No default session is registered. Use `with "
                "sess.as_default()` or pass an explicit session to `%s(session=sess)`"
                % (what, verb, verb)
            )
        if session.graph is not obj.graph:
            raise ValueError(
                "Cannot use the default session to %s: the %s's graph is "
                "different from the session's graph. Pass an explicit session to "
                "`%s(session=sess)`."
                % (what, _kind(obj), "eval" if _kind(obj) == "tensor" else "run")
            )
    if session.graph is not obj.graph:
        raise ValueError(
            "Cannot use the given session to %s: the %s's graph is different from "
            "the session's graph." % (what, _kind(obj))
        )
    return session


def _kind(obj):
    return "tensor" if isinstance(obj, Tensor) else "operation"


class Operation:
    """A node of the graph: a type, data inputs, control inputs, attributes, a requested device."""

    def __init__(
        self,
        graph: Graph,
        op_type: str,
        name: str,
        inputs: Iterable[Tensor],
        output_specs: Iterable[tuple[DType, TensorShape]],
        attrs: dict[str, Any],
        control_inputs: Iterable[Operation],
        op_def: OpDefLike,
    ) -> None:
        self._graph = graph
        self._type = op_type
        self._name = name
        self._inputs = list(inputs)
        self._control_inputs = list(control_inputs)
        self._attrs = attrs
        self._op_def = op_def
        self._device = ""
        self._id = len(graph._ops)
        self._defined_at = _user_frame()
        self._outputs = [Tensor(self, i, dt, sh) for i, (dt, sh) in enumerate(output_specs)]
        self._control_flow_context = None  # the tf.cond branch it was built in (ops/cond.py)

    # -- read-only views ---------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self._name

    @property
    def type(self) -> str:
        return self._type

    @property
    def graph(self) -> Graph:
        return self._graph

    @property
    def device(self) -> str:
        return self._device

    @property
    def outputs(self) -> list[Tensor]:
        return list(self._outputs)

    @property
    def inputs(self) -> tuple[Tensor, ...]:
        return tuple(self._inputs)

    @property
    def control_inputs(self) -> list[Operation]:
        return list(self._control_inputs)

    def values(self) -> tuple[Tensor, ...]:
        return tuple(self._outputs)

    @property
    def node_def(self) -> NodeDef:
        inputs = [t._as_node_def_input() for t in self._inputs]
        inputs += ["^" + c._name for c in self._control_inputs]
        return NodeDef(self._name, self._type, inputs, self._device, dict(self._attrs))

    def get_attr(self, name: str) -> Any:
        try:
            return self._attrs[name]
        except KeyError:
            raise ValueError(
                "Operation '%s' has no attr named '%s'." % (self._name, name)
            ) from None

    def _set_attr(self, name, value):
        self._attrs[name] = value

    def _set_device(self, device):
        self._device = (
            pydev.canonical_name(device) if isinstance(device, pydev.DeviceSpec) else device
        )

    def colocation_groups(self) -> list[bytes]:
        """The ``loc:@<op>`` classes this op must share a device with (its own name if none)."""
        cls = self._attrs.get("_class")
        if cls:
            return list(cls)
        return [("loc:@" + self._name).encode()]

    def run(self, feed_dict: dict | None = None, session: SessionLike = None) -> None:
        """Runs this op (and what it depends on) in ``session`` (default: the default session)."""
        _session_for(self, session, "execute operation").run(self, feed_dict)

    def _add_control_input(self, op):
        if op not in self._control_inputs:
            self._control_inputs.append(op)
            self._graph._version += 1

    def _update_input(self, index, tensor):
        """Replaces data input ``index`` (a ``tf.cond`` branch reading a tensor from outside
        it reads it through a ``Switch`` instead)."""
        self._inputs[index] = tensor
        self._graph._version += 1

    def _get_control_flow_context(self):
        return self._control_flow_context

    def _set_control_flow_context(self, ctx):
        self._control_flow_context = ctx

    def __repr__(self) -> str:
        return "<tf.Operation '%s' type=%s>" % (self._name, self._type)

    def __str__(self) -> str:
        return str(self.node_def)


class _ControlDependencies:
    """One ``tf.control_dependencies`` block: its control ops and the ops created inside it."""

    def __init__(self, graph, control_ops):
        self._graph = graph
        self.control_inputs = control_ops  # None: a block that clears outer blocks
        self.seen = set()

    def __enter__(self):
        g = self._graph
        if self.control_inputs is None:  # as TF, it leaves any tf.cond branch too
            self._saved = g._control_dependencies_stack
            self._saved_context = g._control_flow_context
            g._control_dependencies_stack = []
            g._control_flow_context = None
        else:
            g._control_dependencies_stack.append(self)

    def __exit__(self, *exc):
        g = self._graph
        if self.control_inputs is None:
            g._control_dependencies_stack = self._saved
            g._control_flow_context = self._saved_context
        else:
            if not g._control_dependencies_stack or g._control_dependencies_stack[-1] is not self:
                raise RuntimeError("Control dependencies scopes were not nested properly.")
            g._control_dependencies_stack.pop()
        return False


class _DeviceFunction:
    """An entry of the device-function stack: a merge of a string/DeviceSpec, or a user function."""

    __slots__ = ("merge", "fn", "display")

    def __init__(self, device_name_or_function):
        self.fn = None
        self.merge = None
        self.display = device_name_or_function
        if callable(device_name_or_function) and not isinstance(
            device_name_or_function, pydev.DeviceSpec
        ):
            self.fn = device_name_or_function
        else:
            self.merge = pydev.merge_device(device_name_or_function)

    def apply(self, op):
        if self.merge is not None:
            if not self.merge.is_null_merge:
                op._device = self.merge.merge(op._device)
            return
        result = self.fn(op)
        if result is None:
            raise TypeError("Expected binary or unicode string, got None")
        if isinstance(result, pydev.DeviceSpec):
            result = result.to_string()
        elif isinstance(result, bytes):
            result = result.decode()
        elif not isinstance(result, str):
            raise TypeError("Expected binary or unicode string, got %r" % (result,))
        op._device = result


class Graph:
    """A TensorFlow computation graph: operations in creation order plus the build-time stacks
    (name scope, devices, control dependencies, colocation, container)."""

    _captures_inputs = False  # a function's graph (ops/func_graph.py) captures outside tensors

    def __init__(self) -> None:
        self._ops: list[Operation] = []
        self._nodes_by_name: dict[str, Operation] = {}
        self._names_in_use: dict[str, int] = {}
        self._name_stack = ""
        # _DeviceFunction entries; None = barrier
        self._device_function_stack: list[_DeviceFunction | None] = []
        self._control_dependencies_stack: list[_ControlDependencies] = []
        self._colocation_stack: list[Operation] = []
        self._container = ""
        self._default_attrs: dict[str, Any] = {}
        self._collections: dict[str, list] = {}
        self._version = 0
        self._finalized = False
        self.seed: int | None = None
        self._lock = threading.RLock()
        self._variable_store = None  # created by variable_scope on first use
        self._control_flow_context = None  # the tf.cond branch being built (ops/cond.py)
        self._unfetchable_ops: set[Operation] = set()

    # -- default graph -------------------------------------------------------------------------
    @contextlib.contextmanager
    def as_default(self) -> Iterator[Graph]:
        """Makes this graph the default graph of the current thread inside the block."""
        stack = _graph_stack()
        stack.append(self)
        try:
            yield self
        finally:
            if stack and stack[-1] is self:
                stack.pop()
            else:
                raise AssertionError("Nesting violated for default graph")

    @property
    def version(self) -> int:
        """Grows whenever an op or edge is added (sessions re-place when it changed)."""
        return self._version

    @property
    def finalized(self) -> bool:
        return self._finalized

    def finalize(self) -> None:
        """No op can be added any more (RuntimeError): what a Supervisor and a
        MonitoredSession do, so that a training loop cannot grow its graph by mistake."""
        self._finalized = True

    def _unsafe_unfinalize(self) -> None:
        """Undoes ``finalize`` (a MonitoredSession closing over a graph it finalized)."""
        self._finalized = False

    # -- names ---------------------------------------------------------------------------------
    def unique_name(self, name: str, mark_as_used: bool = True) -> str:
        """TF's unique names: ``add``, ``add_1`` ... made case-insensitively, under the scope."""
        if self._name_stack:
            name = self._name_stack + "/" + name
        key = name.lower()
        i = self._names_in_use.get(key, 0)
        if mark_as_used:
            self._names_in_use[key] = i + 1
        if i > 0:
            base = key
            while key in self._names_in_use:
                key = "%s_%d" % (base, i)
                i += 1
            if mark_as_used:
                self._names_in_use[key] = 1
            name = "%s_%d" % (name, i - 1)
        return name

    def get_name_scope(self) -> str:
        return self._name_stack

    @contextlib.contextmanager
    def name_scope(self, name: str | bytes | None) -> Iterator[str]:
        """Opens a name scope; yields its name with a trailing ``/`` (``""`` at the top)."""
        old = self._name_stack
        if name:
            if isinstance(name, bytes):
                name = name.decode()
            if not isinstance(name, str):
                raise TypeError("name for name_scope must be a string, got %r" % (name,))
            if old:
                if not _VALID_SCOPE_NAME.match(name):
                    raise ValueError("'%s' is not a valid scope name" % name)
            elif not _VALID_OP_NAME.match(name):
                raise ValueError("'%s' is not a valid scope name" % name)
            if name.endswith("/"):
                new = name[:-1]
            else:
                new = self.unique_name(name)
        else:
            new = ""
        self._name_stack = new
        try:
            yield (new + "/") if new else ""
        finally:
            self._name_stack = old

    # -- device, colocation, container, control dependencies -----------------------------------
    @contextlib.contextmanager
    def device(
        self, device_name_or_function: str | pydev.DeviceSpec | Callable | None
    ) -> Iterator[None]:
        """``with g.device(x)``: a string, a DeviceSpec, a function of the op, or None."""
        entry = (
            None if device_name_or_function is None else _DeviceFunction(device_name_or_function)
        )
        stack = self._device_function_stack
        stack.append(entry)
        depth = len(stack)
        try:
            yield
        finally:
            if (
                len(self._device_function_stack) != depth
                or self._device_function_stack[-1] is not entry
            ):
                raise RuntimeError("Exiting device scope without proper scope nesting.")
            self._device_function_stack.pop()

    @contextlib.contextmanager
    def colocate_with(self, op: Any, ignore_existing: bool = False) -> Iterator[None]:
        """Ops created inside share ``op``'s device (and get a ``_class`` loc:@ attribute)."""
        if op is None and not ignore_existing:
            raise ValueError(
                "Trying to reset colocation (op is None) but ignore_existing is not True"
            )
        if op is not None:
            op = _to_operation(self, op)
        saved_devices = self._device_function_stack
        self._device_function_stack = []
        saved_coloc = None
        if ignore_existing:
            saved_coloc = self._colocation_stack
            self._colocation_stack = []
        if op is not None:
            self._colocation_stack.append(op)
        try:
            yield
        finally:
            if op is not None:
                self._colocation_stack.pop()
            if saved_coloc is not None:
                self._colocation_stack = saved_coloc
            self._device_function_stack = saved_devices

    @contextlib.contextmanager
    def container(self, container_name: str) -> Iterator[str]:
        """Stateful ops created inside keep their resources in ``container_name``."""
        old = self._container
        self._container = container_name
        try:
            yield container_name
        finally:
            self._container = old

    def _current_control_dependencies(self):
        ret = set()
        for c in self._control_dependencies_stack:
            ret.update(c.control_inputs)
        return ret

    def control_dependencies(self, control_inputs: Iterable[Any] | None) -> _ControlDependencies:
        """Ops created in the block run only after ``control_inputs`` (None clears outer blocks)."""
        if control_inputs is None:
            return _ControlDependencies(self, None)
        current = self._current_control_dependencies()
        ops = []
        for c in control_inputs:
            if hasattr(c, "_as_graph_element") and not isinstance(c, (Tensor, Operation)):
                c = c._as_graph_element()
            if isinstance(c, str):
                c = self.as_graph_element(c)
            if isinstance(c, Tensor):
                c = c.op
            elif not isinstance(c, Operation):
                raise TypeError(
                    "Can not convert a %s into a Tensor or Operation." % type(c).__name__
                )
            if c._graph is not self:
                raise ValueError("Control input %r is not an element of this graph." % (c,))
            if c not in current:
                ops.append(c)
                current.add(c)
        return _ControlDependencies(self, ops)

    def _control_dependencies_for_inputs(self, input_ops):
        ret = []
        for controller in self._control_dependencies_stack:
            if any(op in controller.seen for op in input_ops):
                continue  # dominated: an input already waits for this block's controls
            ret.extend(c for c in controller.control_inputs if c not in input_ops)
        return ret

    # -- op creation ---------------------------------------------------------------------------
    def create_op(
        self,
        op_type: str,
        inputs: Sequence[Tensor],
        output_specs: Sequence[tuple[DType, TensorShape]],
        name: str,
        attrs: dict[str, Any] | None = None,
        op_def: OpDefLike = None,
    ) -> Operation:
        """Adds an op.  ``name`` ending in ``/`` is used as is (it came from a name scope)."""
        if self._finalized:
            raise RuntimeError("Graph is finalized and cannot be modified.")
        for t in inputs:
            if t._op._graph is not self:
                raise ValueError(
                    "Tensor %s must be from the same graph as the op %s's other inputs." % (t, name)
                )
        name = self._new_op_name(name)
        attrs = dict(attrs or {})
        for k, v in self._default_attrs.items():
            attrs.setdefault(k, v)
        control = self._control_dependencies_for_inputs({t._op for t in inputs})
        ref_inputs = [t for t, is_ref in zip(inputs, op_def.ref_inputs if op_def else ()) if is_ref]
        if not ref_inputs:  # most ops: no colocation to open
            return self._create_op(op_type, name, inputs, output_specs, attrs, control, op_def)
        with contextlib.ExitStack() as stack:
            for t in ref_inputs:  # an op that takes a reference lives with the variable
                stack.enter_context(self.colocate_with(t.op))
            return self._create_op(op_type, name, inputs, output_specs, attrs, control, op_def)

    def _create_op(self, op_type, name, inputs, output_specs, attrs, control, op_def):
        op = Operation(self, op_type, name, inputs, output_specs, attrs, [], op_def)
        op._control_inputs.extend(dict.fromkeys(control))  # each once, in order
        for controller in self._control_dependencies_stack:
            controller.seen.add(op)
        # The op joins the graph before device functions run: as in TF, an op whose device
        # function raised stays in the graph (with no device).
        self._add_op(op)
        self._apply_device_functions(op)
        self._apply_colocation(op)
        if self._container and op_def is not None and op_def.has_container:
            if not op._attrs.get("container"):
                op._attrs["container"] = self._container
        if self._control_flow_context is not None:
            self._control_flow_context.add_op(op)
        return op

    # -- control flow (tf.cond, ops/cond.py) ---------------------------------------------------
    def _get_control_flow_context(self):
        return self._control_flow_context

    def _set_control_flow_context(self, ctx):
        self._control_flow_context = ctx

    def prevent_fetching(self, op: Operation) -> None:
        """Marks ``op`` as not fetchable (an op inside a ``tf.cond`` branch)."""
        self._unfetchable_ops.add(op)

    def is_fetchable(self, tensor_or_op: Tensor | Operation) -> bool:
        op = tensor_or_op.op if isinstance(tensor_or_op, Tensor) else tensor_or_op
        return op not in self._unfetchable_ops

    def _new_op_name(self, name):
        """The name of a new op: ``name`` ending in ``/`` as is (less the ``/``), else a
        unique name under the current name scope."""
        if name.endswith("/"):
            return name[:-1]
        if not _VALID_OP_NAME.match(name):
            raise ValueError("'%s' is not a valid node name" % name)
        return self.unique_name(name)

    def _add_op(self, op):
        with self._lock:
            if op._name in self._nodes_by_name:
                raise ValueError("Duplicate node name in graph: '%s'" % op._name)
            op._id = len(self._ops)
            self._ops.append(op)
            self._nodes_by_name[op._name] = op
            self._version += 1

    def _apply_colocation(self, op):
        """Inside ``colocate_with`` blocks: the op gets their ops' colocation groups (its
        ``_class`` attribute) and the device of the innermost placed one."""
        if not self._colocation_stack:
            return
        groups = set()
        for cop in self._colocation_stack:
            groups.update(cop.colocation_groups())
            if cop._device:
                op._device = cop._device
        op._attrs["_class"] = sorted(groups)

    def _apply_device_functions(self, op):
        for entry in reversed(self._device_function_stack):
            if entry is None:
                break
            entry.apply(op)

    # -- lookup --------------------------------------------------------------------------------
    def get_operations(self) -> list[Operation]:
        return list(self._ops)

    def get_operation_by_name(self, name: str) -> Operation:
        if not isinstance(name, str):
            raise TypeError(
                "Operation names are strings (or similar), not %s." % type(name).__name__
            )
        return self.as_graph_element(name, allow_tensor=False, allow_operation=True)

    def get_tensor_by_name(self, name: str) -> Tensor:
        if not isinstance(name, str):
            raise TypeError("Tensor names are strings (or similar), not %s." % type(name).__name__)
        return self.as_graph_element(name, allow_tensor=True, allow_operation=False)

    def as_graph_element(
        self, obj: Any, allow_tensor: bool = True, allow_operation: bool = True
    ) -> Tensor | Operation:
        """Resolves a Tensor, Operation, object with ``_as_graph_element`` or name to this graph."""
        types_str = " or ".join(
            n for n, ok in (("Tensor", allow_tensor), ("Operation", allow_operation)) if ok
        )
        if hasattr(obj, "_as_graph_element") and not isinstance(obj, (Tensor, Operation)):
            obj = obj._as_graph_element()
        if isinstance(obj, str):
            if ":" in obj and allow_tensor:
                op_name, index_text = obj.split(":", 1)
                try:
                    idx = int(index_text)
                except ValueError:
                    raise ValueError(
                        "The name %r looks a like a Tensor name, but is not a valid "
                        "one. Tensor names must be of the form "
                        '"<op_name>:<output_index>".' % obj
                    ) from None
                op = self._nodes_by_name.get(op_name)
                if op is None:
                    raise KeyError(
                        "The name %r refers to a Tensor which does not exist. The "
                        "operation, %r, does not exist in the graph." % (obj, op_name)
                    )
                if idx >= len(op._outputs) or idx < 0:
                    raise KeyError(
                        "The name %r refers to a Tensor which does not exist. The "
                        "operation, %r, exists but only has %d outputs."
                        % (obj, op_name, len(op._outputs))
                    )
                return op._outputs[idx]
            if ":" in obj:
                raise ValueError(
                    "Name %r appears to refer to a Tensor, not a %s." % (obj, types_str)
                )
            if not allow_operation:
                if obj in self._nodes_by_name:
                    raise ValueError(
                        "The name %r refers to an Operation, not a %s. Tensor "
                        'names must be of the form "<op_name>:<output_index>".' % (obj, types_str)
                    )
                raise KeyError(
                    "The name %r looks like an (invalid) Operation name, not a %s."
                    % (obj, types_str)
                )
            op = self._nodes_by_name.get(obj)
            if op is None:
                raise KeyError("The name %r refers to an Operation not in the graph." % obj)
            return op
        if isinstance(obj, Tensor) and allow_tensor:
            if obj.graph is not self:
                raise ValueError("Tensor %s is not an element of this graph." % obj)
            return obj
        if isinstance(obj, Operation) and allow_operation:
            if obj.graph is not self:
                raise ValueError("Operation %s is not an element of this graph." % obj)
            return obj
        raise TypeError("Can not convert a %s into a %s." % (type(obj).__name__, types_str))

    # -- collections ---------------------------------------------------------------------------
    def add_to_collection(self, name: str, value: Any) -> None:
        self._collections.setdefault(name, []).append(value)

    def add_to_collections(self, names: str | Iterable[str], value: Any) -> None:
        for n in [names] if isinstance(names, str) else set(names):
            self.add_to_collection(n, value)

    def get_collection_ref(self, name: str) -> list:
        return self._collections.setdefault(name, [])

    def get_collection(self, name: str, scope: str | None = None) -> list:
        items = list(self._collections.get(name, []))
        if scope is None:
            return items
        regex = re.compile(scope)
        return [i for i in items if hasattr(i, "name") and regex.match(i.name)]

    def get_all_collection_keys(self) -> list[str]:
        return [k for k, v in self._collections.items() if v]

    def as_graph_def(self) -> list[NodeDef]:
        """The graph as a list of :class:`NodeDef` records (a readable stand-in for GraphDef)."""
        return [op.node_def for op in self._ops]


def _to_operation(graph, obj):
    if hasattr(obj, "_as_graph_element") and not isinstance(obj, (Tensor, Operation)):
        obj = obj._as_graph_element()
    if isinstance(obj, Tensor):
        return obj.op
    if isinstance(obj, Operation):
        return obj
    raise TypeError("Can not convert a %s into a Tensor or Operation." % type(obj).__name__)


# -- default graph and default session stacks (per thread, over one global default graph) -------


class _ThreadStacks(threading.local):
    def __init__(self):
        self.graphs = []
        self.sessions = []


_stacks = _ThreadStacks()
_global_default_graph = None


def _graph_stack():
    return _stacks.graphs


def get_default_graph() -> Graph:
    """The innermost ``Graph.as_default()`` graph of this thread, else the global default graph."""
    if _stacks.graphs:
        return _stacks.graphs[-1]
    global _global_default_graph
    if _global_default_graph is None:
        _global_default_graph = Graph()
    return _global_default_graph


def reset_default_graph() -> None:
    """Replaces the global default graph by a fresh one (not allowed inside a graph block)."""
    if _stacks.graphs:
        raise AssertionError(
            "Do not use tf.reset_default_graph() to clear nested graphs. If "
            "you need a cleared graph, exit the nesting and create a new graph."
        )
    global _global_default_graph
    _global_default_graph = Graph()


def get_default_session() -> SessionLike:
    """The innermost session entered with ``with sess:`` / ``sess.as_default()`` in this thread."""
    return _stacks.sessions[-1] if _stacks.sessions else None


@contextlib.contextmanager
def default_session(session: SessionLike) -> Iterator[SessionLike]:
    _stacks.sessions.append(session)
    try:
        yield session
    finally:
        _stacks.sessions.remove(session)


# -- tensor conversion --------------------------------------------------------------------------

# (priority, order, type, fn(value, dtype, name, as_ref) -> Tensor)
_conversion_functions: list[tuple[int, int, type | tuple[type, ...], Callable]] = []


def register_tensor_conversion_function(
    base_type: type | tuple[type, ...], fn: Callable, priority: int = 100
) -> None:
    """Makes ``convert_to_tensor`` turn instances of ``base_type`` into tensors with
    ``fn(value, dtype, name, as_ref)``; lower priorities are tried first (TF's rule: the ops
    layer registers constants for ``object`` at priority 200, the last resort)."""
    _conversion_functions.append((priority, len(_conversion_functions), base_type, fn))
    _conversion_functions.sort(key=lambda entry: entry[:2])


def convert_to_tensor(
    value: Any,
    dtype: DTypeLike = None,
    name: str | None = None,
    as_ref: bool = False,
    preferred_dtype: DTypeLike = None,
) -> Tensor:
    """A Tensor for ``value``: tensors pass through, variables give their value, Python and
    numpy values become ``Const`` ops (named ``name`` or ``Const``) through the conversion
    functions registered by the ops layer."""
    if dtype is not None:
        dtype = dtypes_mod.as_dtype(dtype)
    if isinstance(value, Tensor):
        if dtype is not None and not dtype.is_compatible_with(value.dtype):
            raise ValueError(
                "Tensor conversion requested dtype %s for Tensor with dtype %s: %r"
                % (dtype.name, value.dtype.name, value)
            )
        return value
    if isinstance(value, Operation):
        raise TypeError(
            "Can't convert Operation '%s' to Tensor (target dtype=%s, name=%r, "
            "as_ref=%s)" % (value.name, dtype, name, as_ref)
        )
    for _, _, base, fn in _conversion_functions:
        if isinstance(value, base):
            if dtype is None and preferred_dtype is not None:
                try:
                    out = fn(value, dtypes_mod.as_dtype(preferred_dtype), name, as_ref)
                    if out is not NotImplemented:
                        return out
                except (TypeError, ValueError):
                    pass
            out = fn(value, dtype, name, as_ref)
            if out is not NotImplemented:  # (TF: the function declines; try the next one)
                return out
    raise TypeError(
        "Cannot convert %r of type %s to a Tensor: no conversion function is "
        "registered for it" % (value, type(value).__name__)
    )


@contextlib.contextmanager
def name_scope(
    name: str | None, default_name: str | None = None, values: Iterable[Any] | None = None
) -> Iterator[str]:
    """``tf.name_scope(name, default_name, values)`` over the graph of ``values`` (or default)."""
    n = name if name else default_name
    if n is None and name is None and default_name is None:
        n = ""
    g = None
    for v in values or ():
        if isinstance(v, (Tensor, Operation)):
            g = v.graph
            break
        if hasattr(v, "graph") and isinstance(v.graph, Graph):
            g = v.graph
            break
    if g is None:
        g = get_default_graph()
    if values is not None and g is not get_default_graph():
        with g.as_default(), g.name_scope(n) as scope:
            yield scope
    else:
        with g.name_scope(n) as scope:
            yield scope


def name_from_scope_name(name: str) -> str:
    return name[:-1] if name and name[-1] == "/" else name
