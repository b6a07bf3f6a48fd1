"""``tf.queue``: the queue classes under the name TF 1.15 also gives them (``tf.queue.FIFOQueue``
is ``tf.FIFOQueue``, ``tf.queue.RandomShuffleQueue`` is ``tf.RandomShuffleQueue`` ...).

Book section: "Asynchronous Communication Using TensorFlow Queues".
"""

from minitf.ops.data_flow_ops import (
    FIFOQueue,
    PaddingFIFOQueue,
    PriorityQueue,
    QueueBase,
    RandomShuffleQueue,
)

__all__ = ["FIFOQueue", "PaddingFIFOQueue", "PriorityQueue", "QueueBase", "RandomShuffleQueue"]
