"""`python -m ddpdoctor.launch agent SPEC.json | rank MODULE [ARGS...]`: the launched processes."""
from __future__ import annotations

import sys
from typing import List

from ddpdoctor.launch.agent import agent_main
from ddpdoctor.launch.shim import rank_shim


def _main(argv: List[str]) -> None:
    if argv[:1] == ["agent"] and len(argv) == 2:
        agent_main(argv[1])
    elif argv[:1] == ["rank"]:
        rank_shim(argv[1:])
    else:
        sys.stderr.write("usage: python -m ddpdoctor.launch agent SPEC.json | rank MODULE [ARGS...]\n")
        sys.exit(2)


if __name__ == "__main__":
    _main(sys.argv[1:])
