"""``tf.queue``: the queue classes under the name TF 1.15 also gives them (``tf.queue.FIFOQueue``
is ``tf.FIFOQueue``).

Book section: "Asynchronous Communication Using TensorFlow Queues".
"""

from minitf.ops.data_flow_ops import FIFOQueue, QueueBase

__all__ = ["FIFOQueue", "QueueBase"]
