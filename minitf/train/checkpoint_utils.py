"""Reading checkpoints without a graph: ``tf.train.load_checkpoint``, ``list_variables``,
``load_variable`` and the reader they return (TF's ``python/training/checkpoint_utils.py`` and
``py_checkpoint_reader``).

Book section: "Saving and restoring" (looking inside a checkpoint a Saver, or TensorFlow itself,
wrote).
"""

from __future__ import annotations

import os

import numpy as np

from minitf.framework import dtypes
from minitf.lib.tensor_bundle import BundleReader
from minitf.train import checkpoint_management


class CheckpointReader:
    """What ``tf.train.load_checkpoint`` returns (TF's ``CheckpointReader``)."""

    def __init__(self, prefix: str) -> None:
        self._reader = BundleReader(prefix)

    def has_tensor(self, name: str) -> bool:
        return self._reader.contains(name)

    def get_tensor(self, name: str) -> np.ndarray:
        """The saved value (a numpy scalar for a scalar); NotFoundError for an unknown key."""
        value = self._reader.lookup(name)
        return value[()] if value.ndim == 0 else value

    def get_variable_to_shape_map(self) -> dict[str, list[int]]:
        return {k: list(self._reader.dtype_and_shape(k)[1]) for k in self._reader.names()}

    def get_variable_to_dtype_map(self) -> dict[str, dtypes.DType]:
        return {k: self._reader.dtype_and_shape(k)[0] for k in self._reader.names()}

    def debug_string(self) -> bytes:
        lines = []
        for k in self._reader.names():
            dtype, shape = self._reader.dtype_and_shape(k)
            lines.append("%s (%s) [%s]\n" % (k, dtype.enum_name, ",".join(map(str, shape))))
        return "".join(lines).encode("utf-8")


def NewCheckpointReader(filepattern: str) -> CheckpointReader:  # noqa: N802 - TF's name
    return CheckpointReader(os.fspath(filepattern))


def _checkpoint_filename(ckpt_dir_or_file):
    ckpt_dir_or_file = os.fspath(ckpt_dir_or_file)
    if os.path.isdir(ckpt_dir_or_file):
        return checkpoint_management.latest_checkpoint(ckpt_dir_or_file)
    return ckpt_dir_or_file


def load_checkpoint(ckpt_dir_or_file: str) -> CheckpointReader:
    """A reader of a checkpoint prefix, or of the latest checkpoint of a directory."""
    filename = _checkpoint_filename(ckpt_dir_or_file)
    if filename is None:
        raise ValueError(
            "Couldn't find 'checkpoint' file or checkpoints in given directory %s"
            % ckpt_dir_or_file
        )
    return NewCheckpointReader(filename)


def load_variable(ckpt_dir_or_file: str, name: str) -> np.ndarray:
    """The value saved under ``name`` (a trailing ``:0`` is ignored)."""
    if name.endswith(":0"):
        name = name[:-2]
    return load_checkpoint(ckpt_dir_or_file).get_tensor(name)


def list_variables(ckpt_dir_or_file: str) -> list[tuple[str, list[int]]]:
    """``[(name, shape)]`` of every tensor in the checkpoint, sorted by name."""
    shapes = load_checkpoint(ckpt_dir_or_file).get_variable_to_shape_map()
    return [(name, shapes[name]) for name in sorted(shapes)]
