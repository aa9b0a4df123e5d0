"""PKG011 (check2, round 8): an NCCL named in LD_PRELOAD is the one torch binds to.

glibc elf/dl-load.c (_dl_map_object) satisfies libtorch_cuda.so's DT_NEEDED libnccl.so.2 with an object already
loaded under that soname, and LD_PRELOAD objects load first, ahead of the wheel's DT_RPATH
($ORIGIN/../../nvidia/nccl/lib, patchelf --force-rpath in pytorch .ci/manywheel/build_cuda.sh @ 799d09f21574).
Azure/MS-AMP's install guide preloads the system NCCL; pytorch/pytorch#119932 ('undefined symbol:
ncclCommRegister' with torch 2.2) is the report the class comes from.
"""
import os

from factory import findings_of, make_snapshot

from ddpdoctor.gather import Sources
from ddpdoctor.gather.packages import nccl_preloaded

TORCH22 = {"torch": "2.2.0", "nvidia-nccl-cu12": "2.19.3"}
MSAMP = "/usr/local/lib/libmsamp_dist.so:/usr/lib/x86_64-linux-gnu/libnccl.so"


def _system_nccl(root, version="2.18.3"):
    d = os.path.join(root, "usr/lib/x86_64-linux-gnu")
    os.makedirs(d)
    open(os.path.join(d, f"libnccl.so.{version}"), "w").close()
    os.symlink(f"libnccl.so.{version}", os.path.join(d, "libnccl.so.2"))
    os.symlink("libnccl.so.2", os.path.join(d, "libnccl.so"))


def test_gatherer_resolves_the_preloaded_name_to_its_versioned_file(tmp_path):
    _system_nccl(str(tmp_path))
    got = nccl_preloaded(Sources(environ={"LD_PRELOAD": MSAMP}, root=str(tmp_path)))
    assert got == [{"path": "/usr/lib/x86_64-linux-gnu/libnccl.so", "real_name": "libnccl.so.2.18.3",
                    "version": "2.18.3"}]


def test_gatherer_ignores_net_plugins_and_other_libraries(tmp_path):
    env = {"LD_PRELOAD": "/opt/aws-ofi-nccl/lib/libnccl-net.so /usr/lib/libjemalloc.so.2"}  # spaces separate too
    assert nccl_preloaded(Sources(environ=env, root=str(tmp_path))) == []
    assert nccl_preloaded(Sources(environ={}, root=str(tmp_path))) == []


def _snap(preloaded, packages=TORCH22, env=None):
    snap = make_snapshot(packages=packages, env=env)
    if preloaded is not None:
        snap.sections["packages"]["nccl_preloaded"] = preloaded
    return snap


def test_older_preloaded_nccl_than_torchs_wheel_warns():
    snap = _snap([{"path": "/usr/lib/x86_64-linux-gnu/libnccl.so", "real_name": "libnccl.so.2.18.3", "version": "2.18.3"}])
    (f,) = findings_of(snap, "PKG011")
    assert f.severity == "warning" and "2.18.3" in f.title and "nvidia-nccl-cu12 2.19.3" in f.title
    assert "env:LD_PRELOAD" in f.subjects and "ncclCommRegister" in f.detail


def test_newer_or_unversioned_preloaded_nccl_is_a_note():
    newer = _snap([{"path": "/opt/nccl/lib/libnccl.so.2", "real_name": "libnccl.so.2.21.5", "version": "2.21.5"}])
    unknown = _snap([{"path": "/opt/nccl/lib/libnccl.so.2"}])
    assert [f.severity for f in findings_of(newer, "PKG011")] == ["info"]
    assert [f.severity for f in findings_of(unknown, "PKG011")] == ["info"]


def test_quiet_without_a_preloaded_nccl_or_without_torch():
    assert findings_of(_snap([]), "PKG011") == []
    assert findings_of(_snap([{"path": "/x/libnccl.so.2.18.3", "version": "2.18.3"}], packages={"torch": None}),
                       "PKG011") == []


def test_snapshot_recorded_before_the_field_reads_the_variable():
    snap = _snap(None, env={"LD_PRELOAD": "/usr/local/lib/libmsamp_dist.so:/usr/lib/libnccl.so.2.18.3"})
    snap.sections["packages"].pop("nccl_preloaded", None)
    (f,) = findings_of(snap, "PKG011")
    assert f.severity == "warning"
    quiet = _snap(None, env={"LD_PRELOAD": "/usr/lib/libjemalloc.so.2"})
    quiet.sections["packages"].pop("nccl_preloaded", None)
    assert findings_of(quiet, "PKG011") == []
