"""Regenerate ddpdoctor/data/wrapper_attributes.json: the attributes an nn.DataParallel and a DistributedDataParallel
instance answer (dir() of live instances of the installed torch, on CPU, DDP in a one-process gloo group), so LINT036
can tell an attribute of the wrapper from one of the wrapped model (nn.Module.__getattr__ finds only the wrapper's own
parameters, buffers and submodules: torch/nn/modules/module.py). Run: .venv/bin/python tools/gen_wrapper_attributes.py"""
import json
import os
import tempfile

import torch
import torch.distributed as dist
from torch import nn

out = os.path.join(os.path.dirname(__file__), "..", "ddpdoctor", "data", "wrapper_attributes.json")
dp = nn.DataParallel(nn.Linear(2, 2))
store = tempfile.mkdtemp()
dist.init_process_group("gloo", init_method=f"file://{store}/rdv", rank=0, world_size=1)
ddp = nn.parallel.DistributedDataParallel(nn.Linear(2, 2))
data = {
    "source": (f"dir() of torch {torch.__version__} instances: torch.nn.DataParallel(nn.Linear(2, 2)) and "
               "torch.nn.parallel.DistributedDataParallel(nn.Linear(2, 2)) in a one-process gloo group; "
               "nn.Module.__getattr__ (torch/nn/modules/module.py) raises AttributeError for any other name"),
    "torch": torch.__version__,
    # on a CPU-only machine DataParallel.__init__ returns before it sets dim, output_device and src_device_obj
    # (torch/nn/parallel/data_parallel.py): added from the source
    "DataParallel": sorted(set(dir(dp)) | {"dim", "output_device", "src_device_obj"}),
    "DistributedDataParallel": sorted(set(dir(ddp))),
}
dist.destroy_process_group()
with open(out, "w", encoding="utf-8") as fh:
    json.dump(data, fh, indent=1)
    fh.write("\n")
print(out, len(data["DataParallel"]), len(data["DistributedDataParallel"]))
