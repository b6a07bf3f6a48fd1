"""The data and the layer sizes of the data-parallel replicas, with numpy alone.

Book section: "Data parallelism".  ``dp_worker.py`` (minitf's replica) and
``bench/tf_replica_child.py`` (TensorFlow's, run by another interpreter that has no minitf)
train on the same rows from here, so that their samples/s compare like with like.
"""

import numpy as np

#: Hidden layer widths of each model (the output layer has 10 units).
HIDDEN = {"digits": [64], "mlp784": [300, 100]}


def dataset(model):
    """((x_train, y_train), (x_test, y_test)), the same in every process."""
    if model == "digits":
        from sklearn.datasets import load_digits

        data = load_digits()
        x = (data.data / 16.0).astype(np.float32)
        y = data.target.astype(np.int64)
        order = np.random.default_rng(0).permutation(len(x))
        x, y = x[order], y[order]
        return (x[:1400], y[:1400]), (x[1400:], y[1400:])
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4096, 784)).astype(np.float32)
    y = np.argmax(x @ rng.standard_normal((784, 10)), axis=1).astype(np.int64)
    return (x[:3584], y[:3584]), (x[3584:], y[3584:])


def rows(run, task, workers, batch, n):
    """The rows replica ``task`` of ``workers`` takes at its run ``run``: W replicas of batch
    b see, run by run, what one replica of batch W b sees."""
    return np.arange((run * workers + task) * batch, (run * workers + task + 1) * batch) % n
