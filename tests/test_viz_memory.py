"""MemoryView: each card's memory by process (book: "Managing the GPU RAM", Figure 12-4)."""

import xml.etree.ElementTree as ET

import minitf as tf
from minitf.runtime import gpu_process_state
from minitf.viz import MemoryView

GIB = 1 << 30
CARDS = [
    {
        "id": 0,
        "name": "minitf emulated GPU",
        "emulated": True,
        "memory_total": 4 * GIB,
        "memory_used": int(3.2 * GIB),
        "memory_free": int(0.8 * GIB),
        "processes": [
            {"pid": 100, "name": "python3 a.py", "memory": int(1.6 * GIB)},
            {"pid": 200, "name": "python3 b.py", "memory": int(1.6 * GIB)},
        ],
    }
]


def _rects(svg):
    ns = "{http://www.w3.org/2000/svg}"
    return ET.fromstring(svg).iter(ns + "rect")


def test_two_processes_at_04_take_two_fifths_each():
    """Figure 12-4: two 40 % segments, the rest free; this process's segment is outlined and
    carries its tensors' in-use and peak strips."""
    view = MemoryView(CARDS, this_pid=200, in_use={0: (GIB // 2, GIB)})
    svg = view.to_svg()
    widths = [float(r.get("width")) for r in _rects(svg) if r.get("height") == "22"]
    assert widths[0] == 560  # the whole card
    assert abs(widths[1] - 224) < 0.5 and abs(widths[2] - 224) < 0.5
    assert "pid 200 python3 b.py: 1638 MiB (this process)" in svg
    assert "tensors in use: 512 MiB" in svg and "tensors peak: 1024 MiB" in svg
    assert svg == MemoryView(CARDS, this_pid=200, in_use={0: (GIB // 2, GIB)}).to_svg()
    assert view._repr_svg_() == svg


def test_live_view_shows_this_process_after_a_run(tmp_path, monkeypatch):
    """After a session ran, the live view shows this process on both emulated cards."""
    monkeypatch.setenv("MINITF_STATE_DIR", str(tmp_path))
    gpu_process_state.release_gpu_memory()
    try:
        tf.Session(
            config=tf.ConfigProto(gpu_options=tf.GPUOptions(per_process_gpu_memory_fraction=0.25))
        ).run(tf.constant(1.0))
        view = MemoryView()
        svg = view.save(str(tmp_path / "m.svg")) and (tmp_path / "m.svg").read_text()
        assert "GPU 0 (emulated)" in svg and "GPU 1 (emulated)" in svg
        assert svg.count("(this process)</title>") == 2
        assert "1024 MiB / 4096 MiB" in svg
    finally:
        gpu_process_state.release_gpu_memory()


def test_cpu_only_view_says_so():
    """Without cards the view says the process is CPU only (and is still valid SVG)."""
    svg = MemoryView([], in_use={}).to_svg()
    assert "No GPU card in this process" in svg
    ET.fromstring(svg)
