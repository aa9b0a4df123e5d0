"""Run every benchmarks/bench_*.py in turn (`make bench`). Each prints its own ratios against a
baseline measured in the same run; nothing here asserts on time."""
import pathlib
import sys

here = pathlib.Path(__file__).parent
sys.path.insert(0, str(here.parent))
from ddpdoctor import proctree  # noqa: E402 - nothing a benchmark starts outlives it

status = 0
for script in sorted(here.glob("bench_*.py")):
    print(f"== {script.name}", flush=True)
    status |= proctree.run([sys.executable, str(script)], new_session=False).returncode
sys.exit(status)
