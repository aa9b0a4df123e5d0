"""Round-10 classes of issue 24 (triage, 2026-12-06 session 3): trigger and quiet cases whose assertions can fail. Logs
are written from the formats the sources print (no logs copied); pure in-process tests (no process launched)."""
from __future__ import annotations

from ddpdoctor.triage.api import triage_paths


def _found_text(tmp_path, text):
    p = tmp_path / "job.log"
    p.write_text(text, encoding="utf-8")
    return [f for f in triage_paths([str(p)]).sorted_findings() if f.severity in ("error", "warning")]


def _ids(f):
    return [(x.id, x.title) for x in f]


# --- batch 66: NVML's NVML_ERROR_GPU_IS_LOST ('GPU is lost', NVIDIA/go-nvml gen/nvml/nvml.h @314e96d) ------------------
def test_nvidia_smi_gpu_is_lost_is_a_gpu_fault(tmp_path):
    for text in ("Unable to determine the device handle for GPU 0000:17:00.0: GPU is lost.  Reboot the system to "
                 "recover this GPU\n",
                 "epoch 3 step 120 loss 0.41\npynvml.NVMLError_GPUIsLost: GPU is lost\n"):
        f = _found_text(tmp_path, text)
        assert f and f[0].id == "LOG020", _ids(f)


def test_prose_about_a_lost_gpu_is_no_fault(tmp_path):
    """The quiet side: the words in a sentence (no caller's ': ' before NVML's text) are no NVML error."""
    text = ("checking whether the GPU is lost before training\n"
            "epoch 1 step 10 loss 0.9\nepoch 1 step 20 loss 0.8\nTraining completed!\n")
    f = _found_text(tmp_path, text)
    assert not [x for x in f if x.id == "LOG020" or x.severity == "error"], _ids(f)
