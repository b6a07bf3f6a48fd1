"""What TF calls ``python/ops``: the op constructors (``tf.constant``, ``tf.matmul``,
``tf.Variable`` ...) and the op registry (``op_def.py``) that says what the graph must know of
each op type before any kernel runs.

Book section: "Operations and kernels" (an op is the abstract operation; its kernels live in
``minitf.kernels``).
"""
