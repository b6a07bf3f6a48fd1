import os
import socket
import subprocess
import sys

import numpy as np
import pytest

import minitf as tf
from minitf import teaching
from minitf.distributed import local_cluster
from minitf.viz import MemoryView, StackView


def _listens(port):
    """Whether a server's socket (SO_REUSEADDR, as gRPC sets it) binds ``port`` and listens."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", port))
        s.listen()
        return True


def _taken_by_a_draw(port, elsewhere=False):
    """Whether a plain bind of ``port`` (what another draw tries) is refused, here or in a
    process of its own."""
    code = "import socket; socket.socket().bind(('127.0.0.1', %d))" % port
    if elsewhere:
        return subprocess.run([sys.executable, "-c", code], capture_output=True).returncode != 0
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


def test_local_addresses_are_bindable_loopback_ports():
    addresses = teaching.local_addresses(3)
    assert len(addresses) == 3
    for address in addresses:
        host, port = address.rsplit(":", 1)
        assert host == "127.0.0.1"
        assert _listens(int(port))


@pytest.mark.skipif(not local_cluster.HOLDS_PORTS, reason="ports are held on Linux only")
def test_a_port_handed_out_stays_held_from_other_draws_until_many_later_ones(monkeypatch):
    """A notebook draws its cluster's ports cells before it starts the servers; meanwhile no
    other draw, in this process or another (a second notebook, a LocalCluster), may take
    them (CI's notebook run once failed "Could not start gRPC server" so)."""
    monkeypatch.setattr(local_cluster, "_held", local_cluster.OrderedDict())
    monkeypatch.setattr(local_cluster, "HELD_PORTS", 3)
    first = local_cluster.free_port()
    assert _taken_by_a_draw(first) and _taken_by_a_draw(first, elsewhere=True)
    assert _listens(first)  # a server binds beside the held socket
    later = [local_cluster.free_port() for _ in range(3)]
    assert first not in later and all(_taken_by_a_draw(p) for p in later)
    assert not _taken_by_a_draw(first)  # the oldest was let go
    assert len(local_cluster._held) == 3


def test_free_port_draws_below_the_ephemeral_range():
    """A port from bind(0) can be handed out again (a Jupyter kernel's ports, an outgoing
    connection) before the server binds it; ports drawn below that range cannot."""
    low, high = local_cluster.ephemeral_ports()
    assert 1024 < low <= high
    ports = {local_cluster.free_port() for _ in range(20)}
    assert all(local_cluster.LOWEST_PICKED_PORT <= p < low for p in ports)
    assert len(ports) > 1  # drawn, not the same port every time
    assert _listens(ports.pop())  # free for a server when handed out


def test_free_port_skips_a_port_something_holds(monkeypatch):
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        taken = held.getsockname()[1]
        with socket.socket() as other:
            other.bind(("127.0.0.1", 0))
            free = other.getsockname()[1]
        draws = iter([taken, free])
        monkeypatch.setattr(local_cluster, "ephemeral_ports", lambda: (65535, 65535))
        monkeypatch.setattr(local_cluster, "LOWEST_PICKED_PORT", taken)
        monkeypatch.setattr(local_cluster.random.SystemRandom, "randrange", lambda *a: next(draws))
        assert local_cluster.free_port() == free


def test_free_port_lets_the_kernel_pick_when_no_room_is_below_its_range(monkeypatch):
    real_low, real_high = local_cluster.ephemeral_ports()
    low = local_cluster.LOWEST_PICKED_PORT + 10
    monkeypatch.setattr(local_cluster, "ephemeral_ports", lambda: (low, 60999))
    port = local_cluster.free_port()
    assert real_low <= port <= real_high  # bind(0)'s choice


def test_local_addresses_rejects_negative_count():
    with pytest.raises(ValueError, match="count must be >= 0"):
        teaching.local_addresses(-1)


def test_device_check_says_where_the_cards_come_from(capsys, monkeypatch):
    monkeypatch.delenv("MINITF_EMULATED_GPUS", raising=False)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    teaching.device_check()
    assert capsys.readouterr().out.splitlines() == [
        "No CUDA driver: minitf emulates 2 GPU card(s) of 4 GiB each (the default).",
        "This process sees 2 GPU device(s).",
    ]
    tf.config.emulate_gpus(0)
    teaching.device_check()
    assert "No GPU at all" in capsys.readouterr().out


def test_software_stack_and_its_figure_12_2_view():
    floors = teaching.software_stack()
    assert [f[0] for f in floors][0] == "Your code" and floors[-1][0] == "GPU cards"
    assert floors[-1] == ("GPU cards", "2 emulated card(s) of 4 GiB", True)
    assert ("CUDA driver", "not found (no NVIDIA driver)", False) in floors
    svg = StackView(floors).to_svg()
    assert "Figure 12-2: the software stack" in svg
    assert svg.count("<rect") == len(floors) and 'stroke-dasharray="4,3"' in svg  # driver absent
    assert StackView([("a", "<b>", True)], title="T").to_svg().count("&lt;b&gt;") == 1


def test_software_stack_of_a_real_machine_with_emulated_cards_asked_for(monkeypatch):
    """The driver floor reports the machine's driver; the card and kernel floors report what
    sessions get: the real card, or the emulated ones emulate_gpus(n) put in its place."""
    from minitf.runtime import devices

    card = devices.PhysicalGPU(0, "NVIDIA H100 80GB HBM3", 80 << 30, (9, 0), False)
    monkeypatch.setattr(devices, "_real_gpus", lambda: [card])
    tf.config.emulate_gpus(None)
    floors = teaching.software_stack()
    assert ("CUDA driver", "found", True) in floors
    assert floors[-1] == ("GPU cards", "1 real card(s)", True)
    tf.config.emulate_gpus(2)
    floors = teaching.software_stack()
    assert ("CUDA driver", "found", True) in floors
    assert floors[-1] == ("GPU cards", "2 emulated card(s) of 4 GiB", True)
    assert (
        "Kernels (cuDNN / CUDA libraries)",
        "numpy kernels (emulated cards too)",
        True,
    ) in floors


def test_memory_view_names_its_figure():
    data = [
        {
            "id": 0,
            "name": "g",
            "emulated": True,
            "memory_total": 100,
            "memory_used": 0,
            "memory_free": 100,
            "processes": [],
            "bus_id": "0000:01:00.0",
        }
    ]
    assert (
        "Figure 12-4: two programs"
        in MemoryView(data, in_use={}, title="Figure 12-4: two programs").to_svg()
    )
    assert ">GPU memory<" in MemoryView(data, in_use={}).to_svg()


def test_traced_run_times_and_traces_a_step():
    g = tf.Graph()
    with g.as_default(), tf.device("/cpu:0"):
        x = tf.constant(np.ones((8, 8), np.float32))
        y = tf.matmul(x, x)
    best, md = teaching.traced_run(g, y, inter=1, intra=1, repeats=2)
    assert best > 0
    assert teaching.threads_used(md) == ["inter-op #0"]
    assert teaching.threads_used(md, "NoSuchOp") == []


GROWING = """
import sys
import minitf as tf
sess = tf.Session()
print("visible", len(sess.list_devices()) - 1)
print("running", flush=True)
sys.stdin.read()
"""


@pytest.mark.cluster
def test_program_lab_runs_programs_side_by_side_and_stops_them(no_child_process_left, monkeypatch):
    monkeypatch.setenv("MINITF_STATE_DIR", os.environ.get("MINITF_STATE_DIR", ""))  # restored
    lab = teaching.ProgramLab("minitf-test-lab-", cards=3)
    try:
        lab.write("p.py", GROWING)
        with lab.running() as procs:
            procs.append(lab.start("p.py", CUDA_VISIBLE_DEVICES="2,0"))
            out = lab.read_until(procs[-1])
            assert procs[-1].poll() is None  # still running
        assert procs[-1].returncode == 0  # stopped when the block ended
        lines = out.splitlines()
        assert lines[-2:] == ["visible 2", "running"]
        # every session logs its GPUs, as TF does (device numbers are the program's own)
        assert [ln.split(" (")[0] for ln in lines[:2]] == ["Created TensorFlow device"] * 2
        assert "pci bus id: 0000:03:00.0" in lines[0]  # /gpu:0 is physical card 2
        assert [c["id"] for c in lab.machine()] == [0, 1, 2]
        assert "MINITF-SMI" in lab.smi()
        assert lab.cards_seen("2,0") == {"/device:GPU:0": 2, "/device:GPU:1": 0}
        assert lab.cards_seen(None, "1") == {"/device:GPU:0": 1}
        with pytest.raises(RuntimeError, match="visible_device_list"):
            lab.cards_seen(None, "7")
    finally:
        lab.cleanup()
    assert not os.path.exists(lab.folder)


@pytest.mark.cluster
def test_read_until_gives_up_on_a_silent_program(no_child_process_left, monkeypatch):
    monkeypatch.setenv("MINITF_STATE_DIR", os.environ.get("MINITF_STATE_DIR", ""))  # restored
    lab = teaching.ProgramLab("minitf-test-lab-")
    try:
        lab.write("quiet.py", "import sys\nsys.stdin.read()\n")
        with lab.running() as procs:
            procs.append(lab.start("quiet.py"))
            with pytest.raises(TimeoutError, match="no 'running' from the program"):
                lab.read_until(procs[-1], timeout=0.5)
        lab.write("exits.py", "print('bye')\n")
        with lab.running() as procs:
            procs.append(lab.start("exits.py"))
            assert lab.read_until(procs[-1]) == "bye"  # it exited without the marker
    finally:
        lab.cleanup()


def test_held_by_groups_memory_by_program():
    data = [
        {"id": 0, "processes": [{"name": "python3 a.py", "memory": 3 * 2**20}]},
        {
            "id": 1,
            "processes": [
                {"name": "python3 a.py", "memory": 2**20},
                {"name": "python3 b.py", "memory": 0},
            ],
        },
    ]
    assert teaching.ProgramLab.held_by(data) == {"a.py": {0: 3, 1: 1}, "b.py": {1: 0}}


@pytest.mark.cluster
@pytest.mark.slow
def test_run_side_by_side_second_program_fails_until_the_programs_share(
    tmp_path, monkeypatch, no_child_process_left
):
    """The chapter's first exercise: the default takes the card, a fraction lets both run; the
    programs' machine is their own: the caller's cards and registry stay out of it, and its
    registry is gone afterwards."""
    monkeypatch.setenv("MINITF_STATE_DIR", str(tmp_path / "caller"))
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)  # TMPDIR is read again
    first, second = teaching.run_side_by_side({}, {})
    assert first == "running"
    assert second.startswith("ResourceExhaustedError: failed to allocate")
    assert "CUDA_ERROR_OUT_OF_MEMORY" in second
    share = {"config": "config.gpu_options.per_process_gpu_memory_fraction = 0.4"}
    assert teaching.run_side_by_side(share, share) == ["running", "running"]
    own = teaching.run_side_by_side({"CUDA_VISIBLE_DEVICES": "0"}, {"CUDA_VISIBLE_DEVICES": "1"})
    assert own == ["running", "running"]
    assert not (tmp_path / "caller").exists(), "the programs used the caller's registry"
    assert not list(tmp_path.glob("minitf-*")), "the programs' registry was left behind"


@pytest.mark.cluster
@pytest.mark.slow
def test_run_side_by_side_reports_a_broken_program(no_child_process_left):
    said = teaching.run_side_by_side({"config": "config.no_such_option = 1"})
    assert said == ["AttributeError: Protocol message ConfigProto has no field no_such_option"]


def test_run_side_by_side_needs_a_card():
    with pytest.raises(ValueError, match="cards must be >= 1"):
        teaching.run_side_by_side({}, cards=0)
