"""The one partitioner (runtime/graph_partition.py) and the step graph it splits (subgraph.py).

Book sections: "Placing Operations on Devices" and "The Master and Worker Services": a graph
placed over several devices (or tasks) runs as pieces joined by _Send/_Recv pairs.  These tests
call the pure functions directly: no session, no thread, no gRPC.
"""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import minitf as tf
from minitf.framework.rendezvous import create_key, parse_key
from minitf.kernels.sendrecv_kernels import edge_key
from minitf.runtime import devices as devices_mod
from minitf.runtime import graph_partition, subgraph
from minitf.runtime.placer import place

CPU0 = "/job:localhost/replica:0/task:0/device:CPU:0"
GPU0 = "/job:localhost/replica:0/task:0/device:GPU:0"
GPU1 = "/job:localhost/replica:0/task:0/device:GPU:1"


def _step(fetches, targets=(), feeds=(), feed_device=CPU0):
    ops = tf.get_default_graph().get_operations()
    placement = place(ops, devices_mod.local_devices())
    return subgraph.build_step_graph(
        ops, placement.device_of, list(fetches), list(targets), list(feeds), lambda t: feed_device
    )


def _split(step, fetch_device=None, loc_of=None):
    taken = {n.name for n in step.nodes}
    return graph_partition.partition(
        step,
        loc_of or (lambda n: n.device),
        graph_partition.namer("%s/_%d", taken),
        lambda d: 7,
        fetch_device=fetch_device,
    )


def _by_type(parts, op_type):
    return [n for nodes in parts.parts.values() for n in nodes if n.type == op_type]


def test_a_cross_device_edge_becomes_one_send_recv_pair_with_tf_s_key():
    with tf.device("/gpu:0"):
        a = tf.constant([1.0, 2.0], name="a")
    with tf.device("/gpu:1"):
        b = tf.square(a, name="b")
        c = tf.negative(a, name="c")  # a second consumer there: the same _Recv
    parts = _split(_step([b, c]))
    assert sorted(parts.parts) == [GPU0, GPU1]
    (send,) = _by_type(parts, "_Send")
    (recv,) = _by_type(parts, "_Recv")
    assert send.device == GPU0 and recv.device == GPU1
    assert send in parts.parts[GPU0] and recv in parts.parts[GPU1]
    assert (send.name, recv.name) == ("a/_0", "a/_1")  # TF's DirectSession names
    key = create_key(GPU0, 7, GPU1, "a:0")
    assert key == "%s;0000000000000007;%s;a:0;0:0" % (GPU0, GPU1)
    assert edge_key(send) == edge_key(recv) == key
    assert parse_key(key) == (GPU0, 7, GPU1, "a:0")
    assert [(src.name, k) for src, k in send.inputs] == [("a", 0)]
    consumers = {n.name: n for n in parts.parts[GPU1] if n.type in ("Square", "Neg")}
    assert all(n.inputs == [(recv, 0)] for n in consumers.values())
    assert recv.get_attr("tensor_type") == tf.float32 and recv.outputs[0][1].as_list() == [2]


def test_a_control_edge_crosses_as_an_empty_float():
    with tf.device("/gpu:0"):
        a = tf.constant(1.0, name="a")
    with tf.device("/gpu:1"), tf.control_dependencies([a]):
        b = tf.constant(2.0, name="b")
    parts = _split(_step([b]))
    (send,) = _by_type(parts, "_Send")
    (recv,) = _by_type(parts, "_Recv")
    assert send.inputs == [] and [c.name for c in send.control_inputs] == ["a"]
    assert recv.get_attr("tensor_name") == "^a" and recv.get_attr("tensor_type") == tf.float32
    b_node = [n for n in parts.parts[GPU1] if n.name == "b"][0]
    assert b_node.control_inputs == [recv] and b_node.inputs == []


def test_fetches_cross_to_the_client_device_and_nothing_else_is_touched():
    with tf.device("/gpu:0"):
        a = tf.constant(3.0, name="a")
        b = a * 2.0
    step = _step([b, a])
    before = [(n.name, list(n.inputs), list(n.control_inputs)) for n in step.nodes]
    parts = _split(step, fetch_device=CPU0)
    # both fetched values come from _Recv nodes on the CPU, one per tensor
    assert [(n.type, n.device) for n, _ in parts.fetches] == [("_Recv", CPU0)] * 2
    assert {n.get_attr("tensor_name") for n, _ in parts.fetches} == {b.name, "a:0"}
    # pure: the step graph it was given is unchanged, and its nodes were copied
    assert [(n.name, list(n.inputs), list(n.control_inputs)) for n in step.nodes] == before
    assert not set(map(id, step.nodes)) & {id(n) for ns in parts.parts.values() for n in ns}


def test_nothing_crosses_one_partition_the_step_graph_itself():
    with tf.device("/cpu:0"):
        a = tf.constant(1.0)
        b = a + 1.0
    step = _step([b])
    parts = _split(step, fetch_device=CPU0)
    assert list(parts.parts) == [CPU0] and parts.parts[CPU0] == step.nodes
    assert parts.fetches == step.fetches


def test_feeds_become_arg_nodes_and_prune_stops_at_them():
    p = tf.placeholder(tf.float32, [2], name="p")
    s = p + 1.0
    with tf.device("/gpu:0"):
        q = tf.square(s, name="q")
    step = _step([q], feeds=[s])
    names = [n.name for n in step.nodes]
    assert "p" not in names and "add" not in names  # cut at the fed tensor
    (arg,) = step.args
    assert (arg.name, arg.type, arg.device) == ("_arg_add_0_0", "_Arg", CPU0)
    assert (arg.get_attr("index"), arg.get_attr("tensor_name")) == (0, "add:0")
    parts = _split(step)
    (recv,) = _by_type(parts, "_Recv")
    assert recv.get_attr("tensor_name") == "_arg_add_0_0:0" and recv.device == GPU0


def test_split_by_task_puts_the_recv_on_its_first_consumer_s_device():
    """The master's use: locations are tasks; a task's _Recv lands on the device of the first
    consumer there, and a consumer on another device of that task reads it as is."""
    with tf.device("/gpu:0"):
        a = tf.constant(1.0, name="a")
    with tf.device("/gpu:1"):
        b = a + 1.0
    with tf.device("/cpu:0"):
        c = a + 2.0
    step = _step([b, c])
    fake_task = {
        GPU0: "/job:ps/replica:0/task:0",
        GPU1: "/job:worker/replica:0/task:0",
        CPU0: "/job:worker/replica:0/task:0",
    }
    parts = _split(step, loc_of=lambda n: fake_task[n.device])
    assert sorted(parts.parts) == ["/job:ps/replica:0/task:0", "/job:worker/replica:0/task:0"]
    (recv,) = _by_type(parts, "_Recv")  # one per (tensor, task), whatever its consumers
    first = [
        n
        for n in parts.parts["/job:worker/replica:0/task:0"]
        if n.type != "_Recv" and any(src is recv for src, _ in n.inputs)
    ]
    assert recv.device == first[0].device and len(first) == 2


def test_namer_skips_names_in_use():
    new_name = graph_partition.namer("%s_S%d", {"a_S0", "a_S2"})
    assert [new_name("a"), new_name("a"), new_name("b")] == ["a_S1", "a_S3", "b_S4"]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.tuples(st.integers(0, 2), st.integers(0, 100), st.integers(0, 100), st.booleans()),
        min_size=1,
        max_size=10,
    )
)
def test_random_graphs_split_into_pieces_that_only_meet_at_send_recv(spec):
    """Every edge of every piece stays inside it; each _Send has exactly one _Recv with its key
    and vice versa; and running the graph gives the same values on one device or many."""
    g = tf.Graph()
    devices = ["/cpu:0", "/gpu:0", "/gpu:1"]
    with g.as_default():
        tensors = []
        for k, (dev, i, j, control) in enumerate(spec):
            with tf.device(devices[dev]):
                if not tensors:
                    t = tf.constant(np.float32(k + 1), name="src%d" % k)
                else:
                    deps = [tensors[j % len(tensors)].op] if control else []
                    with tf.control_dependencies(deps):
                        t = tf.add(tensors[i % len(tensors)], float(k), name="n%d" % k)
            tensors.append(t)
        step = _step(tensors)
        parts = _split(step, fetch_device=CPU0)
        for loc, nodes in parts.parts.items():
            inside = set(map(id, nodes))
            for n in nodes:
                assert n.device == loc
                assert all(id(src) in inside for src, _ in n.inputs)
                assert all(id(src) in inside for src in n.control_inputs)
        sends = sorted(edge_key(n) for n in _by_type(parts, "_Send"))
        recvs = sorted(edge_key(n) for n in _by_type(parts, "_Recv"))
        assert sends == recvs and len(set(sends)) == len(sends)
        spread = tf.Session(graph=g).run(tensors)
    with g.as_default():
        for op in g.get_operations():
            op._set_device("/cpu:0")
        together = tf.Session(graph=g).run(tensors)
    np.testing.assert_allclose(spread, together)


def test_a_value_fetched_where_it_is_made_crosses_nothing():
    with tf.device("/gpu:0"):
        a = tf.constant(1.0, name="a")
    parts = _split(_step([a]), fetch_device=GPU0)
    assert parts.fetches[0][0].name == "a" and not _by_type(parts, "_Recv")


def test_a_node_reads_like_an_operation():
    with tf.device("/gpu:0"):
        a = tf.constant(1.0, name="a")
        b = tf.square(a, name="b")
    step = _step([b])
    node = {n.name: n for n in step.nodes}["b"]
    assert (node.type, node.device, node.op) == ("Square", GPU0, b.op)
    assert node.get_attr("T") == tf.float32
    assert str(node.node_def).splitlines()[:3] == ['name: "b"', 'op: "Square"', 'input: "a"']
    with pytest.raises(ValueError, match="has no attr named 'value'"):
        node.get_attr("value")
