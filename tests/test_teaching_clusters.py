"""The clusters notebooks 07-09 start: ``minitf.teaching.in_process_cluster``, a LocalCluster
whose ps is started GPU-less (``job_env``), and the views of Figures 12-6 and 12-7 drawn from
what those clusters really did.

Book sections: "Multiple Devices Across Multiple Servers", "Pinning Operations Across Tasks",
"Sharing State Across Sessions Using Resource Containers".
"""

import io
import xml.etree.ElementTree as ET
from contextlib import redirect_stdout

import pytest

import minitf as tf
from minitf.distributed import LocalCluster
from minitf.teaching import in_process_cluster
from minitf.viz import ClusterView
from minitf.viz.container_view import ContainerView, variables_used
from minitf.viz.routing import rects_meet, segment_rect, segments

GPU_LESS_PS = {"ps": tf.ConfigProto(device_count={"GPU": 0})}


@pytest.mark.usefixtures("no_thread_left")
def test_in_process_cluster_stops_every_server_even_on_error(two_gpus):
    """The helper yields one started server per task, with a GPU-less ps when asked, and stops
    them all when the block ends, also when the block raises."""
    with pytest.raises(RuntimeError, match="boom"):
        with in_process_cluster({"ps": 1, "worker": 2}, GPU_LESS_PS) as servers:
            assert sorted(servers) == ["ps/0", "worker/0", "worker/1"]
            with tf.Session(servers["worker/1"].target) as sess:
                names = sorted(d.name for d in sess.list_devices())
            raise RuntimeError("boom")
    assert not any("/job:ps" in n and "GPU" in n for n in names)
    assert "/job:worker/replica:0/task:1/device:GPU:1" in names
    assert all(s._stopped for s in servers.values())


def test_in_process_cluster_starts_on_new_ports_when_a_picked_one_was_taken(monkeypatch):
    """A port free when the helper picked it can be taken before its server binds it (another
    process; parallel test workers): the servers started so far stop and the cluster starts
    again on fresh ports, instead of failing with "Could not start gRPC server"."""
    import socket

    from minitf import teaching

    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen(1)
    taken = "127.0.0.1:%d" % holder.getsockname()[1]
    picks = []
    real = teaching.local_addresses

    def first_one_taken(n):
        addresses = real(n)
        if not picks:
            addresses[-1] = taken  # the last task of the first job finds its port taken
        picks.append(addresses)
        return addresses

    monkeypatch.setattr(teaching, "local_addresses", first_one_taken)
    try:
        with in_process_cluster({"ps": 1, "worker": 2}) as servers:
            assert taken not in [s.target.split("//")[-1] for s in servers.values()]
            with tf.Session(servers["worker/1"].target) as sess:
                assert sess.run(tf.constant(3.0) * 2) == 6.0
    finally:
        holder.close()
    assert len(picks) >= 3 and taken in picks[0]  # one job's pick per call, twice over
    assert all(s._stopped for s in servers.values())


def test_book_pinning_example_unpinned_c_takes_the_first_gpu_of_the_cluster(two_gpus):
    """The book's "Pinning Operations Across Tasks" graph through worker 1's master: a on the ps
    CPU, b on worker 0's GPU 1, and the unpinned c on the first GPU in TF 1.15's device order,
    /job:worker/replica:0/task:0/device:GPU:0 (not the master's own task, as the book says)."""
    with tf.device("/job:ps/task:0/cpu:0"):
        a = tf.constant(1.0)
    with tf.device("/job:worker/task:0/gpu:1"):
        b = a + 2
    c = a + b
    log = io.StringIO()
    with in_process_cluster({"ps": 1, "worker": 2}, GPU_LESS_PS) as servers, redirect_stdout(log):
        config = tf.ConfigProto(log_device_placement=True)
        with tf.Session(servers["worker/1"].target, config=config) as sess:
            assert sess.run(c) == 4.0
    assert all(s._stopped for s in servers.values())
    placed = dict(line.split(": ", 1) for line in log.getvalue().splitlines() if ": (" in line)
    assert placed["Const"] == "(Const): /job:ps/replica:0/task:0/device:CPU:0"
    assert placed["add"] == "(AddV2): /job:worker/replica:0/task:0/device:GPU:1"
    assert placed["add_1"] == "(AddV2): /job:worker/replica:0/task:0/device:GPU:0"


def test_local_cluster_job_env_rejects_unknown_jobs():
    with pytest.raises(
        ValueError, match=r"job_env names jobs that are not in the cluster: \['pss'\]"
    ):
        LocalCluster({"ps": 1}, job_env={"pss": {"CUDA_VISIBLE_DEVICES": ""}})


@pytest.mark.cluster
@pytest.mark.usefixtures("no_child_process_left")
def test_figure_12_6_from_a_local_cluster_with_a_gpu_less_ps():
    """A LocalCluster whose workers have two emulated cards and whose ps is started with
    CUDA_VISIBLE_DEVICES="" (the book's advice): the session lists no GPU on the ps, and the
    view shows the client, the master, both services per task and GPUs only on the workers."""
    import os

    env = dict(os.environ, MINITF_EMULATED_GPUS="2")
    with LocalCluster(
        {"ps": 1, "worker": 2},
        cpu_only=False,
        env=env,
        job_env={"ps": {"CUDA_VISIBLE_DEVICES": ""}},
    ) as cluster:
        with tf.Session(cluster.target("worker", 1)) as sess:
            devices = [d.name for d in sess.list_devices()]
    assert [d for d in devices if d.startswith("/job:ps")] == [
        "/job:ps/replica:0/task:0/device:CPU:0"
    ]
    assert sum("GPU" in d for d in devices) == 4
    view = ClusterView(cluster.cluster_spec, devices=devices, master="worker/1")
    svg = view.to_svg()
    assert "devices: CPU:0 (no GPU)" in svg and svg.count("CPU:0, GPU:0, GPU:1") == 2
    assert svg.count("master + worker services") == 3


def _four_clients(servers):
    """Figure 12-7: A and B use x in the default container, C and D the x of my-problem-1, and
    C also the default x; returns {client: [(graph, {name: value read})]}."""

    def run(target, container, init):
        g = tf.Graph()
        with g.as_default(), tf.device("/job:ps/task:0"), tf.container(container):
            x = tf.Variable(0.0, name="x")
            inc = tf.assign_add(x, 1.0)
        with tf.Session(servers[target].target, graph=g) as sess:
            if init:
                sess.run(x.initializer)
            return g, {"x": float(sess.run(inc))}

    return {
        "client A": [run("worker/0", "", True)],
        "client B": [run("worker/1", "", False)],
        "client C": [run("worker/0", "my-problem-1", True), run("worker/0", "", False)],
        "client D": [run("worker/1", "my-problem-1", False)],
    }


def test_figure_12_7_who_sees_which_x(cpu_only):
    """The containers come from the ps's resource manager, each client's arrows go to the x its
    graph resolves to, labelled with the value it read; labels cross no arrow and no label."""
    with in_process_cluster({"ps": 1, "worker": 2}) as servers:
        clients = _four_clients(servers)
        view = ContainerView({"ps/0": servers["ps/0"]}, clients)
        svg = view.to_svg()
    assert all(s._stopped for s in servers.values())
    ET.fromstring(svg)
    assert view.containers == {"ps/0": {"my-problem-1": ["x"], "ps": ["x"]}}
    links = [(c, row[1], v) for c, row, v in view.links]
    assert links == [
        ("client A", "ps", 1.0),
        ("client B", "ps", 2.0),
        ("client C", "my-problem-1", 1.0),
        ("client C", "ps", 3.0),
        ("client D", "my-problem-1", 2.0),
    ]
    assert 'container "ps"  (the default one)' in svg and 'container "my-problem-1"' in svg
    strokes = [segment_rect(p, q) for a in view.arrows for p, q in segments(a.points)]
    for i, arrow in enumerate(view.arrows):
        assert not any(rects_meet(arrow.label_box, s) for s in strokes)
        assert not any(rects_meet(arrow.label_box, b.label_box) for b in view.arrows[i + 1 :])


def test_variables_used_needs_a_pinned_task():
    with pytest.raises(ValueError, match="pin it to a task"):
        tf.Variable(1.0, name="loose")
        variables_used(tf.get_default_graph())
