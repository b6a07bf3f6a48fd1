"""Notebook 16 keeps its two promises: TF2 code is only shown, and the TF1 side really runs.

Book section: none of the chapter; notebook 16 maps each of the chapter's TF1 mechanisms onto
TensorFlow 2.  TensorFlow is not a dependency, so the TF2 code lives in Markdown blocks, and its
names were checked by hand against the TF 2.x API documentation: ``VERIFIED_TF2`` is that list,
so a new or misspelt name fails here until someone checks it.  The TF1 names of the concept
table ("what you ran") must each be used by a code cell that was executed (outputs committed).
"""

import ast
import json
import re
from pathlib import Path

import minitf

NOTEBOOK = Path(__file__).resolve().parents[1] / "notebooks" / "16_towards_tf2.ipynb"

# Every tf.* name the TF2 side uses, as the TF 2.x API docs (tensorflow.org/api_docs) spell it.
VERIFIED_TF2 = {
    "tf.GradientTape", "tf.Variable", "tf.constant", "tf.control_dependencies", "tf.device",
    "tf.function", "tf.int64",
    "tf.matmul", "tf.square", "tf.stack", "tf.compat.v1", "tf.compat.v1.train",
    "tf.config", "tf.config.LogicalDeviceConfiguration",
    "tf.config.experimental.set_memory_growth", "tf.config.list_logical_devices",
    "tf.config.list_physical_devices", "tf.config.set_logical_device_configuration",
    "tf.config.set_soft_device_placement", "tf.debugging", "tf.debugging.set_log_device_placement",
    "tf.data", "tf.data.AUTOTUNE", "tf.data.Dataset", "tf.data.Dataset.from_tensor_slices",
    "tf.data.Dataset.list_files", "tf.data.TFRecordDataset", "tf.data.TextLineDataset",
    "tf.io.decode_csv", "tf.nn.compute_average_loss",
    "tf.nn.sparse_softmax_cross_entropy_with_logits",
    "tf.distribute.MirroredStrategy", "tf.distribute.MultiWorkerMirroredStrategy",
    "tf.distribute.ParameterServerStrategy", "tf.distribute.experimental.ParameterServerStrategy",
    "tf.distribute.coordinator.ClusterCoordinator",
    "tf.distribute.experimental.coordinator.ClusterCoordinator",
    "tf.distribute.experimental.partitioners.MinSizePartitioner",
    "tf.distribute.experimental.CentralStorageStrategy",
    "tf.distribute.experimental.CommunicationOptions",
    "tf.distribute.experimental.CommunicationImplementation.NCCL",
    "tf.distribute.ReduceOp.SUM", "tf.distribute.Server",
    "tf.distribute.cluster_resolver.TFConfigClusterResolver", "tf.train.ClusterSpec",
    "tf.train.Checkpoint", "tf.train.CheckpointManager",
    "tf.keras.Input", "tf.keras.Sequential", "tf.keras.layers.Dense",
    "tf.keras.losses.SparseCategoricalCrossentropy", "tf.keras.optimizers.SGD",
    "tf.keras.callbacks.ModelCheckpoint", "tf.keras.callbacks.BackupAndRestore",
}  # fmt: skip

TF_NAME = re.compile(r"\btf(?:\.\w+)+")
FENCED = re.compile(r"```python\n(.*?)```", re.S)


def _cells():
    return json.loads(NOTEBOOK.read_text())["cells"]


def _source(cell):
    return "".join(cell["source"])


def _tf2_blocks():
    return [b for c in _cells() if c["cell_type"] == "markdown" for b in FENCED.findall(_source(c))]


def _code_cells():
    return [c for c in _cells() if c["cell_type"] == "code"]


def _dotted(node):
    """'a.b.c' for a Name/Attribute chain, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return ".".join([node.id] + parts[::-1])
    return None


def _used_names(source):
    """Every dotted name, every called name and every keyword argument of ``source``."""
    used = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Attribute, ast.Name)):
            name = _dotted(node)
            if name:
                used.add(name)
        elif isinstance(node, ast.keyword) and node.arg:
            used.add(node.arg)
    return used


def _resolves_in_minitf(name):
    obj = minitf
    for part in name.split(".")[1:]:
        if not hasattr(obj, part):
            return False
        obj = getattr(obj, part)
    return True


def _concept_table():
    """[(tf1 tokens, tf2 tokens)] from the table whose header starts with '| TF1'."""
    for cell in _cells():
        lines = _source(cell).splitlines()
        start = [i for i, line in enumerate(lines) if line.startswith("| TF1")]
        if cell["cell_type"] == "markdown" and start:
            rows = []
            for line in lines[start[0] + 2 :]:
                if not line.startswith("|"):
                    break
                cols = line.split("|")[1:-1]
                rows.append((re.findall(r"`([^`]+)`", cols[0]), re.findall(r"`([^`]+)`", cols[1])))
            return rows
    raise AssertionError("no concept table ('| TF1 ...') in %s" % NOTEBOOK.name)


def test_no_code_cell_runs_tf2_code():
    """Code cells import no TensorFlow, use only names minitf has, and repeat no TF2 line."""
    blocks = _tf2_blocks()
    assert len(blocks) >= 7, "expected a TF2 block per part, found %d" % len(blocks)
    tf2_lines = {
        line.split("#")[0].strip()
        for block in blocks
        for line in block.splitlines()
        if TF_NAME.search(line.split("#")[0])
    }
    for cell in _code_cells():
        source = _source(cell)
        tree = ast.parse(source)
        imports = [
            alias.name
            for node in ast.walk(tree)
            if isinstance(node, (ast.Import, ast.ImportFrom))
            for alias in getattr(node, "names", [])
        ] + [node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)]
        assert not any(str(m).startswith("tensorflow") for m in imports), source
        missing = sorted(
            n for n in _used_names(source) if n.startswith("tf.") and not _resolves_in_minitf(n)
        )
        assert not missing, "code cell uses names minitf lacks (TF2 code?): %s" % missing
        code_lines = {line.split("#")[0].strip() for line in source.splitlines()}
        assert not tf2_lines & code_lines, "TF2 lines in a code cell: %s" % (tf2_lines & code_lines)


def test_every_tf2_name_shown_was_checked():
    """Each tf.* name of a TF2 block is a verified TF 2.x name; each one in the prose is either
    verified or a name minitf (TF 1.15) has."""
    in_blocks = {n for block in _tf2_blocks() for n in TF_NAME.findall(block)}
    assert in_blocks - VERIFIED_TF2 == set()
    prose = [FENCED.sub("", _source(c)) for c in _cells() if c["cell_type"] == "markdown"]
    tokens = [tok for text in prose for tok in re.findall(r"`([^`]+)`", text)]
    in_prose = {n for tok in tokens for n in TF_NAME.findall(tok)}
    unknown = {n for n in in_prose - VERIFIED_TF2 if not _resolves_in_minitf(n)}
    assert unknown == set(), "unchecked TF names in the prose: %s" % sorted(unknown)


def test_table_tf1_side_was_run_and_tf2_side_is_shown():
    """Every TF1 name of the concept table is used by an executed code cell; every TF2 name of
    the table appears in a TF2 block."""
    executed = set()
    for cell in _code_cells():
        used = _used_names(_source(cell))
        # a cell that calls tf.* ran and shows what it printed (the last cell only tidies up)
        assert cell["execution_count"] is not None, _source(cell)[:200]
        assert cell["outputs"] or not any(n.startswith("tf.") for n in used), _source(cell)[:200]
        executed |= used
    blocks = "\n".join(_tf2_blocks())
    rows = _concept_table()
    assert len(rows) >= 9
    for tf1, tf2 in rows:
        assert tf1, "a row without TF1 names"
        assert not [name for name in tf1 if name not in executed], "TF1 names never run"
        assert not [name for name in tf2 if name not in blocks], "TF2 names never shown"


def test_each_part_runs_its_tf1_side_before_showing_tf2():
    """Each numbered part ('## N · ...') has an executed code cell before its first TF2 block."""
    parts, current = {}, None
    for cell in _cells():
        source = _source(cell)
        heading = re.match(r"## (\d+) · ", source)
        if heading:
            current = heading.group(1)
            parts[current] = {"ran": False, "tf2_before_run": False}
        if current is None:
            continue
        if cell["cell_type"] == "code" and cell["outputs"]:
            parts[current]["ran"] = True
        if FENCED.search(source) and not parts[current]["ran"]:
            parts[current]["tf2_before_run"] = True
    assert len(parts) >= 7
    assert {p: v for p, v in parts.items() if not v["ran"] or v["tf2_before_run"]} == {}
