"""``tf.Session``: the client's side of running a graph, whatever runs it.

Book sections: "Placing Operations on Devices" (placement happens at the first ``run()``) and
"Opening a Session" (a target names who runs the graph: ``""`` this process, ``"grpc://..."`` the
master of a cluster task).  As in TF, the client class checks and converts what ``run`` is
given (fetch structures, feed values) and hands the flat request to a session implementation
chosen by the target from a small factory registry (TF's ``SessionFactory``): ``DIRECT_SESSION``
(``direct_session.py``, registered here) and ``GRPC_SESSION`` (registered by
``minitf.distributed`` when it is imported; the runtime never imports the distributed layer).

An implementation offers ``run(fetch_tensors, target_ops, feed_tensors, feed_values, options,
run_metadata) -> [value per fetched tensor]``, ``list_devices()``, ``close()`` and, where it
places graphs in this process, ``placement`` and ``plan(...)`` (what the simulator and the
graph view read).
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np

from minitf.framework import errors
from minitf.framework import graph as ops_graph
from minitf.framework.graph import Graph, Operation, Tensor
from minitf.framework.sparse_tensor import SparseTensor, SparseTensorValue
from minitf.runtime.config_proto import ConfigProto

_live_sessions: weakref.WeakSet = weakref.WeakSet()


# -- the factory registry (TF's SessionFactory) -------------------------------------------------


class SessionFactory:
    """``accepts(target)``; ``new_session(target, graph, config)`` makes the implementation;
    ``reset(target, containers, config)`` is ``tf.Session.reset`` for its targets."""

    def __init__(
        self, name: str, accepts: Callable[[str], bool], new_session: Callable, reset: Callable
    ):
        self.name = name
        self.accepts = accepts
        self.new_session = new_session
        self.reset = reset


_factories: dict[str, SessionFactory] = {}
_factories_lock = threading.Lock()


def register_session_factory(factory: SessionFactory) -> None:
    """Adds ``factory`` (TF registers its factories when their library loads)."""
    with _factories_lock:
        _factories[factory.name] = factory


def _factory_for(target: str, config: ConfigProto | None) -> SessionFactory:
    with _factories_lock:
        found = [f for f in _factories.values() if f.accepts(target)]
        names = ", ".join(sorted(_factories))
    if not found:
        options = 'target: "%s"' % target
        if config is not None:
            options += " config: %s" % str(config).strip().replace("\n", " ")
        raise errors.NotFoundError(
            None,
            None,
            "No session factory registered for the given session options: {%s} "
            "Registered factories are {%s}." % (options, names),
        )
    return found[0]


def _as_target(target: Any) -> str:
    if target is None:
        return ""
    if isinstance(target, bytes):
        return target.decode()
    if not isinstance(target, str):
        raise TypeError("target must be a string, but got %s" % type(target).__name__)
    return target


# -- fetches ------------------------------------------------------------------------------------


class _FetchMapper:
    """Flattens a fetch structure to unique graph elements and rebuilds it from their values."""

    def __init__(self, graph, fetches):
        self.elements = []
        self._index = {}
        self._build = self._map(graph, fetches)
        self.tensors = [e for e in self.elements if isinstance(e, Tensor)]
        self.targets = [e for e in self.elements if isinstance(e, Operation)]
        self.key = tuple(self.elements)

    def _element(self, graph, fetch):
        try:
            el = graph.as_graph_element(fetch, allow_tensor=True, allow_operation=True)
        except TypeError as e:
            raise TypeError(
                'Argument `fetch` = %r has invalid type "%s" must be a string or '
                "Tensor. (%s)" % (fetch, type(fetch).__name__, e)
            ) from None
        except (ValueError, KeyError) as e:
            raise ValueError(
                "Fetch argument %r cannot be interpreted as a Tensor. (%s)"
                % (fetch, e.args[0] if e.args else e)
            ) from None
        op = el if isinstance(el, Operation) else getattr(el, "op", None)
        if op is not None and not graph.is_fetchable(op):
            raise ValueError("Operation %r has been marked as not fetchable." % op.name)
        if el not in self._index:
            self._index[el] = len(self.elements)
            self.elements.append(el)
        return self._index[el]

    def _map(self, graph, fetches):
        if fetches is None:
            raise TypeError("Fetch argument None has invalid type <class 'NoneType'>")
        if isinstance(fetches, (list, tuple)):
            subs = [self._map(graph, f) for f in fetches]
            if isinstance(fetches, tuple) and hasattr(fetches, "_fields"):
                return lambda v: type(fetches)(*[s(v) for s in subs])
            kind = type(fetches) if isinstance(fetches, tuple) else list
            return lambda v: kind(s(v) for s in subs)
        if isinstance(fetches, SparseTensor):  # fetched as its three tensors
            subs = [
                self._map(graph, t) for t in (fetches.indices, fetches.values, fetches.dense_shape)
            ]
            return lambda v: SparseTensorValue(*[s(v) for s in subs])
        if isinstance(fetches, dict):
            subs = [(k, self._map(graph, f)) for k, f in fetches.items()]
            kind = type(fetches)
            return lambda v: kind((k, s(v)) for k, s in subs)
        i = self._element(graph, fetches)
        return lambda v: v[i]

    def build(self, tensor_values):
        """The fetch structure, from one value per fetched tensor (in ``self.tensors`` order)."""
        values = iter(tensor_values)
        flat = [None if isinstance(el, Operation) else next(values) for el in self.elements]
        return self._build(flat)


def _shape_tuple(shape):
    if shape.ndims is None:
        return "<unknown>"
    return repr(tuple(shape.as_list()))


def convert_feeds(graph: Graph, feed_dict: dict) -> tuple[list[Tensor], list[np.ndarray]]:
    """The fed tensors of ``feed_dict`` and their values as numpy arrays of the tensors' dtypes
    (TF's checks: keys must name tensors, values must not be tensors, shapes must fit)."""
    tensors, values = [], []
    for key, value in feed_dict.items():
        if type(key) is Tensor and key.graph is graph:
            t = key
        else:
            try:
                t = graph.as_graph_element(key, allow_tensor=True, allow_operation=False)
            except (TypeError, ValueError, KeyError) as e:
                raise TypeError(
                    "Cannot interpret feed_dict key as Tensor: %s" % (e.args[0] if e.args else e)
                ) from None
        if isinstance(value, (Tensor, Operation)) or hasattr(value, "_as_graph_element"):
            raise TypeError(
                "The value of a feed cannot be a tf.Tensor object. Acceptable "
                "feed values include Python scalars, strings, lists, numpy "
                "ndarrays, or TensorHandles."
            )
        dtype = t.dtype.base_dtype
        np_dtype = object if dtype.name == "string" else dtype.as_numpy_dtype
        arr = np.asarray(value, dtype=np_dtype)
        if not t.shape.accepts(arr.shape):
            raise ValueError(
                "Cannot feed value of shape %r for Tensor %s, which has shape %s"
                % (arr.shape, t.name, _shape_tuple(t.shape))
            )
        tensors.append(t)
        values.append(arr)
    return tensors, values


# -- the client class ---------------------------------------------------------------------------


class BaseSession:
    """What ``tf.Session`` and ``tf.InteractiveSession`` share (TF's Python ``BaseSession``)."""

    def __init__(
        self,
        target: str | bytes = "",
        graph: Graph | None = None,
        config: ConfigProto | None = None,
    ):
        if graph is None:
            graph = ops_graph.get_default_graph()
        elif not isinstance(graph, Graph):
            raise TypeError("graph must be a tf.Graph, but got %s" % type(graph))
        if config is None:
            config = ConfigProto()
        elif not isinstance(config, ConfigProto):
            raise TypeError("config must be a tf.ConfigProto, but got %s" % type(config))
        target = _as_target(target)
        self._graph = graph
        self._config = config
        self._target = target
        self._closed = False
        self._default_contexts = []
        self._mappers = {}
        self._impl = _factory_for(target, config).new_session(target, graph, config)
        _live_sessions.add(self)

    # -- properties ----------------------------------------------------------------------------
    graph = property(lambda self: self._graph)
    sess_str = property(lambda self: self._target)

    @property
    def graph_def(self):
        return self._graph.as_graph_def()

    @property
    def placement(self):
        """minitf: the placement of this session's last run (None before the first run, and
        for a remote session, whose master places the graph)."""
        return getattr(self._impl, "placement", None)

    def plan(self, fetches, feed_dict=None):
        """minitf: the step :meth:`run` would execute for these fetches and feeds, without
        running it (``minitf.runtime.simulate`` replays it on a virtual clock).  Places the
        graph first if it grew."""
        mapper, feed_tensors, _ = self._resolve(fetches, feed_dict)
        if not hasattr(self._impl, "plan"):
            raise errors.UnimplementedError(
                None,
                None,
                "A %s session runs its steps elsewhere: "
                "it has no local plan." % type(self._impl).__name__,
            )
        return self._impl.plan(mapper.tensors, mapper.targets, feed_tensors)

    def list_devices(self):
        """The devices of this session: ``_DeviceAttributes`` with name, type and memory."""
        self._check_open()
        return self._impl.list_devices()

    # -- lifetime ------------------------------------------------------------------------------
    def close(self):
        """Ends the session: its implementation frees what it holds."""
        if not self._closed:
            self._closed = True
            self._impl.close()

    def _check_open(self):
        if getattr(self._impl, "was_reset", False):
            raise errors.CancelledError(None, None, "Session has been closed.")
        if self._closed:
            raise RuntimeError("Attempted to use a closed Session.")

    def as_default(self):
        """``with sess.as_default():`` makes ``t.eval()`` and ``op.run()`` use this session."""
        return ops_graph.default_session(self)

    def __enter__(self):
        g = self._graph.as_default()
        s = self.as_default()
        g.__enter__()
        s.__enter__()
        self._default_contexts.append((g, s))
        return self

    def __exit__(self, exc_type, exc, tb):
        g, s = self._default_contexts.pop()
        s.__exit__(exc_type, exc, tb)
        g.__exit__(exc_type, exc, tb)
        self.close()
        return False

    @staticmethod
    def reset(target, containers=None, config=None):
        """Closes every session of ``target`` and clears its resource containers (default:
        each device's default container), as the target's session factory does it."""
        target = _as_target(target)
        return _factory_for(target, config).reset(target, containers, config)

    # -- running -------------------------------------------------------------------------------
    def _resolve(self, fetches, feed_dict):
        """``(mapper, fed tensors, fed values)`` of one run: the checks and conversions every
        session does before running anything, local or remote."""
        self._check_open()
        hashable = isinstance(fetches, (Tensor, Operation, str))
        mapper = self._mappers.get(fetches) if hashable else None
        if mapper is None:
            mapper = _FetchMapper(self._graph, fetches)
            if hashable:
                self._mappers[fetches] = mapper
        if not self._graph._ops:
            raise RuntimeError(
                "The Session graph is empty.  Add operations to the graph before calling run()."
            )
        feed_tensors, feed_values = convert_feeds(self._graph, feed_dict) if feed_dict else ((), ())
        return mapper, feed_tensors, feed_values

    def run(self, fetches, feed_dict=None, options=None, run_metadata=None):
        """Runs what ``fetches`` need and returns their values in the same structure.

        ``fetches``: a Tensor, an Operation (its value is None), a Variable, a name, or any
        nesting of lists, tuples, namedtuples and dicts of those.
        """
        mapper, feed_tensors, feed_values = self._resolve(fetches, feed_dict)
        values = self._impl.run(
            mapper.tensors, mapper.targets, feed_tensors, feed_values, options, run_metadata
        )
        return mapper.build(values)


class Session(BaseSession):
    """``tf.Session(target="", graph=None, config=None)``."""


class InteractiveSession(BaseSession):
    """A session that makes itself the default session when created (for notebooks)."""

    def __init__(self, target="", graph=None, config=None):
        super().__init__(target, graph, config)
        self._graph_ctx = self._graph.as_default()
        self._sess_ctx = self.as_default()
        self._graph_ctx.__enter__()
        self._sess_ctx.__enter__()

    def close(self):
        if not self._closed and self._sess_ctx is not None:
            self._sess_ctx.__exit__(None, None, None)
            self._graph_ctx.__exit__(None, None, None)
            self._sess_ctx = None
        super().close()


def live_sessions() -> list[BaseSession]:
    """The client sessions of this process not yet garbage-collected (``Session.reset``)."""
    return list(_live_sessions)
