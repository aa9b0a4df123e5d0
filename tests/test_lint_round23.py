"""Round 20, wave 6 (issue 25): two classes the held-out review found, fixed after the review (disclosed in
docs/measured/lint.md), each with a trigger and a quiet fixture (fixtures/lint/r23/)."""
from __future__ import annotations

import json
from pathlib import Path

from ddpdoctor.lint.api import lint_paths

ROOT = Path(__file__).resolve().parent.parent
FIX = ROOT / "fixtures" / "lint" / "r23"


def found(path: Path, rid: str, preview=True):
    return [f for f in lint_paths([str(path)], preview=preview).findings if f.id == rid]


# ---------------------------------------------------------------- LINT042: an environment str compared with an int
def test_lint042_the_rank_read_from_the_environment_compared_with_an_int_warns_directly_and_through_a_name():
    got = sorted(found(FIX / "env_rank_compared_with_int_bad.py", "LINT042"), key=lambda f: f.evidence["line"])
    assert [(f.evidence["line"], f.evidence["variable"], f.evidence["always"]) for f in got] == [
        (10, "RANK", "False"), (13, "LOCAL_RANK", "True"), (15, "RANK", "False")]
    assert got[0].fix == "int(os.environ['RANK']) == 0" and got[1].evidence["via"] == "local_rank"
    assert "Lib/os.py" in got[0].evidence["source"]


def test_lint042_int_wrapped_rebound_or_str_compared_values_are_quiet():
    assert found(FIX / "env_rank_compared_with_int_ok.py", "LINT042") == []


def test_lint042_is_a_preview_rule_a_note_by_default():
    assert {f.severity for f in found(FIX / "env_rank_compared_with_int_bad.py", "LINT042", preview=False)} == {"info"}


def test_lint042_facts_name_their_source():
    doc = json.loads((ROOT / "ddpdoctor" / "data" / "lint_env_types.json").read_text())
    assert doc["value_type"] == "str" and doc["source"]["repo"] == "python/cpython"
    assert len(doc["source"]["commit"]) == 40 and doc["source"]["path"] == "Lib/os.py"
    assert len(doc["rank_variables"]["source"]["commit"]) == 40


# ---------------------------------------------------------------- LINT043: --local_rank passed but not accepted
PROJECT = FIX / "launch_project"


def test_lint043_a_parser_without_local_rank_under_torch_distributed_launch_warns_at_parse_args():
    [f] = found(PROJECT / "train_no_local_rank_bad.py", "LINT043")
    assert f.evidence["line"] == 10 and f.evidence["launch"] == "README.md:3"
    assert "--local-rank" in f.fix and "run.py" in f.evidence["source"] and "launch.py" in f.evidence["source"]


def test_lint043_parse_known_args_the_option_defined_or_use_env_are_quiet():
    for name in ("train_known_args_ok.py", "train_defines_local_rank_ok.py", "train_use_env_ok.py"):
        assert found(PROJECT / name, "LINT043") == [], name


def test_lint043_facts_name_both_spellings_with_their_sources():
    doc = json.loads((ROOT / "ddpdoctor" / "data" / "launchers.json").read_text())
    [entry] = [l for l in doc["launchers"] if l["name"] == "torch.distributed.launch"]
    facts = entry["passes_local_rank"]
    assert [o.split("=")[0] for o in facts["options"]] == ["--local_rank", "--local-rank"]
    assert all(len(s["commit"]) == 40 and s["repo"] == "pytorch/pytorch" for s in facts["sources"])
