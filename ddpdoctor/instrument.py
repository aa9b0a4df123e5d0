"""Public alias, kept because users import it: `from ddpdoctor.instrument import StepRecorder, trainer_callback`.

The code lives in `ddpdoctor.inprocess.instrument`; this module *is* that module (same object in
sys.modules), so attributes, monkeypatching and `is` comparisons behave exactly as before.
"""
import sys

from ddpdoctor.inprocess.instrument import __name__ as _target

sys.modules[__name__] = sys.modules[_target]
