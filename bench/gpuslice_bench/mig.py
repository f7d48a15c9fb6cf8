"""Mode mig: which MIG instance each tenant gets.

A scenario in mode mig gives every tenant a GPU instance of its own (one compute instance each),
either the profile its `mig:` names or one derived from its compute request: the largest of the
model's 1g/2g/3g/4g/7g profiles whose compute slices are at most its share of the GPU's seven
(request ÷ the sum of requests × 7), and at least 1g. The layout must fit one GPU as the driver
places it (NVIDIA's placement rules, as docs/simulator.md and gpu/mig_profiles.cc state them);
the simulator checks it again when it creates the instances.
"""

# The standard profile of each size per model (no +me, no double-memory 1g): compute slices ->
# name. The full tables, with their SM counts, are the simulator's (gpu/mig_profiles.cc).
_PROFILES = {
    "A100-40GB": {1: "1g.5gb", 2: "2g.10gb", 3: "3g.20gb", 4: "4g.20gb", 7: "7g.40gb"},
    "A100-80GB": {1: "1g.10gb", 2: "2g.20gb", 3: "3g.40gb", 4: "4g.40gb", 7: "7g.80gb"},
    "H100-80GB": {1: "1g.10gb", 2: "2g.20gb", 3: "3g.40gb", 4: "4g.40gb", 7: "7g.80gb"},
    "H200": {1: "1g.18gb", 2: "2g.35gb", 3: "3g.71gb", 4: "4g.71gb", 7: "7g.141gb"},
}
MODELS = tuple(_PROFILES)
# Compute slices -> (memory slices, valid first memory slices), as `nvidia-smi mig -lgipp` lists them.
_PLACEMENT = {1: (1, range(0, 7)), 2: (2, (0, 2, 4)), 3: (4, (0, 4)), 4: (4, (0,)), 7: (8, (0,))}


def profiles(model):
    return list(_PROFILES[model].values())


def slices(model, profile):
    return next(g for g, name in _PROFILES[model].items() if name == profile)


def _fits(sizes):
    """True when instances of these compute-slice sizes can be placed on one GPU without overlap."""
    if sum(sizes) > 7:
        return False
    used = [False] * 8

    def place(i):
        if i == len(sizes):
            return True
        width, starts = _PLACEMENT[sizes[i]]
        for s in starts:
            if s + width <= 8 and not any(used[s:s + width]):
                used[s:s + width] = [True] * width
                if place(i + 1):
                    return True
                used[s:s + width] = [False] * width
        return False

    return place(0)


def layout(model, tenants):
    """tenants: [(name, weight, profile or None)] -> ((name, profile), ...), largest instance first
    (the order GPUSLICE_SIM_MIG lists them); ValueError when they do not fit one GPU."""
    total = sum(w for _, w, _ in tenants) or 1
    chosen = []
    for name, weight, profile in tenants:
        if profile is None:
            want = weight / total * 7
            g = max([g for g in _PROFILES[model] if g <= want + 1e-9] or [1])
            profile = _PROFILES[model][g]
        chosen.append((name, profile))
    chosen.sort(key=lambda item: -slices(model, item[1]))  # stable: tenants' order within a size
    if not _fits([slices(model, p) for _, p in chosen]):
        raise ValueError(f"the instances {', '.join(f'{n}: {p}' for n, p in chosen)} do not fit one {model} "
                         f"(7 compute and 8 memory slices, NVIDIA's placements); name smaller ones with "
                         f"tenants[].mig")
    return tuple(chosen)


def layout_variable(layout_):
    """GPUSLICE_SIM_MIG's value for a layout."""
    return ",".join(profile for _, profile in layout_)
