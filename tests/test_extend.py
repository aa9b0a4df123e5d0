"""Adding a check that needs a new fact touches three places: the gatherer, the check, and its test
fixture. This file is all three, written against the public API only (ddpdoctor.gather,
ddpdoctor.checks), and proves the check runs in `ddpdoctor check`, shows in `explain`, and that
its gatherer's declared fields validate recorded snapshots."""
from __future__ import annotations

import json

import pytest

from ddpdoctor.cli import main


@pytest.fixture
def toy():
    """Register the toy gatherer and check for one test, then remove them (other tests list every
    registered check, e.g. the docs/checks.md staleness test)."""
    from ddpdoctor import gather
    from ddpdoctor.checks import check, warning
    from ddpdoctor.gather import INT, gatherer
    from ddpdoctor.model import registry

    @gatherer("toy", fields={"widgets": INT})
    def gather_toy(src):
        return {"widgets": int(src.environ.get("TOY_WIDGETS", "0"))}

    @check("SYS990", "too-few-widgets", family="system", needs=("toy",))
    def too_few_widgets(snap):
        """Fewer than two widgets are configured.

        What it checks
            TOY_WIDGETS, as the toy gatherer read it.

        Why it matters
            A toy needs two widgets.

        Example
            TOY_WIDGETS=1

        Fix
            export TOY_WIDGETS=2
        """
        n = snap["toy"]["widgets"]
        if n < 2:
            yield warning(f"only {n} widget(s)", fix="export TOY_WIDGETS=2", subjects=["env:TOY_WIDGETS"],
                          evidence={"widgets": n})

    yield
    registry.REGISTRY.pop("SYS990", None)
    registry._SLUGS.pop("too-few-widgets", None)
    gather.GATHERERS.pop("toy", None)


def run(capsys, *argv) -> tuple:
    with pytest.raises(SystemExit) as exc:
        main(list(argv))
    out = capsys.readouterr()
    return exc.value.code, out.out, out.err


def test_toy_check_runs_in_check_and_fires(toy, capsys, monkeypatch):
    monkeypatch.setenv("TOY_WIDGETS", "1")
    code, out, _ = run(capsys, "check", "--no-comm", "--only", "SYS990", "--format", "json")
    report = json.loads(out)
    assert code == 0  # a warning, below the default --fail-on error
    assert [(f["id"], f["name"], f["evidence"]["widgets"]) for f in report["findings"]] == \
        [("SYS990", "too-few-widgets", 1)]
    assert report["summary"]["checks_run"] == 1


def test_toy_check_stays_quiet_when_the_fact_is_fine(toy, capsys, monkeypatch):
    monkeypatch.setenv("TOY_WIDGETS", "3")
    code, out, _ = run(capsys, "check", "--no-comm", "--only", "too-few-widgets", "--format", "json")
    report = json.loads(out)
    assert code == 0 and report["findings"] == [] and report["summary"]["checks_run"] == 1


def test_toy_check_appears_in_explain_and_the_list(toy, capsys):
    code, out, _ = run(capsys, "explain", "SYS990")
    assert code == 0 and "Fewer than two widgets" in out and "export TOY_WIDGETS=2" in out
    code, out, _ = run(capsys, "checks", "--format", "json")
    assert code == 0 and "SYS990" in [c["id"] for c in json.loads(out)]


def test_toy_gatherer_fields_validate_a_recorded_snapshot(toy, capsys, tmp_path):
    bad = tmp_path / "snap.json"
    bad.write_text(json.dumps({"schema": "ddpdoctor/snapshot/1", "sections": {"toy": {"widgets": "many"}}}))
    code, _, err = run(capsys, "check", "--snapshot", str(bad), "--only", "SYS990")
    assert code == 2 and "toy.widgets" in err
    good = tmp_path / "good.json"
    good.write_text(json.dumps({"schema": "ddpdoctor/snapshot/1", "sections": {"toy": {"widgets": 0}}}))
    code, out, _ = run(capsys, "check", "--snapshot", str(good), "--only", "SYS990", "--format", "json")
    assert code == 0 and [f["id"] for f in json.loads(out)["findings"]] == ["SYS990"]


def test_the_toy_is_gone_afterwards():
    from ddpdoctor import gather
    from ddpdoctor.model.registry import REGISTRY

    assert "SYS990" not in REGISTRY and "toy" not in gather.GATHERERS
