"""Public alias, kept because users import it: `from ddpdoctor.integrations import DoctorCallback`.

The code lives in `ddpdoctor.inprocess.callback`; this module *is* that module (same object in
sys.modules), so attributes, monkeypatching and `is` comparisons behave exactly as before.
"""
import sys

from ddpdoctor.inprocess.callback import __name__ as _target

sys.modules[__name__] = sys.modules[_target]
