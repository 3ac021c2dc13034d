"""gradcheck.dataclass_cache: gradcheck's dataclasses built from code compiled in an earlier process are the classes
``@dataclass`` builds; other modules' classes never touch the cache; a cache file that cannot be read or written
costs nothing but the speed-up."""

from __future__ import annotations

import dataclasses
import os
import sys
import types

import pytest

from gradcheck import dataclass_cache

CLASS_SOURCE = '''
from __future__ import annotations
from dataclasses import dataclass, field

@dataclass(frozen=True)
class Probe:
    """A frozen record as gradcheck's evidence types are."""
    name: str
    value: float = 0.5
    tags: tuple = ()
    extra: dict = field(default_factory=dict, hash=False, compare=False)

@dataclass(order=True)
class Mutable:
    rank: int
    label: str = "x"
'''


def _module(name: str):
    module = types.ModuleType(name)
    sys.modules[name] = module
    try:
        exec(compile(CLASS_SOURCE, f"<{name}>", "exec"), module.__dict__)
    finally:
        del sys.modules[name]
    return module


@pytest.fixture
def sources(tmp_path, monkeypatch):
    cache = dataclass_cache.CompiledSources(str(tmp_path / "cache" / "dataclasses.marshal"))
    monkeypatch.setattr(dataclass_cache, "_SOURCES", cache)
    dataclass_cache.install()
    return cache


def _behaviour(module) -> tuple:
    probe = module.Probe("a", tags=(1, 2))
    try:
        probe.name = "b"
        frozen = "assigned"
    except dataclasses.FrozenInstanceError:
        frozen = "frozen"
    other = dataclasses.replace(probe, value=2.0)
    mutable = [module.Mutable(2), module.Mutable(1, "y")]
    return (
        repr(probe),
        probe == module.Probe("a", 0.5, (1, 2), {}),
        hash(probe) == hash(module.Probe("a", tags=(1, 2))),
        frozen,
        repr(other),
        [f.name for f in dataclasses.fields(module.Probe)],
        repr(sorted(mutable)),
        dataclasses.asdict(probe),
        module.Probe.__init__.__code__.co_filename,
    )


def test_our_classes_use_the_cache_and_behave_as_dataclass_builds_them(sources):
    plain = _module("elsewhere_probe")  # not gradcheck's: exec as dataclasses calls it
    assert sources._codes is None  # nothing of ours built yet: the file was not even read
    ours = _module("gradcheck._cache_probe")
    assert sources._new and sources._used  # the methods' code came through the cache
    assert _behaviour(ours) == _behaviour(plain)
    sources.save()
    assert os.path.exists(sources.path)

    again = dataclass_cache.CompiledSources(sources.path)  # the next process
    import gradcheck.dataclass_cache as cache_module

    cache_module._SOURCES = again
    try:
        rebuilt = _module("gradcheck._cache_probe")
    finally:
        cache_module._SOURCES = sources
    assert not again._new  # every method's code was read, none compiled
    assert _behaviour(rebuilt) == _behaviour(plain)


def test_other_modules_dataclasses_never_reach_the_cache(sources):
    _module("user_program_module")
    assert sources._codes is None and not sources._used


def test_a_broken_or_unwritable_cache_costs_only_the_speed_up(tmp_path, monkeypatch):
    broken = tmp_path / "broken.marshal"
    broken.write_bytes(b"\x00not marshal")
    cache = dataclass_cache.CompiledSources(str(broken))
    monkeypatch.setattr(dataclass_cache, "_SOURCES", cache)
    module = _module("gradcheck._cache_probe_broken")
    assert module.Probe("a").value == 0.5 and cache._new

    blocked = tmp_path / "a-file"
    blocked.write_text("not a folder")
    unwritable = dataclass_cache.CompiledSources(str(blocked / "sub" / "dataclasses.marshal"))
    unwritable.code("x = 1\n")
    unwritable.save()  # no error: the folder cannot be made
    assert not (blocked / "sub").exists()


def test_installing_twice_wraps_once():
    dataclass_cache.install()
    first = dataclasses.exec
    dataclass_cache.install()
    assert dataclasses.exec is first
