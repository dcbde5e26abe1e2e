"""The runtime's module graph has no import circle (issue 29): every mpy_lazy/**/*.py parsed,
every import counted, module-level or inside a function, relative ones resolved; a dynamic
__import__("mpy_lazy.<package>." + name) counts as importing every module of that package
(any other dynamic import fails the test: it could hide an edge). A module is understood,
loaded and tested from the modules below it (kinds, _arith and the fast paths at the bottom,
the ops' rooms above them, check, kernels, program, model on top: docs/OPS.md)."""
import ast
import os

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PACKAGE = os.path.join(ROOT, "mpy_lazy")


def modules(top=PACKAGE):
    """{dotted name: path} of every module under `top` (a package's __init__ is the package)."""
    out = {}
    for d, _, files in os.walk(top):
        for f in files:
            if f.endswith(".py"):
                rel = os.path.relpath(os.path.join(d, f), os.path.dirname(top))[:-3].replace(os.sep, ".")
                out[rel[:-9] if rel.endswith(".__init__") else rel] = os.path.join(d, f)
    return out


def imports(name, path, mods):
    """The modules of `mods` that module `name` imports anywhere in its file."""
    is_pkg = path.endswith("__init__.py")
    here = name if is_pkg else name.rpartition(".")[0]
    out = set()
    with open(path) as f:
        tree = ast.parse(f.read(), path)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name in mods:
                    out.add(a.name)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = here.split(".")
                parts = parts[:len(parts) - (node.level - 1)]
                base = ".".join(parts + ([base] if base else []))
            for a in node.names:  # `from package import module`, or a name of module `base`
                if base + "." + a.name in mods:
                    out.add(base + "." + a.name)
                elif base in mods:
                    out.add(base)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "__import__":
            arg = node.args[0]
            prefix = arg.left.value if isinstance(arg, ast.BinOp) and isinstance(arg.left, ast.Constant) else None
            assert prefix and prefix.endswith(".") and prefix[:-1] in mods, \
                "%s:%d: a dynamic import this test cannot resolve" % (path, node.lineno)
            out |= {m for m in mods if m.startswith(prefix)}
    out.discard(name)
    return out


def cycles(graph):
    """Every strongly connected component of more than one module (Tarjan), as sorted lists."""
    index, low, stack, on, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def graph_of(top=PACKAGE):
    mods = modules(top)
    return {name: imports(name, path, mods) for name, path in mods.items()}


def test_the_runtime_has_no_import_circle():
    graph = graph_of()
    assert "mpy_lazy.kinds" in graph and "mpy_lazy.ops.conv" in graph
    found = cycles(graph)
    assert not found, "import circles in mpy_lazy/: %s" % "; ".join(" <-> ".join(c) for c in found)


def test_the_bottom_of_the_runtime_imports_nothing_above_it():
    """kinds imports nothing; the shared arithmetic only backend; the fast paths only each other
    (_viper at their base) and the bottom; a room only the bottom, its package's base
    (ops/__init__: module, param, container) and graph (for its Op's declare)."""
    graph = graph_of()
    m = "mpy_lazy."
    assert graph[m + "kinds"] == set()
    assert graph[m + "_arith"] <= {m + "backend"}
    bottom = {m + "kinds", m + "_arith", m + "backend"}
    for fast in ("_viper", "_thumb", "_viper_elem", "_viper_recurrent", "_viper_reduce", "_viper_signal", "_nd"):
        assert graph[m + fast] <= bottom | {m + "_viper"}, (fast, graph[m + fast])
    base = bottom | {m + "ops", m + "module", m + "param", m + "container", m + "graph"}
    for name in graph:
        if name.startswith(m + "ops."):
            assert graph[name] <= base, (name, graph[name] - base)


def test_the_cycle_finder_finds_a_circle_through_a_function_level_import(tmp_path):
    """The test above can fail: a package where b imports a inside a function, a imports b."""
    pkg = tmp_path / "p"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from . import b\n")
    (pkg / "b.py").write_text("def f():\n    from .a import x\n")
    (pkg / "c.py").write_text("def g():\n    return __import__('p.' + 'a')\n")
    assert cycles(graph_of(str(pkg))) == [["p.a", "p.b"]]
    (pkg / "b.py").write_text("x = 1\n")
    assert cycles(graph_of(str(pkg))) == []
