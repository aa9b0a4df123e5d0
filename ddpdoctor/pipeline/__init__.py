"""gather -> snapshot -> judge -> report: the snapshot container and its schema check
(snapshot, shapes), the one check runner (runner), judging (judge), the `check` command's flow
(check) and rendering (render)."""
