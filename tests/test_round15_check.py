"""Round 15 (check15): Lightning's Trainer(devices=N) / Trainer(gpus=...) literals read by `check --script` and judged by
GPU019 against the GPUs the process will see (the LEFT item of stop 40: 'GPU016/GPU019 for devices= literals').
Pure functions on recorded facts: no process is started."""
from __future__ import annotations

import ast

from factory import findings_of, fixture_snapshot

from ddpdoctor.lint.scriptfacts import script_facts, trainer_gpu_indices

TRAINER = "import lightning as L\ntrainer = L.Trainer({args})\n"


def _facts(tmp_path, text):
    p = tmp_path / "train.py"
    p.write_text(text)
    return script_facts([str(p)])


def _gpu019(tmp_path, args, cvd=None):
    facts = _facts(tmp_path, TRAINER.format(args=args))
    lint = {"scripts": ["train.py"], "files": [], "findings": [], "rules_run": 0, "facts": facts}

    def edit(sections):
        sections["lint"] = lint
        if cvd is not None:
            sections.setdefault("env", {"vars": {}, "redacted": []})["vars"]["CUDA_VISIBLE_DEVICES"] = cvd

    snap = fixture_snapshot("rtx4090-4x-no-p2p", edit=edit)  # a recorded 4-GPU machine
    return [(f.severity, f.title) for f in findings_of(snap, "GPU019") if "Trainer(" in f.title]


def test_trainer_device_literals_become_gpu_ordinals():
    src = ("t = Trainer(devices=4, accelerator='gpu')\nt = Trainer(gpus=[0, 3])\nt = Trainer(devices='0,2')\n"
           "t = Trainer(devices='2')\nt = Trainer(devices=-1)\nt = Trainer(devices='auto')\n"
           "t = Trainer(devices=8, accelerator='cpu')\nt = Trainer(devices=n)\n")
    got = [(e["index"], e["line"], e["what"]) for e in trainer_gpu_indices(ast.parse(src), "train.py")]
    assert got == [(3, 1, "Trainer(devices=4)"), (0, 2, "Trainer(gpus=[0, 3])"), (3, 2, "Trainer(gpus=[0, 3])"),
                   (0, 3, "Trainer(devices='0,2')"), (2, 3, "Trainer(devices='0,2')"), (1, 4, "Trainer(devices='2')")]


def test_trainer_devices_beyond_the_visible_gpus_warns(tmp_path):
    # 8 GPUs asked on the recorded 4-GPU machine; 4 asked where CUDA_VISIBLE_DEVICES leaves 2
    got = _gpu019(tmp_path, "accelerator='gpu', devices=8, strategy='ddp'")
    assert [s for s, _ in got] == ["warning"] and "Trainer(devices=8)" in got[0][1] and "GPU 7" in got[0][1]
    got = _gpu019(tmp_path, "devices=4", cvd="0,1")
    assert [s for s, _ in got] == ["warning"] and "2 GPU(s)" in got[0][1]
    assert [s for s, _ in _gpu019(tmp_path, "gpus=[0, 3]", cvd="0,1")] == ["warning"]


def test_trainer_devices_that_fit_are_quiet(tmp_path):
    assert _gpu019(tmp_path, "devices=4") == []
    assert _gpu019(tmp_path, "devices=2", cvd="0,1") == []
    assert _gpu019(tmp_path, "devices=-1") == []
    assert _gpu019(tmp_path, "devices='auto'") == []
    assert _gpu019(tmp_path, "accelerator='cpu', devices=8") == []  # CPU processes, not GPU ordinals
