"""``--format sarif``, ``--format github``, ``--format gitlab`` (issue 45, item 1): what code review tools read.

Real runs: a Warp training loop with a seeded mistake (tests/programs/exec/training_loop.py) copied into a git
repository of its own under ``gradcheck exec``, and a built-in scenario's fault variant under ``gradcheck run``. SARIF
is validated against the OASIS 2.1.0 schema (tests/corpus/sarif); the GitHub workflow commands and GitLab's Code
Quality issues against their documented fields.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import pytest
from conftest import ROOT, TESTS, cli

PROGRAM = TESTS / "programs" / "exec" / "training_loop.py"
SCHEMA = TESTS / "corpus" / "sarif" / "sarif-schema-2.1.0.json"
pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    """A git repository holding the program in a subfolder: the source root the paths are relative to."""
    root = tmp_path_factory.mktemp("repo")
    subprocess.run(["git", "init", "-q", str(root)], check=True, timeout=30)
    (root / "train").mkdir()
    shutil.copy(PROGRAM, root / "train" / "loop.py")
    return root


def _sarif(text: str) -> dict:
    start = text.index('{\n  "$schema"')  # the program's own prints come first on stdout
    return json.loads(text[start:])


def test_sarif_validates_against_the_2_1_0_schema_and_places_results_in_the_repository(repo):
    jsonschema = pytest.importorskip("jsonschema")
    log = _sarif(cli("exec", "--format", "sarif", "train/loop.py", "--mistake", "new-tape-zero", cwd=repo).stdout)
    jsonschema.validate(log, json.loads(SCHEMA.read_text()))
    (run,) = log["runs"]
    rules = [rule["id"] for rule in run["tool"]["driver"]["rules"]]
    assert "accumulation" in rules and "cross-rank" in rules
    assert run["originalUriBaseIds"]["SRCROOT"]["uri"] == repo.resolve().as_uri() + "/"
    assert run["results"] and run["invocations"][0]["executionSuccessful"]
    line = next(n for n, text in enumerate(PROGRAM.read_text().splitlines(), 1) if "tape.backward(" in text)
    for result in run["results"]:
        assert rules[result["ruleIndex"]] == result["ruleId"]
        (location,) = result["locations"]
        physical = location["physicalLocation"]
        assert physical["artifactLocation"] == {"uri": "train/loop.py", "uriBaseId": "SRCROOT"}
        assert physical["region"]["startLine"] >= 1
    assert any(r["ruleId"] == "accumulation" and r["level"] == "error" for r in run["results"])
    assert any(r["locations"][0]["physicalLocation"]["region"]["startLine"] == line for r in run["results"])
    prints = [r["partialFingerprints"]["gradcheck/v1"] for r in run["results"]]
    assert len(set(prints)) == len(prints)


def test_fingerprints_survive_a_blank_line_inserted_above_the_site(tmp_path, repo):
    moved = tmp_path / "moved"
    shutil.copytree(repo, moved)
    program = moved / "train" / "loop.py"
    program.write_text("\n" + program.read_text())
    before = _sarif(cli("exec", "--format", "sarif", "train/loop.py", "--mistake", "new-tape-zero", cwd=repo).stdout)
    after = _sarif(cli("exec", "--format", "sarif", "train/loop.py", "--mistake", "new-tape-zero", cwd=moved).stdout)

    def keyed(log):
        return {
            (r["ruleId"], r["properties"]["subject"]): (
                r["partialFingerprints"]["gradcheck/v1"],
                r["locations"][0]["physicalLocation"]["region"]["startLine"],
            )
            for r in log["runs"][0]["results"]
        }

    old, new = keyed(before), keyed(after)
    assert old.keys() == new.keys() and old
    for key in old:
        assert new[key][0] == old[key][0]  # the same fingerprint
        assert new[key][1] == old[key][1] + 1  # at the line that moved


def test_a_suppressed_finding_is_a_sarif_suppression_and_left_out_of_the_annotations(repo):
    ignore = ("--ignore", "zero-audit")
    log = _sarif(
        cli("exec", "--format", "sarif", *ignore, "train/loop.py", "--mistake", "new-tape-zero", cwd=repo).stdout
    )
    suppressed = [r for r in log["runs"][0]["results"] if r.get("suppressions")]
    assert suppressed and all(r["ruleId"] == "zero-audit" for r in suppressed)
    assert suppressed[0]["suppressions"][0]["kind"] == "external"
    github = cli("exec", "--format", "github", *ignore, "train/loop.py", "--mistake", "new-tape-zero", cwd=repo)
    assert "title=gradcheck zero-audit" not in github.stdout and "title=gradcheck accumulation" in github.stdout


GITHUB_LINE = re.compile(r"^::(error|warning|notice) (file=[^,:]+,line=\d+,)?title=[^,:]+::[^\r\n]+$")


def test_github_workflow_commands_one_line_each_escaped(repo):
    proc = cli("exec", "--format", "github", "train/loop.py", "--mistake", "new-tape-zero", cwd=repo)
    assert proc.returncode == 1
    commands = [line for line in proc.stdout.splitlines() if line.startswith("::")]
    assert commands and all(GITHUB_LINE.match(line) for line in commands), commands
    assert any(line.startswith("::error file=train/loop.py,line=") for line in commands)
    assert all("%0Afix%3A" not in line and "%0Afix: " in line for line in commands)  # text escapes only %, CR, LF


def test_gitlab_code_quality_issues_have_the_required_fields_and_unique_fingerprints(repo):
    proc = cli("exec", "--format", "gitlab", "train/loop.py", "--mistake", "new-tape-zero", cwd=repo)
    issues = json.loads(proc.stdout[proc.stdout.index("[\n") :])
    assert issues
    for issue in issues:
        assert set(issue) == {"description", "check_name", "fingerprint", "severity", "location"}
        assert issue["severity"] in {"info", "minor", "major", "critical", "blocker"}
        assert issue["location"]["path"] == "train/loop.py" and issue["location"]["lines"]["begin"] >= 1
    assert len({i["fingerprint"] for i in issues}) == len(issues)


def test_a_site_outside_the_source_root_is_listed_without_a_location(tmp_path):
    proc = cli("run", "spring-chain", "--fault", "wrong-func-grad", "--fd", "fast", "--format", "sarif", cwd=tmp_path)
    log = json.loads(proc.stdout)
    results = log["runs"][0]["results"]
    assert results and all("locations" not in r for r in results)  # the scenario's file is in the package
    inside = cli("run", "spring-chain", "--fault", "wrong-func-grad", "--fd", "fast", "--format", "gitlab", cwd=ROOT)
    paths = {i["location"]["path"] for i in json.loads(inside.stdout)}
    assert paths == {"scenarios/spring_chain.py"}  # run from this repository: the scenario's own file


def test_the_formats_are_offered_where_a_report_is_printed_and_refused_elsewhere():
    assert "sarif" in cli("run", "--help").stdout
    bad = cli("explain", "accumulation", "--format", "sarif")
    assert bad.returncode == 2 and "has no --format sarif" in bad.stderr


def test_source_root_sets_what_paths_are_relative_to_and_a_missing_one_is_a_usage_error(repo):
    train = repo / "train"
    args = ("exec", "--format", "gitlab", "--source-root", str(train), "loop.py", "--mistake", "new-tape-zero")
    proc = cli(*args, cwd=train)
    issues = json.loads(proc.stdout[proc.stdout.index("[\n") :])
    assert {i["location"]["path"] for i in issues} == {"loop.py"}  # relative to --source-root, not git's top
    bad = cli("exec", "--format", "sarif", "--source-root", str(repo / "nowhere"), "train/loop.py", cwd=repo)
    assert bad.returncode == 2 and "--source-root" in bad.stderr and "no such folder" in bad.stderr
    assert "Traceback" not in bad.stderr
