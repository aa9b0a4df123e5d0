"""Public alias, kept because users import it: `ddpdoctor.preflight()` and `import ddpdoctor.preflight` (the module is callable).

The code lives in `ddpdoctor.inprocess.preflight`; this module *is* that module (same object in
sys.modules), so attributes, monkeypatching and `is` comparisons behave exactly as before.
"""
import sys

from ddpdoctor.inprocess.preflight import __name__ as _target

sys.modules[__name__] = sys.modules[_target]
