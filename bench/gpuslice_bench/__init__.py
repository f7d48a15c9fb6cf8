"""gpuslice-bench: runs hand-written sharing scenarios and reports how tenants slowed each other.

One concept per module: scenario (the YAML format and its validation), machine (simulated or
real GPU, MPS), workloads (one gpuslice-workload process), sampler (the device's ground truth
over time), runner (one mode of one scenario), entitlement and metrics (the figures of
/work/shared/REFERENCE.md §5), table, charts and summary (what people read), overhead (the
shim's per-call cost), progress (the live line on stderr) and cli.
"""

# project(VERSION) from CMakeLists.txt, set by <build>/bin/gpuslice-bench; "unreleased" from the source tree.
VERSION = "unreleased"
