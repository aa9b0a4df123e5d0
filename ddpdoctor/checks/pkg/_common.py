"""What the PKG checks share: the NCCL wheel names, the one release parser, "is the NCCL torch loads older than X"."""
from __future__ import annotations

from ddpdoctor.facts import gpu_versions


NCCL_WHEELS = ("nvidia-nccl-cu11", "nvidia-nccl-cu12", "nvidia-nccl-cu13")


def _version(text) -> tuple:
    """(major, minor, patch) as far as given: facts.gpu_versions.release, the one release parser."""
    return gpu_versions.release(text)


def _nccl_older_than(snap, floor: tuple, torch_bundling: tuple):
    """(basis, guess, nccl, torch) when the NCCL torch loads is older than `floor`: from its recorded version, or,
    when none was recorded, from a torch older than `torch_bundling` (the first torch whose wheel bundles an NCCL
    at or past the floor's minor), said as a guess. None when it is not older, or nothing tells."""
    from ddpdoctor.facts.net import nccl_version_of

    nccl = nccl_version_of(snap)
    torch = _version(((snap["packages"].get("versions") or {}).get("torch") or "").split("+")[0])
    if nccl:
        if nccl >= floor:
            return None
        return f"NCCL {'.'.join(map(str, nccl))}", False, nccl, torch
    if len(torch) >= 2 and torch[:2] < torch_bundling:
        return (f"torch {'.'.join(map(str, torch))} (its bundled NCCL is older than {floor[0]}.{floor[1]}: a guess, "
                "NCCL's version was not recorded)", True, nccl, torch)
    return None
