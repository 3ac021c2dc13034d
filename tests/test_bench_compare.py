"""`make bench`'s regression gate (bench/compare.py, bench/baseline.py, bench/run_bench.py's wiring) and
bench/gpu_rows.py's command line, on faked numbers: pure Python, no benchmark runs, no Warp.

The gate must flag a row that got slower beyond its noise and stay silent on rows that moved within it, whichever
way a row counts as better; an unreadable baseline must stop the run rather than hide every regression.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from conftest import ROOT

sys.path.insert(0, str(ROOT / "bench"))

import baseline  # noqa: E402
import compare  # noqa: E402
import gpu_rows  # noqa: E402
import run_bench  # noqa: E402
from rows import Row  # noqa: E402


def record(value, rounds=(), unit="×", better="lower"):
    return {"value": value, "unit": unit, "better": better, "rounds": list(rounds)}


PREVIOUS = {
    "P1w": record(1.05, (1.04, 1.05, 1.06)),  # spread ~2%: the 3% floor applies
    "P6": record(1.50, (1.40, 1.50, 1.60)),  # spread 13% (now: 12.5%)
    "B1": record(30.0, (29.0, 30.0, 31.0), better="higher"),
    "P3-list": record(0.28, unit="s"),  # no rounds: 10%
    "E6": record(0.05, (0.049, 0.050, 0.051), unit="s"),
}
NOW = {
    "P1w": record(1.25, (1.24, 1.25, 1.26)),  # +19%: slower
    "P6": record(1.60, (1.50, 1.60, 1.70)),  # +7% within 13%: same
    "B1": record(33.0, (32.0, 33.0, 34.0), better="higher"),  # 10% faster
    "P3-list": record(0.30, unit="s"),  # +7% within the default 10%
    "E6": record(0.05, (0.050, 0.050, 0.051), unit="ms"),  # unit changed: not comparable
    "E7": record(1.08, (1.07, 1.08)),  # new row
}


def test_the_slower_row_is_flagged_and_the_others_are_not():
    changes = {c.key: c for c in compare.compare(PREVIOUS, NOW)}
    assert [c.key for c in compare.regressions(list(changes.values()))] == ["P1w"]
    assert changes["P1w"].worse == pytest.approx(0.2 / 1.05)
    assert changes["P6"].verdict == "same" and changes["P6"].noise == pytest.approx(
        0.2 / 1.5
    )  # the larger spread: previous
    assert changes["B1"].verdict == "faster" and changes["B1"].worse == pytest.approx(-0.1)
    assert changes["P3-list"].verdict == "same" and changes["P3-list"].noise == compare.DEFAULT_NOISE
    assert changes["E6"].verdict == "not comparable"
    assert changes["E7"].verdict == "new"


def test_a_higher_is_better_row_that_falls_is_slower_and_the_default_threshold_flags_without_rounds():
    previous = {"B1": record(30.0, better="higher"), "P4": record(7.0, unit="s")}
    now = {"B1": record(26.0, better="higher"), "P4": record(7.8, unit="s")}
    assert [c.key for c in compare.regressions(compare.compare(previous, now))] == ["B1", "P4"]
    assert compare.regressions(compare.compare(previous, previous)) == []


def test_the_noise_is_the_larger_spread_of_the_two_runs_at_least_the_floor():
    assert compare.spread([1.0]) is None
    assert compare.spread([0.9, 1.0, 1.1]) == pytest.approx(0.2)
    assert compare.noise([0.9, 1.0, 1.1], [1.0, 1.0]) == pytest.approx(0.2)
    assert compare.noise([1.0, 1.001], None) == compare.NOISE_FLOOR
    assert compare.noise(None, [2.0]) == compare.DEFAULT_NOISE


def test_the_table_names_only_the_slower_row_slower():
    text = compare.table(compare.compare(PREVIOUS, NOW))
    lines = {line.split()[0]: line for line in text.splitlines()[1:]}
    assert "SLOWER" in lines["P1w"] and "1.050×" in lines["P1w"] and "1.250×" in lines["P1w"]
    assert all("SLOWER" not in line for key, line in lines.items() if key != "P1w")
    assert compare.summary(compare.compare(PREVIOUS, NOW)).startswith("1 row(s) got slower")


def test_the_baseline_merges_rows_measured_alone_and_refuses_a_file_that_is_not_one(tmp_path):
    path = tmp_path / "baseline.json"
    baseline.save(baseline.stamped({"P1w": record(1.2), "P6": record(2.0)}, "cpu"), path)
    baseline.save(baseline.stamped({"P6": record(1.4)}, "cpu"), path)
    rows = baseline.load(path)
    assert rows["P1w"]["value"] == 1.2 and rows["P6"]["value"] == 1.4
    assert {"date", "commit", "machine"} <= set(rows["P6"]) and "device cpu" in rows["P6"]["machine"]
    path.write_text("[1, 2]", encoding="utf-8")
    with pytest.raises(SystemExit, match="not a benchmark baseline"):
        baseline.load(path)
    assert baseline.load(tmp_path / "absent.json") == {}


def test_make_bench_fails_on_a_regression_against_the_numbers_it_kept(tmp_path, monkeypatch, capsys):
    """run_bench's own wiring, with a fake group in place of a measurement: the first run keeps its numbers, the
    second (slower) run is flagged and, with --fail-on-regression, exits 1."""
    values = iter([1.00, 1.30])

    def fake(args):
        value = next(values)
        return [Row("FAKE", "a faked row", f"{value}×", value=value, rounds=(value, value * 1.01))]

    monkeypatch.setitem(run_bench.GROUPS, "FAKE", fake)
    path = tmp_path / "baseline.json"
    common = ["--only", "fake", "--baseline", str(path), "--fail-on-regression"]
    assert run_bench.main([*common, "--update-baseline"]) == 0
    assert json.loads(path.read_text(encoding="utf-8"))["rows"]["FAKE"]["value"] == 1.0
    assert run_bench.main(common) == 1
    out = capsys.readouterr().out
    assert "SLOWER" in out and "1 row(s) got slower beyond their noise: FAKE" in out
    assert json.loads(path.read_text(encoding="utf-8"))["rows"]["FAKE"]["value"] == 1.0  # not updated


def test_run_bench_rejects_an_unknown_row_and_takes_ids_in_any_case(capsys):
    assert run_bench.parse(["--only", "p1w,P6,e6"]).groups == ["P1w", "P6", "E6"]
    with pytest.raises(SystemExit):
        run_bench.parse(["--only", "P9"])
    assert "unknown rows ['P9']" in capsys.readouterr().err


def test_gpu_rows_arguments_and_its_not_measured_section(tmp_path, capsys):
    args = gpu_rows.parse(["--output", str(tmp_path / "g.md"), "--only", "p1,e5", "--rounds", "2"])
    assert args.groups == ["P1", "E5"] and args.device == "cuda:0" and args.rounds == 2
    for bad, said in ((["--only", "X"], "unknown groups"), (["--device", "cpu"], "measures CUDA devices"), ([], "")):
        with pytest.raises(SystemExit):
            gpu_rows.parse(bad if not bad or "--output" in bad else ["--output", "x.md", *bad])
        assert said in capsys.readouterr().err
    text = gpu_rows.section(tmp_path / "absent.md")
    assert text.count("not measured") == len(gpu_rows.PLAN) and gpu_rows.COMMAND in text
    (tmp_path / "g.md").write_text("## GPU (CUDA)\n\nmeasured on a test\n", encoding="utf-8")
    assert "measured on a test" in gpu_rows.section(tmp_path / "g.md")


def test_gpu_rows_refuses_in_one_line_without_a_cuda_device(tmp_path):
    """CUDA_VISIBLE_DEVICES hides any GPU, so the refusal is tested on every machine."""
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    out = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "gpu_rows.py"), "--output", str(tmp_path / "g.md")],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert out.returncode == 2
    assert out.stderr.strip().splitlines() == [
        "gpu_rows: no CUDA device cuda:0 here (Warp sees none); run it on a machine with a CUDA GPU"
    ]
    assert out.stdout == "" and not (tmp_path / "g.md").exists()


def test_the_full_table_keeps_the_dated_sections_below_the_marker(tmp_path):
    path = tmp_path / "BENCHMARKS.md"
    path.write_text(f"# old table\n{run_bench.KEEP_MARKER}\n\n## Issue 41: before and after\nkept\n", encoding="utf-8")
    run_bench.write_output(path, "# new table\n", full=True)
    text = path.read_text(encoding="utf-8")
    assert (
        text.startswith("# new table\n")
        and "old table" not in text
        and text.endswith("## Issue 41: before and after\nkept\n")
    )
    run_bench.write_output(path, "| E6 | only |\n", full=False)  # --only --output: that table alone
    assert path.read_text(encoding="utf-8") == "| E6 | only |\n"
