"""``tf.data``: the Data API of TF 1.15 in graph mode (``tf.data.Dataset`` and its iterators).

Book section: "Loading Data Directly from the Graph": the queues, readers and queue runners of
the chapter gave way to this API in TF 1.4 (the companion notebook's last section).  The graph
side is ``ops/dataset_ops.py`` and ``ops/iterator_ops.py``, the kernels
``kernels/dataset_kernels.py`` and ``kernels/iterator_kernels.py``.
"""

from types import SimpleNamespace

from minitf.ops.dataset_ops import AUTOTUNE, Dataset, TextLineDataset, TFRecordDataset
from minitf.ops.iterator_ops import (
    Iterator,
    make_initializable_iterator,
    make_one_shot_iterator,
)

#: ``tf.data.experimental``: what of it TF 1.15's graph code reaches for
experimental = SimpleNamespace(AUTOTUNE=AUTOTUNE, unbatch=lambda: lambda d: d.unbatch())

__all__ = [
    "Dataset",
    "Iterator",
    "TFRecordDataset",
    "TextLineDataset",
    "experimental",
    "make_initializable_iterator",
    "make_one_shot_iterator",
]
