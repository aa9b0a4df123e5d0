"""Round 22's robustness classes left by the audit (robust22's for-lead.md) in facts/ and gather/: numbers of 19+
digits (int() refuses 4,300+ digits since CPython 3.11, gh-95778; str.isdigit() takes '²', which int() refuses) and a
FIFO where a file of the user's own trees is expected (open() waits for a writer for ever, fifo(7))."""
from __future__ import annotations

import os
import threading

from ddpdoctor.facts.gpu import version_tuple
from ddpdoctor.facts.launch import serving_command
from ddpdoctor.gather import Sources
from ddpdoctor.gather.launch import _hub_cached_config


def test_a_version_part_of_5000_digits_ends_the_version_not_the_doctor():
    assert version_tuple("8." + "9" * 5000 + ".2") == (8,)
    assert version_tuple("12.4.1") == (12, 4, 1)  # quiet twin: a real version is read whole


def test_a_serving_size_of_5000_digits_or_a_superscript_is_no_size():
    huge = serving_command(["vllm", "serve", "m", "-tp", "9" * 5000])
    assert huge is not None and huge["tensor_parallel"] is None
    sup = serving_command(["vllm", "serve", "m", "-tp", "²"])
    assert sup is not None and sup["tensor_parallel"] is None
    real = serving_command(["vllm", "serve", "m", "-tp", "4"])
    assert real is not None and real["tensor_parallel"] == 4


def _hub_folder(tmp_path):
    cache = tmp_path / "hub"
    folder = cache / "models--org--name"
    (folder / "refs").mkdir(parents=True)
    return cache, folder


def test_a_fifo_as_the_hub_caches_main_ref_is_no_ref_and_never_blocks(tmp_path):
    cache, folder = _hub_folder(tmp_path)
    os.mkfifo(folder / "refs" / "main")
    src = Sources(environ={"HF_HUB_CACHE": str(cache)})
    got = {}
    t = threading.Thread(target=lambda: got.setdefault("v", _hub_cached_config(src, "org/name")), daemon=True)
    t.start()
    t.join(20)
    assert not t.is_alive(), "reading a FIFO ref blocked"
    assert got["v"] is None


def test_a_regular_main_ref_still_finds_the_cached_config(tmp_path):
    cache, folder = _hub_folder(tmp_path)
    commit = "a" * 40
    (folder / "refs" / "main").write_text(commit)
    snap = folder / "snapshots" / commit
    snap.mkdir(parents=True)
    (snap / "config.json").write_text("{}")
    src = Sources(environ={"HF_HUB_CACHE": str(cache)})
    assert _hub_cached_config(src, "org/name") == str(snap / "config.json")
