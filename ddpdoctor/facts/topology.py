"""NVML topology levels: their names and the nvidia-smi `topo -m` abbreviations."""
from __future__ import annotations

TOPOLOGY_NAMES = {0: "NVML_TOPOLOGY_INTERNAL", 10: "NVML_TOPOLOGY_SINGLE", 20: "NVML_TOPOLOGY_MULTIPLE",
                  30: "NVML_TOPOLOGY_HOSTBRIDGE", 40: "NVML_TOPOLOGY_NODE", 50: "NVML_TOPOLOGY_SYSTEM"}
# nvidia-smi topo -m abbreviations, for messages.
TOPOLOGY_SHORT = {"NVML_TOPOLOGY_INTERNAL": "X", "NVML_TOPOLOGY_SINGLE": "PIX", "NVML_TOPOLOGY_MULTIPLE": "PXB",
                  "NVML_TOPOLOGY_HOSTBRIDGE": "PHB", "NVML_TOPOLOGY_NODE": "NODE", "NVML_TOPOLOGY_SYSTEM": "SYS"}
