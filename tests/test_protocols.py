"""The interfaces the registries rely on: every check module is a CheckModule, every renderer a Renderer.

A check or format added with one registry line must satisfy its protocol, or `gradcheck explain`, the table and
the JSON would meet it only when a user's run reached it."""

from __future__ import annotations

import inspect

from gradcheck.checks import REGISTRY
from gradcheck.checks.protocol import CheckModule
from gradcheck.formats import RENDERERS
from gradcheck.formats.protocol import Renderer


def test_every_check_module_is_a_check_module():
    for module in REGISTRY:
        assert isinstance(module, CheckModule), module.__name__
        assert list(inspect.signature(module.check).parameters)[:2] == ["trace", "options"], module.__name__
        assert module.NAME and module.SUMMARY and module.EXPLAIN, module.__name__


def test_a_module_missing_part_of_the_interface_is_not_one():
    import types

    half = types.ModuleType("half")
    half.NAME, half.SUMMARY = "half", "one line"
    assert not isinstance(half, CheckModule)


def test_every_renderer_takes_a_document_and_the_three_options():
    for kind, by_format in RENDERERS.items():
        for fmt, render in by_format.items():
            assert isinstance(render, Renderer), (kind, fmt)
            inspect.signature(render).bind(object(), color=False, width=100, verbose=False)
