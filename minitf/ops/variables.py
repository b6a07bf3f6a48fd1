"""``tf.Variable`` (TF1 reference variables) and the variable initializers.

Book section: "Placing Operations on Devices".  ``tf.Variable(3.0, name="a")`` makes four ops:
``a/initial_value`` (Const), ``a`` (VariableV2, where the value lives), ``a/Assign`` (the
initializer, colocated with ``a``) and ``a/read`` (Identity, colocated with ``a``), exactly the
ops the book's placement log lists.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, NoReturn

from minitf.framework import dtypes, tensor_shape
from minitf.framework.device_spec import DeviceSpec
from minitf.framework.graph import (
    DTypeLike,
    GraphKeys,
    Operation,
    SessionLike,
    ShapeLike,
    Tensor,
    convert_to_tensor,
    get_default_graph,
    name_from_scope_name,
    name_scope,
    register_tensor_conversion_function,
)
from minitf.framework.tensor_shape import TensorShape
from minitf.lib.protobuf.tf_protos_pb2 import SaveSliceInfoDef, VariableDef
from minitf.lib.tensor_slice import TensorSlice
from minitf.ops import array_ops, control_flow_ops, math_ops, slicing, state_ops
from minitf.ops.array_ops import TensorLike


class SaveSliceInfo:
    """Where a partitioned variable's shard sits in the full variable (TF's
    ``Variable.SaveSliceInfo``): a Saver saves the shard as this slice of ``full_name``."""

    def __init__(
        self,
        full_name: str,
        full_shape: Sequence[int],
        var_offset: Sequence[int],
        var_shape: Sequence[int],
    ) -> None:
        self.full_name = full_name
        self.full_shape = [int(d) for d in full_shape]
        self.var_offset = [int(d) for d in var_offset]
        self.var_shape = [int(d) for d in var_shape]

    @property
    def spec(self) -> str:
        """The ``shape_and_slice`` string of the shard: ``"10 4 4,3:0,4"``."""
        slc = TensorSlice(self.var_offset, self.var_shape)
        return " ".join(str(d) for d in self.full_shape) + " " + str(slc)

    def to_proto(self, export_scope: str | None = None) -> SaveSliceInfoDef:
        """TF's ``SaveSliceInfoDef`` of this shard (``full_name`` without ``export_scope``)."""
        return SaveSliceInfoDef(
            full_name=strip_scope(self.full_name, export_scope),
            full_shape=self.full_shape,
            var_offset=self.var_offset,
            var_shape=self.var_shape,
        )


def strip_scope(name: str, scope: str | None) -> str:
    """``name`` with a leading ``scope/`` taken off (TF's ``ops.strip_name_scope``)."""
    if scope and name.startswith(scope + "/"):
        return name[len(scope) + 1 :]
    return name


def prepend_scope(name: str, scope: str | None) -> str:
    """``name`` under ``scope`` (TF's ``ops.prepend_name_scope``)."""
    return scope + "/" + name if scope else name


class Variable:
    """A TF1 reference variable.  ``v.op`` is its ``VariableV2``; ``v.initializer`` its Assign."""

    SaveSliceInfo = SaveSliceInfo  # TF's Variable.SaveSliceInfo
    _save_slice_info: SaveSliceInfo | None = None  # set on a partitioned variable's shards

    def __init__(
        self,
        initial_value: TensorLike | Callable[[], TensorLike] = None,
        trainable: bool = True,
        collections: Iterable[str] | None = None,
        validate_shape: bool = True,
        caching_device: str | DeviceSpec | Callable | None = None,
        name: str | None = None,
        dtype: DTypeLike = None,
        expected_shape: ShapeLike = None,
        use_resource: bool | None = None,
        shape: ShapeLike = None,
        **unused: Any,
    ) -> None:
        if initial_value is None:
            raise ValueError("initial_value must be specified.")
        if use_resource:
            raise ValueError("minitf implements TF1 reference variables only (use_resource=False)")
        g = get_default_graph()
        if collections is None:
            collections = [GraphKeys.GLOBAL_VARIABLES]
        collections = list(collections)
        if trainable and GraphKeys.TRAINABLE_VARIABLES not in collections:
            collections.append(GraphKeys.TRAINABLE_VARIABLES)
        from_fn = callable(initial_value)
        with name_scope(name, "Variable", [] if from_fn else [initial_value]) as scope:
            true_name = name_from_scope_name(scope)
            if from_fn:
                saved = dict(g._default_attrs)
                g._default_attrs["_class"] = [("loc:@" + true_name).encode()]
                try:
                    with g.name_scope("Initializer"), g.device(None):
                        init = convert_to_tensor(initial_value(), name="initial_value", dtype=dtype)
                finally:
                    g._default_attrs = saved
            else:
                init = convert_to_tensor(initial_value, name="initial_value", dtype=dtype)
            self._initial_value = init
            var_shape = init.shape if validate_shape else tensor_shape.unknown_shape()
            if shape is not None:
                var_shape = tensor_shape.as_shape(shape)
            self._variable = state_ops.variable_op_v2(var_shape, init.dtype.base_dtype, name=scope)
            self._initializer_op = state_ops.assign(
                self._variable, init, validate_shape=validate_shape
            ).op
            if caching_device is not None:
                with g.device(caching_device):
                    self._snapshot = array_ops.identity(self._variable, name="read")
            else:
                with g.colocate_with(self._variable.op):
                    self._snapshot = array_ops.identity(self._variable, name="read")
        self._trainable = trainable
        self._caching_device = caching_device
        g.add_to_collections(collections, self)

    # -- the TF1 Variable surface ------------------------------------------------------------
    name = property(lambda self: self._variable.name)
    op = property(lambda self: self._variable.op)
    graph = property(lambda self: self._variable.graph)
    device = property(lambda self: self._variable.device)
    dtype = property(lambda self: self._variable.dtype)
    shape = property(lambda self: self._variable.shape)
    initializer = property(lambda self: self._initializer_op)
    initial_value = property(lambda self: self._initial_value)
    trainable = property(lambda self: self._trainable)

    def get_shape(self) -> TensorShape:
        return self._variable.shape

    def value(self) -> Tensor:
        """The ``<name>/read`` snapshot: what ops see when they use the variable."""
        return self._snapshot

    def read_value(self) -> Tensor:
        return array_ops.identity(self._variable, name="read")

    def _ref(self):
        return self._variable

    def to_proto(self, export_scope: str | None = None) -> VariableDef:
        """TF's ``VariableDef``: the names of this variable's ops, as a MetaGraphDef's
        variable collections hold it (names without ``export_scope``)."""

        def name(t):
            return strip_scope(t.name, export_scope)

        msg = VariableDef(
            variable_name=name(self._variable),
            initializer_name=name(self._initializer_op),
            snapshot_name=name(self._snapshot),
            trainable=self._trainable,
        )
        if self._initial_value is not None:
            msg.initial_value_name = name(self._initial_value)
        if self._save_slice_info is not None:
            msg.save_slice_info_def.CopyFrom(self._save_slice_info.to_proto(export_scope))
        return msg

    @staticmethod
    def from_proto(variable_def: VariableDef, import_scope: str | None = None) -> Variable:
        """The Variable whose ops ``variable_def`` names in the default graph (TF's
        ``Variable.from_proto``; the graph's collections are left as they are)."""
        if variable_def.is_resource:
            raise ValueError("minitf implements TF1 reference variables only (use_resource=False)")
        g = get_default_graph()

        def element(name):
            return g.as_graph_element(prepend_scope(name, import_scope))

        v = Variable.__new__(Variable)
        v._variable = element(variable_def.variable_name)
        v._initializer_op = element(variable_def.initializer_name)
        v._snapshot = element(variable_def.snapshot_name)
        v._initial_value = (
            element(variable_def.initial_value_name) if variable_def.initial_value_name else None
        )
        v._trainable = variable_def.trainable
        v._caching_device = None
        if variable_def.HasField("save_slice_info_def"):
            info = variable_def.save_slice_info_def
            v._save_slice_info = SaveSliceInfo(
                prepend_scope(info.full_name, import_scope),
                info.full_shape,
                info.var_offset,
                info.var_shape,
            )
        return v

    def _as_graph_element(self):
        return self._variable

    def assign(
        self,
        value: TensorLike,
        use_locking: bool = False,
        name: str | None = None,
        read_value: bool = True,
    ) -> Tensor:
        return state_ops.assign(self._variable, value, use_locking=use_locking, name=name)

    def assign_add(
        self,
        delta: TensorLike,
        use_locking: bool = False,
        name: str | None = None,
        read_value: bool = True,
    ) -> Tensor:
        return state_ops.assign_add(self._variable, delta, use_locking=use_locking, name=name)

    def assign_sub(
        self,
        delta: TensorLike,
        use_locking: bool = False,
        name: str | None = None,
        read_value: bool = True,
    ) -> Tensor:
        return state_ops.assign_sub(self._variable, delta, use_locking=use_locking, name=name)

    def count_up_to(self, limit: int) -> Tensor:
        """``CountUpTo`` on this variable (``state_ops.count_up_to``)."""
        return state_ops.count_up_to(self._variable, limit)

    def eval(self, session: SessionLike = None) -> Any:
        return self._variable.eval(session=session)

    def load(self, value: Any, session: SessionLike = None) -> None:
        """Writes ``value`` into the variable by feeding its initializer's value input."""
        from minitf.framework.graph import get_default_session

        session = session or get_default_session()
        if session is None:
            raise ValueError(
                "Either session argument should be provided or default session "
                "should be established"
            )
        session.run(self._initializer_op, {self._initializer_op.inputs[1]: value})

    def __repr__(self) -> str:
        return "<tf.Variable '%s' shape=%s dtype=%s>" % (self.name, self.shape, self.dtype.name)

    def __bool__(self) -> NoReturn:
        raise TypeError("Using a `tf.Variable` as a Python `bool` is not allowed.")


def _variable_to_tensor(v, dtype=None, name=None, as_ref=False):
    t = v._ref() if as_ref else v.value()
    if dtype is not None and not dtype.is_compatible_with(t.dtype):
        raise ValueError(
            "Incompatible type conversion requested to type '%s' for variable of "
            "type '%s'" % (dtype.name, t.dtype.name)
        )
    return t


register_tensor_conversion_function(Variable, _variable_to_tensor)
math_ops._install_operators(Variable)
Variable.__getitem__ = lambda self, spec: slicing.slice_helper(self, spec)  # the value read
math_ops._install_comparisons(Variable)


def global_variables(scope: str | None = None) -> list[Variable]:
    return get_default_graph().get_collection(GraphKeys.GLOBAL_VARIABLES, scope)


all_variables = global_variables


def trainable_variables(scope: str | None = None) -> list[Variable]:
    return get_default_graph().get_collection(GraphKeys.TRAINABLE_VARIABLES, scope)


def local_variables(scope: str | None = None) -> list[Variable]:
    return get_default_graph().get_collection(GraphKeys.LOCAL_VARIABLES, scope)


def variables_initializer(var_list: Sequence[Variable], name: str | None = "init") -> Operation:
    """One op that runs every variable's initializer (a ``NoOp`` named ``init``)."""
    if var_list:
        return control_flow_ops.group(*[v.initializer for v in var_list], name=name)
    return control_flow_ops.no_op(name=name)


def global_variables_initializer() -> Operation:
    """``tf.global_variables_initializer()``: initialises every global variable."""
    return variables_initializer(global_variables())


def initialize_all_variables() -> Operation:
    """The pre-1.0 name of :func:`global_variables_initializer` (the blog posts use it)."""
    return global_variables_initializer()


def local_variables_initializer() -> Operation:
    return variables_initializer(local_variables(), name="init")


def is_variable_initialized(variable: Variable) -> Tensor:
    return state_ops.is_variable_initialized(variable)


def report_uninitialized_variables(
    var_list: list | None = None, name: str = "report_uninitialized_variables"
) -> Tensor:
    """The names of the variables of ``var_list`` (default: global and local) that hold no
    value yet, a 1-D string tensor computed on the CPU: what a Supervisor or a
    MonitoredSession asks before it calls a model ready ("Managing sessions")."""
    if var_list is None:
        var_list = global_variables() + local_variables()
        if not var_list:
            g = get_default_graph()
            var_list = [op.outputs[0] for op in g.get_operations() if op.type == "VariableV2"]
    with name_scope(name):
        checks = [state_ops.is_variable_initialized(v) for v in var_list]
        with get_default_graph().device("/cpu:0"):
            if not var_list:
                return array_ops.constant([], dtype=dtypes.string)
            missing = array_ops.logical_not(array_ops.stack(checks))
            names = array_ops.constant([v.op.name for v in var_list])
            return array_ops.boolean_mask(names, missing)
