"""The package's shape: no import cycles (lazy imports included), each layer importing only the layers
below it, and Warp internals touched in one module only.

Read from the source with ``ast``, so every ``import`` counts, also those inside function bodies that
run only on some paths: a cycle through a lazy import is still a cycle the next refactor trips over.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from conftest import ROOT

PACKAGE = ROOT / "gradcheck"
BUILTIN_SCENARIOS = ROOT / "scenarios"  # installed as gradcheck.scenarios


def _modules() -> dict[str, Path]:
    found = {}
    for root, prefix in ((PACKAGE, "gradcheck"), (BUILTIN_SCENARIOS, "gradcheck.scenarios")):
        for path in sorted(root.rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join([prefix, *parts])] = path
    return found


MODULES = _modules()


def _target(name: str) -> str | None:
    """The gradcheck module an import of ``name`` loads: the longest known prefix."""
    while name:
        if name in MODULES:
            return name
        name = name.rpartition(".")[0]
    return None


def _imports(module: str, path: Path) -> set[str]:
    """Every gradcheck module ``module`` imports, at the top or inside a function."""
    is_package = path.name == "__init__.py"
    edges = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = module.split(".")
                anchor = anchor[: len(anchor) - node.level + (1 if is_package else 0)]
                base = ".".join([*anchor, base] if base else anchor)
            names = [f"{base}.{alias.name}" for alias in node.names]  # a submodule, or a name in base
        else:
            continue
        for name in names:
            target = _target(name)
            if target is not None and target != module:
                edges.add(target)
    return edges


GRAPH = {module: _imports(module, path) for module, path in MODULES.items()}


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle of ``graph`` as a path (first module repeated at the end), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    stack: list[str] = []

    def visit(module: str) -> list[str] | None:
        state[module] = 1
        stack.append(module)
        for target in sorted(graph.get(module, ())):
            if state.get(target) == 1:
                return stack[stack.index(target) :] + [target]
            if target not in state:
                found = visit(target)
                if found:
                    return found
        stack.pop()
        state[module] = 2
        return None

    for module in sorted(graph):
        if module not in state:
            found = visit(module)
            if found:
                return found
    return None


def test_the_graph_sees_the_imports_it_must():
    """The walk is not vacuous: lazy imports inside functions and submodule imports are edges."""
    assert "gradcheck.engine.scenario_run" in GRAPH["gradcheck.api"]  # inside check()
    assert "gradcheck.checks.accumulation" in GRAPH["gradcheck.checks"]  # from gradcheck.checks import accumulation
    assert "gradcheck.engine.isolation" in GRAPH["gradcheck.engine.pipeline"]  # inside _executor()


def test_the_cycle_finder_finds_cycles():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None


def test_no_import_cycles():
    cycle = _cycle(GRAPH)
    assert cycle is None, "import cycle: " + " → ".join(cycle)


# Each layer imports only itself and the layers listed: the tree reads as the pipeline
# cli → engine (a driver) → observe (the one observer) and pytorch (its torch side) → the rooms it works through
# (diagnose → rerun → source, measure → tape → warp_compat) → model; checks → model, formats → model beside cli; the
# public API on top.
_ROOMS = {"warp_compat", "tape", "measure", "source", "rerun", "diagnose"}
ALLOWED = {
    "model": {"model"},
    "warp_compat": {"warp_compat", "model"},
    "tape": {"tape", "warp_compat", "model"},
    "measure": {"measure", "tape", "warp_compat", "model"},
    "source": {"source", "warp_compat", "model"},
    "rerun": {"rerun", "source", "measure", "tape", "warp_compat", "model"},
    "diagnose": {"diagnose", "rerun", "source", "measure", "tape", "warp_compat", "model"},
    "observe": {"observe", *_ROOMS, "model"},
    "pytorch": {"pytorch", "observe", *_ROOMS, "model"},
    "checks": {"checks", "model"},
    "formats": {"formats", "model"},
    "scenario": {"scenario", "model"},
    "scenarios": {"scenarios", "model"},
    "examples": {"examples"},  # programs gradcheck ships to try exec on: they use nothing of gradcheck's
    "engine": {"engine", "scenario", "scenarios", "observe", "pytorch", *_ROOMS, "checks", "model", "clip", "version"},
    "cli": {"cli", "engine", "scenario", "checks", "formats", "model", "version"},
    "api": {"engine", "model"},
    "auditing": {"engine", "model"},
    "testing": {"api", "checks", "model"},
    "clip": {"measure", "warp_compat", "model"},
    "version": set(),
    "dataclass_cache": set(),  # stdlib only: imported first of all, before any module of ours builds a class
    "gradcheck": {"api", "auditing", "model", "version", "dataclass_cache"},
    "__main__": {"cli"},
}


def _layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "gradcheck"


def test_every_module_has_a_layer():
    assert {_layer(m) for m in MODULES} <= set(ALLOWED)


def test_layers_import_only_downward():
    wrong = sorted(
        f"{module} imports {target}"
        for module, targets in GRAPH.items()
        for target in targets
        if _layer(target) not in ALLOWED[_layer(module)]
    )
    assert not wrong, "\n".join(wrong)


def test_few_modules_at_the_top():
    top = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(top) <= 12, top


# Warp's private attributes and internal layouts, which have moved between releases, and the patches gradcheck
# sees a program through: only warp_compat/ may name them, behind functions whose names say what they do.
INTERNALS = re.compile(
    r"\._cls\b|\._ctype\b|\bwarp\._src\b|\bwp\._src\b|__dict__\[|\brecord_launch\b|\bLAUNCH_[A-Z]+\b"
    r"|\b(?:wp|warp)\.(?:launch|capture_launch|Tape\.\w+)\s*=[^=]|\binspect\.signature\((?:wp|warp)\.|\bargs\[\d+:\d+\]"
    r"|\badj\.(?:args|tree)\b"
)
COMPAT = PACKAGE / "warp_compat"


def test_warp_internals_only_in_warp_compat():
    hits = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if COMPAT not in path.parents
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if INTERNALS.search(line)
    ]
    assert not hits, "Warp internals outside warp_compat/:\n" + "\n".join(hits)


def test_the_internals_pattern_catches_what_it_must():
    for line in ("for name in obj._cls.vars:", "mirror = instance._ctype", "import warp._src.context",
                 "saved = allocator.__dict__[k]", "def record_launch(self, kernel", "entry[LAUNCH_INPUTS]",
                 "wp.launch = watched", "signature = inspect.signature(wp.launch)", "values = list(args[2:4])",
                 "labels = [a.label for a in kernel.adj.args]"):  # fmt: skip
        assert INTERNALS.search(line), line
    assert not INTERNALS.search("if wp.launch == other:")
    # and warp_compat really is where they live
    assert any(INTERNALS.search(p.read_text(encoding="utf-8")) for p in COMPAT.glob("*.py"))


def test_every_file_and_function_is_small():
    """One job a file: none over ~500 lines, no function over ~80 (a long one is several steps wanting names)."""
    long_files, long_functions = [], []
    for module, path in MODULES.items():
        text = path.read_text(encoding="utf-8")
        if text.count("\n") > 520:
            long_files.append(f"{module}: {text.count(chr(10))} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno - node.lineno >= 80:
                long_functions.append(f"{module}.{node.name}: {node.end_lineno - node.lineno + 1} lines")
    assert not long_files and not long_functions, "\n".join(long_files + long_functions)


def test_every_package_ships_in_a_plain_install():
    """`[tool.setuptools] packages` is an explicit list (scenarios/ installs as gradcheck.scenarios), so a new
    subpackage missing from it works in the editable install every test uses and is absent after `pip install .`
    (as gradcheck.examples once was: `python -m gradcheck.examples.torch_warp_train` failed)."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]["packages"])
    packages = {"gradcheck.scenarios"} | {
        ".".join(("gradcheck", *init.parent.relative_to(PACKAGE).parts)).rstrip(".")
        for init in PACKAGE.rglob("__init__.py")
        if "__pycache__" not in init.parts
    }
    assert packages - listed == set(), "add these to [tool.setuptools] packages in pyproject.toml"


# Which driver each module serves: ``gradcheck run`` (a scenario's passes at fixed params, then the probes that run
# its forward again) or ``gradcheck exec`` / ``gradcheck.audit()`` (an unmodified program). A module that serves one
# driver is never imported by the other's: run never loads the torch side or exec's default adjoint test, exec never
# loads a run-only probe. Everything not listed serves both.
RUN_DRIVER = ("gradcheck.engine.runner", "gradcheck.engine.scenario_run", "gradcheck.engine.post_pass")
EXEC_DRIVER = ("gradcheck.engine.program_audit", "gradcheck.engine.hosting", "gradcheck.auditing")
EXEC_ONLY = re.compile(r"gradcheck\.(pytorch(\..*)?|observe\.(kernel_tests|launch_tests|program_roots))$")
RUN_ONLY = re.compile(r"gradcheck\.(rerun\.carried_state|engine\.(reentrancy|post_pass|pass_loop|scenario_run))$")


def _reach(starts) -> set[str]:
    seen, stack = set(), list(starts)
    while stack:
        for target in GRAPH.get(stack.pop(), ()):
            if target not in seen and _layer(target) not in ("cli", "api"):
                seen.add(target)
                stack.append(target)
    return seen


def test_no_module_is_loaded_by_a_driver_it_does_not_serve():
    run_loads = sorted(m for m in _reach(RUN_DRIVER) if EXEC_ONLY.match(m))
    exec_loads = sorted(m for m in _reach(EXEC_DRIVER) if RUN_ONLY.match(m))
    assert not run_loads, f"run's driver loads exec-only modules: {run_loads}"
    assert not exec_loads, f"exec's driver loads run-only modules: {exec_loads}"
    # and the rule is not vacuous: each driver does load the modules that serve it
    assert {"gradcheck.pytorch.watch", "gradcheck.observe.kernel_tests"} <= _reach(EXEC_DRIVER)
    assert {"gradcheck.rerun.carried_state", "gradcheck.engine.reentrancy"} <= _reach(RUN_DRIVER)
