"""The recorder attaches to a process whatever imported torch before it (issue 27, held-out run set:
a fault-injecting sitecustomize imported torch.distributed first, and every stall was then read as
"before init_process_group")."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.slow
@pytest.mark.timeout(120)
@pytest.mark.parametrize("first", ["torch_first", "recorder_first"])
def test_recorder_sees_init_and_collectives_even_when_torch_distributed_was_imported_first(tmp_path, first):
    """Another sitecustomize (or a .pth file) may import torch.distributed before the recorder
    attaches: the package's re-exported names must still be the recorder's wrappers, or every stall
    is read as "before init_process_group" and no collective is recorded."""
    code = textwrap.dedent(f"""
        import os, sys
        if {first == "torch_first"!r}:
            import torch.distributed
            assert "torch.distributed" in sys.modules
        from ddpdoctor.run import recorder
        recorder.install()
        import torch, torch.distributed as dist
        print("wrapped", getattr(dist.init_process_group, "__ddpdoctor_wrapped__", False),
              getattr(dist.all_reduce, "__ddpdoctor_wrapped__", False))
        dist.init_process_group("gloo", init_method="file://" + os.path.join(os.environ["DDPDOCTOR_RUN_DIR"], "store"),
                                rank=0, world_size=1)
        dist.all_reduce(torch.ones(2))
        print("state", recorder.S.phase, recorder.S.rank, recorder.S.world)
        dist.destroy_process_group()
    """)
    env = dict(os.environ, DDPDOCTOR_RUN_DIR=str(tmp_path), PYTHONPATH=ROOT)
    res = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=100)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "wrapped True True" in res.stdout, res.stdout + res.stderr[-2000:]
    assert "state run 0 1" in res.stdout, res.stdout + res.stderr[-2000:]
