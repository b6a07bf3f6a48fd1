import socket

import pytest

from minitf import teaching


def test_local_addresses_are_bindable_loopback_ports():
    addresses = teaching.local_addresses(3)
    assert len(addresses) == 3
    for address in addresses:
        host, port = address.rsplit(":", 1)
        assert host == "127.0.0.1"
        with socket.socket() as s:
            s.bind((host, int(port)))


def test_local_addresses_rejects_negative_count():
    with pytest.raises(ValueError, match="count must be >= 0"):
        teaching.local_addresses(-1)


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
