"""ClusterSpec and replica_device_setter: the pure-Python half of the cluster chapter.

Book sections: "Multiple Devices Across Multiple Servers" and "Sharding Variables Across
Multiple Parameter Servers".  Device strings are compared with the tables TF printed for the
same graphs (tests/data/tf_outputs/ex_e_cluster.v1.stdout.txt), parsed at test time.
"""

import ast
import pathlib
import re

import pytest

import minitf as tf

REF = pathlib.Path(__file__).parent / "data" / "tf_outputs"
ROW = re.compile(r"^  (\S+)\s+(\S+)\s+device='([^']*)'")


def _tf_table(heading):
    lines = (REF / "ex_e_cluster.v1.stdout.txt").read_text().splitlines()
    start = lines.index(heading)
    rows = []
    for line in lines[start + 2 :]:
        m = ROW.match(line)
        if not m:
            break
        rows.append(m.groups())
    return rows


def _ours():
    return [(op.name, op.type, op.device) for op in tf.get_default_graph().get_operations()]


@pytest.mark.parametrize(
    "heading,kwargs",
    [
        ("### 2. book: replica_device_setter(ps_tasks=2)", dict(ps_tasks=2)),
        (
            "### 2. replica_device_setter(ps_tasks=2, ps_device='/job:ps', "
            "worker_device='/job:worker/task:0/cpu:0')",
            dict(ps_tasks=2, ps_device="/job:ps", worker_device="/job:worker/task:0/cpu:0"),
        ),
        (
            "### 2. replica_device_setter(cluster=spec)  [ps_tasks from spec]",
            dict(
                cluster={
                    "ps": ["127.0.0.1:1", "127.0.0.1:2"],
                    "worker": ["127.0.0.1:3", "127.0.0.1:4", "127.0.0.1:5"],
                }
            ),
        ),
    ],
)
def test_replica_device_setter_matches_tf(heading, kwargs, book_setter_graph):
    """Round robin over ps tasks for the 5 variables, worker_device as default, nested blocks
    merged field by field — exactly TF's op.device strings."""
    book_setter_graph(tf.train.replica_device_setter(**kwargs))
    expected = _tf_table(heading)
    assert len(expected) >= 20
    assert _ours()[: len(expected)] == expected


def test_standard_ps_ops_match_tf():
    """The op types sent to parameter servers are TF 2.21's list."""
    from minitf.train import device_setter

    line = next(
        s
        for s in (REF / "ex_e_cluster.v1.stdout.txt").read_text().splitlines()
        if s.startswith("device_setter.STANDARD_PS_OPS = ")
    )
    expected = ast.literal_eval(line.split(" = ", 1)[1])
    assert sorted(device_setter.STANDARD_PS_OPS) == expected


def test_replica_device_setter_returns_none_without_ps_tasks():
    """No ps tasks (or no ps job in the cluster) gives None, so tf.device(None) clears outer
    blocks — one of the chapter's surprises."""
    assert tf.train.replica_device_setter(ps_tasks=0) is None
    assert tf.train.replica_device_setter(cluster={"worker": ["a:1"]}) is None
    with tf.device("/job:worker/task:1"):
        with tf.device(tf.train.replica_device_setter(ps_tasks=0)):
            c = tf.constant(1.0)
    assert c.op.device == ""


def test_replica_device_setter_options():
    """merge_devices=False keeps an inner device as is; a custom strategy picks the task; a
    variable pinned to another job does not advance the round robin; bad strategies fail."""
    with tf.device(tf.train.replica_device_setter(ps_tasks=3, merge_devices=False)):
        with tf.device("/job:other"):
            a = tf.Variable(1.0, name="a")
        b = tf.Variable(2.0, name="b")
        c = tf.Variable(3.0, name="c")
    assert a.device == "/job:other" and b.device == "/job:ps/task:0"
    assert c.device == "/job:ps/task:1"
    picks = []
    with tf.device(
        tf.train.replica_device_setter(
            ps_tasks=4, ps_strategy=lambda op: picks.append(op.name) or 3
        )
    ):
        d = tf.Variable(1.0, name="d")
    assert d.device == "/job:ps/task:3" and picks == ["d"]
    with pytest.raises(TypeError, match="ps_strategy must be callable"):
        tf.train.replica_device_setter(ps_tasks=1, ps_strategy=5)


def test_cluster_spec_forms_and_queries():
    """Every constructor form and query of TF's ClusterSpec."""
    spec = tf.train.ClusterSpec({"ps": ["ps0:1111"], "worker": ("w0:3333", "w1:4444")})
    assert spec.jobs == ["ps", "worker"]
    assert spec.num_tasks("worker") == 2 and spec.task_indices("worker") == [0, 1]
    assert spec.task_address("worker", 1) == "w1:4444"
    assert spec.job_tasks("worker") == ["w0:3333", "w1:4444"]
    assert spec.as_dict() == {"ps": ["ps0:1111"], "worker": ["w0:3333", "w1:4444"]}
    assert str(spec) == "ClusterSpec({'ps': ['ps0:1111'], 'worker': ['w0:3333', 'w1:4444']})"
    assert (
        spec == tf.train.ClusterSpec(spec) == {"ps": ["ps0:1111"], "worker": ["w0:3333", "w1:4444"]}
    )
    assert spec.as_cluster_def()["job"][1] == {
        "name": "worker",
        "tasks": {0: "w0:3333", 1: "w1:4444"},
    }
    sparse = tf.train.ClusterSpec({"worker": {1: "w1:1", 3: "w3:3"}})
    assert sparse.task_indices("worker") == [1, 3]
    assert sparse.job_tasks("worker") == [None, "w1:1", None, "w3:3"]
    assert sparse.as_dict() == {"worker": {1: "w1:1", 3: "w3:3"}}
    assert not tf.train.ClusterSpec({})
    assert tf.train.ClusterSpec({"a": {0: "x:1"}}) == tf.train.ClusterSpec({"a": ["x:1"]})
    assert tf.train.ClusterSpec({"a": ["x:1", "y:2"]}) != tf.train.ClusterSpec(
        {"a": ["y:2", "x:1"]}
    )


def test_cluster_spec_bad_input():
    """Bad specs and unknown jobs/tasks get TF's errors."""
    with pytest.raises(TypeError, match="must be a dictionary mapping one or more job names"):
        tf.train.ClusterSpec(["a:1"])
    with pytest.raises(TypeError, match="The tasks for job 'ps' must be a list or a dictionary"):
        tf.train.ClusterSpec({"ps": "a:1"})
    with pytest.raises(TypeError, match="addresses are"):
        tf.train.ClusterSpec({"ps": [1234]})
    spec = tf.train.ClusterSpec({"ps": ["a:1"]})
    with pytest.raises(ValueError, match="No such job in cluster: 'worker'"):
        spec.num_tasks("worker")
    with pytest.raises(ValueError, match="No task with index 3 in job 'ps'"):
        spec.task_address("ps", 3)
