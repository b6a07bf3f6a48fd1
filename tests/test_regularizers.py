"""Chapter 11's ℓ1 and ℓ2 regularization: ``tf.contrib.layers.l1_regularizer`` /
``l2_regularizer`` given to ``tf.get_variable`` or ``tf.layers.dense`` build their loss next
to the variable in ``<variable>/Regularizer/`` and collect it in ``REGULARIZATION_LOSSES``;
``tf.losses.get_regularization_loss`` adds them up."""

import logging

import numpy as np
import pytest

import minitf as tf

L1, L2 = tf.contrib.layers.l1_regularizer, tf.contrib.layers.l2_regularizer


def test_dense_and_get_variable_collect_their_losses_as_tf_names_them():
    x = tf.placeholder(tf.float32, [None, 4], name="X")
    h = tf.layers.dense(x, 3, kernel_regularizer=L1(0.01), name="hidden1")
    tf.layers.dense(h, 2, kernel_regularizer=L2(0.5), bias_regularizer=L1(1.0), name="out")
    w = tf.get_variable("w", [2], regularizer=L2(1.0), initializer=tf.ones_initializer())
    losses = tf.get_collection(tf.GraphKeys.REGULARIZATION_LOSSES)
    assert [t.name for t in losses] == [
        "hidden1/kernel/Regularizer/l1_regularizer:0",
        "out/kernel/Regularizer/l2_regularizer:0",
        "out/bias/Regularizer/l1_regularizer:0",
        "w/Regularizer/l2_regularizer:0",
    ]
    l1 = losses[0].op
    assert [t.name for t in l1.inputs] == [
        "hidden1/kernel/Regularizer/l1_regularizer/scale:0",
        "hidden1/kernel/Regularizer/l1_regularizer/Sum:0",
    ]
    assert l1.colocation_groups() == [b"loc:@hidden1/kernel"]
    total = tf.losses.get_regularization_loss()
    assert total.op.name == "total_regularization_loss" and total.op.type == "AddN"
    assert tf.losses.get_regularization_losses("out") == losses[1:3]
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        k1, k2, b2 = sess.run(["hidden1/kernel:0", "out/kernel:0", "out/bias:0"])
        got = sess.run(losses + [total])
    want = [0.01 * np.abs(k1).sum(), 0.5 * (k2**2).sum() / 2, np.abs(b2).sum(), 1.0]
    np.testing.assert_allclose(got, want + [sum(want)], rtol=1e-5)
    assert w.name == "w:0"


def test_training_with_the_regularization_loss_shrinks_the_weights():
    w = tf.get_variable("w", [3], regularizer=L2(1.0), initializer=tf.ones_initializer())
    loss = tf.losses.get_regularization_loss()  # gradient w
    train = tf.train.GradientDescentOptimizer(0.5).minimize(loss)
    with tf.Session() as sess:
        sess.run(w.initializer)
        sess.run(train)
        np.testing.assert_allclose(sess.run(w), [0.5] * 3)


def test_scales_are_checked_as_tf_checks_them(caplog):
    with pytest.raises(ValueError, match="scale cannot be an integer: 1"):
        L1(1)
    with pytest.raises(ValueError, match="Setting a scale less than 0 on a regularizer: -0.5"):
        L2(-0.5)
    with caplog.at_level(logging.INFO, logger="minitf"):
        off = L2(0.0)
    assert "Scale of 0 disables regularizer." in caplog.text
    tf.get_variable("v", [2], regularizer=off)
    assert tf.get_collection(tf.GraphKeys.REGULARIZATION_LOSSES) == []
    assert tf.losses.get_regularization_loss().op.type == "Const"
    with pytest.raises(ValueError, match="does not support activity_regularizer"):
        tf.layers.dense(tf.zeros([1, 2]), 2, activity_regularizer=L1(0.1))


def test_every_shard_of_a_partitioned_variable_is_regularized():
    tf.get_variable("big", [4, 2], regularizer=L1(1.0), partitioner=tf.fixed_size_partitioner(2))
    names = [t.name for t in tf.get_collection(tf.GraphKeys.REGULARIZATION_LOSSES)]
    assert names == [
        "big/part_0/Regularizer/l1_regularizer:0",
        "big/part_1/Regularizer/l1_regularizer:0",
    ]


def test_batch_normalization_weights_take_regularizers():
    x = tf.placeholder(tf.float32, [None, 3])
    tf.layers.batch_normalization(x, gamma_regularizer=L2(0.1))
    assert [t.name for t in tf.get_collection(tf.GraphKeys.REGULARIZATION_LOSSES)] == [
        "batch_normalization/gamma/Regularizer/l2_regularizer:0"
    ]


def test_get_variable_takes_tfs_arguments_in_tfs_order():
    w = tf.get_variable("w", [2], tf.float32, tf.ones_initializer(), L2(1.0), False)
    assert w not in tf.trainable_variables()  # the sixth argument: trainable
    assert len(tf.get_collection(tf.GraphKeys.REGULARIZATION_LOSSES)) == 1  # the fifth
    with pytest.raises(ValueError, match="does not support custom_getter"):
        tf.get_variable("c", [1], custom_getter=lambda getter, *a, **k: getter(*a, **k))
    with pytest.raises(TypeError):
        tf.get_variable("d", [1], no_such_argument=1)
