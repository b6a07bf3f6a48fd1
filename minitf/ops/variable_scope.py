"""``tf.variable_scope`` and ``tf.get_variable``: variables created (or reused) by name.

Book section: "Pinning Operations Across Tasks" and the blog's examples, which create
parameters with ``tf.get_variable("w", (2, 2), initializer=tf.constant_initializer(2))``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from minitf.framework import dtypes, tensor_shape
from minitf.framework.device_spec import DeviceSpec
from minitf.framework.graph import DTypeLike, GraphKeys, ShapeLike, get_default_graph
from minitf.ops import init_ops, partitioned_variables
from minitf.ops.partitioned_variables import PartitionedVariable
from minitf.ops.variables import Variable

AUTO_REUSE = "AUTO_REUSE"


class VariableScope:
    """A named scope for ``get_variable``: its name, reuse flag and default initializer."""

    def __init__(
        self, reuse: bool | str, name: str = "", initializer: Any = None, partitioner: Any = None
    ) -> None:
        self.name = name
        self.reuse = reuse
        self.initializer = initializer
        self.partitioner = partitioner
        self.original_name_scope = name + "/" if name else ""

    def reuse_variables(self) -> None:
        self.reuse = True


class _Store:
    def __init__(self):
        self.vars = {}
        self.scope = VariableScope(False)
        self.scope_counts = {}


def _store():
    g = get_default_graph()
    if g._variable_store is None:
        g._variable_store = _Store()
    return g._variable_store


def get_variable_scope() -> VariableScope:
    return _store().scope


@contextlib.contextmanager
def variable_scope(
    name_or_scope: str | VariableScope | None,
    default_name: str | None = None,
    values: Iterable[Any] | None = None,
    initializer: Any = None,
    reuse: bool | str | None = None,
    partitioner: Any = None,
) -> Iterator[VariableScope]:
    """Opens a variable scope (and a name scope of the same name); its ``initializer`` and
    ``partitioner`` are the defaults of the ``get_variable`` calls inside."""
    store = _store()
    g = get_default_graph()
    outer = store.scope
    if isinstance(name_or_scope, VariableScope):
        full = name_or_scope.name
    else:
        base = name_or_scope
        if base is None:
            if default_name is None:
                raise TypeError("If default_name is None then name_or_scope is required")
            prefix = outer.name + "/" if outer.name else ""
            n = store.scope_counts.get(prefix + default_name, 0)
            store.scope_counts[prefix + default_name] = n + 1
            base = default_name if n == 0 else "%s_%d" % (default_name, n)
        full = (outer.name + "/" + base) if outer.name else base
    new_reuse = (
        True
        if (reuse is True or outer.reuse is True)
        else (AUTO_REUSE if reuse == AUTO_REUSE or outer.reuse == AUTO_REUSE else False)
    )
    inherited = name_or_scope if isinstance(name_or_scope, VariableScope) else outer
    scope = VariableScope(
        new_reuse,
        full,
        initializer or inherited.initializer,
        partitioner if partitioner is not None else inherited.partitioner,
    )
    store.scope = scope
    try:
        name = (
            full.rsplit("/", 1)[-1] if not isinstance(name_or_scope, VariableScope) else full + "/"
        )
        with g.name_scope(name):
            yield scope
    finally:
        store.scope = outer


def get_variable(
    name: str,
    shape: ShapeLike = None,
    dtype: DTypeLike = None,
    initializer: Any = None,
    regularizer: Callable[[Any], Any] | None = None,
    trainable: bool = True,
    collections: Iterable[str] | None = None,
    caching_device: str | DeviceSpec | Callable | None = None,
    partitioner: Any = None,
    validate_shape: bool = True,
    use_resource: bool | None = None,
    custom_getter: Any = None,
    constraint: Any = None,
    synchronization: Any = None,
    aggregation: Any = None,
) -> Variable | PartitionedVariable:
    """Returns the variable ``<scope>/<name>``, creating it unless the scope reuses variables.
    With a ``partitioner`` (or the scope's), a :class:`PartitionedVariable` of shards
    ``<name>/part_<i>``.  A ``regularizer`` (``weights -> loss``) makes the new variable's
    loss in ``<name>/Regularizer/`` and adds it to ``REGULARIZATION_LOSSES``."""
    refuse_unsupported("tf.get_variable", custom_getter=custom_getter, constraint=constraint)
    del use_resource, synchronization, aggregation  # minitf's variables are TF 1's (ref) ones
    store = _store()
    scope = store.scope
    full = (scope.name + "/" + name) if scope.name else name
    if full in store.vars:
        return _reused_variable(store, scope, full, shape)
    _check_may_create(scope, full)
    dtype = dtypes.as_dtype(dtype) if dtype is not None else dtypes.float32
    initializer = initializer if initializer is not None else scope.initializer
    partitioner = partitioner if partitioner is not None else scope.partitioner
    options = dict(
        trainable=trainable,
        collections=collections,
        caching_device=caching_device,
        dtype=dtype,
        validate_shape=validate_shape,
    )

    def make(var_name, var_shape, partition_info=None):
        init_value = _initial_value(full, var_shape, dtype, initializer, partition_info)
        return _new_variable(scope, var_name, init_value, regularizer, options)

    if partitioner is None:
        var = make(name, shape)
    else:
        var = partitioned_variables.make_partitioned(
            full,
            shape,
            dtype,
            partitioner,
            lambda part, part_shape, info: make(name + "/" + part, part_shape, info),
        )
    store.vars[full] = var
    return var


def _new_variable(scope, var_name, init_value, regularizer, options):
    """A variable named by the variable scope (not the name scope), regularized if asked."""
    g = get_default_graph()
    with g.name_scope(None), g.name_scope(scope.name + "/" if scope.name else None):
        var = Variable(init_value, name=var_name, **options)
    if regularizer is not None:
        _regularize(var, regularizer)
    return var


def refuse_unsupported(api: str, **args: Any) -> None:
    """TF arguments minitf does not model (``tf.get_variable``'s, the layers'): a ValueError
    naming the first one given (not None)."""
    for what, arg in args.items():
        if arg is not None:
            raise ValueError("minitf: %s does not support %s" % (api, what))


def _check_may_create(scope, full):
    if scope.reuse is True:
        raise ValueError(
            "Variable %s does not exist, or was not created with "
            "tf.get_variable(). Did you mean to set reuse=tf.AUTO_REUSE in "
            "VarScope?" % full
        )


def _reused_variable(store, scope, full, shape):
    """The existing variable ``full``, if ``scope`` reuses variables and ``shape`` fits."""
    if scope.reuse is False:
        raise ValueError(
            "Variable %s already exists, disallowed. Did you mean to set "
            "reuse=True or reuse=tf.AUTO_REUSE in VarScope?" % full
        )
    var = store.vars[full]
    if shape is not None and not tensor_shape.as_shape(shape).is_compatible_with(var.shape):
        raise ValueError(
            "Trying to share variable %s, but specified shape %s and found "
            "shape %s." % (full, tensor_shape.as_shape(shape), var.shape)
        )
    return var


def _initial_value(full, shape, dtype, initializer, partition_info=None):
    """The initial value of the new variable ``full``: ``initializer`` (None: Glorot uniform
    for floats, zeros for integers and bools; an initializer class: one of ``dtype``) as a
    function of no arguments, or the value given."""
    if initializer is None:
        if dtype.is_floating:
            initializer = init_ops.glorot_uniform_initializer()
        elif dtype.is_integer or dtype.is_bool:
            initializer = init_ops.zeros_initializer()
        else:
            raise ValueError(
                "An initializer for variable %s of %s is required" % (full, dtype.base_dtype)
            )
    if isinstance(initializer, type):
        initializer = initializer(dtype=dtype)
    if not callable(initializer):
        return initializer
    if shape is None:
        raise ValueError(
            "Shape of a new variable (%s) must be fully defined, but instead "
            "was %s." % (full, tensor_shape.unknown_shape())
        )
    shape = tensor_shape.as_shape(shape)
    if not shape.is_fully_defined():
        raise ValueError(
            "Shape of a new variable (%s) must be fully defined, but instead "
            "was %s." % (full, shape)
        )
    dims = shape.as_list()
    if partition_info is None:
        return lambda: initializer(dims, dtype=dtype)
    return lambda: initializer(dims, dtype=dtype, partition_info=partition_info)


def _regularize(var, regularizer):
    """TF's: the regularizer's loss of a new variable, next to it, in ``<var>/Regularizer/``
    (outside any control-dependency block), added to ``REGULARIZATION_LOSSES`` (a regularizer
    may return None: no loss)."""
    g = var.graph
    with g.colocate_with(var.op), g.name_scope(var.op.name + "/Regularizer/"):
        with g.control_dependencies(None):
            loss = regularizer(var)
    if loss is not None:
        g.add_to_collection(GraphKeys.REGULARIZATION_LOSSES, loss)
