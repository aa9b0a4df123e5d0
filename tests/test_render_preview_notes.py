""""No issues found!" is a claim of health. A lint report whose only findings are notes because their rules have
not yet earned their severity at first read (lint.engine.earned_severity) names likely faults: its summary says
so and its family is not marked healthy. Plain notes keep the health line."""
from pathlib import Path

import pytest

from ddpdoctor.cli import main

FIX = Path(__file__).resolve().parent.parent / "fixtures" / "lint"


def _lint(capsys, *args):
    with pytest.raises(SystemExit) as exc:
        main(["lint", *args])
    return exc.value.code, capsys.readouterr().out


def test_notes_held_in_preview_are_not_a_clean_bill(capsys):
    code, out = _lint(capsys, str(FIX / "seed_question_spawn.py"))
    assert code == 0  # the earned-severity rule decides the exit status, not this line
    assert "No issues found!" not in out and "not a clean bill" in out
    assert "[?] Training script (static)" in out and "[✓] Training script" not in out
    assert "at their own severity:" in out


def test_a_clean_script_keeps_the_health_line(capsys, tmp_path):
    script = tmp_path / "clean.py"
    script.write_text("import torch\n\nprint(torch.ones(1))\n")
    code, out = _lint(capsys, str(script))
    assert code == 0 and "No issues found!" in out and "not a clean bill" not in out
