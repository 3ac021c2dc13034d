"""A file scenario's module is named from its contents, not its path (issue 42, item 5).

Warp keys a module's kernel cache entry ``wp_<module name>_<kernel hash>``: a module name derived from the file's
absolute path made every fresh clone in another folder (a CI checkout) compile the scenario's kernels again.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap

from conftest import ROOT, SCENARIOS

from gradcheck.scenario.loader import load
from gradcheck.scenario.resolve import resolve

# loads a file scenario as `gradcheck run` does, then loads (compiles or finds in the cache) its Warp module on the CPU
_LOAD_AND_BUILD = textwrap.dedent(
    """
    import json, sys
    import warp as wp
    wp.config.quiet = False  # Warp says "(compiled)" or "(cached)" for each module it loads
    from gradcheck.scenario.loader import checked
    scenario, _ = checked(sys.argv[1])
    module = type(scenario).__module__
    wp.load_module(module, device="cpu")
    print(json.dumps({"module": module, "cache": wp.config.kernel_cache_dir}))
    """
)


def _build_in_a_fresh_process(spec: str, clone, cache) -> tuple[dict, str]:
    env = {**os.environ, "WARP_CACHE_PATH": str(cache), "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-c", _LOAD_AND_BUILD, spec], cwd=clone, env=env, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.splitlines()[-1]), proc.stdout


def _module_dirs(cache_dir: str) -> set[str]:
    return {name for name in os.listdir(cache_dir) if name.startswith("wp_")}


def test_the_same_file_in_two_clones_compiles_once(tmp_path):
    """Two checkouts in different folders, one kernel cache (as a CI cache restores it): the second run finds the
    scenario's module in the cache and compiles nothing."""
    clones = [tmp_path / "clone-a", tmp_path / "elsewhere" / "clone-b"]
    for clone in clones:
        (clone / "scenarios").mkdir(parents=True)
        shutil.copy(SCENARIOS / "factory.py", clone / "scenarios" / "factory.py")
    cache = tmp_path / "kernel-cache"

    first, first_says = _build_in_a_fresh_process("scenarios/factory.py", clones[0], cache)
    after_first = _module_dirs(first["cache"])
    second, second_says = _build_in_a_fresh_process("scenarios/factory.py", clones[1], cache)

    assert first["module"] == second["module"]
    assert first["module"].startswith("gradcheck_user_factory_")
    assert [d for d in after_first if first["module"] in d], after_first  # the first run did compile it here
    assert "(compiled)" in first_says
    assert _module_dirs(second["cache"]) == after_first, "the second clone compiled its own copy"
    assert "(cached)" in second_says and "(compiled)" not in second_says, second_says


def _scenario_file(folder, source: str):
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "scenario.py"
    path.write_text(source)
    return path


def test_different_files_of_the_same_name_stay_apart(tmp_path):
    """Same file name, different contents (two folders, or one file edited in the same process): two modules, each
    with its own classes and its own Warp module."""
    source = (SCENARIOS / "factory.py").read_text()
    first = load(resolve(str(_scenario_file(tmp_path / "a", source))))
    second = load(resolve(str(_scenario_file(tmp_path / "b", source.replace('"loss = sum', '"loss: sum')))))
    edited_path = _scenario_file(tmp_path / "c", source)
    load(resolve(str(edited_path)))
    edited_path.write_text(source.replace("float(i + 1)", "float(i + 2)"))
    edited = load(resolve(str(edited_path)))

    modules = [sys.modules[type(s).__module__] for s in (first, second, edited)]
    assert len({m.__name__ for m in modules}) == 3
    assert all(m.__name__.startswith("gradcheck_user_scenario_") for m in modules)
    assert (first.description, second.description) == ("loss = sum((i+1) * x[i])", "loss: sum((i+1) * x[i])")
    warp_modules = {m.weighted.module.name for m in modules}
    assert warp_modules == {m.__name__ for m in modules}  # each file's kernel in its own Warp module
    assert "float(i + 2)" in modules[2].weighted.adj.source  # the edit is what runs, not the module of before


def test_two_copies_of_one_file_in_one_process_share_its_module(tmp_path):
    """The first copy's module serves both (same source, classes and kernels: Warp compiles them once); each load
    still gives its own scenario instance."""
    source = (SCENARIOS / "factory.py").read_text() + f"# loaded by {tmp_path} only\n"  # bytes no other test loads
    first = load(resolve(str(_scenario_file(tmp_path / "a", source))))
    second = load(resolve(str(_scenario_file(tmp_path / "b", source))))
    assert type(first) is type(second) and first is not second
    assert sys.modules[type(first).__module__].__file__ == str(tmp_path / "a" / "scenario.py")
