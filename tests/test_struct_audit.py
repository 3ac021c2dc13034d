"""Struct adjoint audit on the nested-struct scenario: every fault fires its check, the clean variant is silent."""

from __future__ import annotations

import ctypes

import pytest
from conftest import by_check, cli_json, needs_struct_grad_keepalive, run_scenario

from gradcheck.checks import run_checks
from gradcheck.engine.runner import run_passes
from gradcheck.measure.allocations import AllocationLedger
from gradcheck.model.exit_codes import ExitCode
from gradcheck.model.findings import Severity
from gradcheck.scenarios.nested_struct import NestedStruct
from gradcheck.warp_compat import struct_records

STRUCT_CHECKS = ("stale-adjoint", "dangling-adjoint")


def test_clean_nested_struct_20_passes_is_silent():
    proc, data = cli_json("run", "nested-struct", "--passes", "20", "--device", "cpu")
    assert proc.returncode == ExitCode.OK, proc.stderr
    (scenario,) = data["scenarios"]
    assert scenario["findings"] == [] and scenario["notes"] == []
    assert all(p["norms"][0] > 0 for p in scenario["params"])


def test_clean_cartpole_has_no_struct_findings():
    result, _ = run_scenario("cartpole", passes=2, steps="10")
    assert not [f for f in result.findings if f.check in STRUCT_CHECKS]
    assert result.notes == ()


@needs_struct_grad_keepalive
def test_requires_grad_off_is_stale_with_a_growing_orphan():
    result, _ = run_scenario("nested-struct", fault="requires-grad-off", passes=4)
    stale = by_check(result.findings, "stale-adjoint")
    finding = next(f for f in stale if f.subject == "model.geo.scale.grad")
    assert finding.severity == Severity.ERROR
    assert finding.evidence["kind"] == "orphan-grad"
    assert finding.evidence["live_ptr"] == "null" and finding.evidence["mirror_ptr"] != "null"
    assert finding.evidence["owner"] == "model.geo._scale_grad"
    norms = finding.evidence["orphan_norms_after_zero"]
    assert [round(n / norms[0], 6) for n in norms] == [1.0, 2.0, 3.0, 4.0]  # although tape.zero() ran
    assert finding.evidence["also_seen_at"] == ["geo.scale.grad"]  # the user's own instance, folded in
    missing = by_check(result.findings, "missing-gradient")
    assert [f.subject for f in missing] == ["geo.scale.grad"]


@needs_struct_grad_keepalive
def test_grad_replaced_is_stale():
    result, _ = run_scenario("nested-struct", fault="grad-replaced", passes=3)
    (finding,) = [f for f in by_check(result.findings, "stale-adjoint") if f.evidence["in_tape"]]
    assert finding.subject == "model.geo.thickness.grad"
    assert finding.evidence["kind"] == "replaced-grad"
    assert finding.evidence["live_ptr"] != finding.evidence["mirror_ptr"] != "null"
    assert [f.subject for f in by_check(result.findings, "missing-gradient")] == ["geo.thickness.grad"]
    (fd,) = by_check(result.findings, "fd-mismatch")  # the wrong gradient, explained by the stale pointer
    assert "likely cause: struct adjoint pointers that miss the live gradient: model.geo.thickness.grad" in fd.message


def test_late_requires_grad_has_a_null_mirror_and_a_missing_gradient():
    result, _ = run_scenario("nested-struct", fault="late-requires-grad", passes=3)
    (finding,) = [f for f in by_check(result.findings, "stale-adjoint") if f.evidence["in_tape"]]
    assert finding.subject == "model.material.damping.grad"
    assert finding.evidence["kind"] == "null-grad" and finding.evidence["mirror_ptr"] == "null"
    assert [f.subject for f in by_check(result.findings, "missing-gradient")] == ["material.damping.grad"]


def test_nested_copy_is_a_stale_data_pointer():
    result, _ = run_scenario("nested-struct", fault="nested-copy", passes=3)
    (finding,) = by_check(result.findings, "stale-adjoint")
    assert finding.subject == "model.geo.thickness"
    assert finding.evidence["kind"] == "nested-copy"
    assert finding.evidence["copied_from"] == "geo"
    assert "model.geo = geo" in finding.hint


def _record_grad_ptrs(parts) -> list[int]:
    return [fields["mass"][1].grad for _, fields in struct_records(parts)]


def _read_float(ptr: int) -> float:
    return ctypes.c_float.from_address(ptr).value  # quarantined by the ledger: still allocated, safe to read


def test_aos_freed_backward_would_write_released_memory():
    """Control: without gradcheck, backward really writes into the released gradient buffers."""
    import warp as wp

    with AllocationLedger(quarantine=True) as ledger:
        scenario = NestedStruct()
        scenario.setup("cpu", fault="aos-freed")
        ptrs = _record_grad_ptrs(scenario.parts)
        assert all(ledger.freed_at(p) is not None for p in ptrs)
        assert [_read_float(p) for p in ptrs] == [0.0, 0.0, 0.0]
        tape = wp.Tape()
        with tape:
            loss = scenario.forward()
        tape.backward(loss)
        assert all(_read_float(p) != 0.0 for p in ptrs)  # use-after-free writes, caught by the quarantine


def test_aos_freed_is_dangling_and_backward_is_not_launched():
    scenario = NestedStruct()
    with AllocationLedger(quarantine=True) as ledger:
        trace = run_passes(scenario, name="nested-struct", device="cpu", passes=3, fault="aos-freed", ledger=ledger)
        ptrs = _record_grad_ptrs(scenario.parts)
        assert [_read_float(p) for p in ptrs] == [0.0, 0.0, 0.0]  # the released region was not written
    assert all(r.backward_skipped for r in trace.passes)
    findings = run_checks(trace)
    dangling = by_check(findings, "dangling-adjoint")
    assert sorted(f.subject for f in dangling) == [f"parts[{i}].mass.grad" for i in range(3)]
    for f in dangling:
        assert f.evidence["kind"] == "freed" and f.evidence["backward_skipped_passes"] == [1, 2, 3]
        assert "backward was not launched" in f.message
        assert f.evidence["confidence"].startswith("high")
    assert not by_check(findings, "missing-gradient")  # nothing ran, so absent gradients prove nothing
    assert not by_check(findings, "accumulation")


def test_record_pointing_into_a_newer_array_names_that_array():
    """A freed address handed to a new array: liveness alone would pass it; the audit names the new owner."""
    import warp as wp

    from gradcheck.measure.struct_audit import StructAuditor
    from gradcheck.scenarios.nested_struct import Part
    from gradcheck.tape.naming import walk

    class Holder:
        pass

    with AllocationLedger() as ledger:
        holder = Holder()
        holder.mass = wp.array([2.0], dtype=float, requires_grad=True)
        holder.offset = wp.array([(1.0, 0.0, 0.0)], dtype=wp.vec3, requires_grad=True)
        part = Part()
        part.mass, part.offset, part.weight = holder.mass, holder.offset, 1.0
        holder.parts = wp.array([part], dtype=Part)
        holder.bystander = wp.zeros(1, dtype=float)  # allocated after the records were written
        # what the allocator does after a free: the record's grad address now lies in the bystander
        part._ctype.mass.grad = holder.bystander.ptr
        holder.parts.assign(wp.array([part], dtype=Part))
        holder.mass.requires_grad = False
        issues = StructAuditor(walk(holder), ledger).audit([("parts", holder.parts, True)])
    (issue,) = [i for i in issues if i.subject == "parts[0].mass.grad"]
    assert (issue.check, issue.kind, issue.owner) == ("dangling-adjoint", "reused", "bystander")


# tape-zero-only reproduces warp#807 (a zero-step bug, silent on fixed Warp): tests/test_warp_versions.py
@pytest.mark.parametrize("fault", [f for f in NestedStruct.faults if f != "tape-zero-only"])
def test_every_fault_is_detected_by_a_struct_check(fault):
    result, report = run_scenario("nested-struct", fault=fault, passes=2)
    assert [f for f in result.findings if f.check in STRUCT_CHECKS], (fault, result.error, result.findings)
    assert report.exit_code == ExitCode.FINDINGS


def test_memory_reused_by_an_integer_array_is_reported_without_a_norm():
    """Freed gradient memory can be handed to any array (seen in CI: an int32 index array)."""
    import warp as wp

    from gradcheck.measure.struct_audit import Observation, pointer_issue

    owner = wp.zeros(4, dtype=wp.int32, device="cpu")
    issue = pointer_issue(
        Observation("dangling-adjoint", "reused", "parts[0].mass.grad", owner.ptr, 0, True, "idx", owner_array=owner)
    )
    assert (issue.check, issue.kind, issue.owner, issue.orphan_norm) == ("dangling-adjoint", "reused", "idx", None)
