"""What each tenant should get of the GPU's time: its request as a weight, its limit as a cap,
and no more than it asks for.

A tenant's demand is what its running workloads would use alone: a compute workload all of the
GPU, a latency workload kernels_per_request × kernel_us per period. The GPU's time is then
shared by weighted max-min fairness (water-filling): in proportion to the requests, except that
a tenant never gets more than min(demand, limit) and what it leaves is shared by the others in
the same proportion. That is what gpuslice's scheduler promises (docs/scheduling.md); the
unmanaged and MPS modes are measured against the same promise.
"""


def workload_demand(workload):
    """Fraction of the GPU's time one process of `workload` asks for when it runs alone."""
    p = workload.params
    if workload.kind == "compute":
        return 1.0
    if workload.kind == "latency":
        return min(1.0, p["kernels_per_request"] * p["kernel_us"] / (p["period_ms"] * 1000))
    return 0.0


def water_fill(weights, caps, capacity=1.0):
    """{name: share}: `capacity` split in proportion to `weights`, nobody above its cap."""
    share = {name: 0.0 for name in weights}
    open_ = {name for name in weights if caps[name] > 0 and weights[name] > 0}
    left = capacity
    while open_ and left > 1e-12:
        total = sum(weights[n] for n in open_)
        fair = {n: left * weights[n] / total for n in open_}
        capped = {n for n in open_ if caps[n] <= fair[n]}
        if not capped:
            for n in open_:
                share[n] = fair[n]
            break
        for n in capped:
            share[n] = caps[n]
            left -= caps[n]
        open_ -= capped
    return share
