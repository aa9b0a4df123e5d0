"""Whatever text or bytes the linter is given, it answers with findings, never a traceback."""
from __future__ import annotations

import string

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ddpdoctor.lint.engine import lint_source
from ddpdoctor.lint.source import decode

PIECES = st.sampled_from([
    "import torch.multiprocessing as mp\n", "from transformers import Trainer\n", "def f(rank):\n",
    "    Trainer(model=None).train()\n", "mp.spawn(f, nprocs=2)\n", "if __name__ == '__main__':\n",
    "    f(0)\n", "if rank == 0:\n", "    model(x)\n", "model = DDP(model)\n", "with model.no_sync():\n",
    "    loss.backward()\n", "os.environ['RANK'] = '0'\n", "class D(Dataset):\n", "  def __init__(self):\n",
    "    self.f = h5py.File('x')\n", "lambda: (yield)\n", "x = {**a, 'b': 1}\n", "async def g():\n",
    "    async with a as b:\n", "        await c\n", "match x:\n", "    case 1:\n", "        pass\n", "@dec\n",
    "for e in range(3):\n", "    for b in loader:\n", "        pass\n", "torch.load('x')\n", "(\n", "]\n",
])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(PIECES, max_size=25))
def test_random_programs_never_crash_the_linter(pieces):
    for f in lint_source("".join(pieces), "fuzz.py"):
        assert f.id.startswith("LINT"), (f.id, f.title)


@settings(max_examples=60, deadline=None)
@given(st.text(alphabet=string.printable + "é🤗\x00\u2028", max_size=300))
def test_random_text_never_crashes_the_linter(text):
    for f in lint_source(text, "fuzz.py"):
        assert f.id.startswith("LINT"), (f.id, f.title)


@settings(max_examples=60, deadline=None)
@given(st.binary(max_size=300))
def test_random_bytes_decode_or_explain(data):
    result = decode("x.py", data)
    assert isinstance(result, str) or result.kind == "encoding"
