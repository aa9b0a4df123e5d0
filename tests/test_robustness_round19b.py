"""Round 19, wave 2 of the robustness audit: the sections the training process writes (runtime, runtime_*) have
declared field types, so a hand-edited one is exit 2 naming the field instead of a crashed RT check (DOC001)."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ddpdoctor.cli import main

HERE = Path(__file__).parent
RECORDED = HERE / "data" / "runtime_recorded_gloo_cpu.snap.json"  # gather_sections() on CPU under Gloo (see below)


def _call(capsys, argv):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    out, err = capsys.readouterr()
    return exc.value.code, out, err


def _edited(tmp_path, section, key, value):
    doc = json.loads(RECORDED.read_text())
    doc["sections"].setdefault(section, {})[key] = value
    path = tmp_path / "edited.snap.json"
    path.write_text(json.dumps(doc))
    return path


# one wrong type per runtime section, each in a field an RT check reads (the audit's cells crashed RT004 with
# "'list' object has no attribute 'get'")
@pytest.mark.parametrize("section,key,value,field", [
    ("runtime", "threads", [None], "runtime.threads"),
    ("runtime", "cuda", 5, "runtime.cuda"),
    ("runtime", "usable_cpus", "8", "runtime.usable_cpus"),
    ("runtime_data", "sampler", "DistributedSampler", "runtime_data.sampler"),
    ("runtime_data", "num_workers", "4", "runtime_data.num_workers"),
    ("runtime_trainer", "args", ["--ddp_timeout", "60"], "runtime_trainer.args"),
    ("runtime_peers", "ranks", [1, 2], "runtime_peers.ranks"),
    ("runtime_steps", "steps_measured", "3", "runtime_steps.steps_measured"),
])
def test_a_hand_edited_runtime_field_is_an_input_error_naming_it(capsys, tmp_path, section, key, value, field):
    rc, out, err = _call(capsys, ["check", "--snapshot", str(_edited(tmp_path, section, key, value)), "--json"])
    assert rc == 2, (rc, out[:400])
    assert field in err and "DOC001" not in out and "Traceback" not in err + out


def test_the_recorded_runtime_sections_are_judged_without_a_crash(capsys):
    rc, out, err = _call(capsys, ["check", "--snapshot", str(RECORDED), "--json"])
    report = json.loads(out)
    assert rc in (0, 1), err
    assert not [f for f in report["findings"] if f["id"] == "DOC001"], out[:600]
    assert "Traceback" not in err


RECORD = r"""
import json, os, sys
import torch, torch.distributed as dist
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler
dist.init_process_group("gloo", init_method="tcp://127.0.0.1:" + sys.argv[2], rank=0, world_size=1)
from ddpdoctor.inprocess.runtime import gather_sections
ds = TensorDataset(torch.randn(64, 4))
dl = DataLoader(ds, batch_size=8, sampler=DistributedSampler(ds), num_workers=2)
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(4, 2))
sections = gather_sections(dataloader=dl, model=model, peers=True, peer_timeout_s=3)
json.dump(sections, open(sys.argv[1], "w"), default=str)
dist.destroy_process_group()
"""


@pytest.mark.slow
def test_what_the_in_process_writers_record_fits_the_declared_types(tmp_path):
    """Re-records the sections with the real writers (Gloo on CPU) and checks them with the declared types: the
    declaration follows the writers, not the other way round."""
    import socket

    from ddpdoctor.gather import schema
    from ddpdoctor.pipeline.shapes import shape_error

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = tmp_path / "sections.json"
    script = tmp_path / "record.py"
    script.write_text(RECORD)
    subprocess.run([sys.executable, str(script), str(out), str(port)], check=True, timeout=300,
                   env={**os.environ, "PYTHONPATH": str(HERE.parent)})
    sections = json.loads(out.read_text())
    assert {"runtime", "runtime_data", "runtime_trainer", "runtime_peers"} <= set(sections)
    assert "error" not in sections["runtime"] and "error" not in sections["runtime_data"], sections
    assert sections["runtime_data"]["sampler"]["distributed"] is True  # the state the declaration is about
    assert shape_error(sections) == ""
    declared = schema()[0]
    assert "runtime.threads" in declared and "runtime_data.sampler" in declared
