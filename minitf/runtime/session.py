"""``tf.Session``: places a graph on the devices of this process and runs parts of it.

Book sections: "Placing Operations on Devices" (placement happens at the first ``run()`` and
again whenever the graph grew; ``log_device_placement`` prints where every op went, here in the
notebook cell rather than on a terminal) and every example that calls ``sess.run``.
"""

import sys
import threading
import weakref

import numpy as np

from minitf.framework import errors
from minitf.framework import graph as ops_graph
from minitf.framework.graph import Graph, Operation, Tensor
from minitf.ops.op_def import get_op_def
from minitf.runtime import devices as devices_mod
from minitf.runtime import executor, placer, pools
from minitf.runtime.config_proto import ConfigProto, RunOptions

_live_sessions = weakref.WeakSet()


class _DeviceAttributes:
    """What ``sess.list_devices()`` returns per device (TF's ``_DeviceAttributes``)."""

    def __init__(self, name, device_type, memory_limit_bytes, incarnation):
        self.name = name
        self.device_type = device_type
        self.memory_limit_bytes = memory_limit_bytes
        self.incarnation = incarnation

    def __repr__(self):
        return "_DeviceAttributes(%s, %s, %d, %d)" % (self.name, self.device_type,
                                                      self.memory_limit_bytes, self.incarnation)


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
            raise TypeError('Argument `fetch` = %r has invalid type "%s" must be a string or '
                            'Tensor. (%s)' % (fetch, type(fetch).__name__, e)) from None
        except (ValueError, KeyError) as e:
            raise ValueError("Fetch argument %r cannot be interpreted as a Tensor. (%s)"
                             % (fetch, e.args[0] if e.args else e)) from None
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
        if isinstance(fetches, dict):
            subs = [(k, self._map(graph, f)) for k, f in fetches.items()]
            kind = type(fetches)
            return lambda v: kind((k, s(v)) for k, s in subs)
        i = self._element(graph, fetches)
        return lambda v: v[i]

    def build(self, values):
        return self._build(values)


def _fetched(value, device):
    """A value handed back to Python: variables are read, values on a card copied to the host,
    host arrays copied (callers may write to what they get)."""
    on_host = device is None or device.backend != "cuda"
    value = executor.host_value(value, device)
    if on_host and isinstance(value, np.ndarray):
        return value.copy()
    return value


class BaseSession:
    """A session running graphs in this process (TF's ``DirectSession``)."""

    def __new__(cls, target="", *args, **kwargs):
        if isinstance(target, (str, bytes)) and target[:7] in ("grpc://", b"grpc://"):
            from minitf.distributed import grpc_session
            return object.__new__(grpc_session.remote_class(cls))
        return object.__new__(cls)

    def __init__(self, target="", graph=None, config=None):
        if graph is None:
            graph = ops_graph.get_default_graph()
        elif not isinstance(graph, Graph):
            raise TypeError("graph must be a tf.Graph, but got %s" % type(graph))
        if config is None:
            config = ConfigProto()
        elif not isinstance(config, ConfigProto):
            raise TypeError("config must be a tf.ConfigProto, but got %s" % type(config))
        if isinstance(target, bytes):
            target = target.decode()
        if target not in ("", None):
            raise errors.NotFoundError(
                None, None, 'No session factory registered for the given session options: '
                '{target: "%s" config: %s} Registered factories are {DIRECT_SESSION, GRPC_SESSION}.'
                % (target, str(config).strip().replace("\n", " ")))
        self._graph = graph
        self._config = config
        self._target = target or ""
        self._closed = False
        self._reset = False
        self._devices = devices_mod.local_devices(config)
        # bad gpu_options fail here, before any run
        devices_mod.memory_policies(self._devices, config.gpu_options)
        self._has_gpu_support = bool(devices_mod.machine_gpus())
        self._placement = None
        self._placed_version = -1
        self._stateful = {}
        self._kernels = {}
        self._plans = {}
        self._mappers = {}
        self._lock = threading.Lock()
        self._default_contexts = []
        self._pool_sets, self._owned_pools = pools.session_pools(config)
        if config.log_device_placement:
            self._log(devices_mod.creation_lines(self._devices, config.gpu_options) +
                      devices_mod.device_mapping_lines(self._devices))
        _live_sessions.add(self)

    # -- properties ----------------------------------------------------------------------------
    graph = property(lambda self: self._graph)
    sess_str = property(lambda self: self._target)

    @property
    def graph_def(self):
        return self._graph.as_graph_def()

    def list_devices(self):
        """The devices of this session: ``_DeviceAttributes`` with name, type and memory."""
        self._check_open()
        return [_DeviceAttributes(d.name, d.device_type, d.memory_limit, i + 1)
                for i, d in enumerate(self._devices)]

    # -- lifetime ------------------------------------------------------------------------------
    def close(self):
        """Frees the session's devices (and the variables they hold)."""
        self._closed = True
        self._kernels.clear()
        self._plans.clear()
        for p in self._owned_pools:
            p.close()
        self._owned_pools = []

    def _check_open(self):
        if self._reset:
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
        """Closes every session of ``target`` and clears its resource containers.

        For the in-process target ``""``: each live local session is closed (using it again
        raises ``CancelledError``) and the listed containers (default: each device's default
        container) are cleared on its devices.
        """
        if isinstance(target, (str, bytes)) and target[:7] in ("grpc://", b"grpc://"):
            from minitf.distributed import grpc_session
            return grpc_session.reset(target, containers, config)
        if target not in ("", None):
            raise errors.NotFoundError(None, None, "No session factory registered for the given "
                                       'session options: {target: "%s"} Registered factories '
                                       "are {DIRECT_SESSION, GRPC_SESSION}." % target)
        for sess in list(_live_sessions):
            for d in sess._devices:
                for c in (containers if containers is not None else [d.job]):
                    d.resource_manager.cleanup(c)
            sess.close()
            sess._reset = True

    # -- running -------------------------------------------------------------------------------
    def _log(self, lines):
        sys.stdout.write("\n".join(lines) + "\n")

    def _ensure_placed(self):
        g = self._graph
        if self._placed_version == g.version:
            return self._placement
        with self._lock:
            if self._placed_version == g.version:
                return self._placement
            version = g.version
            ops = list(g._ops)
            # "TensorFlow grabs all the RAM of all visible GPUs the first time you run a graph"
            devices_mod.ensure_gpu_memory(self._devices, self._config.gpu_options)
            placement = placer.place(ops, self._devices, self._config.allow_soft_placement,
                                     preassigned=self._stateful,
                                     has_cuda=self._has_gpu_support)
            for op in ops:
                if get_op_def(op.type).is_stateful:
                    self._stateful.setdefault(op.name, placement.device_of[op].name)
            if self._config.log_device_placement:
                self._log(placement.log_lines)
            self._plans.clear()
            self._placement = placement
            self._placed_version = version
            return placement

    def _feeds(self, feed_dict):
        tensors, values = [], []
        for key, value in feed_dict.items():
            try:
                t = self._graph.as_graph_element(key, allow_tensor=True, allow_operation=False)
            except (TypeError, ValueError, KeyError) as e:
                raise TypeError("Cannot interpret feed_dict key as Tensor: %s"
                                % (e.args[0] if e.args else e)) from None
            if isinstance(value, (Tensor, Operation)) or hasattr(value, "_as_graph_element"):
                raise TypeError("The value of a feed cannot be a tf.Tensor object. Acceptable "
                                "feed values include Python scalars, strings, lists, numpy "
                                "ndarrays, or TensorHandles.")
            dtype = t.dtype.base_dtype
            np_dtype = object if dtype.name == "string" else dtype.as_numpy_dtype
            arr = np.asarray(value, dtype=np_dtype)
            if not t.shape.is_compatible_with(arr.shape):
                raise ValueError("Cannot feed value of shape %r for Tensor %s, which has shape %s"
                                 % (arr.shape, t.name, _shape_tuple(t.shape)))
            tensors.append(t)
            values.append(arr)
        return tensors, values

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
            raise RuntimeError("The Session graph is empty.  Add operations to the graph before "
                               "calling run().")
        feed_tensors, feed_values = self._feeds(feed_dict) if feed_dict else ((), ())
        return mapper, feed_tensors, feed_values

    def _prepare(self, fetches, feed_dict):
        """Resolves fetches and feeds, places the graph if needed, and returns
        ``(mapper, execution plan, fed values)`` for one run (the simulator uses it too)."""
        mapper, feed_tensors, feed_values = self._resolve(fetches, feed_dict)
        placement = self._ensure_placed()
        key = (mapper.key, tuple(feed_tensors))
        eplan = self._plans.get(key)
        if eplan is None:
            eplan = self._plans[key] = executor.build(
                placement.ops, placement, self._devices[0].name, mapper.tensors,
                mapper.targets, feed_tensors, _KernelCache(self._kernels, placement))
        return mapper, eplan, feed_values

    def run(self, fetches, feed_dict=None, options=None, run_metadata=None):
        """Runs what ``fetches`` need and returns their values in the same structure.

        ``fetches``: a Tensor, an Operation (its value is None), a Variable, a name, or any
        nesting of lists, tuples, namedtuples and dicts of those.
        """
        mapper, eplan, feed_values = self._prepare(fetches, feed_dict)
        options = options if options is not None else _NO_OPTIONS
        index = options.inter_op_thread_pool
        if not 0 <= index < len(self._pool_sets):
            raise errors.InvalidArgumentError(None, None, "Invalid inter_op_thread_pool: %d"
                                              % index)
        trace = options.trace_level > 0 and run_metadata is not None
        tracer = executor.Tracer(eplan) if trace else None
        timeout = options.timeout_in_ms or self._config.operation_timeout_in_ms
        vals = executor.run_step(eplan, feed_values, self._pool_sets[index], tracer, timeout)
        if trace:
            stats = tracer.step_stats([d.name for d in self._devices])
            run_metadata.step_stats.dev_stats[:] = stats.dev_stats
            run_metadata.step_stats.transfers[:] = stats.transfers
        out = []
        slots = eplan.fetch_slots
        ti = 0
        for el in mapper.elements:
            if isinstance(el, Operation):
                out.append(None)
                continue
            s, k = slots[ti]
            ti += 1
            try:
                out.append(_fetched(vals[s][k], eplan.device_of_node(s)))
            except errors.OpError as e:
                name = "_retval_%s_%d_%d" % (el.op.name, el.value_index, ti - 1)
                raise type(e)(None, el.op, placer.attach_node(e.message, name)) from None
        return mapper.build(out)


_NO_OPTIONS = RunOptions()


class _KernelCache:
    """Kernels of a session keyed by (op, device): made once, reused by every plan."""

    def __init__(self, store, placement):
        self._store = store
        self._placement = placement

    def get(self, op):
        return self._store.get((op, self._placement.device_of[op].name))

    def __setitem__(self, op, kernel):
        self._store[(op, self._placement.device_of[op].name)] = kernel


def _shape_tuple(shape):
    if shape.ndims is None:
        return "<unknown>"
    return repr(tuple(shape.as_list()))


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
