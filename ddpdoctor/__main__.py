from ddpdoctor.start import entry

entry()  # `python -m ddpdoctor`: a triage search starts before the CLI loads; this process runs the command
