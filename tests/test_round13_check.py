"""Round 13 (issue 26): classes the stop-38 note left, each with a trigger and quiet cases."""
from __future__ import annotations

from factory import findings_of, fixture_snapshot


def _facts(tmp_path, text):
    from ddpdoctor.lint.scriptfacts import script_facts

    p = tmp_path / "train.py"
    p.write_text(text)
    return script_facts([str(p)])


# ------------------------------------------------ GPU019: CUDA_VISIBLE_DEVICES set after CUDA initialised
# KaiyangZhou/deep-person-reid#267 (batch 62): main() set os.environ['CUDA_VISIBLE_DEVICES'] = args.gpu_devices after
# torch.cuda.is_available(); cuInit had read the variable, so the job ran on all 4 GPUs.
LATE = ('import os, torch\n'
        'def main(dev):\n'
        '    use_gpu = torch.cuda.is_available()\n'
        '    os.environ["CUDA_VISIBLE_DEVICES"] = dev\n'
        'if __name__ == "__main__":\n'
        '    main("0")\n')


def test_visible_devices_set_after_cuda_init_read_from_script(tmp_path):
    facts = _facts(tmp_path, LATE)
    assert facts["env_sets"] == []
    late = facts["late_env_sets"]
    assert [(e["line"], e["value"], e["text"], e["cuda_init"]["line"]) for e in late] == [(4, None, "dev", 3)]
    assert late[0]["cuda_init"]["call"] == "torch.cuda.is_available()"
    # a literal set after a module-level .cuda() is late too, and leaves env_sets
    facts = _facts(tmp_path, 'import os, torch\nm = torch.nn.Linear(1, 1).cuda()\ndef f():\n'
                             '    os.environ["CUDA_VISIBLE_DEVICES"] = "1"\n')
    assert [e["value"] for e in facts["late_env_sets"]] == ["1"] and facts["env_sets"] == []


def test_visible_devices_set_before_cuda_init_is_not_late(tmp_path):
    # set first, CUDA after: the ordinary, working order
    facts = _facts(tmp_path, 'import os, torch\nos.environ["CUDA_VISIBLE_DEVICES"] = "0"\nok = torch.cuda.is_available()\n')
    assert facts["late_env_sets"] == [] and [e["value"] for e in facts["env_sets"]] == ["0"]
    # a CUDA call in another function is not known to have run first
    facts = _facts(tmp_path, 'import os, torch\ndef g():\n    return torch.cuda.device_count()\ndef f():\n'
                             '    os.environ["CUDA_VISIBLE_DEVICES"] = "0"\n')
    assert facts["late_env_sets"] == []
    # a module-level CUDA call below the function's definition line is not "above" it
    facts = _facts(tmp_path, 'import os, torch\ndef f():\n    os.environ["CUDA_VISIBLE_DEVICES"] = "0"\n'
                             'n = torch.cuda.device_count()\n')
    assert facts["late_env_sets"] == []


def _late(sets, env=None, keep=4):
    lint = {"scripts": ["train.py"], "files": [], "findings": [], "rules_run": 0,
            "facts": {"env_sets": [], "late_env_sets": sets, "loader_workers": None, "gpu_indices": []}}
    return findings_of(fixture_snapshot("rtx4090-4x-no-p2p", keep=keep, env=env, edit=lambda s: s.update(lint=lint)),
                       "GPU019")


LATE_FACT = {"name": "CUDA_VISIBLE_DEVICES", "value": None, "text": "args.gpu_devices", "path": "main.py", "line": 40,
             "how": "assign", "cuda_init": {"line": 31, "call": "torch.cuda.is_available()"}}


def test_visible_devices_set_after_cuda_init_warns():
    found = _late([LATE_FACT])
    assert [f.severity for f in found] == ["warning"]
    assert "main.py:40 sets CUDA_VISIBLE_DEVICES after torch.cuda.is_available() at line 31" in found[0].title
    assert "4 GPU(s)" in found[0].detail


def test_visible_devices_set_after_cuda_init_quiet_cases():
    assert not _late([])                                               # no late set
    assert not _late([dict(LATE_FACT, cuda_init=None)])                # malformed: no init call recorded
    assert not _late([dict(LATE_FACT, name="OMP_NUM_THREADS")])        # another variable
