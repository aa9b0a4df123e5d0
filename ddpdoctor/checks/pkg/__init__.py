"""PKG: installed packages and the native libraries they load (displayed family "packages"; ENV014 and ENV018,
DeepSpeed's multi-node launch, are displayed under "launcher"). One module per theme:

    bindings     PKG001         the deprecated pynvml distribution
    nccl         PKG002 PKG003 PKG007 PKG009 PKG011 PKG013
                                the NCCL torch loads: wheels, GPUs, WSL, a USB NIC, LD_PRELOAD, torch's pin
    torch_build  PKG005 PKG004 PKG019 PKG022
                                torch without torch.distributed / NCCL; older than accelerate needs; NumPy 2 under a NumPy-1.x torch; two torch installs
    launch       PKG006 ENV014 ENV018
                                DeepSpeed's multi-node launch: pdsh and the hostfile, ssh keys, the remote environment
    releases     PKG010 PKG025 PKG030
                                releases with a known defect; a triton other than torch pins; an accelerate older than
                                transformers accepts
    extensions   PKG012 PKG014 PKG018 PKG020 PKG026
                                compiled extensions built for another torch; the CUDA toolkit of a JIT build; apex and mmcv
                                without their compiled extensions; an extension needing a newer libstdc++
    native       PKG015 PKG016 PKG017 PKG021 PKG024 PKG023 PKG027
                                conda CUDA packages, LD_LIBRARY_PATH's CUDA libraries and libstdc++, glibc; a second Intel OpenMP runtime;
                                another torch's libraries in LD_LIBRARY_PATH; magma built for another CUDA; an ITT symbol MKL lacks

The modules are imported here, in this order, so the checks register in it; what they share is in _common.
"""
# one statement each: a single `from ... import (a, b)` would import them in the order written, and this is the order
from ddpdoctor.checks.pkg import bindings  # noqa: F401, I001 - registers its checks
from ddpdoctor.checks.pkg import nccl  # noqa: F401
from ddpdoctor.checks.pkg import torch_build  # noqa: F401
from ddpdoctor.checks.pkg import launch  # noqa: F401
from ddpdoctor.checks.pkg import releases  # noqa: F401
from ddpdoctor.checks.pkg import extensions  # noqa: F401
from ddpdoctor.checks.pkg import native  # noqa: F401
from ddpdoctor.checks.pkg._common import NCCL_WHEELS, _version  # noqa: F401 - the names callers import from here
