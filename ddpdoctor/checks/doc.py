"""DOC: findings about ddpdoctor itself, raised by the runner (a crashed check, a failed gatherer
or plugin). Declared here like every other family; `ddpdoctor.pipeline.runner` produces them."""
from __future__ import annotations

from ddpdoctor.model.registry import internal

CHECK_CRASHED = internal("DOC001", "check-crashed", """A ddpdoctor check raised an exception instead of returning findings.

What it checks
    Nothing on your machine: this is ddpdoctor reporting a bug in one of its own checks (or a plugin's).

Why it matters
    The other checks still ran, but this one gave no verdict, so a problem it covers may be hidden.

Example
    A plugin check indexes a snapshot section that a recorded snapshot lacks.

Fix
    Report it with the output of `ddpdoctor check --format markdown`, which includes the traceback.
""")

GATHER_FAILED = internal("DOC002", "gatherer-failed", """A fact gatherer failed, so the checks that need its facts were skipped.

What it checks
    Whether every snapshot section ddpdoctor tried to read could be read.

Why it matters
    Checks that depend on the missing facts are skipped, and say so; they did not pass.

Example
    /proc is not mounted in a sandbox, so the host section cannot read the cgroup CPU quota.

Fix
    Read the error in the evidence; if it is a ddpdoctor bug, report it with `ddpdoctor snapshot -o snap.json`.
""")

PLUGIN_FAILED = internal("DOC003", "plugin-failed", """A third-party check plugin could not be loaded.

What it checks
    Every entry point in the `ddpdoctor.checks` group imports cleanly.

Why it matters
    The plugin's checks did not run. Built-in checks are unaffected.

Example
    A plugin was written for an older ddpdoctor and imports a name that no longer exists.

Fix
    Upgrade or uninstall the plugin: `pip install -U <plugin>` or `pip uninstall <plugin>`.
""")

RUN_OWN_FAILED = internal("DOC004", "run-own-failure", """ddpdoctor run's own code failed while it watched or tore down the job.

What it checks
    Nothing of your job: `ddpdoctor run` reports a bug of its own (its watch loop, the stacks it takes before a
    stop, its teardown), with the phase, the exception and where in ddpdoctor it was raised.

Why it matters
    No rank is blamed for it: the job's exit status is the job's own, and the ranks' records taken before the
    failure stand. A verdict the failed step would have given (a stall, a death, the stacks before a kill) may be
    missing, and the report says so instead of naming a rank.

Example
    torchrun tears the job down after rank 1 died; ddpdoctor run's death check raises while it reads the ranks'
    records: "ddpdoctor run's own code failed while tearing the job down: KeyError: 'pid'".

Fix
    Report it at the ddpdoctor issue tracker with `ddpdoctor run --report run.json` attached (its evidence holds
    the traceback); the job can be run without ddpdoctor meanwhile.
""")
