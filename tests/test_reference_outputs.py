"""minitf against real TensorFlow: the chapter's examples (a)-(d) and (h) rebuilt with
``import minitf as tf`` and compared with what TF printed.

The expected values are parsed, at test time, out of the reference runs in
tests/data/tf_outputs/ (``ex_*.v1.stdout.txt`` and the ``placer.cc:162]`` /
``direct_session.cc`` lines of the matching ``.stderr.txt``).  Those runs were made on a CPU-only
machine, so every reference test uses the ``cpu_only`` fixture.

Spec: tf1_semantics.md §1.6-1.8 (device scopes, colocation, variables),
§2 (placer), §3 (log_device_placement), §5.4 (control dependencies), §8 (errors), §11 (TF 2.21
observations).  The TF 2.21 Python wrapper around error texts ("Graph execution error:",
"Detected at node ...") is not part of TF1 and is stripped before comparing; the TF-core text
below it (what TF1 printed) must be contained in minitf's message.

The last section runs the book's own GPU example on two emulated GPUs (``two_gpus``).
"""

import ast
import re
from pathlib import Path

import numpy as np
import pytest

import minitf as tf
from helpers import PLACEMENT_RE, chapter_control_deps_graph, placements

REF_DIR = Path(__file__).parent / "data" / "tf_outputs"
CPU0 = "/job:localhost/replica:0/task:0/device:CPU:0"
GPU0 = "/job:localhost/replica:0/task:0/device:GPU:0"


# =============================================================================================
# Parsing the reference files
# =============================================================================================


def ref_stdout(example):
    return (REF_DIR / ("%s.v1.stdout.txt" % example)).read_text()


def ref_stderr(example):
    return (REF_DIR / ("%s.v1.stderr.txt" % example)).read_text()


# "  a/Assign      Assign      device='/device:CPU:0'  _class=['loc:@a']"
_TABLE_RE = re.compile(
    r"^  (?P<name>\S+)\s+(?P<type>\w+)\s+device='(?P<device>[^']*)'"
    r"(?:\s+_class=(?P<cls>\[[^\]]*\]))?\s*$"
)
# "pin float op to '/cpu:1': EXCEPTION tensorflow....InvalidArgumentError"
_PROBE_RE = re.compile(
    r"^(?P<label>\S.*?)\s*: (?:NO EXCEPTION, result=(?P<result>.*)"
    r"|EXCEPTION (?P<cls>\S+))$"
)
_ERRNAME_RE = re.compile(r"^\s+tf\.errors name: (?P<name>\w+)\s+error_code: (?P<code>\w+)$")
_MSG_RE = re.compile(r"^    \|(?: (?P<text>.*))?$")


def _lines_after(text, header):
    """The lines that follow the first line starting with ``header``."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith(header):
            return lines[i + 1 :]
    raise AssertionError("header %r not found in the reference file" % header)


def table_after(text, header):
    """The ``op.device`` table under ``header``: [(name, type, device, _class or None)]."""
    rows = []
    for line in _lines_after(text, header):
        m = _TABLE_RE.match(line)
        if not m:
            break
        cls = m.group("cls")
        cls = None if cls is None else [s.encode() for s in ast.literal_eval(cls)]
        rows.append((m.group("name"), m.group("type"), m.group("device"), cls))
    assert rows, "empty table under %r" % header
    return rows


def placement_after(text, header):
    """The consecutive placement-log lines under ``header`` (as whole strings)."""
    rows = []
    for line in _lines_after(text, header):
        if not PLACEMENT_RE.match(line):
            break
        rows.append(line)
    assert rows, "no placement lines under %r" % header
    return rows


def stderr_sessions(example):
    """Per ``direct_session.cc`` session line of the stderr file: (its text, [placer lines])."""
    sessions = []
    for line in ref_stderr(example).splitlines():
        m = re.search(r"direct_session\.cc:\d+\] (.*)$", line)
        if m:
            sessions.append((m.group(1), []))
            continue
        m = re.search(r"placer\.cc:162\] (.*)$", line)
        if m:
            sessions[-1][1].append(m.group(1))
    return sessions


class Outcome:
    """One ``<label>: NO EXCEPTION, result=...`` / ``<label>: EXCEPTION <class>`` entry."""

    def __init__(self, label, result_text=None, cls=None):
        self.label = label
        self.result_text = result_text
        self.cls = cls  # dotted class name, or None
        self.error_name = None
        self.error_code = None
        self.message_lines = []

    @property
    def raised(self):
        return self.cls is not None

    @property
    def result(self):
        """The printed result evaluated back to Python (``np.float32(3.0)``, None, a str)."""
        return eval(self.result_text, {"__builtins__": {}, "np": np})  # noqa: S307

    @property
    def core_message(self):
        """The TF-core error text: TF 2.21's Python wrapper lines removed."""
        lines = self.message_lines
        node_lines = [i for i, line in enumerate(lines) if line.startswith("Node: '")]
        if node_lines:
            lines = lines[node_lines[-1] + 1 :]
        elif lines and lines[0] == "Graph execution error:":
            lines = lines[2:]
        return "\n".join(lines)


def probes(text):
    """Every outcome line of a reference stdout, by label (first occurrence wins)."""
    out = {}
    current = None
    for line in text.splitlines():
        m = _PROBE_RE.match(line)
        if m:
            current = Outcome(m.group("label").strip(), m.group("result"), m.group("cls"))
            out.setdefault(current.label, current)
            continue
        if current is None or not current.raised:
            continue
        m = _ERRNAME_RE.match(line)
        if m:
            current.error_name = m.group("name")
            current.error_code = None if m.group("code") == "None" else int(m.group("code"))
            continue
        m = _MSG_RE.match(line)
        if m:
            current.message_lines.append(m.group("text") or "")
    return out


def probe(example, label):
    found = probes(ref_stdout(example))
    assert label in found, "no outcome %r in %s" % (label, example)
    return found[label]


def value_line(text, name, after=None):
    """``<name> = <number>`` lines (e.g. ``c = 12.0``) → list of floats, in file order."""
    lines = _lines_after(text, after) if after else text.splitlines()
    return [
        float(m.group(1))
        for m in (re.match(r"^%s = (\S+)$" % re.escape(name), line) for line in lines)
        if m
    ]


# =============================================================================================
# Helpers on the minitf side
# =============================================================================================


def op_table(graph=None):
    """minitf's view of the same table: [(name, type, device, _class or None)] in graph order."""
    graph = graph or tf.get_default_graph()
    rows = []
    for op in graph.get_operations():
        try:
            cls = list(op.get_attr("_class"))
        except ValueError:
            cls = None
        rows.append((op.name, op.type, op.device, cls))
    return rows


def out_lines(capsys):
    return capsys.readouterr().out.splitlines()


def config(**kw):
    return tf.ConfigProto(**kw)


def assert_error_matches(exc_info, outcome):
    """minitf's error has TF's class, code and (contained) core message."""
    assert outcome.raised
    e = exc_info.value
    assert type(e).__name__ == outcome.error_name
    assert outcome.cls.endswith("." + outcome.error_name)
    if outcome.error_code is not None:
        assert e.error_code == outcome.error_code
    core = outcome.core_message
    assert core, "no TF message parsed for %r" % outcome.label
    assert core in e.message, "\nTF:     %r\nminitf: %r" % (core, e.message)
    assert core in str(e)


# =============================================================================================
# (a) simple placement + log_device_placement        ex_a_placement
# =============================================================================================


def build_ex_a():
    with tf.device("/cpu:0"):
        a = tf.Variable(3.0, name="a")
        b = tf.constant(4.0, name="b")
    c = a * b
    return a, b, c


def test_ex_a_build_time_devices_types_and_class(cpu_only):
    """ex_a: op names, types, op.device strings and _class attrs at graph-build time
    (spec §1.6 canonical strings, §1.8 the four ops of a Variable)."""
    build_ex_a()
    expected = table_after(ref_stdout("ex_a_placement"), "graph-build-time op.device strings:")
    assert op_table() == expected


def test_ex_a_class_attr_is_list_of_bytes(cpu_only):
    """ex_a: ``op.get_attr('_class')`` is ``[b'loc:@a']``; colocation_groups() (spec §1.7)."""
    a, b, c = build_ex_a()
    g = tf.get_default_graph()
    assert g.get_operation_by_name("a/Assign").get_attr("_class") == [b"loc:@a"]
    assert g.get_operation_by_name("a/read").get_attr("_class") == [b"loc:@a"]
    assert a.op.colocation_groups() == [b"loc:@a"]
    assert c.op.colocation_groups() == [b"loc:@mul"]
    assert a.initializer.name == "a/Assign"
    assert a.device == a.op.device == "/device:CPU:0"


def test_ex_a_session_creation_prints_device_mapping(cpu_only, capsys):
    """ex_a: a CPU-only Session(log_device_placement=True) prints the direct_session.cc line
    'Device mapping: no known devices.' (spec §3.1) and nothing else when created."""
    build_ex_a()
    expected = stderr_sessions("ex_a_placement")[0][0]
    assert expected == "Device mapping: no known devices."
    capsys.readouterr()
    tf.Session(config=config(log_device_placement=True))
    assert out_lines(capsys) == [expected]


def test_ex_a_list_devices(cpu_only):
    """ex_a: sess.list_devices() names, types and memory (268435456) (spec §2.1)."""
    build_ex_a()
    expected = []
    for line in _lines_after(ref_stdout("ex_a_placement"), "sess.list_devices():"):
        m = re.match(r"^\s+(/job:\S+) (\w+) (\d+)$", line)
        if not m:
            break
        expected.append((m.group(1), m.group(2), int(m.group(3))))
    assert expected == [(CPU0, "CPU", 268435456)]
    sess = tf.Session()
    got = [(d.name, d.device_type, d.memory_limit_bytes) for d in sess.list_devices()]
    assert got == expected


def test_ex_a_first_run_logs_whole_graph_in_tf_order(cpu_only, capsys):
    """ex_a: the first run (of a.initializer only) places and logs the *whole* graph, in TF's
    order: first pass in graph order, then the generators (spec §2.1, §2.3, §3.2)."""
    a, b, c = build_ex_a()
    text = ref_stdout("ex_a_placement")
    expected = placement_after(text, "### sess.run(a.initializer)")
    assert expected == stderr_sessions("ex_a_placement")[0][1]  # stdout and stderr agree
    sess = tf.Session(config=config(log_device_placement=True))
    capsys.readouterr()
    assert sess.run(a.initializer) is None
    assert out_lines(capsys) == expected


def test_ex_a_fetch_value_and_second_run_prints_nothing(cpu_only, capsys):
    """ex_a: sess.run(c) = np.float32(12.0) twice; the graph did not grow, so the second run
    logs nothing new (spec §2.1, §3.2)."""
    a, b, c = build_ex_a()
    text = ref_stdout("ex_a_placement")
    first = value_line(text, "c", after="### sess.run(c)")[0]
    again = value_line(text, "c", after="### sess.run(c) again")[0]
    sess = tf.Session(config=config(log_device_placement=True))
    sess.run(a.initializer)
    capsys.readouterr()
    v1 = sess.run(c)
    assert out_lines(capsys) == []
    v2 = sess.run(c)
    assert out_lines(capsys) == []
    assert type(v1) is np.float32 and v1 == np.float32(first) == np.float32(12.0)
    assert type(v2) is np.float32 and v2 == np.float32(again)


def test_ex_a_placement_is_not_written_back(cpu_only):
    """ex_a: after running, op.device still holds the requested device ('' for mul), not the
    placed one (spec §1.6 last bullet, §2.1)."""
    a, b, c = build_ex_a()
    sess = tf.Session(config=config(log_device_placement=True))
    sess.run(a.initializer)
    sess.run(c)
    sess.run(c)
    expected = table_after(
        ref_stdout("ex_a_placement"),
        "op.device strings after running (placement is NOT written back):",
    )
    assert op_table() == expected
    assert c.op.device == ""


def test_ex_a_second_session_logs_again(cpu_only, capsys):
    """ex_a: a second Session on the same graph prints the device mapping and the whole
    placement again (placement is per session, spec §2.1) and computes c = 12.0."""
    a, b, c = build_ex_a()
    text = ref_stdout("ex_a_placement")
    sessions = stderr_sessions("ex_a_placement")
    assert len(sessions) == 2
    mapping2, placed2 = sessions[1]
    expected = placement_after(text, "### second Session on same graph")
    assert expected == placed2
    expected_c = value_line(text, "c", after="### second Session on same graph")[0]

    sess1 = tf.Session(config=config(log_device_placement=True))
    sess1.run(a.initializer)
    sess1.run(c)
    capsys.readouterr()

    sess2 = tf.Session(config=config(log_device_placement=True))
    assert out_lines(capsys) == [mapping2]
    sess2.run(a.initializer)
    assert out_lines(capsys) == expected
    value = sess2.run(c)
    assert out_lines(capsys) == []
    assert type(value) is np.float32 and value == np.float32(expected_c)


def test_ex_a_no_logging_without_log_device_placement(cpu_only, capsys):
    """ex_a (spec §3): without log_device_placement neither the device mapping nor the
    placement is printed."""
    a, b, c = build_ex_a()
    capsys.readouterr()
    sess = tf.Session()
    sess.run(a.initializer)
    assert sess.run(c) == np.float32(12.0)
    assert capsys.readouterr().out == ""


# =============================================================================================
# (b) dynamic placement functions                    ex_b_dynamic_placement
# =============================================================================================


def book_variables_on_cpu(op):
    """The book's device function: tests op.type == "Variable", which TF1 ops never have."""
    if op.type == "Variable":
        return "/cpu:0"
    else:
        return "/gpu:0"


def fixed_variables_on_cpu(op):
    if op.type in ("Variable", "VariableV2", "VarHandleOp"):
        return "/cpu:0"
    else:
        return "/gpu:0"


def build_ex_b(device_fn):
    with tf.device(device_fn):
        a = tf.Variable(3.0, name="a")
        b = tf.constant(4.0, name="b")
        c = a * b
    return a, b, c


def test_ex_b_device_function_is_called_with_each_op(cpu_only):
    """ex_b: the function gets each new Operation (its name and type already set); the ops
    created under colocate_with (a/Assign, a/read) do not see it (spec §1.6 kind 2, §1.7)."""
    expected = []
    for line in _lines_after(ref_stdout("ex_b_dynamic_placement"), "device function calls"):
        m = re.match(r"^  (\S+)\s+(\S+)\s+(\w+)$", line)
        if not m:
            break
        expected.append((m.group(1).rsplit(".", 1)[-1], m.group(2), m.group(3)))
    assert expected
    calls = []

    def recording(op):
        assert isinstance(op, tf.Operation)
        calls.append((type(op).__name__, op.name, op.type))
        return book_variables_on_cpu(op)

    build_ex_b(recording)
    assert calls == expected


def test_ex_b_book_function_results_are_stored_verbatim(cpu_only):
    """ex_b: device-function results are stored verbatim ('/gpu:0', not '/device:GPU:0'), and
    the book's ``op.type == "Variable"`` test matches nothing: the op is a VariableV2
    (spec §1.6 kind 2, §10.3)."""
    a, b, c = build_ex_b(book_variables_on_cpu)
    expected = table_after(
        ref_stdout("ex_b_dynamic_placement"), "op.device after build (book's function"
    )
    assert op_table() == expected
    assert a.op.type == "VariableV2"
    assert not [op for op in tf.get_default_graph().get_operations() if op.type == "Variable"]
    assert {op.device for op in tf.get_default_graph().get_operations()} == {"/gpu:0"}


def test_ex_b_book_function_without_soft_placement_fails(cpu_only):
    """ex_b: the book's function pins the variable to '/gpu:0'; on a CPU-only session the run
    fails with InvalidArgumentError naming ``a`` (spec §2.5 reason 1)."""
    expected = probe(
        "ex_b_dynamic_placement",
        "book variables_on_cpu, no soft placement: sess.run(a.initializer)",
    )
    a, b, c = build_ex_b(book_variables_on_cpu)
    sess = tf.Session(config=config(log_device_placement=True))
    with pytest.raises(tf.errors.InvalidArgumentError) as info:
        sess.run(a.initializer)
    assert_error_matches(info, expected)
    assert info.value.message.endswith("\n\t [[a]]")
    assert info.value.op is not None and info.value.op.name == "a"


def test_ex_b_book_function_with_soft_placement(cpu_only, capsys):
    """ex_b: with allow_soft_placement everything falls back to CPU:0 (spec §2.6); c = 12.0."""
    text = ref_stdout("ex_b_dynamic_placement")
    header = "### run book version WITH allow_soft_placement=True"
    expected = placement_after(text, header)
    assert expected == stderr_sessions("ex_b_dynamic_placement")[1][1]
    a, b, c = build_ex_b(book_variables_on_cpu)
    sess = tf.Session(config=config(log_device_placement=True, allow_soft_placement=True))
    capsys.readouterr()
    sess.run(a.initializer)
    assert out_lines(capsys) == expected
    value = sess.run(c)
    assert type(value) is np.float32
    assert value == np.float32(value_line(text, "c", after=header)[0])


def test_ex_b_fixed_function_build_and_soft_placement(cpu_only, capsys):
    """ex_b: the fixed function (VariableV2 → '/cpu:0') moves the variable group to '/cpu:0'
    (Assign/read follow by colocation) and runs with soft placement (spec §1.7, §2.6)."""
    text = ref_stdout("ex_b_dynamic_placement")
    a, b, c = build_ex_b(fixed_variables_on_cpu)
    assert op_table() == table_after(text, "op.device after build (fixed function")
    header = "### run fixed version WITH allow_soft_placement=True"
    expected = placement_after(text, header)
    assert expected == stderr_sessions("ex_b_dynamic_placement")[2][1]
    sess = tf.Session(config=config(log_device_placement=True, allow_soft_placement=True))
    capsys.readouterr()
    sess.run(a.initializer)
    assert out_lines(capsys) == expected
    value = sess.run(c)
    assert type(value) is np.float32
    assert value == np.float32(value_line(text, "c", after=header)[0])


def test_ex_b_device_function_returning_none_raises_type_error(cpu_only):
    """ex_b: a device function returning None → TypeError('Expected binary or unicode string,
    got None') when the op is created (spec §1.6 kind 2)."""
    expected = probe("ex_b_dynamic_placement", "device fn returning None")
    assert expected.error_name == "TypeError"
    with tf.device("/job:localhost"):
        with pytest.raises(TypeError) as info:
            with tf.device(lambda op: None):
                tf.constant(1.0, name="under_none_fn")
    assert str(info.value) == "\n".join(expected.message_lines)
    assert str(info.value) == "Expected binary or unicode string, got None"


G3_FUNCTIONS = {
    "device fn returning DeviceSpec(CPU,0)": (
        "under_devicespec_fn",
        lambda op: tf.DeviceSpec(device_type="CPU", device_index=0),
    ),
    "device fn returning '/gpu:1'": ("under_str_fn_gpu1", lambda op: "/gpu:1"),
    "device fn returning ''": ("under_empty_fn", lambda op: ""),
}


@pytest.mark.parametrize("label", sorted(G3_FUNCTIONS))
def test_ex_b_function_result_completed_by_outer_block(cpu_only, label):
    """ex_b: an inner device function's result is completed by an outer
    tf.device("/job:localhost") block (spec §1.6: the inner function runs first, the outer
    string then fills unset fields)."""
    expected = probe("ex_b_dynamic_placement", label)
    assert not expected.raised
    name, fn = G3_FUNCTIONS[label]
    with tf.device("/job:localhost"):
        with tf.device(fn):
            op = tf.constant(1.0, name=name).op
    assert op.device == expected.result


def build_g3():
    g3 = tf.Graph()
    with g3.as_default():
        with tf.device("/job:localhost"):
            try:
                with tf.device(lambda op: None):
                    tf.constant(1.0, name="under_none_fn")
            except TypeError:
                pass
            for name, fn in G3_FUNCTIONS.values():
                with tf.device(fn):
                    tf.constant(1.0, name=name)
            with tf.device(None):
                tf.constant(1.0, name="under_device_None")
            with tf.device(""):
                tf.constant(1.0, name="under_device_emptystr")
    return g3


def test_ex_b_g3_table(cpu_only):
    """ex_b 'all ops of g3': function results completed by the outer block, tf.device(None)
    clearing it, tf.device("") leaving it alone (spec §1.6).  The row of the op whose device
    function raised is checked by the next test."""
    expected = table_after(ref_stdout("ex_b_dynamic_placement"), "all ops of g3:")
    expected = [row for row in expected if row[0] != "under_none_fn"]
    got = [row for row in op_table(build_g3()) if row[0] != "under_none_fn"]
    assert got == expected


def test_ex_b_op_whose_device_function_raised_stays_in_graph(cpu_only):
    """ex_b 'all ops of g3': TF had already added the op to the graph when the device function
    raised, so ``under_none_fn`` is listed with device '' (no device entry applied; §11: what
    a program can read back follows the observed run)."""
    expected = [
        row
        for row in table_after(ref_stdout("ex_b_dynamic_placement"), "all ops of g3:")
        if row[0] == "under_none_fn"
    ]
    assert expected == [("under_none_fn", "Const", "", None)]
    got = [row for row in op_table(build_g3()) if row[0] == "under_none_fn"]
    assert got == expected


# =============================================================================================
# (c) pinning to /gpu:0 with no GPU                  ex_c_gpu_pinning
# =============================================================================================


def build_ex_c():
    with tf.device("/gpu:0"):
        i = tf.Variable(3, name="i")
        j = tf.add(i, 1, name="j")
        f = tf.constant(3.0, name="f")
        m = f * 2.0
    return i, j, f, m


def test_ex_c_build_time_devices(cpu_only):
    """ex_c: '/gpu:0' from a string scope is canonicalised to '/device:GPU:0' (spec §1.3,
    §1.6); names and types of every op (tf.add(name='j') → 'j/y', 'j' AddV2)."""
    build_ex_c()
    assert op_table() == table_after(ref_stdout("ex_c_gpu_pinning"), "op.device at build time:")


def test_ex_c_pinned_to_missing_gpu_fails_without_soft_placement(cpu_only):
    """ex_c: without soft placement both sess.run(i.initializer) and a later sess.run(f) fail:
    placement covers the whole graph, so ``i`` is named even when fetching f (spec §2.1,
    §2.5 reason 1 with the 'CUDA is not enabled' suffix)."""
    first = probe("ex_c_gpu_pinning", "allow_soft_placement=False: sess.run(i.initializer)")
    second = probe("ex_c_gpu_pinning", "allow_soft_placement=False: second try sess.run(f)")
    i, j, f, m = build_ex_c()
    sess = tf.Session()
    with pytest.raises(tf.errors.InvalidArgumentError) as info:
        sess.run(i.initializer)
    assert_error_matches(info, first)
    assert info.value.op is not None and info.value.op.name == "i"
    with pytest.raises(tf.errors.InvalidArgumentError) as info:
        sess.run(f)
    assert_error_matches(info, second)


def test_ex_c_soft_placement_log_and_values(cpu_only, capsys):
    """ex_c: allow_soft_placement=True puts everything on CPU:0 (placement log in TF order);
    i.initializer → None, j → np.int32(4), f → np.float32(3.0) (spec §2.6, §3.2)."""
    text = ref_stdout("ex_c_gpu_pinning")
    expected = placement_after(text, "### allow_soft_placement=True")
    assert expected == stderr_sessions("ex_c_gpu_pinning")[1][1]
    i, j, f, m = build_ex_c()
    sess = tf.Session(config=config(allow_soft_placement=True, log_device_placement=True))
    capsys.readouterr()
    results = {}
    results["i.initializer"] = sess.run(i.initializer)
    assert out_lines(capsys) == expected
    results["j"] = sess.run(j)
    results["f"] = sess.run(f)
    assert out_lines(capsys) == []
    for key, value in results.items():
        want = probe("ex_c_gpu_pinning", "allow_soft_placement=True: sess.run(%s)" % key)
        assert not want.raised
        assert type(value) is type(want.result)
        assert value == want.result
    assert results["j"] == np.int32(4) and results["f"] == np.float32(3.0)


def _pin_probes():
    found = []
    for label, outcome in probes(ref_stdout("ex_c_gpu_pinning")).items():
        m = re.match(
            r"^pin float op to '(?P<dev>[^']*)'(?P<soft>, allow_soft_placement=True)?$", label
        )
        if m:
            found.append(pytest.param(m.group("dev"), bool(m.group("soft")), outcome, id=label))
    assert len(found) == 9
    return found


@pytest.mark.parametrize("device, soft, outcome", _pin_probes())
def test_ex_c_pin_float_op(cpu_only, device, soft, outcome):
    """ex_c 'pin float op to X': which pins a 1-CPU session can satisfy, with and without soft
    placement; soft placement drops type and index only, not job/task (spec §2.4-2.6)."""
    g = tf.Graph()
    with g.as_default():
        with tf.device(device):
            add = tf.constant(1.0) + tf.constant(2.0)
    assert add.op.name == "add"
    sess = tf.Session(graph=g, config=config(allow_soft_placement=soft))
    if outcome.raised:
        with pytest.raises(tf.errors.InvalidArgumentError) as info:
            sess.run(add)
        assert_error_matches(info, outcome)
        assert info.value.message.endswith("\n\t [[add]]")
    else:
        value = sess.run(add)
        assert type(value) is type(outcome.result)
        assert value == outcome.result


def test_ex_c_two_cpu_devices(cpu_only, capsys):
    """ex_c device_count={'CPU': 2}: list_devices, placement log (x1 pinned to /cpu:1, its
    constant follows it, the fed placeholder with two consumers goes to CPU:0) and
    x0=2 → y = 8.0 (spec §2.3 generator rule, §5.3 device_count)."""
    text = ref_stdout("ex_c_gpu_pinning")
    header = "### device_count={'CPU': 2}"
    m = re.match(r"^devices: (\[.*\])$", _lines_after(text, header)[0])
    expected_devices = ast.literal_eval(m.group(1))
    expected_log = placement_after(text, "devices: ")
    assert expected_log == stderr_sessions("ex_c_gpu_pinning")[2][1]
    outcome = probe("ex_c_gpu_pinning", "device_count CPU:2, pin to /cpu:1")

    x0 = tf.placeholder(tf.float32, name="x0")
    with tf.device("/cpu:1"):
        x1 = tf.multiply(x0, 3.0, name="x1")
    y = tf.add(x1, x0, name="y")
    sess = tf.Session(config=config(device_count={"CPU": 2}, log_device_placement=True))
    assert [d.name for d in sess.list_devices()] == expected_devices
    assert [d.device_type for d in sess.list_devices()] == ["CPU", "CPU"]
    capsys.readouterr()
    value = sess.run(y, feed_dict={x0: 2.0})
    assert out_lines(capsys) == expected_log
    assert type(value) is type(outcome.result) and value == outcome.result


# =============================================================================================
# (d) control dependencies                           ex_d_control_deps
# =============================================================================================


def test_ex_d_control_inputs_and_node_def(cpu_only):
    """ex_d: only ops created inside the block get control inputs; op.inputs, op.control_inputs
    and node_def.input ('^a', '^b') (spec §5.4)."""
    chapter_control_deps_graph()
    row_re = re.compile(
        r"^  (\S+)\s+(\w+)\s+inputs=(\[.*?\]) control_inputs=(\[.*?\]) "
        r"node_def\.input=(\[.*?\])$"
    )
    expected = [
        (
            m.group(1),
            m.group(2),
            ast.literal_eval(m.group(3)),
            ast.literal_eval(m.group(4)),
            ast.literal_eval(m.group(5)),
        )
        for m in map(row_re.match, ref_stdout("ex_d_control_deps").splitlines())
        if m
    ]
    assert len(expected) == 6
    got = [
        (
            op.name,
            op.type,
            [t.name for t in op.inputs],
            [c.name for c in op.control_inputs],
            list(op.node_def.input),
        )
        for op in tf.get_default_graph().get_operations()
    ]
    assert got == expected


def test_ex_d_values(cpu_only):
    """ex_d: z = 7.0 and fetching x alone = 3.0 (control inputs carry no value)."""
    text = ref_stdout("ex_d_control_deps")
    a, b, x, y, z = chapter_control_deps_graph()
    sess = tf.Session()
    z_value = sess.run(z)
    assert type(z_value) is np.float32
    assert z_value == np.float32(value_line(text, "z")[0]) == np.float32(7.0)
    fetch_x = re.search(r"^default config: fetch x = (\S+)", text, re.M).group(1)
    x_value = sess.run(x)
    assert type(x_value) is np.float32 and x_value == np.float32(float(fetch_x))


def test_ex_d_control_inputs_run_before_the_op(cpu_only):
    """Spec §5.4: control inputs are pulled into every step that runs the op, and run first."""
    v = tf.Variable(0.0, name="counter")
    bump = v.assign_add(1.0)
    with tf.control_dependencies([bump]):
        after = tf.constant(5.0, name="after")
    sess = tf.Session()
    sess.run(v.initializer)
    assert sess.run(after) == np.float32(5.0)
    assert sess.run(after) == np.float32(5.0)
    assert sess.run(v) == np.float32(2.0)
    assert [c.name for c in after.op.control_inputs] == [bump.op.name]


# =============================================================================================
# (h) uninitialised variables, section "1. local DirectSession"    ex_h_uninitialized
# =============================================================================================

H = "ex_h_uninitialized"


def build_ex_h():
    x = tf.Variable(3.0, name="x")
    w = tf.Variable([1.0, 2.0], name="w")
    y = x * 2
    return x, w, y


def test_ex_h_variable_op_types(cpu_only):
    """ex_h: TF1 reference variables are VariableV2 ops (spec §1.8)."""
    x, w, y = build_ex_h()
    line = re.search(r"^variable op types: (.*)$", ref_stdout(H), re.M).group(1)
    assert [x.op.type, w.op.type] == line.split()


def test_ex_h_fetch_uninitialized_variable(cpu_only):
    """ex_h: fetching the variable itself → FailedPreconditionError (code 9),
    'Attempting to use uninitialized value x' + '\\n\\t [[{{node _retval_x_0_0}}]]' (spec §8)."""
    outcome = probe(H, "sess.run(x)  [fetch the variable itself]")
    x, w, y = build_ex_h()
    sess = tf.Session()
    with pytest.raises(tf.errors.FailedPreconditionError) as info:
        sess.run(x)
    assert_error_matches(info, outcome)
    assert info.value.error_code == tf.errors.FAILED_PRECONDITION == 9


def test_ex_h_read_through_consumer(cpu_only):
    """ex_h: y = x * 2 reads x through x/read: the error names node x/read (spec §8)."""
    outcome = probe(H, "sess.run(y)  [y = x * 2]")
    x, w, y = build_ex_h()
    sess = tf.Session()
    with pytest.raises(tf.errors.FailedPreconditionError) as info:
        sess.run(y)
    assert_error_matches(info, outcome)
    assert info.value.message.endswith("\n\t [[{{node x/read}}]]")


def test_ex_h_eval_uninitialized(cpu_only):
    """ex_h: x.eval(session=s) fails like sess.run(x)."""
    outcome = probe(H, "x.eval(session=s)")
    x, w, y = build_ex_h()
    sess = tf.Session()
    with pytest.raises(tf.errors.FailedPreconditionError) as info:
        x.eval(session=sess)
    assert_error_matches(info, outcome)


def test_ex_h_is_variable_initialized(cpu_only):
    """ex_h: tf.is_variable_initialized(x) is False before x.initializer runs, True after."""
    expected = re.search(r"^is_variable_initialized\(x\): (\w+)$", ref_stdout(H), re.M).group(1)
    x, w, y = build_ex_h()
    check = tf.is_variable_initialized(x)
    sess = tf.Session()
    before = sess.run(check)
    assert type(before) is np.bool_
    assert str(bool(before)) == expected == "False"
    sess.run(x.initializer)
    assert bool(sess.run(check)) is True


def test_ex_h_initialize_one_then_all(cpu_only):
    """ex_h: after x.initializer, y = 6.0 while w is still uninitialised
    ('[[{{node _retval_w_0_0}}]]'); tf.global_variables_initializer() then initialises w."""
    text = ref_stdout(H)
    y_after = float(re.search(r"^after x\.initializer: y = (\S+)", text, re.M).group(1))
    outcome = probe(H, "sess.run(w) still uninitialised")
    x, w, y = build_ex_h()
    sess = tf.Session()
    sess.run(x.initializer)
    value = sess.run(y)
    assert type(value) is np.float32 and value == np.float32(y_after)
    with pytest.raises(tf.errors.FailedPreconditionError) as info:
        sess.run(w)
    assert_error_matches(info, outcome)
    init = tf.global_variables_initializer()
    assert sess.run(init) is None
    np.testing.assert_array_equal(sess.run(w), np.array([1.0, 2.0], np.float32))
    assert sess.run(w).dtype == np.float32
    assert bool(sess.run(tf.is_variable_initialized(w))) is True


def test_ex_h_sessions_do_not_share_variables(cpu_only):
    """Spec §6.4: local sessions never share variables; a second session must initialise
    again."""
    x, w, y = build_ex_h()
    s1 = tf.Session()
    s1.run(tf.global_variables_initializer())
    assert s1.run(y) == np.float32(6.0)
    s2 = tf.Session()
    with pytest.raises(tf.errors.FailedPreconditionError) as info:
        s2.run(y)
    assert "Attempting to use uninitialized value x" in info.value.message


# =============================================================================================
# The book's GPU example on two emulated GPUs (section "Operations and kernels")
# =============================================================================================


def test_two_gpus_session_devices(two_gpus, capsys):
    """Spec §2.1/§3.1: CPU:0, GPU:0, GPU:1 in list_devices; the Device mapping block lists the
    GPUs with their description."""
    tf.constant(1.0)
    capsys.readouterr()
    sess = tf.Session(config=config(log_device_placement=True))
    names = [d.name for d in sess.list_devices()]
    assert names == [CPU0, GPU0, "/job:localhost/replica:0/task:0/device:GPU:1"]
    assert [d.device_type for d in sess.list_devices()] == ["CPU", "GPU", "GPU"]
    lines = out_lines(capsys)
    # TF's "Created TensorFlow device" line per GPU comes first, then the mapping block.
    for k, line in enumerate(lines[:2]):
        assert re.match(
            r"^Created TensorFlow device \(/job:localhost/replica:0/task:0/"
            r"device:GPU:%d with \d+ MB memory\) -> physical GPU \(device: %d, "
            r"name: .+\)$" % (k, k),
            line,
        )
    lines = lines[2:]
    assert lines[0] == "Device mapping:"
    assert len(lines) == 3
    for k, line in enumerate(lines[1:]):
        assert re.match(
            r"^/job:localhost/replica:0/task:0/device:GPU:%d -> device: %d, name: "
            r".+, pci bus id: .+, compute capability: \d+\.\d+$" % (k, k),
            line,
        )


def test_book_int32_variable_on_gpu_has_no_kernel(two_gpus):
    """Book 'Operations and kernels': tf.Variable(3) pinned to /gpu:0 cannot be placed: no
    int32 GPU kernel (spec §2.5 reason 2)."""
    with tf.device("/gpu:0"):
        i = tf.Variable(3, name="i")
    sess = tf.Session()
    with pytest.raises(tf.errors.InvalidArgumentError) as info:
        sess.run(i.initializer)
    e = info.value
    assert e.error_code == 3
    assert (
        "Cannot assign a device for operation i: Could not satisfy explicit device "
        "specification '/device:GPU:0' because no supported kernel for GPU devices is "
        "available."
    ) in e.message
    assert e.op is not None and e.op.name == "i"
    assert "CUDA is not enabled" not in e.message


def test_book_float_variable_on_gpu_is_placed_on_gpu0(two_gpus, capsys):
    """Book 'Operations and kernels': tf.Variable(3.0) on /gpu:0 works and lands on GPU:0."""
    with tf.device("/gpu:0"):
        i = tf.Variable(3.0, name="i")
    sess = tf.Session(config=config(log_device_placement=True))
    capsys.readouterr()
    sess.run(i.initializer)
    lines = out_lines(capsys)
    assert "i: (VariableV2): %s" % GPU0 in lines
    assert placements(lines) == {
        "i": ("VariableV2", GPU0),
        "i/Assign": ("Assign", GPU0),
        "i/read": ("Identity", GPU0),
        "i/initial_value": ("Const", GPU0),
    }
    value = sess.run(i)
    assert type(value) is np.float32 and value == np.float32(3.0)


def test_book_int32_variable_soft_placement_moves_to_cpu(two_gpus, capsys):
    """Book 'Soft placement': allow_soft_placement=True moves the int32 variable and its
    colocated Assign/read to CPU:0 (spec §2.6).  Its initial value is a Const pinned to
    /device:GPU:0 that does have an int32 GPU kernel, so it keeps GPU:0: the generator rule
    only follows the consumer when the consumer's device is a candidate (spec §2.3)."""
    with tf.device("/gpu:0"):
        i = tf.Variable(3, name="i")
    sess = tf.Session(config=config(allow_soft_placement=True, log_device_placement=True))
    capsys.readouterr()
    sess.run(i.initializer)
    lines = out_lines(capsys)
    assert lines == [
        "i: (VariableV2): %s" % CPU0,
        "i/Assign: (Assign): %s" % CPU0,
        "i/read: (Identity): %s" % CPU0,
        "i/initial_value: (Const): %s" % GPU0,
    ]
    value = sess.run(i)
    assert type(value) is np.int32 and value == 3


def test_unpinned_ops_prefer_gpu0_when_a_kernel_exists(two_gpus, capsys):
    """Book 'Simple placement' rule 3 / spec §2.3-2.4: unpinned ops go to GPU:0 if it has a
    kernel; an int32 MatMul (no GPU kernel) goes to CPU:0 and its constants follow it."""
    x = tf.constant([[1.0, 2.0]], name="x")
    w = tf.constant([[3.0], [4.0]], name="w")
    fm = tf.matmul(x, w, name="float_matmul")
    xi = tf.constant([[1, 2]], name="xi")
    wi = tf.constant([[3], [4]], name="wi")
    im = tf.matmul(xi, wi, name="int_matmul")
    sess = tf.Session(config=config(log_device_placement=True))
    capsys.readouterr()
    fv, iv = sess.run([fm, im])
    placed = placements(out_lines(capsys))
    assert placed == {
        "float_matmul": ("MatMul", GPU0),
        "int_matmul": ("MatMul", CPU0),
        "x": ("Const", GPU0),
        "w": ("Const", GPU0),
        "xi": ("Const", CPU0),
        "wi": ("Const", CPU0),
    }
    np.testing.assert_array_equal(fv, np.array([[11.0]], np.float32))
    np.testing.assert_array_equal(iv, np.array([[11]], np.int32))
    assert fv.dtype == np.float32 and iv.dtype == np.int32
