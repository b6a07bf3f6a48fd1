"""What TF calls core/kernels: one implementation per (op type, device type, dtypes).

``registry.py`` is the lookup the placer and the executor use; ``tensor_ops.py`` the small
surface each device's backend offers (``numpy_ops.py``: CPU and emulated cards; ``cuda_ops.py``:
numba.cuda on a real card or the simulator; ``cuda.py``: the numba.cuda kernels themselves); the
``*_kernels.py`` modules register the kernels of each op family, written once against that
surface.  Importing this package registers them all.

Book section: "Operations and kernels".
"""

from minitf.kernels import (  # noqa: F401
    accumulator_kernels,
    array_kernels,
    control_flow_kernels,
    dataset_kernels,
    io_kernels,
    iterator_kernels,
    math_kernels,
    nn_kernels,
    parsing_kernels,
    queue_kernels,
    random_kernels,
    reader_kernels,
    script_kernels,
    sendrecv_kernels,
    state_kernels,
    summary_kernels,
    training_kernels,
)
