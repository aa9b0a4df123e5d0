"""Argument parsing for the worker entry points (`python -m ddpdoctor.comm`, `python -m ddpdoctor.probe`)
that run under a user's torchrun or srun: a bad value is one line on stderr and exit 2, never a
silently substituted default."""
from __future__ import annotations

import argparse
import sys


class OneLineParser(argparse.ArgumentParser):
    def error(self, message: str):  # argparse prints the usage too; the contract is one line
        sys.stderr.write(f"{self.prog}: error: {' '.join(message.split())}\n")
        sys.exit(2)


def at_least(low, kind=int):
    """An argparse `type` that accepts `kind` values >= low (> 0 for low 0.0 floats: see `positive`)."""
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a{'n integer' if kind is int else ' number'}") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"{text} is below the minimum {low}")
        return value

    parse.__name__ = kind.__name__
    return parse


def positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text} must be above 0")
    return value
