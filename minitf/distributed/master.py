"""The master service of a task: sessions, cluster-wide placement, partitions, steps.

A session's graph is placed over every device of the cluster (TF 1.15's placer rules), then
split per task for each (fetches, targets, feeds) signature: a tensor crossing tasks becomes a
``_Send`` on the producer's device and a ``_Recv`` on the consumer's (control edges too, with an
empty tensor).  Each step runs every involved partition concurrently: on an open RunGraphs
call to the task (streams.py) when its sends fit in one message, else on a RunGraph call.
"""

import os
import concurrent.futures
import itertools
import math
import queue
import random
import sys
import threading

os.environ.setdefault("GRPC_VERBOSITY", "ERROR")  # no INFO lines (GOAWAY ...) in notebooks
import grpc  # noqa: E402

from minitf.distributed import protocol_pb2 as pb
from minitf.distributed import rendezvous as rdv
from minitf.distributed import streams
from minitf.distributed import wire
from minitf.distributed.worker import (CONTROL_RPC_SECONDS, DEFAULT_STEP_SECONDS,
                                       STEP_SLACK_SECONDS, STREAM_CHUNK_BYTES,
                                       partition_answer, rpc_error)
from minitf.framework import dtypes, errors
from minitf.framework.graph import Graph
from minitf.runtime import device_name_utils as dnu
from minitf.runtime import executor, placer


class RemoteDevice:
    """What the placer needs of a device of some task of the cluster."""

    def __init__(self, attrs):
        self.name = attrs.name
        self.device_type = attrs.device_type
        self.memory_limit = attrs.memory_limit
        self.incarnation = attrs.incarnation
        self.parsed = dnu.parse_full_name(attrs.name)
        self.task = "/job:%s/replica:0/task:%d" % (self.parsed.job, self.parsed.task)
        self.job, self.task_index = self.parsed.job, self.parsed.task


def _task_of(device_name):
    p = dnu.parse_full_name(device_name)
    return "/job:%s/replica:0/task:%d" % (p.job, p.task)


class _Signature:
    """The partitions of one (fetches, targets, feeds) signature, registered on the workers."""

    def __init__(self, handles, fetch_at, feed_at, tasks):
        self.handles = handles      # task -> graph handle
        self.fetch_at = fetch_at    # task -> [tensor names fetched from that partition]
        self.feed_at = feed_at      # task -> [(feed tensor name, placeholder tensor name)]
        self.tasks = tasks


class MasterSession:
    def __init__(self, master, handle, config):
        self.master = master
        self.handle = handle
        self.config = config
        self.graph = Graph()
        self.lock = threading.Lock()
        self.devices = None
        self.placer = None
        self.placement = None
        self.placed_version = -1
        self.version = 0
        self.signatures = {}
        self.tasks = set()      # the tasks its partitions were ever registered on

    def extend(self, gdef):
        with self.lock:
            wire.import_graph_def(gdef, self.graph)
            self.version = len(self.graph.get_operations())

    def ensure_placed(self):
        if self.devices is None:
            self.devices = self.master.cluster_devices(self.config)
        if self.placer is None:
            self.placer = placer.GraphPlacer(
                self.devices, self.config.allow_soft_placement,
                has_cuda=any(d.device_type == "GPU" for d in self.devices))
        if self.placed_version == self.version:
            return self.placement
        placement = self.placer.place(self.graph.get_operations())
        if self.config.log_device_placement:
            sys.stdout.write("\n".join(placement.log_lines) + "\n")
            sys.stdout.flush()
        self.deregister_all()
        self.placement = placement
        self.placed_version = self.version
        return placement

    def deregister_all(self):
        for sig in self.signatures.values():
            for task, h in sig.handles.items():
                try:
                    self.master.worker_stub(task).DeregisterGraph(
                        pb.DeregisterGraphRequest(session_handle=self.handle, graph_handle=h),
                        timeout=CONTROL_RPC_SECONDS, metadata=self.master.channels.metadata)
                except grpc.RpcError:
                    pass
        self.signatures.clear()

    def close(self):
        """The session ended: every task it used drops its partitions and, for a session with
        isolated state, its variables."""
        self.signatures.clear()
        for task in self.tasks:
            try:
                self.master.worker_stub(task).DeregisterGraph(
                    pb.DeregisterGraphRequest(session_handle=self.handle),
                    timeout=CONTROL_RPC_SECONDS, metadata=self.master.channels.metadata)
            except grpc.RpcError:
                pass

    # -- partitioning ------------------------------------------------------------------------
    def signature(self, fetches, targets, feeds):
        key = (tuple(fetches), tuple(targets), tuple(feeds))
        sig = self.signatures.get(key)
        if sig is None:
            sig = self.signatures[key] = self._partition(fetches, targets, feeds)
        return sig

    def _partition(self, fetch_names, target_names, feed_names):
        g = self.graph
        dev = self.placement.device_of
        try:
            fetch_t = [g.get_tensor_by_name(n) for n in fetch_names]
            target_ops = [g.get_operation_by_name(n) for n in target_names]
            feed_t = [g.get_tensor_by_name(n) for n in feed_names]
        except (KeyError, ValueError, TypeError) as e:
            raise errors.InvalidArgumentError(None, None, "Unknown fetch, target or feed: %s"
                                              % str(e)[:300]) from None
        feed_set = set(feed_t)
        fetch_ops = [t.op for t in fetch_t if t not in feed_set] + target_ops
        needed = executor.prune(fetch_ops, feed_set)
        ops = [op for op in g.get_operations() if op in needed]
        nodes = {}          # task -> [NodeDef]
        names_used = set(op.name for op in g.get_operations())
        counter = itertools.count()
        recvs = {}          # (tensor or ('^', op), dst task) -> recv node name
        feed_nodes = {}     # (tensor, task) -> placeholder name
        feed_at = {}
        fetch_at = {}

        def task_of(op):
            return dev[op].task

        def fresh(base):
            while True:
                name = "%s_S%d" % (base, next(counter))
                if name not in names_used:
                    names_used.add(name)
                    return name

        def add(task, msg):
            nodes.setdefault(task, []).append(msg)

        def attr(msg, key, value):
            msg.attr[key].CopyFrom(wire.attr_to_proto(value, key))

        def feed_input(t, task, device):
            k = (t, task)
            name = feed_nodes.get(k)
            if name is None:
                name = feed_nodes[k] = fresh(t.op.name + "/_feed")
                m = pb.NodeDef(name=name, op="Placeholder", device=device)
                attr(m, "dtype", t.dtype.base_dtype)
                attr(m, "shape", t.shape)
                attr(m, wire.OUTPUT_TYPES_ATTR, [t.dtype.base_dtype])
                attr(m, wire.OUTPUT_SHAPES_ATTR, [t.shape])
                add(task, m)
                feed_at.setdefault(task, []).append((t.name, name + ":0"))
            return name + ":0"

        def recv_input(src_op, t, dst_task, dst_device):
            control = t is None
            k = (("^", src_op) if control else t, dst_task)
            name = recvs.get(k)
            if name is not None:
                return name
            src_task, src_device = task_of(src_op), dev[src_op].name
            base = src_op.name if control else t.op.name
            send_name, recv_name = fresh(base), fresh(base)
            key = "%s;%s;%s;%s" % (src_device, dst_device, t.name if t is not None
                                   else "^" + src_op.name, dst_task)
            dtype = dtypes.float32 if control else t.dtype.base_dtype
            s = pb.NodeDef(name=send_name, op=rdv.SEND_OP, device=src_device)
            if control:
                s.input.append("^" + src_op.name)
            else:
                s.input.append(t.name)
                attr(s, "T", dtype)
            attr(s, "key", key)
            attr(s, "recv_device", dst_device)
            attr(s, wire.OUTPUT_TYPES_ATTR, [])
            attr(s, wire.OUTPUT_SHAPES_ATTR, [])
            sends.setdefault(src_task, []).append(s)
            r = pb.NodeDef(name=recv_name, op=rdv.RECV_OP, device=dst_device)
            attr(r, "tensor_type", dtype)
            attr(r, "key", key)
            attr(r, "send_task", src_task)
            attr(r, "send_node", send_name)
            attr(r, "send_device", src_device)
            attr(r, "tensor_name", t.name if t is not None else "^" + src_op.name)
            attr(r, "control", control)
            attr(r, wire.OUTPUT_TYPES_ATTR, [dtype])
            attr(r, wire.OUTPUT_SHAPES_ATTR, [t.shape if t is not None else
                                              __import__("minitf").TensorShape([])])
            add(dst_task, r)
            recvs[k] = recv_name
            return recv_name

        sends = {}
        for op in ops:
            task, device = task_of(op), dev[op].name
            m = pb.NodeDef()
            wire.node_to_proto(op, m)
            m.device = device
            del m.input[:]
            for t in op.inputs:
                if t in feed_set:
                    m.input.append(feed_input(t, task, device))
                elif task_of(t.op) != task:
                    m.input.append(recv_input(t.op, t, task, device) + ":0")
                else:
                    m.input.append(t.name)
            controls = []
            for c in op.control_inputs:
                if c not in needed:
                    continue
                if task_of(c) != task:
                    controls.append("^" + recv_input(c, None, task, device))
                else:
                    controls.append("^" + c.name)
            m.input.extend(controls)
            add(task, m)
        for task, ss in sends.items():
            for s in ss:
                add(task, s)
        for t in fetch_t:
            if t not in feed_set:
                fetch_at.setdefault(task_of(t.op), []).append(t.name)
        handles = {}
        tasks = sorted(nodes)
        futures = {}
        config = pb.SessionConfig(isolate_session_state=self.config.isolate_session_state)
        self.tasks.update(tasks)
        for task in tasks:
            gdef = pb.GraphDef(node=_topo(nodes[task]))
            futures[task] = self.master.pool.submit(self.master.register, task, self.handle,
                                                    config, gdef)
        errs = []
        for task, f in futures.items():
            try:
                handles[task] = f.result()
            except errors.OpError as e:
                errs.append(e)
        if errs:
            raise errs[0]
        return _Signature(handles, fetch_at, feed_at, tasks)


def _topo(node_list):
    """NodeDefs ordered so that every input comes first (import_graph_def needs it)."""
    by_name = {n.name: n for n in node_list}
    out, state = [], {}
    for root in node_list:
        if root.name in state:
            continue
        stack = [(root, False)]
        while stack:
            n, done = stack.pop()
            if done:
                state[n.name] = 2
                out.append(n)
                continue
            if state.get(n.name):
                continue
            state[n.name] = 1
            stack.append((n, True))
            for i in n.input:
                src = i[1:] if i.startswith("^") else i.rsplit(":", 1)[0]
                d = by_name.get(src)
                if d is not None and not state.get(src):
                    stack.append((d, False))
    return out


class Master:
    """The master service of one task."""

    def __init__(self, server):
        self.server = server
        self.channels = server.worker.channels
        self.task_name = server.worker.task_name
        self.sessions = {}
        self.lock = threading.Lock()
        self.pool = concurrent.futures.ThreadPoolExecutor(64, thread_name_prefix="minitf-master")

    def close(self):
        self.pool.shutdown(wait=False, cancel_futures=True)

    # -- helpers -----------------------------------------------------------------------------
    def tasks(self):
        spec = self.server.cluster_spec()
        return [("/job:%s/replica:0/task:%d" % (job, i), spec.task_address(job, i))
                for job in spec.jobs for i in spec.task_indices(job)]

    def worker_stub(self, task):
        return self.channels.worker(self.server.worker.task_address(task))

    def register(self, task, session_handle, config, gdef):
        def requests():
            first = True
            for piece in wire.iter_graph_def_chunks(gdef):
                if first:
                    yield pb.RegisterGraphRequest(session_handle=session_handle, config=config,
                                                  graph_def_chunk=piece)
                    first = False
                else:
                    yield pb.RegisterGraphRequest(graph_def_chunk=piece)
        try:
            return self.worker_stub(task).RegisterGraph(
                requests(), timeout=CONTROL_RPC_SECONDS,
                metadata=self.channels.metadata).graph_handle
        except grpc.RpcError as e:
            self.channels.failed(self.server.worker.task_address(task), e)
            raise rpc_error(e, task) from None

    def cluster_devices(self, config, timeout=None):
        tasks = self.tasks()
        filters = [dnu.parse_full_name(f) for f in getattr(config, "device_filters", ()) or ()]
        filters = [f for f in filters if f is not None]
        if filters:
            tasks = [(t, a) for t, a in tasks if t == self.task_name or any(
                dnu.is_complete_specification(f, dnu.parse_full_name(t + "/device:CPU:0"))
                or (f.job is not None and f.task is None and ("/job:%s/" % f.job) in t + "/")
                for f in filters)]
        op_timeout = getattr(config, "operation_timeout_in_ms", 0) or 0
        timeout = timeout or (op_timeout / 1000.0 if op_timeout else CONTROL_RPC_SECONDS)

        def status(task, address):
            for attempt in (0, 1):   # once more on a fresh channel: the task may be back
                try:
                    r = self.channels.worker(address).GetStatus(
                        pb.GetStatusRequest(), timeout=timeout,
                        metadata=self.channels.metadata)
                    break
                except grpc.RpcError as e:
                    self.channels.failed(address, e)
                    if attempt or e.code() != grpc.StatusCode.UNAVAILABLE:
                        raise rpc_error(e, task) from None
            return [RemoteDevice(a) for a in r.device_attributes]
        futures = [self.pool.submit(status, t, a) for t, a in tasks]
        out = []
        for f in futures:
            out.extend(f.result())
        return out

    def _session(self, handle):
        with self.lock:
            s = self.sessions.get(handle)
        if s is None:
            raise errors.AbortedError(None, None, "Session %s is not found." % handle[:100])
        return s

    def _abort(self, context, exc):
        streams.abort(context, exc)

    # -- service methods ---------------------------------------------------------------------
    def CreateSession(self, request_iterator, context):
        try:
            header, gdef = wire.read_graph_stream(request_iterator, "CreateSession")
            config = wire.proto_to_session_config(header.config)
            default = self.server.config   # the server's config: defaults for its sessions
            config.allow_soft_placement |= bool(default.allow_soft_placement)
            config.log_device_placement |= bool(default.log_device_placement)
            if not config.operation_timeout_in_ms:
                config.operation_timeout_in_ms = default.operation_timeout_in_ms
            handle = "%016x" % random.getrandbits(64)
            sess = MasterSession(self, handle, config)
            sess.extend(gdef)
            sess.devices = self.cluster_devices(config)
            with self.lock:
                self.sessions[handle] = sess
            return pb.CreateSessionResponse(session_handle=handle, graph_version=sess.version)
        except Exception as e:  # noqa: BLE001
            self._abort(context, e)

    def ExtendSession(self, request_iterator, context):
        try:
            header, gdef = wire.read_graph_stream(request_iterator, "ExtendSession")
            sess = self._session(header.session_handle)
            if header.current_graph_version != sess.version:
                raise errors.AbortedError(None, None, "Current graph version %d does not match "
                                          "the master's %d" % (header.current_graph_version,
                                                               sess.version))
            sess.extend(gdef)
            return pb.ExtendSessionResponse(new_graph_version=sess.version)
        except Exception as e:  # noqa: BLE001
            self._abort(context, e)

    def RunStep(self, request_iterator, context):
        try:
            yield from self._step(request_iterator, context.time_remaining(),
                                  context.add_callback)
        except Exception as e:  # noqa: BLE001
            self._abort(context, e)

    def RunSteps(self, request_iterator, context):
        return streams.serve_steps(request_iterator, context,
                                   lambda one, on_cancel: self._step(one, None, on_cancel))

    def _step(self, request_iterator, remaining, on_cancel):
        """Runs one step: yields the fed values the client fetches, then every partition's
        fetched values and step stats as they come (a remote task's messages are forwarded
        unparsed: a RunGraphResponse's bytes are a RunStepResponse); small messages are
        joined (wire.coalesce).  ``remaining``: seconds the client waits (None: no limit but
        the configured ones); ``on_cancel(fn)``: ``fn()`` is to be called if the client goes
        away."""
        header, feeds = wire.read_tensor_stream(request_iterator, "RunStep",
                                                pb.RunStepRequest, "feed", "feed_part")
        sess = self._session(header.session_handle)
        step_id = random.getrandbits(62)
        with sess.lock:
            sess.ensure_placed()
            sig = sess.signature(list(header.fetch), list(header.target), list(feeds))
        inline, parts = wire.split_named_tensors(
            [(n, feeds[n]) for n in header.fetch if n in feeds],
            chunk_bytes=STREAM_CHUNK_BYTES)
        yield from wire.coalesce(itertools.chain(
            [pb.RunStepResponse(step_id=step_id, tensor=inline)], parts,
            self._run_partitions(sess, sig, step_id, feeds, header.options, remaining,
                                 on_cancel)))

    def _run_partitions(self, sess, sig, step_id, feeds, options, remaining, on_cancel):
        """Runs the step's partitions concurrently, yielding their response messages as they
        come: one partition is read on this thread (the master's own when it has one, else a
        remote one: no hand-off), the others on the pool.  The first failure cancels the rest
        and, once all have stopped, is raised (a root cause before the errors it caused)."""
        timeout = DEFAULT_STEP_SECONDS if remaining is None else remaining
        op_timeout = options.timeout_in_ms or sess.config.operation_timeout_in_ms
        if op_timeout:
            timeout = min(timeout, op_timeout / 1000.0)
        ms = int(math.ceil(timeout * 1000))
        if timeout < DEFAULT_STEP_SECONDS and options.timeout_in_ms != ms:
            # the workers learn the step's deadline from their requests (a step on an open
            # RunGraphs call has no gRPC deadline of its own)
            options = pb.RunStepOptions(trace_level=options.trace_level, timeout_in_ms=ms)
        calls = {}
        lock = threading.Lock()
        cancelled = [False]

        def cancel_all():
            with lock:
                cancelled[0] = True
                pending = list(calls.values())
            for c in pending:
                c.cancel()

        def track(task, call):
            with lock:
                calls[task] = call
                if cancelled[0]:
                    call.cancel()

        def local(task):   # the master's own worker: no RPC
            header = pb.RunGraphRequest(session_handle=sess.handle, graph_handle=sig.handles[task],
                                        step_id=step_id, recv_key=sig.fetch_at.get(task, ()),
                                        options=options)
            worker = self.server.worker
            out, stats = worker.run_graph(header, {ph: feeds[name] for name, ph in
                                                   sig.feed_at.get(task, ())}, timeout,
                                          lambda step: track(task, step))
            yield from partition_answer(out, stats)

        def remote(task):
            sends = [(ph, feeds[name]) for name, ph in sig.feed_at.get(task, ())]
            inline, parts = wire.split_named_tensors(sends, chunk_bytes=STREAM_CHUNK_BYTES,
                                                     wrap=(pb.RunGraphRequest, "send_part"))
            first = pb.RunGraphRequest(session_handle=sess.handle, graph_handle=sig.handles[task],
                                       step_id=step_id, recv_key=sig.fetch_at.get(task, ()),
                                       options=options, send=inline)
            address = self.server.worker.task_address(task)
            try:
                # cancelling either kind of call does nothing once its step has ended (gRPC
                # tells the master of a RunStep's end after the client heard it)
                if len(inline) == len(sends):   # every send fits in the first message
                    call = self.channels.steps(address, "RunGraphs").acquire().step(
                        first, timeout + STEP_SLACK_SECONDS)
                else:
                    call = self.channels.worker(address).RunGraph(
                        itertools.chain((first,), parts), timeout=timeout,
                        metadata=self.channels.metadata)
                track(task, call)
                yield from call
            except grpc.RpcError as e:
                self.channels.failed(address, e)
                err = rpc_error(e, task)
                if e.code() == grpc.StatusCode.CANCELLED and not cancelled[0]:
                    # cancelled by the peer's side (its server went away mid-call)
                    err = errors.UnavailableError(None, None, err.message)
                if e.code() == grpc.StatusCode.DEADLINE_EXCEEDED:
                    err = errors.DeadlineExceededError(None, None, err.message)
                err._minitf_derived = (streams.is_derived(e)
                                       or e.code() == grpc.StatusCode.CANCELLED)
                raise err from None

        def messages(task):
            return local(task) if task == self.task_name else remote(task)

        done = object()
        arrived = queue.SimpleQueue()

        def pump(task):
            try:
                for m in messages(task):
                    arrived.put(m)
                arrived.put(done)
            except Exception as e:  # noqa: BLE001
                arrived.put(e)

        if not sig.tasks:   # only fed values fetched
            return
        here = self.task_name if self.task_name in sig.tasks else sig.tasks[0]
        others = [t for t in sig.tasks if t != here]
        on_cancel(cancel_all)    # the client went away
        for t in others:
            self.pool.submit(pump, t)
        failures = []
        try:
            yield from messages(here)
        except Exception as e:  # noqa: BLE001
            failures.append(e)
            cancel_all()
        waiting = len(others)
        while waiting:
            try:   # every partition ends by itself: calls have deadlines, local runs timeouts
                m = arrived.get(timeout=timeout + CONTROL_RPC_SECONDS)
            except queue.Empty:
                cancel_all()
                raise errors.DeadlineExceededError(None, None, "Timed out waiting for the "
                                                   "partitions of step %d" % step_id) from None
            if m is done:
                waiting -= 1
            elif isinstance(m, Exception):
                waiting -= 1
                failures.append(m)
                cancel_all()
            elif not failures:
                yield m
        if failures:
            root = [e for e in failures if not getattr(e, "_minitf_derived", False)]
            raise (root or failures)[0]

    def CloseSession(self, request, context):
        with self.lock:
            sess = self.sessions.pop(request.session_handle, None)
        if sess is not None:
            with sess.lock:
                sess.close()
        return pb.CloseSessionResponse()

    def ListDevices(self, request, context):
        try:
            from minitf.runtime.config_proto import ConfigProto
            devs = self.cluster_devices(ConfigProto())
            local, remote = [], []
            for d in devs:
                a = pb.DeviceAttributes(name=d.name, device_type=d.device_type,
                                        memory_limit=d.memory_limit, incarnation=d.incarnation)
                (local if d.task == self.task_name else remote).append(a)
            return pb.ListDevicesResponse(local_device=local, remote_device=remote)
        except Exception as e:  # noqa: BLE001
            self._abort(context, e)

    def Reset(self, request, context):
        try:
            with self.lock:
                sessions, self.sessions = list(self.sessions.values()), {}
            for s in sessions:
                with s.lock:
                    s.close()
            containers = list(request.container)
            remaining = context.time_remaining()
            timeout = CONTROL_RPC_SECONDS if remaining is None else remaining

            def cleanup(task, address):
                try:
                    self.channels.worker(address).CleanupAll(
                        pb.CleanupAllRequest(container=containers), timeout=timeout,
                        metadata=self.channels.metadata)
                except grpc.RpcError as e:
                    raise rpc_error(e, task) from None
            futures = [self.pool.submit(cleanup, t, a) for t, a in self.tasks()]
            for f in futures:
                f.result()
            return pb.ResetResponse()
        except Exception as e:  # noqa: BLE001
            self._abort(context, e)
