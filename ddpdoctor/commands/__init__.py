"""The subcommands loaded lazily by ddpdoctor.cli (one module each, `command` is the click command)
and what they share (common.py). A new command: a module here plus one line in cli.LAZY_COMMANDS."""
