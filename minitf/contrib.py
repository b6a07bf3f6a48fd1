"""``tf.contrib``: the few pieces of TF 1.15's contrib that the chapter's code can use.

Book section: "Sharding Variables Across Multiple Parameter Servers" (a ``ps_strategy`` for
``replica_device_setter`` that balances the ps tasks by bytes): ``tf.contrib.training``'s
``GreedyLoadBalancingStrategy`` and ``byte_size_load_fn``, which live in
``minitf.train.device_setter`` next to the default round robin; and chapter 11's regularizers,
``tf.contrib.layers.l1_regularizer`` and ``l2_regularizer`` (``ops/regularizers.py``).
"""

from __future__ import annotations

import sys
import types

from minitf.ops.regularizers import l1_regularizer, l2_regularizer
from minitf.train.device_setter import GreedyLoadBalancingStrategy, byte_size_load_fn

training = types.ModuleType(__name__ + ".training", "tf.contrib.training: ps strategies.")
training.GreedyLoadBalancingStrategy = GreedyLoadBalancingStrategy  # type: ignore[attr-defined]
training.byte_size_load_fn = byte_size_load_fn  # type: ignore[attr-defined]
sys.modules[training.__name__] = training

layers = types.ModuleType(__name__ + ".layers", "tf.contrib.layers: weight regularizers.")
layers.l1_regularizer = l1_regularizer  # type: ignore[attr-defined]
layers.l2_regularizer = l2_regularizer  # type: ignore[attr-defined]
sys.modules[layers.__name__] = layers

__all__ = ["layers", "training"]
