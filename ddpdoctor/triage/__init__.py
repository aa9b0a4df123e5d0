"""`ddpdoctor triage LOG...`: the root cause of a failed distributed job, from the logs it left.

Layers, top down (as listed in ddpdoctor/__init__.py):
- commands  ddpdoctor/commands/triage.py parses arguments, renders, chooses the exit status;
- pipeline  `api`: paths in, a Report out: reads the inputs, builds the job, runs the rules through
            the one runner (`run_checks(job, when="triage")`), relays run reports, orders;
- checks    `rules/`: one module per fault family; each rule is a registry spec (kind "log", IDs
            LOGnnn) that takes a `Job` and yields findings;
- gather    `reader` finds the inputs and streams them in one bounded-memory pass; `records` reads
            torch elastic error files and ddpdoctor run reports (JSON);
- facts     `job` reconstructs the job from events (ranks, hosts, versions, exits, watchdog
            cross-tab); `verdict` derives what several rules share (root cause, who carries the
            timeouts); `signatures` turns a line into events; `lines` parses prefixes and times;
            `flight` (+ `safe_pickle`) reads Flight Recorder dumps without executing anything.
"""
