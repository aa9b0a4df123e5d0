"""`ddpdoctor triage LOG...`: the root cause of a failed distributed job, from the logs it left.

Layers, top down:
- `cli`     parses arguments, renders, chooses the exit status;
- `api`     paths in, a Report out: reads inputs, builds the job, runs the rules, folds and orders;
- `rules/`  one module per fault family; each rule is a registry spec (kind "log", IDs LOGnnn) that
            takes a `Job` and yields findings;
- `job`     reconstructs the job from events: ranks, hosts, versions, deaths, watchdog cross-tab;
- `signatures` turns one log line into events; `lines` parses prefixes and timestamps;
- `reader`  finds the inputs and streams them in one bounded-memory pass;
- `flight`  (+ `safe_pickle`) reads Flight Recorder dumps without executing anything;
- `records` reads torch elastic error files and ddpdoctor run reports (JSON).
"""
