"""Writes tf_written.tfrecord with real TensorFlow (run once with TF 2.21's compat.v1; never
a dependency of minitf).  tests/test_readers.py reads the committed file with minitf's
TFRecordReader and expects these records, keys at their byte offsets.

    /tmp/tfvenv/bin/python tests/data/readers/make_tf_record.py
"""

import os

import tensorflow as tf

RECORDS = [b"abc", b"", b"hello", b"Hello distributed TensorFlow!", bytes(range(256))[:40]]

here = os.path.dirname(os.path.abspath(__file__))
with tf.compat.v1.python_io.TFRecordWriter(os.path.join(here, "tf_written.tfrecord")) as w:
    for r in RECORDS:
        w.write(r)
