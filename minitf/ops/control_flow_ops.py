"""``no_op`` and ``group``: ops that do nothing but wait for their control inputs.

Book section: "Control Dependencies" (a ``NoOp`` with control inputs is how several ops are
run as one target, e.g. ``global_variables_initializer``).
"""

from __future__ import annotations

from typing import Any

from minitf.framework.graph import (
    Operation,
    _to_operation,
    get_default_graph,
    name_scope,
)
from minitf.ops.op_def import apply_op, register_op

register_op("NoOp")


def no_op(name: str | None = None) -> Operation:
    """A ``NoOp``: runs nothing; useful only through its control inputs."""
    return apply_op("NoOp", [], [], name or "NoOp")


def group(*inputs: Any, **kwargs: Any) -> Operation:
    """A ``NoOp`` named ``group_deps`` that runs after every op in ``inputs``.

    As in TF, when the inputs sit on several devices one ``NoOp`` per device is made first, so
    the final ``NoOp`` waits for one control edge per device.
    """
    name = kwargs.pop("name", None)
    if kwargs:
        raise TypeError("Unknown keyword arguments: " + ", ".join(sorted(kwargs)))
    by_device: dict[str, list[Operation]] = {}
    for x in inputs:
        for item in x if isinstance(x, (list, tuple)) else [x]:
            if item is not None:
                op = _to_operation(None, item)
                by_device.setdefault(op.device, []).append(op)
    g = next(iter(by_device.values()))[0].graph if by_device else get_default_graph()
    with g.as_default(), name_scope(name, "group_deps", []) as scope:
        if len(by_device) <= 1:
            dev, deps = next(iter(by_device.items())) if by_device else ("", [])
            return _noop_after(g, dev, deps, scope)
        per_device = [_noop_after(g, dev, by_device[dev], None) for dev in sorted(by_device)]
        with g.control_dependencies(per_device):
            return no_op(name=scope)


def _noop_after(g, device, deps, name):
    with g.control_dependencies(deps):
        if not device:
            return no_op(name=name)
        with g.device(device):
            return no_op(name=name)


def with_dependencies(dependencies: Any, output_tensor: Any, name: str | None = None) -> Any:
    """``output_tensor`` passed through an ``Identity`` (named ``control_dependency``) that runs
    only after ``dependencies``, on ``output_tensor``'s device."""
    from minitf.ops.array_ops import identity

    g = output_tensor.graph
    with g.as_default(), name_scope(name, "control_dependency", [output_tensor]) as scope:
        with g.colocate_with(output_tensor.op), g.control_dependencies(dependencies):
            return identity(output_tensor, name=scope)


def tuple_(tensors: Any, name: str | None = None, control_inputs: Any = None) -> list:
    """``tf.tuple`` (the ``_`` keeps Python's ``tuple`` usable in this module): the tensors,
    each passed on only once all of them are computed (a ``group_deps`` NoOp that waits for
    them all, then one ``control_dependency`` Identity per tensor; None stays None).  How
    ``gate_gradients`` keeps an op's input gradients together."""
    present = [t for t in tensors if t is not None]
    if not present:
        raise ValueError("Must have at least one Tensor: %s" % (tensors,))
    with name_scope(name, "tuple", present):
        gating_ops = [t.op for t in present] + list(control_inputs or ())
        gate = group(*gating_ops)
        return [None if t is None else with_dependencies([gate], t) for t in tensors]
