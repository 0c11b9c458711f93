"""GPU state through NVML: one interface, a real pynvml backend and a simulated one."""
