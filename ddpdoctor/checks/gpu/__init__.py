"""GPU: device health, topology (NVLink, PCIe, P2P) and how ranks are launched onto the GPUs."""
