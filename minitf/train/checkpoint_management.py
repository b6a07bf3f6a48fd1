"""Checkpoint bookkeeping: the ``checkpoint`` state file and the files of a checkpoint prefix
(TF 1.15's ``python/training/checkpoint_management.py``).

Book section: "Saving and restoring" (``tf.train.latest_checkpoint`` finds the newest
checkpoint a Saver recorded; the chapter's chief restores it after a crash).

The state file is the text form of a ``CheckpointState`` message::

    model_checkpoint_path: "model-3"
    all_model_checkpoint_paths: "model-2"
    all_model_checkpoint_paths: "model-3"

Paths in it are relative to its directory when that directory was given as a relative path,
absolute otherwise; readers join relative ones with the directory.
"""

from __future__ import annotations

import glob
import logging
import os
import re

from google.protobuf import text_format

from minitf.lib import file_io
from minitf.lib.bundle_pb2 import CheckpointState
from minitf.lib.protobuf.tf_protos_pb2 import SaverDef

__all__ = [
    "CheckpointState",
    "checkpoint_exists",
    "generate_checkpoint_state_proto",
    "get_checkpoint_mtimes",
    "get_checkpoint_state",
    "latest_checkpoint",
    "meta_graph_filename",
    "remove_checkpoint",
    "update_checkpoint_state",
]


def _checkpoint_filename(save_dir: str, latest_filename: str | None) -> str:
    return os.path.join(save_dir, latest_filename or "checkpoint")


def generate_checkpoint_state_proto(
    save_dir: str,
    model_checkpoint_path: str,
    all_model_checkpoint_paths: list[str] | None = None,
) -> CheckpointState:
    """The ``CheckpointState`` to record: the newest path last in the list of all; paths made
    relative to ``save_dir`` when ``save_dir`` itself is relative."""
    paths = list(all_model_checkpoint_paths or [])
    if not paths or paths[-1] != model_checkpoint_path:
        paths.append(model_checkpoint_path)
    if not os.path.isabs(save_dir):
        if not os.path.isabs(model_checkpoint_path):
            model_checkpoint_path = os.path.relpath(model_checkpoint_path, save_dir)
        paths = [p if os.path.isabs(p) else os.path.relpath(p, save_dir) for p in paths]
    return CheckpointState(
        model_checkpoint_path=model_checkpoint_path, all_model_checkpoint_paths=paths
    )


def update_checkpoint_state(
    save_dir: str,
    model_checkpoint_path: str,
    all_model_checkpoint_paths: list[str] | None = None,
    latest_filename: str | None = None,
    save_relative_paths: bool = False,
) -> None:
    """Writes the state file ``<save_dir>/<latest_filename or "checkpoint">`` (atomically:
    a temporary file renamed over it)."""
    if save_relative_paths:
        model_checkpoint_path = _relative(model_checkpoint_path, save_dir)
        all_model_checkpoint_paths = [
            _relative(p, save_dir) for p in all_model_checkpoint_paths or []
        ]
    ckpt = generate_checkpoint_state_proto(
        save_dir, model_checkpoint_path, all_model_checkpoint_paths
    )
    state_file = _checkpoint_filename(save_dir, latest_filename)
    if state_file == ckpt.model_checkpoint_path:
        raise RuntimeError(
            "Save path '%s' conflicts with path used for checkpoint state.  Please use a "
            "different save path." % model_checkpoint_path
        )
    file_io.atomic_write_string_to_file(state_file, text_format.MessageToString(ckpt))


def _relative(path, save_dir):
    return os.path.relpath(path, save_dir) if os.path.isabs(path) else path


def get_checkpoint_state(
    checkpoint_dir: str, latest_filename: str | None = None
) -> CheckpointState | None:
    """The ``CheckpointState`` of the state file in ``checkpoint_dir`` (relative paths joined
    with the directory), or None when there is no state file or it cannot be parsed."""
    state_file = _checkpoint_filename(checkpoint_dir, latest_filename)
    if not os.path.isfile(state_file):
        return None
    ckpt = CheckpointState()
    try:
        with open(state_file) as f:
            text_format.Merge(f.read(), ckpt)
    except (OSError, UnicodeDecodeError, text_format.ParseError) as e:
        logging.warning("%s: %s", type(e).__name__, e)
        logging.warning("%s: Checkpoint ignored", state_file)
        return None
    if not ckpt.model_checkpoint_path:
        raise ValueError("Invalid checkpoint state loaded from " + checkpoint_dir)
    if not os.path.isabs(ckpt.model_checkpoint_path):
        ckpt.model_checkpoint_path = os.path.join(checkpoint_dir, ckpt.model_checkpoint_path)
    for i, p in enumerate(ckpt.all_model_checkpoint_paths):
        if not os.path.isabs(p):
            ckpt.all_model_checkpoint_paths[i] = os.path.join(checkpoint_dir, p)
    return ckpt


def checkpoint_exists(checkpoint_prefix: str) -> bool:
    """Whether a V2 checkpoint (``<prefix>.index``) or a V1 one (the prefix itself) exists
    (both taken as glob patterns, as TF's ``get_matching_files`` does)."""
    return bool(glob.glob(checkpoint_prefix + ".index") or glob.glob(checkpoint_prefix))


def latest_checkpoint(checkpoint_dir: str, latest_filename: str | None = None) -> str | None:
    """The newest checkpoint recorded in ``checkpoint_dir``'s state file if its files exist,
    else None (also None without a directory or state file)."""
    ckpt = get_checkpoint_state(checkpoint_dir, latest_filename)
    if ckpt and ckpt.model_checkpoint_path:
        if checkpoint_exists(ckpt.model_checkpoint_path):
            return ckpt.model_checkpoint_path
        logging.error("Couldn't match files for checkpoint %s", ckpt.model_checkpoint_path)
    return None


def get_checkpoint_mtimes(checkpoint_prefixes: list[str]) -> list[float]:
    """The modification time of each existing checkpoint's ``.index`` file."""
    return [
        os.path.getmtime(p + ".index") for p in checkpoint_prefixes if os.path.isfile(p + ".index")
    ]


def meta_graph_filename(checkpoint_filename: str, meta_graph_suffix: str = "meta") -> str:
    """``model-3.meta`` for ``model-3`` (a sharded V1 suffix ``-?????-of-00002`` dropped)."""
    basename = re.sub(r"-[\d\?]+-of-\d+$", "", checkpoint_filename)
    return ".".join([basename, meta_graph_suffix])


def remove_checkpoint(
    checkpoint_prefix: str,
    checkpoint_format_version: int = SaverDef.V2,
    meta_graph_suffix: str = "meta",
) -> None:
    """Deletes a checkpoint's files: ``.index``, ``.data-?????-of-?????`` and ``.meta``."""
    if checkpoint_format_version == SaverDef.V2:
        paths = [checkpoint_prefix + ".index"]
        paths += glob.glob(glob.escape(checkpoint_prefix) + ".data-?????-of-?????")
    else:
        paths = [checkpoint_prefix]
    paths.append(meta_graph_filename(checkpoint_prefix, meta_graph_suffix))
    for path in paths:
        if os.path.exists(path):
            os.remove(path)
