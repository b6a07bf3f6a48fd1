"""``tf.python_io``: TFRecord files from Python (TF's ``python/lib/io/tf_record.py``).

Book section: "Distributing TensorFlow" (input data and event files are TFRecord files).  The
framing itself is ``minitf/lib/tf_record.py``.
"""

from minitf.lib.tf_record import (  # noqa: F401
    TFRecordCompressionType,
    TFRecordOptions,
    TFRecordWriter,
    tf_record_iterator,
)
