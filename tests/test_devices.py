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
        "Created TensorFlow device (/job:localhost/replica:0/task:0/device:GPU:0 with 3796 MB "
        "memory) -> physical GPU (device: 0, name: minitf emulated GPU, pci bus id: "
        "0000:04:00.0, compute capability: 7.0)",
        "Created TensorFlow device (/job:localhost/replica:0/task:0/device:GPU:1 with 3796 MB "
        "memory) -> physical GPU (device: 1, name: minitf emulated GPU, pci bus id: "
        "0000:03:00.0, compute capability: 7.0)",
        "Device mapping:",
        "/job:localhost/replica:0/task:0/device:GPU:0 -> device: 0, name: minitf emulated GPU, "
        "pci bus id: 0000:04:00.0, compute capability: 7.0",
        "/job:localhost/replica:0/task:0/device:GPU:1 -> device: 1, name: minitf emulated GPU, "
        "pci bus id: 0000:03:00.0, compute capability: 7.0",
    ]
    with tf.device("/gpu:0"):
        a = tf.constant(1.0, name="a")
    sess = tf.Session(config=tf.ConfigProto(log_device_placement=True))
    capsys.readouterr()
    sess.run(a)
    assert "a: (Const): /job:localhost/replica:0/task:0/device:GPU:0" in capsys.readouterr().out
    assert [d.name for d in sess.list_devices()][1:] == [
        "/job:localhost/replica:0/task:0/device:GPU:0",
        "/job:localhost/replica:0/task:0/device:GPU:1",
    ]


def test_empty_cuda_visible_devices_hides_every_card(monkeypatch):
    """CUDA_VISIBLE_DEVICES="" (how the book starts a parameter server) gives a CPU-only task."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert [d.device_type for d in tf.Session().list_devices()] == ["CPU"]
    assert tf.test.gpu_device_name() == ""
    assert not tf.test.is_gpu_available()


@pytest.mark.parametrize(
    "value,message",
    [
        ("1,x", "'x' is not a GPU id"),
        ("5", "lists GPU 5 but this machine has 2 GPU card(s)"),
        ("1,1", "lists GPU 1 twice"),
    ],
)
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
        ("/device:CPU:0", "CPU"),
        ("/device:GPU:0", "GPU"),
        ("/device:GPU:1", "GPU"),
    ]
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


def test_emulate_gpus_stands_in_for_the_machines_real_cards(monkeypatch):
    """On a machine with one real card, emulate_gpus(4) gives four emulated ones (a page
    written for four cards runs there); emulate_gpus(None) gives the real card back, and the
    environment's count applies only where there is no real card."""
    from minitf.runtime import devices

    real = [devices.PhysicalGPU(0, "NVIDIA H100 80GB HBM3", 80 << 30, (9, 0), False)]
    monkeypatch.setattr(devices, "_real_gpus", lambda: real)
    monkeypatch.setenv("MINITF_EMULATED_GPUS", "3")
    tf.config.emulate_gpus(None)
    assert devices.machine_gpus() == real and devices.real_cards_in_use()
    tf.config.emulate_gpus(4)
    cards = devices.machine_gpus()
    assert len(cards) == 4 and all(c.emulated for c in cards)
    assert not devices.real_cards_in_use()
    assert [c.physical_id for c in devices.visible_gpus()] == [0, 1, 2, 3]
    names = [d.name for d in tf.device_lib.list_local_devices() if d.device_type == "GPU"]
    assert names == ["/device:GPU:%d" % i for i in range(4)]
    tf.config.emulate_gpus(0)
    assert devices.machine_gpus() == []
    tf.config.emulate_gpus(None)
    assert devices.machine_gpus() == real


# -- GPU memory (book: "Managing the GPU RAM") -----------------------------------------------

import numpy as np  # noqa: E402

from minitf.runtime import allocator, card_registry  # noqa: E402


def test_first_run_reserves_card_memory(fresh_cards):
    """A session takes (nearly) all of every visible card at its first run, not before."""
    tf.config.emulate_gpus(2, memory_limit=1 << 30)
    sess = tf.Session()
    assert card_registry.usage(0) == []
    sess.run(tf.constant(1.0))
    (entry,) = card_registry.usage(0)
    expected = allocator.GpuMemoryPolicy(1 << 30, tf.GPUOptions(), free_bytes=1 << 30).limit_bytes
    assert entry["bytes"] == expected and entry["pid"] > 0
    assert [e["bytes"] for e in card_registry.usage(1)] == [expected]


def test_fraction_limits_the_reservation_and_first_session_wins(fresh_cards):
    """per_process_gpu_memory_fraction=0.4 reserves 40 % of each card; later sessions share it."""
    tf.config.emulate_gpus(1, memory_limit=1 << 30)
    cfg = tf.ConfigProto(gpu_options=tf.GPUOptions(per_process_gpu_memory_fraction=0.4))
    tf.Session(config=cfg).run(tf.constant(1.0))
    tf.Session().run(tf.constant(2.0))
    assert [e["bytes"] for e in card_registry.usage(0)] == [int(0.4 * (1 << 30))]


def test_gpu_tensors_and_variables_count_against_the_card(fresh_cards):
    """Op outputs on a GPU live in its allocator while the step needs them; variables stay
    allocated, and so does a constant (the initial value) while the session's kernels live."""
    tf.config.emulate_gpus(1, memory_limit=1 << 30)
    with tf.device("/gpu:0"):
        v = tf.Variable(np.zeros((256, 256), np.float32), name="v")
        big = tf.matmul(v, v, name="big")
    sess = tf.Session()
    sess.run(v.initializer)
    alloc = sess._impl.devices[1].allocator
    tensor = 256 * 256 * 4
    assert alloc.bytes_in_use == 2 * tensor  # the variable and its initial value
    sess.run(big)
    assert alloc.bytes_in_use == 2 * tensor
    assert alloc.peak_bytes_in_use >= 3 * tensor  # and the product, while its _Send needs it
    sess.close()
    assert alloc.bytes_in_use == tensor  # the variable outlives the session, in its container


def test_an_op_too_big_for_its_card_fails_with_oom(fresh_cards):
    """ResourceExhaustedError names the op, the shape, the device and the sizes."""
    tf.config.emulate_gpus(1, memory_limit=1 << 20)
    with tf.device("/gpu:0"):
        big = tf.zeros([600, 600], name="big") + 1.0
    with pytest.raises(tf.errors.ResourceExhaustedError) as info:
        tf.Session().run(big)
    msg = str(info.value)
    assert (
        "OOM when allocating tensor with shape[600,600] and type float on "
        "/job:localhost/replica:0/task:0/device:GPU:0 by allocator GPU_0_bfc" in msg
    )
    assert "[[{{node" in msg


def test_allow_growth_grows_and_never_shrinks(fresh_cards):
    """allow_growth starts small, grows with the work, and keeps what it took."""
    tf.config.emulate_gpus(1, memory_limit=1 << 30)
    cfg = tf.ConfigProto(gpu_options=tf.GPUOptions(allow_growth=True))
    with tf.device("/gpu:0"):
        small = tf.zeros([10], name="small") + 1.0
        large = tf.zeros([1024, 1024], name="large") + 1.0
    sess = tf.Session(config=cfg)
    sess.run(small)
    first = card_registry.usage(0)[0]["bytes"]
    sess.run(large)
    grown = card_registry.usage(0)[0]["bytes"]
    sess.run(small)
    assert first < grown == card_registry.usage(0)[0]["bytes"]
    assert grown >= 4 << 20


GPU0, GPU1, GPU2 = ("/job:localhost/replica:0/task:0/device:GPU:%d" % i for i in range(3))


def _virtual(*per_card, **gpu_options):
    """A ConfigProto with gpu_options.experimental.virtual_devices, one entry per card."""
    cfg = tf.ConfigProto(log_device_placement=True, gpu_options=tf.GPUOptions(**gpu_options))
    for mbs in per_card:
        cfg.gpu_options.experimental.virtual_devices.add(memory_limit_mb=mbs)
    return cfg


def test_virtual_devices_split_a_card_into_logical_gpus(fresh_cards, capsys):
    """TF's virtual_devices: card 0 becomes GPU:0 (256 MB) and GPU:1 (128 MB), card 1 stays
    one GPU:2; each logical GPU has its own allocator and limit, and the process reserves
    their sum on card 0."""
    tf.config.emulate_gpus(2, memory_limit=1 << 30)
    cfg = _virtual([256, 128], [])
    assert str(cfg.gpu_options).startswith(
        "experimental {\n  virtual_devices {\n    memory_limit_mb: 256.0\n"
    )
    with tf.device("/gpu:1"):
        fits = tf.zeros([1024, 1024], name="fits") + 1.0  # 4 MiB
        too_big = tf.zeros([6000, 6000], name="too_big") + 1.0  # 137 MiB > 128 MB
    sess = tf.Session(config=cfg)
    out = capsys.readouterr().out
    created = [line for line in out.splitlines() if line.startswith("Created TensorFlow")]
    assert [c.split(" -> ")[0] for c in created] == [
        "Created TensorFlow device (%s with 256 MB memory)" % GPU0,
        "Created TensorFlow device (%s with 128 MB memory)" % GPU1,
        "Created TensorFlow device (%s with %d MB memory)"
        % (GPU2, allocator.GpuMemoryPolicy(1 << 30, None).limit_bytes >> 20),
    ]
    # both logical GPUs of card 0 name the same physical card
    assert created[0].split("physical GPU (")[1] == created[1].split("physical GPU (")[1]
    assert created[0].split("physical GPU (")[1].startswith("device: 0, ")
    assert created[2].split("physical GPU (")[1].startswith("device: 1, ")
    limits = {d.name: d.memory_limit_bytes for d in sess.list_devices()}
    assert limits[GPU0] == 256 << 20 and limits[GPU1] == 128 << 20 and limits[GPU2] == 1 << 30
    assert sess.run(fits).shape == (1024, 1024)
    assert sum(e["bytes"] for e in card_registry.usage(0)) == 384 << 20
    assert sess._impl.devices[2].allocator is not sess._impl.devices[1].allocator
    with pytest.raises(tf.errors.ResourceExhaustedError, match="by allocator GPU_1_bfc"):
        sess.run(too_big)


def test_virtual_devices_with_allow_growth_grow_each_logical_gpu(fresh_cards):
    tf.config.emulate_gpus(1, memory_limit=1 << 30)
    with tf.device("/gpu:1"):
        big = tf.zeros([1024, 1024]) + 1.0
    with tf.device("/cpu:0"):
        on_cpu = tf.constant(1.0)
    sess = tf.Session(config=_virtual([256, 128], allow_growth=True))
    sess.run(on_cpu)
    assert sum(e["bytes"] for e in card_registry.usage(0)) == 0
    sess.run(big)
    grown = sum(e["bytes"] for e in card_registry.usage(0))
    assert 4 << 20 <= grown <= 128 << 20


@pytest.mark.parametrize(
    "per_card,options,error,text",
    [
        (
            [[100], [100]],
            {"per_process_gpu_memory_fraction": 0.5},
            tf.errors.InvalidArgumentError,
            "It's invalid to set per_process_gpu_memory_fraction when virtual_devices is set.",
        ),
        (
            [[100]],
            {},
            tf.errors.InvalidArgumentError,
            "doesn't match the number of elements in the virtual_devices list. #GPUs in "
            "visible_device_list: 2 virtual_devices.size(): 1",
        ),
        ([[0], []], {}, tf.errors.InvalidArgumentError, "memory_limit_mb must be > 0, got 0.0"),
        ([[float("nan")], []], {}, tf.errors.InvalidArgumentError, "memory_limit_mb must be > 0"),
        (
            [[5000], []],
            {},
            tf.errors.InvalidArgumentError,
            "memory_limit of 4.88G (5242880000 bytes) is larger than the GPU's memory of 4.00G",
        ),
        (
            [[3000, 3000], []],
            {},
            tf.errors.InvalidArgumentError,
            "The virtual devices of GPU 0 ask for 5.86G (6291456000 bytes) in all, more than its "
            "4.00G (4294967296 bytes)",
        ),
    ],
)
def test_bad_virtual_devices_are_refused_at_session_creation(per_card, options, error, text):
    with pytest.raises(error) as info:
        tf.Session(config=_virtual(*per_card, **options))
    assert text in info.value.message


def test_fewer_gpus_than_virtual_devices_is_an_unknown_error():
    cfg = _virtual([100], [100])
    cfg.device_count["GPU"] = 1
    with pytest.raises(
        tf.errors.UnknownError,
        match="Not enough GPUs to create virtual devices. num_gpus_to_use: 1 #virtual_devices: 2",
    ):
        tf.Session(config=cfg)


@pytest.mark.parametrize("fraction", [-0.1, 1.5])
def test_bad_memory_fraction_is_refused_at_session_creation(fraction):
    """A fraction outside [0, 1] is an InvalidArgumentError naming the value."""
    cfg = tf.ConfigProto(gpu_options=tf.GPUOptions(per_process_gpu_memory_fraction=fraction))
    with pytest.raises(tf.errors.InvalidArgumentError, match=str(fraction)):
        tf.Session(config=cfg)


_PROGRAM = """
import sys
import minitf as tf
tf.config.emulate_gpus(1, memory_limit=4 << 30)
cfg = tf.ConfigProto()
cfg.gpu_options.per_process_gpu_memory_fraction = 0.4
with tf.device("/gpu:0"):
    c = tf.constant(3.0) * 2.0
try:
    print(tf.Session(config=cfg).run(c), flush=True)
except tf.errors.ResourceExhaustedError as e:
    print("OOM:", e, flush=True)
    sys.exit(3)
sys.stdin.readline()
"""


def test_three_programs_at_04_share_a_card_only_two_fit(fresh_cards, tmp_path):
    """Figure 12-4: two programs with fraction 0.4 run side by side on one card; a third gets
    the book's CUDA_ERROR_OUT_OF_MEMORY; when one exits its memory is free again."""
    import os
    import subprocess
    import sys

    env = dict(
        os.environ,
        PYTHONPATH=os.path.dirname(os.path.dirname(tf.__file__)),
        MINITF_STATE_DIR=str(tmp_path),
    )
    procs = []
    try:
        for _ in range(2):
            p = subprocess.Popen(
                [sys.executable, "-c", _PROGRAM],
                env=env,
                text=True,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
            )
            assert p.stdout.readline().strip() == "6.0"
            procs.append(p)
        third = subprocess.run(
            [sys.executable, "-c", _PROGRAM],
            env=env,
            text=True,
            input="",
            capture_output=True,
            timeout=60,
        )
        assert third.returncode == 3
        assert (
            "failed to allocate 1.60G (1717986918 bytes) from device: "
            "CUDA_ERROR_OUT_OF_MEMORY" in third.stdout
        )
        procs[0].communicate("\n", timeout=30)
        again = subprocess.run(
            [sys.executable, "-c", _PROGRAM],
            env=env,
            text=True,
            input="\n",
            capture_output=True,
            timeout=60,
        )
        assert again.returncode == 0 and again.stdout.strip() == "6.0"
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
            p.communicate(timeout=30)


def test_every_session_logs_its_gpus_on_stderr(capsys, monkeypatch):
    """TF logs "Created TensorFlow device" per GPU at every session creation, not only with
    log_device_placement (outside a notebook kernel); TF_CPP_MIN_LOG_LEVEL=1 hides it."""
    import sys

    monkeypatch.delitem(sys.modules, "ipykernel", raising=False)
    for _ in range(2):
        tf.Session().close()
        out, err = capsys.readouterr()
        assert out == ""
        assert [ln.split(" with ")[0] for ln in err.splitlines()] == [
            "Created TensorFlow device (/job:localhost/replica:0/task:0/device:GPU:0",
            "Created TensorFlow device (/job:localhost/replica:0/task:0/device:GPU:1",
        ]
    monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "1")
    tf.Session().close()
    assert capsys.readouterr() == ("", "")
    tf.config.emulate_gpus(0)
    monkeypatch.delenv("TF_CPP_MIN_LOG_LEVEL")
    tf.Session().close()
    assert capsys.readouterr().err == ""  # no GPU, nothing to log
