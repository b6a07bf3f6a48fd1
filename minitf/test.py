"""``tf.test``: the GPU checks the chapter's readers run first.

Book section: "Installation" ("check that TensorFlow sees your GPU").  With emulated cards
``gpu_device_name()`` answers ``/device:GPU:0`` like a CUDA machine would;
``is_built_with_cuda()`` and ``is_gpu_available(cuda_only=True)`` tell the truth about real
CUDA hardware.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from minitf.runtime import devices


def gpu_device_name() -> str:
    """``'/device:GPU:0'`` when this process sees a GPU (real or emulated), else ``''``."""
    return "/device:GPU:0" if devices.visible_gpus() else ""


def is_built_with_cuda() -> bool:
    """True when minitf can run real CUDA kernels here (numba.cuda found a driver)."""
    return devices.cuda_available()


def is_gpu_available(
    cuda_only: bool = False, min_cuda_compute_capability: Sequence[int] | None = None
) -> bool:
    """Whether a GPU is visible; ``cuda_only`` ignores emulated cards; a (major, minor)
    minimum compute capability filters cards."""
    cards = devices.visible_gpus()
    if cuda_only:
        cards = [c for c in cards if not c.emulated]
    if min_cuda_compute_capability is not None:
        cards = [
            c for c in cards if tuple(c.compute_capability) >= tuple(min_cuda_compute_capability)
        ]
    return bool(cards)


# -- gradient checking (TF's python/ops/gradient_checker.py) ------------------------------------


def compute_gradient(
    x: Any,
    x_shape: Sequence[int],
    y: Any,
    y_shape: Sequence[int],
    x_init_value: Any = None,
    delta: float = 1e-3,
    init_targets: Any = None,
    extra_feed_dict: dict | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """The Jacobian of ``y`` with respect to ``x`` twice, as ``(theoretical, numerical)``
    arrays of shape ``[x.size, y.size]``: from ``tf.gradients`` (one one-hot ``grad_ys`` per
    element of ``y``), and from central differences ``delta`` apart, feeding ``x`` (its value
    ``x_init_value``, else random) in the default session."""
    from minitf.framework.graph import get_default_session
    from minitf.ops import array_ops, gradients_impl

    sess = get_default_session()
    if sess is None:
        raise ValueError("compute_gradient needs a default session (use `with sess.as_default()`)")
    if init_targets is not None:
        sess.run(init_targets)
    dtype = x.dtype.base_dtype.as_numpy_dtype
    x0 = (
        np.asarray(x_init_value, dtype=dtype).reshape(x_shape)
        if x_init_value is not None
        else np.random.default_rng(0).uniform(-1, 1, size=x_shape).astype(dtype)
    )
    feeds = dict(extra_feed_dict or {})
    n_x, n_y = int(np.prod(x_shape, dtype=np.int64)), int(np.prod(y_shape, dtype=np.int64))
    dy = array_ops.placeholder(y.dtype.base_dtype, shape=y_shape)
    (grad,) = gradients_impl.gradients(y, x, grad_ys=dy)
    theoretical = np.zeros((n_x, n_y))
    for j in range(n_y):
        onehot = np.zeros(n_y, dtype=y.dtype.base_dtype.as_numpy_dtype)
        onehot[j] = 1
        if grad is not None:
            g = sess.run(grad, {**feeds, x: x0, dy: onehot.reshape(y_shape)})
            theoretical[:, j] = np.reshape(g, -1)
    numerical = np.zeros((n_x, n_y))
    for i in range(n_x):
        xp, xm = x0.copy().reshape(-1), x0.copy().reshape(-1)
        xp[i] += delta
        xm[i] -= delta
        yp = sess.run(y, {**feeds, x: xp.reshape(x_shape)})
        ym = sess.run(y, {**feeds, x: xm.reshape(x_shape)})
        numerical[i, :] = (np.reshape(yp, -1) - np.reshape(ym, -1)) / (2 * delta)
    return theoretical, numerical


def compute_gradient_error(*args: Any, **kwargs: Any) -> float:
    """The largest absolute difference between ``compute_gradient``'s two Jacobians."""
    theoretical, numerical = compute_gradient(*args, **kwargs)
    return float(np.max(np.abs(theoretical - numerical))) if theoretical.size else 0.0
