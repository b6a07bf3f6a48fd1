"""Writes tests/data/tf_checkpoint/model-5.{index,data-00000-of-00001} with real TensorFlow
(run once with TF 2.21, tensorflow-cpu: ``python tests/data/tf_checkpoint/make_checkpoint.py``).

tests/test_saver.py restores it with minitf and compares with the values below; TF itself is
not needed at test time.
"""

import os

import numpy as np
import tensorflow.compat.v1 as tf

tf.disable_eager_execution()
out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "model")
w = tf.Variable(np.arange(6, dtype=np.float32).reshape(2, 3) / 4, name="w")
b = tf.Variable(np.float32(-1.5), name="b")
with tf.variable_scope("layer"):
    k = tf.Variable(np.array([[1, -2], [3, 2**40]], dtype=np.int64), name="kernel")
    d = tf.Variable(np.linspace(0, 1, 5), name="d")  # float64
step = tf.Variable(7, name="global_step")  # int32
empty = tf.Variable(np.zeros((0, 4), np.float32), name="empty")
s = tf.Variable(np.array([b"ab", b"", b"x" * 200], dtype=object), name="s")  # string
with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    print(
        tf.train.Saver().save(sess, out, global_step=5, write_meta_graph=False, write_state=False)
    )
