"""Pure derived readings that checks share: no I/O, no gatherer imports. Each function reads
snapshot sections (or plain values) and returns a figure, often with the source of its value."""
