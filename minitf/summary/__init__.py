"""``tf.summary``: summary ops, the event-file writer and the summary protos.

Book section: "Distributing TensorFlow" (the chief writes summaries for TensorBoard).  TF's
``python/summary``.  The ops live in ``minitf/ops/summary_ops.py`` (their kernels in
``minitf/kernels/summary_kernels.py``); the writer in ``writer.py``
(``summary_iterator``, which reads event files back, is ``tf.train.summary_iterator``, as in TF).
"""

from minitf.lib.protobuf.tf_protos_pb2 import Event, SessionLog, Summary  # noqa: F401
from minitf.ops.summary_ops import histogram, merge, merge_all, scalar  # noqa: F401
from minitf.summary.writer import FileWriter, FileWriterCache  # noqa: F401
