"""Random bytes sent to every method of a server's master and worker services (used by
tests/test_service_fuzz.py with a few hundred messages and by tests/stress/ with 10,000 a
service): each call must end with a status, change no state, and leave the server answering."""

import collections
import contextlib

import grpc
import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import minitf as tf
from minitf.distributed import services
from minitf.distributed.local_cluster import free_port
from minitf.distributed.wire import GRPC_OPTIONS

SERVICES = ("MasterService", "WorkerService")


def fuzz(target, service, examples, max_bytes, timeout):
    """Sends about ``examples`` messages of random bytes (hypothesis picks the method and the
    bytes) to ``service`` of ``target``; after each the server's state must be intact.  Returns
    how often each (method, status name) came back."""
    seen = collections.Counter()
    calls = target.calls(service)

    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(st.sampled_from(calls), st.binary(max_size=max_bytes))
    def one(named_call, data):
        name, call = named_call
        seen[name, call(data, timeout).name] += 1
        assert target.state_is_intact(), "%s(%r) changed the server's state" % (name, data)

    one()
    assert target.state_is_intact()
    return seen


def method_calls(channel, service):
    """``[(name, call(data, timeout))]``: one raw-bytes caller per method of ``service``."""
    out = []
    for name, kind, _, _ in services.methods(service):
        path = "/%s.%s/%s" % (services.PACKAGE, service, name)
        out.append((name, _raw_caller(getattr(channel, kind)(path), kind)))
    return out


def _raw_caller(method, kind):
    """Calls ``method`` with one message of ``data`` (no serializer: the bytes go as they are);
    returns the gRPC status code it ended with (OK when it answered)."""

    def call(data, timeout):
        request = iter([data]) if kind.startswith("stream") else data
        try:
            answer = method(request, timeout=timeout)
            if kind.endswith("stream"):
                for _ in answer:
                    pass
        except grpc.RpcError as e:
            return e.code()
        return grpc.StatusCode.OK

    return call


class FuzzTarget:
    """A started in-process server holding state a stray request could wipe: a variable
    (value 42) in its default container and an open session on it, reached over gRPC."""

    def __init__(self):
        port = free_port()
        spec = tf.train.ClusterSpec({"worker": ["127.0.0.1:%d" % port]})
        self.server = tf.train.Server(spec, "worker", 0)
        self.graph = tf.Graph()
        with self.graph.as_default():
            self.v = tf.Variable(42.0, name="fuzz_v")
            init = tf.global_variables_initializer()
        config = tf.ConfigProto()
        config.rpc_options.use_rpc_for_inprocess_master = True
        self.sess = tf.Session(self.server.target, graph=self.graph, config=config)
        self.sess.run(init)
        self.channel = grpc.insecure_channel(self.server.target[len("grpc://") :], GRPC_OPTIONS)

    def calls(self, service):
        return method_calls(self.channel, service)

    def state_is_intact(self):
        """The session still runs, the variable still holds 42, and the worker answers."""
        value = self.sess.run(self.v)
        status = dict(self.calls("WorkerService"))["GetStatus"](b"", 5.0)
        return bool(np.isclose(value, 42.0)) and status == grpc.StatusCode.OK

    def close(self):
        self.channel.close()
        self.sess.close()
        self.server.stop()


@contextlib.contextmanager
def fuzz_target():
    target = FuzzTarget()
    try:
        yield target
    finally:
        target.close()
