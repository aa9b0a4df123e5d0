"""Small helpers shared by checks: reading env values from a snapshot the same way everywhere."""
from __future__ import annotations

import re
from typing import List, Mapping, Optional

FALSY = {"", "0", "off", "false", "f", "no", "n"}


def env_of(snap) -> Mapping[str, str]:
    return (snap.get("env") or {}).get("vars") or {}


def lint_facts(snap) -> dict:
    """What `check --script` read from the scripts (the lint section's `facts`: lint.scriptfacts, lint.configfacts),
    or {} when no script was given."""
    return ((snap.get("lint") or {}) if "lint" in snap else {}).get("facts") or {}


def script_asks(snap, key: str) -> list:
    """What the scripts ask of the machine (lint.scriptfacts `precision` / `attention` / `backends` / `compiles`),
    from `check --script` or the script of check's own launch command; [] when none was read."""
    return [e for e in lint_facts(snap).get(key) or () if isinstance(e, dict)]


def env_int(env: Mapping[str, str], name: str) -> Optional[int]:
    """The integer value of `name`, or None when unset or not an integer (another check reports that)."""
    raw = env.get(name)
    if raw is None:
        return None
    try:
        return int(str(raw).strip())
    except ValueError:
        return None


NCCL_SO = re.compile(r"^libnccl\.so(\.\d+)*$")  # NCCL itself; libnccl-net*.so are its network plugins
NCCL_SO_VERSION = re.compile(r"^libnccl\.so\.(\d+\.\d+\.\d+)$")  # a real file's name: libnccl.so.2.18.3


def preloaded_nccl(ld_preload: Optional[str]) -> List[str]:
    """The LD_PRELOAD items that are NCCL itself (ld.so(8) takes them separated by spaces or colons), in order:
    what the gatherer resolves (packages.nccl_preloaded) and PKG011 reads from a snapshot recorded before it."""
    return [p for p in re.split(r"[:\s]+", ld_preload or "") if p and NCCL_SO.match(p.rsplit("/", 1)[-1])]


def nccl_version_in_name(name: str) -> Optional[str]:
    """'2.18.3' from a file name libnccl.so.2.18.3 (the real file a libnccl.so.2 link resolves to), else None."""
    m = NCCL_SO_VERSION.match(name.rsplit("/", 1)[-1])
    return m.group(1) if m else None


def truthy(value: Optional[str]) -> bool:
    """How tokenizers and most HF libraries read a boolean env var: anything but the falsy set is on."""
    return value is not None and value.strip().lower() not in FALSY


def nccl_conf_applied(snap) -> tuple:
    """({name: (value, path)} NCCL takes from its config files, [(name, path)] the environment overrides).

    NCCL sets each file line with setenv(name, value, 0) (src/misc/param.cc, setEnvFile): a variable
    already in the environment wins, and the first file read (NCCL_CONF_FILE or ~/.nccl.conf) wins
    over /etc/nccl.conf."""
    env = env_of(snap)
    applied: dict = {}
    shadowed: list = []
    for conf in ((snap.get("env") or {}).get("nccl_conf") or []):
        if not isinstance(conf, dict):
            continue
        for name, value in (conf.get("vars") or {}).items():
            if name in env:
                shadowed.append((name, conf.get("path")))
            else:
                applied.setdefault(name, (str(value), conf.get("path")))
    return applied, shadowed


def jit_caches_under(env, mount_point: str) -> list:
    """[(variable, value, what)] for the run-time compilers' cache variables (data/jit_caches.json) that name a
    directory under `mount_point` (the mount that holds Triton's cache), in the table's order."""
    import json
    import os

    mount = os.path.normpath(str(mount_point or ""))
    if not mount or mount == "/":
        return []
    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "jit_caches.json")
    with open(path, encoding="utf-8") as fh:
        rows = json.load(fh)["variables"]
    out = []
    for row in rows:
        value = str(env.get(row["name"]) or "").strip()
        if value and os.path.isabs(value) and (os.path.normpath(value) + "/").startswith(mount.rstrip("/") + "/"):
            out.append((row["name"], value, row["what"]))
    return out


def triton_cache_key_without_arch(versions) -> Optional[str]:
    """'<package> <version>' when the installed Triton keys its kernel cache without the GPU architecture
    (data/jit_caches.json cache_key_without_arch: triton-lang/triton#1593, first in 2.1.0; 2.1.0 nightlies dated
    before the merge lack it too), else None. A version this cannot read is None: nothing is claimed."""
    import json
    import os

    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "jit_caches.json")
    with open(path, encoding="utf-8") as fh:
        row = json.load(fh)["cache_key_without_arch"]

    def parts(text):
        m = re.match(r"\s*(\d+)\.(\d+)(?:\.(\d+))?(?:\.?dev(\d+))?", str(text or ""))
        return None if not m else ((int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)), m.group(4))

    low, fixed = parts(row["from"])[0], parts(row["fixed_in"])[0]
    for name in row["packages"]:
        version = (versions or {}).get(name)
        got = parts(version)
        if not got:
            continue
        base, dev = got
        if low <= base < fixed or (base == fixed and dev and len(dev) >= 8 and dev[:8] < row["fixed_in_dev_date"]):
            return f"{name} {version}"
    return None
