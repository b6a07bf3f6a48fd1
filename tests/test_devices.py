"""Devices of a process: emulated cards, CUDA_VISIBLE_DEVICES, tf.test and device_lib.

Book sections: "Installation" and "Managing the GPU RAM" (Figure 12-3).
"""

import re

import pytest

import minitf as tf


def _mapping(capsys, config=None):
    cfg = config or tf.ConfigProto()
    cfg.log_device_placement = True
    tf.Session(config=cfg).close()
    return capsys.readouterr().out.splitlines()


def test_cuda_visible_devices_renumbers_cards(monkeypatch, capsys):
    """Figure 12-3: with CUDA_VISIBLE_DEVICES=3,2 the program's /gpu:0 is card 3, /gpu:1 card 2."""
    tf.config.emulate_gpus(4)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,2")
    lines = _mapping(capsys)
    assert lines == [
        "Device mapping:",
        "/job:localhost/replica:0/task:0/device:GPU:0 -> device: 0, name: minitf emulated GPU, "
        "pci bus id: 0000:04:00.0, compute capability: 7.0",
        "/job:localhost/replica:0/task:0/device:GPU:1 -> device: 1, name: minitf emulated GPU, "
        "pci bus id: 0000:03:00.0, compute capability: 7.0"]
    with tf.device("/gpu:0"):
        a = tf.constant(1.0, name="a")
    sess = tf.Session(config=tf.ConfigProto(log_device_placement=True))
    capsys.readouterr()
    sess.run(a)
    assert "a: (Const): /job:localhost/replica:0/task:0/device:GPU:0" in capsys.readouterr().out
    assert [d.name for d in sess.list_devices()][1:] == [
        "/job:localhost/replica:0/task:0/device:GPU:0",
        "/job:localhost/replica:0/task:0/device:GPU:1"]


def test_empty_cuda_visible_devices_hides_every_card(monkeypatch):
    """CUDA_VISIBLE_DEVICES="" (how the book starts a parameter server) gives a CPU-only task."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert [d.device_type for d in tf.Session().list_devices()] == ["CPU"]
    assert tf.test.gpu_device_name() == ""
    assert not tf.test.is_gpu_available()


@pytest.mark.parametrize("value,message", [
    ("1,x", "'x' is not a GPU id"), ("5", "lists GPU 5 but this machine has 2 GPU card(s)"),
    ("1,1", "lists GPU 1 twice")])
def test_malformed_cuda_visible_devices(monkeypatch, value, message):
    """A malformed CUDA_VISIBLE_DEVICES is a clear InvalidArgumentError, not a silent guess."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", value)
    with pytest.raises(tf.errors.InvalidArgumentError, match=re.escape(message)):
        tf.Session()


def test_tf_test_helpers_with_emulated_and_no_cards():
    """tf.test answers like a CUDA machine for emulated cards, and honestly about real CUDA."""
    assert tf.test.gpu_device_name() == "/device:GPU:0"
    assert tf.test.is_gpu_available()
    assert not tf.test.is_gpu_available(cuda_only=True)
    assert not tf.test.is_built_with_cuda()
    assert tf.test.is_gpu_available(min_cuda_compute_capability=(7, 0))
    assert not tf.test.is_gpu_available(min_cuda_compute_capability=(9, 0))
    tf.config.emulate_gpus(0)
    assert tf.test.gpu_device_name() == ""
    assert not tf.test.is_gpu_available()


def test_device_lib_lists_local_devices():
    """device_lib.list_local_devices(): names without a job, types, memory, descriptions."""
    devs = tf.device_lib.list_local_devices()
    assert [(d.name, d.device_type) for d in devs] == [
        ("/device:CPU:0", "CPU"), ("/device:GPU:0", "GPU"), ("/device:GPU:1", "GPU")]
    assert devs[0].memory_limit == 268435456 and devs[1].memory_limit == 4 << 30
    assert devs[1].physical_device_desc.startswith("device: 0, name: minitf emulated GPU")
    assert 'name: "/device:GPU:1"' in repr(devs[2])
    cpu_only = tf.device_lib.list_local_devices(tf.ConfigProto(device_count={"GPU": 0}))
    assert [d.name for d in cpu_only] == ["/device:CPU:0"]


def test_emulate_gpus_and_environment(monkeypatch):
    """MINITF_EMULATED_GPUS sets the card count; emulate_gpus overrides it; bad values fail."""
    tf.config.emulate_gpus(None)
    monkeypatch.setenv("MINITF_EMULATED_GPUS", "3")
    assert len(tf.device_lib.list_local_devices()) == 4
    monkeypatch.setenv("MINITF_EMULATED_GPUS", "many")
    with pytest.raises(ValueError, match="MINITF_EMULATED_GPUS must be a number >= 0"):
        tf.device_lib.list_local_devices()
    tf.config.emulate_gpus(1, memory_limit=1 << 30)
    (gpu,) = [d for d in tf.device_lib.list_local_devices() if d.device_type == "GPU"]
    assert gpu.memory_limit == 1 << 30
    for bad in (-1, 1.5, True):
        with pytest.raises(ValueError, match="emulate_gpus expects a number of cards"):
            tf.config.emulate_gpus(bad)
    with pytest.raises(ValueError, match="memory_limit must be a positive number of bytes"):
        tf.config.emulate_gpus(1, memory_limit=0)
