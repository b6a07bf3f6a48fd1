"""State written to disk is written whole or not at all, and a damaged ``checkpoint`` state
file is named when it is read (issue 24).

Book section: "Sharing State Across Sessions Using Resource Containers" (a restarted task reads
the last checkpoint back).  As TF: the ``checkpoint`` state file and the ``.meta`` graph go
through a temporary file renamed over the target (``lib/file_io.py``); a state file that does
not parse is logged with its path and "Checkpoint ignored", and ``latest_checkpoint`` is None.
"""

import logging

import pytest

import minitf as tf
from minitf.lib import file_io


class _FullDisk:
    """``open`` whose files take half of what is written, then fail (a disk filling up)."""

    def __init__(self, real_open, only=""):
        self._open, self._only = real_open, only

    def __call__(self, *args):
        f = self._open(*args)
        if self._only not in str(args[0]):
            return f
        write = f.write

        def half(data):
            write(data[: len(data) // 2])
            raise OSError(28, "No space left on device")

        f.write = half
        return f


def test_atomic_write_keeps_the_old_file_whole(tmp_path, monkeypatch):
    path = tmp_path / "state"
    file_io.atomic_write_string_to_file(str(path), "old contents")
    monkeypatch.setattr(file_io, "open", _FullDisk(open), raising=False)
    with pytest.raises(OSError, match="No space left"):
        file_io.atomic_write_string_to_file(str(path), "new contents, much longer")
    assert path.read_text() == "old contents"
    assert [p.name for p in tmp_path.iterdir()] == ["state"]
    monkeypatch.undo()
    with pytest.raises(FileExistsError):
        file_io.atomic_write_string_to_file(str(path), b"x", overwrite=False)
    file_io.atomic_write_string_to_file(str(path), b"new")
    assert path.read_bytes() == b"new" and len(list(tmp_path.iterdir())) == 1


def test_a_failed_save_leaves_the_last_checkpoint_readable(tmp_path, monkeypatch, cpu_only):
    v = tf.Variable(1.0, name="v")
    saver = tf.train.Saver()
    prefix = str(tmp_path / "model")
    with tf.Session() as sess:
        sess.run(v.initializer)
        saver.save(sess, prefix, global_step=1)
        state, meta = tmp_path / "checkpoint", tmp_path / "model-1.meta"
        before = state.read_text(), meta.read_bytes()
        for target in ("checkpoint.tmp", "model-1.meta.tmp"):
            monkeypatch.setattr(file_io, "open", _FullDisk(open, target), raising=False)
            with pytest.raises(OSError, match="No space left"):
                saver.save(sess, prefix, global_step=1)
            monkeypatch.undo()
    assert (state.read_text(), meta.read_bytes()) == before
    assert not [p.name for p in tmp_path.iterdir() if ".tmp" in p.name]
    assert tf.train.latest_checkpoint(str(tmp_path)) == prefix + "-1"


def test_a_damaged_state_file_is_named_and_ignored_like_tf(tmp_path, caplog):
    (tmp_path / "checkpoint").write_text('model_checkpoint_path: "model-1\n garbage {{{')
    with caplog.at_level(logging.WARNING):
        assert tf.train.latest_checkpoint(str(tmp_path)) is None
    assert "%s: Checkpoint ignored" % (tmp_path / "checkpoint") in caplog.text
    (tmp_path / "checkpoint").write_bytes(b"\xff\xfe\x00")
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        assert tf.train.get_checkpoint_state(str(tmp_path)) is None
    assert "%s: Checkpoint ignored" % (tmp_path / "checkpoint") in caplog.text
