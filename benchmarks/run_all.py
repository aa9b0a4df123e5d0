"""Run every benchmarks/bench_*.py in turn (`make bench`). Each prints its own ratios against a
baseline measured in the same run; nothing here asserts on time."""
import pathlib
import subprocess
import sys

here = pathlib.Path(__file__).parent
status = 0
for script in sorted(here.glob("bench_*.py")):
    print(f"== {script.name}", flush=True)
    status |= subprocess.call([sys.executable, str(script)])
sys.exit(status)
