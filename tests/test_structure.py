"""The import structure of the ``minitf`` package: no import cycles, and layers that import
only downwards.

Every module of ``minitf/`` is read with ``ast`` (nothing is imported).  An import is any
``import x``, ``from x import y`` or relative ``from . import y``, at module level or inside a
function or an ``if`` (``if TYPE_CHECKING:`` included: a module that names another's types
depends on it), plus ``__import__("minitf...")`` and ``importlib.import_module("minitf...")``
with a literal name.  ``from package import name`` is an import of the submodule
``package.name`` when there is one, else of the package itself.  Importing a submodule is not
counted as importing its parent packages too (Python runs their ``__init__`` first, but that
would put every module in a cycle with ``minitf/__init__.py``).

Layers, lowest first (README "Layout"): ``framework`` < ``ops`` < ``kernels`` < ``runtime`` <
``distributed`` < ``train``, ``viz``, ``summary``.  A module may import its own layer and those
below.  The
top-level modules (``minitf/__init__.py``, ``config``, ``smi``, ``server``, ``test``,
``device_lib``, ...) are the API surface above every layer: they may import anything, and of
them a layer may import only ``minitf.config``.
"""

import ast
from pathlib import Path

import pytest

PACKAGE_DIR = Path(__file__).resolve().parent.parent / "minitf"
LAYERS = {
    "lib": 0,
    "framework": 0,
    "ops": 1,
    "kernels": 2,
    "runtime": 3,
    "distributed": 4,
    "train": 5,
    "viz": 5,
    "summary": 5,
}
LAYERS_MAY_IMPORT = {"config"}  # the top-level modules a layer may import


# =============================================================================================
# Reading the import graph
# =============================================================================================


def find_modules(package_dir):
    """{dotted name: path} of every module of the package (a package is its ``__init__``)."""
    found = {}
    for path in sorted(package_dir.rglob("*.py")):
        parts = list(path.relative_to(package_dir.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _known(name, modules):
    """The module an import of ``name`` runs: ``name`` itself, else its longest known prefix
    (``a.b.C`` where C is a class of ``a.b``)."""
    parts = name.split(".")
    while parts:
        if ".".join(parts) in modules:
            return ".".join(parts)
        parts.pop()
    return None


def _literal_import(call):
    """The literal module name of ``__import__("x")`` / ``importlib.import_module("x")``."""
    f = call.func
    dynamic = (isinstance(f, ast.Name) and f.id in ("__import__", "import_module")) or (
        isinstance(f, ast.Attribute) and f.attr == "import_module"
    )
    if (
        dynamic
        and call.args
        and isinstance(call.args[0], ast.Constant)
        and isinstance(call.args[0].value, str)
    ):
        return call.args[0].value
    return None


def imports_of(module, path, modules):
    """[(imported module, line)] of one module, in the package only, in source order."""
    root = module.split(".")[0]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out = []

    def add(name, line):
        target = _known(name, modules)
        if target is not None and target != module:
            out.append((target, line))

    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == root:
                    add(alias.name, node.lineno)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                base = ".".join(base + ([node.module] if node.module else []))
            else:
                base = node.module
            if base.split(".")[0] != root:
                continue
            for alias in node.names:
                sub = base + "." + alias.name
                add(sub if sub in modules else base, node.lineno)
        elif isinstance(node, ast.Call):
            name = _literal_import(node)
            if name and name.split(".")[0] == root:
                add(name, node.lineno)
    return sorted(out, key=lambda t: t[1])


def import_graph(package_dir):
    """{module: {imported module: first line}} and {module: path}."""
    modules = find_modules(package_dir)
    graph = {}
    for module, path in modules.items():
        edges = graph.setdefault(module, {})
        for target, line in imports_of(module, path, modules):
            edges.setdefault(target, line)
    return graph, modules


# =============================================================================================
# Cycles and layers
# =============================================================================================


def strongly_connected(graph):
    """Tarjan's strongly connected components with more than one module, each sorted."""
    index, low, on_stack, stack, comps = {}, {}, set(), [], []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                comps.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(comps)


def elementary_cycles(graph, comp, limit=50):
    """The cycles inside one strongly connected component, each starting at its smallest
    module, shortest first (at most ``limit``)."""
    members = set(comp)
    cycles = []

    def extend(start, path):
        for w in sorted(graph[path[-1]]):
            if w == start:
                cycles.append(path + [start])
            elif w in members and w > start and w not in path and len(cycles) < limit:
                extend(start, path + [w])

    for start in comp:
        extend(start, [start])
    return sorted(cycles, key=lambda c: (len(c), c))[:limit]


def layer_of(module, modules):
    """The subpackage a module belongs to (its layer), or None for the modules at the top of
    the package (the API surface)."""
    path = modules[module]
    package_dir = modules[module.split(".")[0]].parent
    parts = path.relative_to(package_dir).parts
    return parts[0] if len(parts) > 1 else None


def describe_cycle(cycle, graph, modules, root):
    steps = " -> ".join(cycle)
    where = ", ".join(
        "%s:%d" % (modules[a].relative_to(root).as_posix(), graph[a][b])
        for a, b in zip(cycle, cycle[1:])
    )
    return "  %s\n      (%s)" % (steps, where)


def cycle_problems(graph, modules, root):
    problems = []
    for comp in strongly_connected(graph):
        cycles = elementary_cycles(graph, comp)
        problems.append("modules in a cycle: %s" % ", ".join(comp))
        problems += [describe_cycle(c, graph, modules, root) for c in cycles]
    return problems


def layer_problems(graph, modules, root):
    """The imports that go up: into a higher layer, or from a layer into the API surface."""
    top = min(modules, key=len)
    allowed = ", ".join(sorted(top + "." + name for name in LAYERS_MAY_IMPORT))
    problems, unknown = [], set()
    for module in sorted(graph):
        src = layer_of(module, modules)
        if src is None:
            continue
        if src not in LAYERS:
            unknown.add(src)
            continue
        for target, line in sorted(graph[module].items(), key=lambda t: t[1]):
            dst = layer_of(target, modules)
            where = "%s:%d" % (modules[module].relative_to(root).as_posix(), line)
            if dst is None:
                if target.partition(".")[2] not in LAYERS_MAY_IMPORT:
                    problems.append(
                        "%s  %s (%s) imports %s (the API surface: a layer may "
                        "import only %s of it)" % (where, module, src, target, allowed)
                    )
            elif dst in LAYERS and LAYERS[dst] > LAYERS[src]:
                problems.append("%s  %s (%s) imports %s (%s)" % (where, module, src, target, dst))
    problems += [
        "%s.%s is in no layer: add it to LAYERS in tests/test_structure.py" % (top, name)
        for name in sorted(unknown)
    ]
    return problems


# =============================================================================================
# The tests
# =============================================================================================


@pytest.fixture(scope="module")
def minitf_graph():
    graph, modules = import_graph(PACKAGE_DIR)
    return graph, modules, PACKAGE_DIR.parent


def test_the_import_graph_is_read(minitf_graph):
    """The reader sees module-level, function-level and ``from package import module`` edges."""
    graph, modules, _ = minitf_graph
    assert len(modules) > 50
    assert "minitf.runtime.executor" in graph["minitf.runtime.direct_session"]  # module level
    assert "minitf.kernels.cuda" in graph["minitf.kernels.cuda_ops"]  # in a function
    assert "minitf.framework.errors" in graph["minitf.runtime.devices"]  # from pkg import m
    assert "minitf.framework.graph" in graph["minitf.ops.array_ops"]  # from m import name


def test_no_import_cycles(minitf_graph):
    """No two modules import each other, directly or through others."""
    problems = cycle_problems(*minitf_graph)
    assert not problems, "import cycles (each import as file:line):\n" + "\n".join(problems)


def test_layers_import_only_downwards(minitf_graph):
    """framework < ops < kernels < runtime < distributed < train, viz; of the top-level modules
    a layer imports only minitf.config."""
    problems = layer_problems(*minitf_graph)
    assert not problems, (
        "imports that go up (framework < ops < kernels < runtime < "
        "distributed < train, viz < the top-level modules):\n" + "\n".join(problems)
    )


# -- the checker itself, on a small made-up package ---------------------------------------------


def _package(tmp_path, files):
    for name, text in files.items():
        path = tmp_path / "pkg" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return import_graph(tmp_path / "pkg") + (tmp_path,)


def test_checker_finds_cycles_and_upward_imports(tmp_path):
    graph, modules, root = _package(
        tmp_path,
        {
            "__init__.py": "from pkg.runtime import session\n",
            "config.py": "",
            "api.py": "import pkg.runtime.session\n",
            "framework/__init__.py": "",
            "framework/graph.py": "def late():\n    from ..ops import array_ops\n",
            "ops/__init__.py": "",
            "ops/array_ops.py": "from pkg.ops.op_def import apply_op\n",
            "ops/op_def.py": "from pkg.framework import graph\n",
            "runtime/__init__.py": "",
            "runtime/session.py": "from pkg import config\nfrom . import helper\n"
            "def f():\n    return __import__('pkg.api')\n",
            "runtime/helper.py": "import importlib\n"
            "importlib.import_module('pkg.runtime.session')\n",
        },
    )
    assert graph["pkg.framework.graph"] == {"pkg.ops.array_ops": 2}
    assert graph["pkg.runtime.session"] == {"pkg.config": 1, "pkg.runtime.helper": 2, "pkg.api": 4}
    assert cycle_problems(graph, modules, root) == [
        "modules in a cycle: pkg.api, pkg.runtime.helper, pkg.runtime.session",
        "  pkg.api -> pkg.runtime.session -> pkg.api\n"
        "      (pkg/api.py:1, pkg/runtime/session.py:4)",
        "  pkg.runtime.helper -> pkg.runtime.session -> pkg.runtime.helper\n"
        "      (pkg/runtime/helper.py:2, pkg/runtime/session.py:2)",
        "modules in a cycle: pkg.framework.graph, pkg.ops.array_ops, pkg.ops.op_def",
        "  pkg.framework.graph -> pkg.ops.array_ops -> pkg.ops.op_def -> pkg.framework.graph\n"
        "      (pkg/framework/graph.py:2, pkg/ops/array_ops.py:1, pkg/ops/op_def.py:1)",
    ]
    layers = layer_problems(graph, modules, root)
    assert layers == [
        "pkg/framework/graph.py:2  pkg.framework.graph (framework) imports pkg.ops.array_ops (ops)",
        "pkg/runtime/session.py:4  pkg.runtime.session (runtime) imports pkg.api (the API "
        "surface: a layer may import only pkg.config of it)",
    ]


def test_checker_accepts_a_layered_package(tmp_path):
    graph, modules, root = _package(
        tmp_path,
        {
            "__init__.py": "import pkg.viz\nfrom pkg.runtime.session import Session\n",
            "config.py": "",
            "framework/__init__.py": "",
            "framework/graph.py": "import os\nimport pkg.config\n",
            "runtime/__init__.py": "",
            "runtime/session.py": "from pkg.framework.graph import Graph\n",
            "viz/__init__.py": "from pkg.runtime import session\nfrom .. import config\n",
        },
    )
    assert cycle_problems(graph, modules, root) == []
    assert layer_problems(graph, modules, root) == []


def test_checker_names_a_subpackage_in_no_layer(tmp_path):
    graph, modules, root = _package(tmp_path, {"__init__.py": "", "extras/__init__.py": ""})
    assert layer_problems(graph, modules, root) == [
        "pkg.extras is in no layer: add it to LAYERS in tests/test_structure.py"
    ]
