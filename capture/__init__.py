"""Profiler drivers, timing, sweeps and the HSTU inference workload (needs torch on the GPU side)."""
