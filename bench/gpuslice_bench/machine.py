"""Where the tenants run: the build tree's programs, the simulated or the real GPU, and MPS."""
import dataclasses
import os
import shutil
import subprocess


@dataclasses.dataclass(frozen=True)
class Paths:
    source_dir: str
    build_dir: str

    def bin(self, name):
        return os.path.join(self.build_dir, "bin", name)

    @property
    def workload(self):
        return self.bin("gpuslice-workload")

    @property
    def sim_tool(self):
        return self.bin("gpuslice-sim")

    @property
    def simlib(self):
        return os.path.join(self.build_dir, "simlib")

    @property
    def shim(self):
        return os.path.join(self.build_dir, "lib", "libgpuslice.so")

    @property
    def overhead_bench(self):
        return self.bin("shim_overhead_bench")

    def missing(self, simulated, shim):
        """The build outputs a run needs that are not there."""
        needed = [self.workload]
        if simulated:
            needed += [self.sim_tool, os.path.join(self.simlib, "libcuda.so.1")]
        if shim:
            needed.append(self.shim)
        return [p for p in needed if not os.path.exists(p)]


def real_driver_present():
    """An NVIDIA GPU and its driver library: the device node and libcuda.so.1 in the loader's cache."""
    if not os.path.exists("/dev/nvidiactl"):
        return False
    try:
        cache = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return False
    return "libcuda.so.1 " in cache


def mps_unavailable_reason(simulated):
    """None when MPS can run here (the simulator's server, or a private control daemon); else why not."""
    if simulated:
        return None
    if shutil.which("nvidia-cuda-mps-control") is None:
        return "nvidia-cuda-mps-control is not installed"
    return None


def mig_unavailable_reason(simulated):
    """None when mode mig can run here. gpuslice-bench creates MIG instances only on the simulated
    GPU: changing a real GPU's MIG layout needs root and stops every process on it."""
    if simulated:
        return None
    return "mode mig runs on the simulated GPU only (gpuslice-bench never changes a real GPU's MIG layout)"


def clean_environment():
    """The caller's environment without anything that would change what the tenants get:
    gpuslice's and the simulator's settings, MPS client settings, and a preload."""
    return {k: v for k, v in os.environ.items() if not k.startswith(("GPUSLICE_", "CUDA_MPS_")) and k != "LD_PRELOAD"}


def real_gpu_memory():
    """Device 0's memory in bytes as nvidia-smi reports it, or None."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=memory.total", "--format=csv,noheader,nounits", "-i", "0"],
                             capture_output=True, text=True, timeout=20).stdout.strip()
        return int(out.splitlines()[0]) << 20
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return None


def real_gpu_name():
    try:
        return subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader", "-i", "0"],
                              capture_output=True, text=True, timeout=20).stdout.strip().splitlines()[0]
    except (OSError, subprocess.SubprocessError, IndexError):
        return "NVIDIA GPU"
