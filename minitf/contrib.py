"""``tf.contrib``: the few pieces of TF 1.15's contrib that the chapter's code can use.

Book section: "Sharding Variables Across Multiple Parameter Servers" (a ``ps_strategy`` for
``replica_device_setter`` that balances the ps tasks by bytes).  Only ``tf.contrib.training``'s
``GreedyLoadBalancingStrategy`` and ``byte_size_load_fn`` are here; they live in
``minitf.train.device_setter`` next to the default round robin.
"""

from __future__ import annotations

import sys
import types

from minitf.train.device_setter import GreedyLoadBalancingStrategy, byte_size_load_fn

training = types.ModuleType(__name__ + ".training", "tf.contrib.training: ps strategies.")
training.GreedyLoadBalancingStrategy = GreedyLoadBalancingStrategy  # type: ignore[attr-defined]
training.byte_size_load_fn = byte_size_load_fn  # type: ignore[attr-defined]
sys.modules[training.__name__] = training

__all__ = ["training"]
