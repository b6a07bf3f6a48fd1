"""Partitioned variables: ``tf.get_variable(..., partitioner=...)``, a ``variable_scope``'s
``partitioner``, ``tf.fixed_size_partitioner`` and ``tf.min_max_variable_partitioner``, the
``PartitionedVariable`` they make (TF 1.15's names ``var/part_<i>``, the concatenation on read),
the shards dealt round robin over ps tasks by ``replica_device_setter``, and training through
the concatenation.

Book section: "Sharding Variables Across Multiple Parameter Servers".
"""

import numpy as np
import pytest

import minitf as tf
from minitf.ops.partitioned_variables import PartitionedVariable


def test_fixed_size_partitioner_names_shapes_and_concatenation():
    w = tf.get_variable(
        "w",
        [5, 3],
        initializer=tf.constant_initializer(1.0),
        partitioner=tf.fixed_size_partitioner(2),
    )
    assert isinstance(w, PartitionedVariable) and len(w) == 2
    assert [v.name for v in w] == ["w/part_0:0", "w/part_1:0"]
    assert [v.shape.as_list() for v in w] == [[3, 3], [2, 3]]  # the first shard gets the extra row
    assert w.name == "w" and w.shape.as_list() == [5, 3] and w.dtype == tf.float32
    assert [v.name for v in tf.trainable_variables()] == ["w/part_0:0", "w/part_1:0"]
    value = tf.convert_to_tensor(w)
    assert value.op.type == "Identity" and value.op.name == "w"
    assert value.op.inputs[0].op.name == "w/ConcatPartitions/concat"
    assert value.shape.as_list() == [5, 3]
    with tf.control_dependencies([tf.no_op(name="before")]):
        again = tf.convert_to_tensor(w)  # each use its own concat, without the block's inputs
    assert again.op.name == "w_1" and not again.op.inputs[0].op.control_inputs
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        assert sess.run(w * 2.0).tolist() == [[2.0] * 3] * 5


def test_partitions_along_another_axis_and_more_shards_than_rows():
    v = tf.get_variable("v", [2, 7], partitioner=tf.fixed_size_partitioner(3, axis=1))
    assert [p.shape.as_list() for p in v] == [[2, 3], [2, 2], [2, 2]]
    u = tf.get_variable("u", [2, 4], partitioner=tf.fixed_size_partitioner(5))
    assert [p.shape.as_list() for p in u] == [[1, 4], [1, 4]]


def test_min_max_variable_partitioner_keeps_shards_above_the_minimum_size():
    part = tf.min_max_variable_partitioner(max_partitions=4, min_slice_size=1000)
    assert part(shape=tf.TensorShape([100, 10]), dtype=tf.float32) == [4, 1]  # 4000 bytes
    assert part(shape=tf.TensorShape([100, 5]), dtype=tf.float32) == [2, 1]  # 2000 bytes
    assert part(shape=tf.TensorShape([10, 2]), dtype=tf.float32) == [1, 1]
    with pytest.raises(ValueError):
        tf.min_max_variable_partitioner(axis=1)


def test_a_scope_s_partitioner_reaches_tf_layers_dense_and_reuse_returns_the_same():
    x = tf.placeholder(tf.float32, [None, 6])
    with tf.variable_scope("net", partitioner=tf.fixed_size_partitioner(2)):
        tf.layers.dense(x, 4, name="layer")
    names = [v.op.name for v in tf.trainable_variables()]
    assert names == [
        "net/layer/kernel/part_0",
        "net/layer/kernel/part_1",
        "net/layer/bias/part_0",
        "net/layer/bias/part_1",
    ]
    with tf.variable_scope("net", reuse=True):
        kernel = tf.get_variable("layer/kernel")
    assert isinstance(kernel, PartitionedVariable) and kernel.shape.as_list() == [6, 4]


def test_shards_go_round_robin_over_the_ps_tasks():
    with tf.device(tf.train.replica_device_setter(ps_tasks=2)):
        tf.train.get_or_create_global_step()  # takes ps/0's turn
        w = tf.get_variable("w", [8, 2], partitioner=tf.fixed_size_partitioner(4))
    assert [v.device for v in w] == [
        "/job:ps/task:1",
        "/job:ps/task:0",
        "/job:ps/task:1",
        "/job:ps/task:0",
    ]


def test_glorot_scales_each_shard_by_the_whole_variable_s_fans():
    w = tf.get_variable(
        "w",
        [400, 100],
        partitioner=tf.fixed_size_partitioner(4),
        initializer=tf.glorot_uniform_initializer(seed=1),
    )
    limit = np.sqrt(6.0 / (400 + 100))  # a shard alone would give sqrt(6 / 200)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        value = sess.run(tf.convert_to_tensor(w))
    assert np.abs(value).max() <= limit and np.abs(value).max() > 0.9 * limit


def test_training_updates_each_shard_through_the_concatenation():
    x = tf.constant(np.ones((2, 5), np.float32))
    w = tf.get_variable(
        "w", [5, 3], initializer=tf.zeros_initializer(), partitioner=tf.fixed_size_partitioner(2)
    )
    loss = tf.reduce_sum(tf.matmul(x, w) * tf.constant([1.0, 2.0, 3.0]))
    train = tf.train.GradientDescentOptimizer(0.5).minimize(loss)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        sess.run(train)
        shards = sess.run(list(w))
    # d loss / d w[i, j] = 2 * (j + 1) for every row i: each shard moved by -0.5 of it
    assert [s.tolist() for s in shards] == [[[-1.0, -2.0, -3.0]] * 3, [[-1.0, -2.0, -3.0]] * 2]


def test_bad_partitions_are_refused():
    with pytest.raises(ValueError, match="must be fully defined"):
        tf.get_variable(
            "a",
            [None, 2],
            initializer=tf.zeros_initializer(),
            partitioner=tf.fixed_size_partitioner(2),
        )
    with pytest.raises(ValueError, match="one dimension"):
        tf.get_variable("b", [4, 4], partitioner=lambda shape, dtype: [2, 2])
    with pytest.raises(ValueError, match="does not match the Variable's rank"):
        tf.get_variable("c", [4, 4], partitioner=lambda shape, dtype: [2])
    with pytest.raises(TypeError, match="mutable tensor"):
        tf.assign(tf.get_variable("d", [4], partitioner=tf.fixed_size_partitioner(2)), [1] * 4)
