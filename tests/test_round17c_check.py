"""Round 17, third wave (issue 26): a compiled extension built against another torch, read from ELF.

The extension's undefined GLOBAL c10/at/torch symbols (.dynsym) against the exports of torch's libraries (.gnu.hash),
for extensions that list libtorch/libc10 in DT_NEEDED: gathered as packages.torch_extensions, judged by PKG012.
Pure: the built ELF fixtures in fixtures/elf/site (see its README) are read as bytes; no process is started."""
import os

from factory import findings_of, fixture_snapshot

from ddpdoctor.gather.elf import read_object
from ddpdoctor.gather.packages import torch_extensions

SITE = os.path.join(os.path.dirname(__file__), os.pardir, "fixtures", "elf", "site")


def test_elf_reader_needed_undefined_and_gnu_hash_exports():
    ext = read_object(os.path.join(SITE, "staleext", "_C.so"))
    lib = read_object(os.path.join(SITE, "torch", "lib", "libc10.so"))
    try:
        assert "libc10.so" in ext.needed()
        assert set(ext.undefined(("_ZN3c10",))) == {"_ZN3c104impl3fooEv", "_ZN3c104impl3barEl"}
        assert lib.exports({"_ZN3c104impl3fooEv", "_ZN3c104impl3barEl"}) == {"_ZN3c104impl3fooEv"}
    finally:
        ext.close()
        lib.close()
    assert read_object(os.path.join(SITE, os.pardir, "README.md")) is None  # not ELF: None, never an error


def test_extension_missing_torch_symbols_gathered_only_for_the_stale_one():
    exts = torch_extensions(SITE)
    assert [e["package"] for e in exts] == ["staleext"]  # okext resolves everything: not listed
    assert exts[0]["missing"] == ["_ZN3c104impl3barEl"] and exts[0]["missing_count"] == 1
    assert exts[0]["file"] == os.path.join("staleext", "_C.so")
    assert torch_extensions(os.path.join(SITE, "okext")) is None  # no torch/lib/libc10.so there: not judged


def _machine(exts):
    def edit(s):
        s["packages"]["torch_extensions"] = exts
    return fixture_snapshot("hgx-h100-8x", edit=edit)


def test_pkg012_reports_an_extension_with_missing_torch_symbols():
    stale = findings_of(_machine(torch_extensions(SITE)), "PKG012")
    assert len(stale) == 1 and stale[0].severity == "error" and "staleext" in stale[0].title
    assert "_ZN3c104impl3barEl" in stale[0].title and "pkg:staleext" in stale[0].subjects


def test_pkg012_quiet_when_every_extension_resolves_or_the_fact_is_absent():
    assert not findings_of(_machine([]), "PKG012")
    assert not findings_of(fixture_snapshot("hgx-h100-8x"), "PKG012")


def _old_glibc(torch, glibc=None, platform=None):
    def edit(s):
        s["packages"]["versions"]["torch"] = torch
        if glibc is not None:
            s["host"]["glibc"] = glibc
        if platform is not None:
            s["host"]["platform"] = platform
    return fixture_snapshot("rtx4090-4x-no-p2p", keep=1, edit=edit)


def test_pkg017_glibc_older_than_torch_binaries_trigger_and_quiet():
    """pytorch/pytorch#6607 / #14274's class: CentOS 6's glibc 2.12 under torch's binaries (need 2.17)."""
    found = findings_of(_old_glibc("1.0.0", glibc="2.12"), "PKG017")
    assert len(found) == 1 and found[0].severity == "error" and "2.17" in found[0].title
    assert findings_of(_old_glibc("2.5.1", platform="Linux-3.10.0-1160.el7.x86_64-x86_64-with-glibc2.12"), "PKG017")
    assert not findings_of(_old_glibc("1.0.0", glibc="2.17"), "PKG017")  # at the floor
    assert not findings_of(_old_glibc("1.0.0"), "PKG017")  # the base's glibc 2.35 (from its platform)
    assert not findings_of(_old_glibc("2.8.0", glibc="2.12"), "PKG017")  # a release the table does not hold


def test_extensions_in_develop_checkouts_and_conda_forge_lib_dir(tmp_path):
    """maskrcnn-benchmark#421 / CenterNet#271's class (an extension built in its checkout, reached through an
    egg-link) and pytorch_scatter#470's (conda-forge keeps libc10.so in the environment's lib/): files copied."""
    import shutil

    env = tmp_path / "env"
    site = env / "lib" / "python3.11" / "site-packages"
    (site / "torch").mkdir(parents=True)
    shutil.copy(os.path.join(SITE, "torch", "lib", "libc10.so"), env / "lib" / "libc10.so")  # conda-forge layout
    checkout = tmp_path / "maskrcnn-benchmark"
    (checkout / "maskrcnn_benchmark").mkdir(parents=True)
    shutil.copy(os.path.join(SITE, "staleext", "_C.so"), checkout / "maskrcnn_benchmark" / "_C.so")
    assert torch_extensions(str(site)) == []  # the checkout is not reached yet: nothing points into it
    (site / "maskrcnn-benchmark.egg-link").write_text(f"{checkout}\n.\n")
    exts = torch_extensions(str(site))
    assert [e["package"] for e in exts] == ["maskrcnn-benchmark"]
    assert exts[0]["file"] == str(checkout / "maskrcnn_benchmark" / "_C.so") and exts[0]["missing_count"] == 1
    with open(os.path.join(SITE, "staleext", "_C.so"), "rb") as fh:
        (checkout / "maskrcnn_benchmark" / "broken.so").write_bytes(fh.read(900))
    assert [e["package"] for e in torch_extensions(str(site))] == ["maskrcnn-benchmark"]  # a truncated .so: skipped
    (env / "lib" / "libc10.so").unlink()
    assert torch_extensions(str(site)) is None  # no torch library anywhere: not judged


CXX = os.path.join(os.path.dirname(__file__), os.pardir, "fixtures", "elf", "cxx")


def test_libstdcxx_found_for_torch_and_pkg016_judges_it():
    """pytorch/pytorch#157709 / #8318's class: the libstdc++.so.6 ld.so finds for torch lacks a GLIBCXX it needs."""
    from ddpdoctor.gather import Sources
    from ddpdoctor.gather.packages import libstdcxx

    site = os.path.join(CXX, "site")
    old = libstdcxx(Sources(environ={"LD_LIBRARY_PATH": os.path.abspath(os.path.join(CXX, "old"))}), site)
    assert old["from"] == "LD_LIBRARY_PATH" and old["glibcxx"] == "3.4.28" and old["needs_glibcxx"] == "3.4.30"
    assert old["needed_by"] == "libtorch_python.so"
    new = libstdcxx(Sources(environ={"LD_LIBRARY_PATH": os.path.abspath(os.path.join(CXX, "new"))}), site)
    assert new["glibcxx"] == "3.4.30"

    def machine(cxx):
        def edit(s):
            s["packages"]["libstdcxx"] = cxx
        return fixture_snapshot("rtx4090-4x-no-p2p", keep=1, edit=edit)

    found = findings_of(machine(old), "PKG016")
    assert len(found) == 1 and found[0].severity == "error" and "GLIBCXX_3.4.30" in found[0].title
    assert not findings_of(machine(new), "PKG016")
    assert not findings_of(fixture_snapshot("rtx4090-4x-no-p2p", keep=1), "PKG016")  # no fact: nothing said
