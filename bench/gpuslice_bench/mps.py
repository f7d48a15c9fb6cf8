"""The MPS comparison: each tenant's limits in the variables MPS clients read (what gpuslice's own
`mps` sharing mode would hand them), and on a real GPU a private MPS control daemon for the run.
On the simulated GPU GPUSLICE_SIM_MPS=1 makes every process a client of the simulated server."""
import os
import subprocess


class MpsDaemon:
    def __init__(self, scratch_dir):
        self.env_vars = {"CUDA_MPS_PIPE_DIRECTORY": os.path.join(scratch_dir, "mps-pipe"),
                         "CUDA_MPS_LOG_DIRECTORY": os.path.join(scratch_dir, "mps-log")}
        for d in self.env_vars.values():
            os.makedirs(d, exist_ok=True)

    def _control(self, env, args=(), stdin=None):
        return subprocess.run(["nvidia-cuda-mps-control", *args], env={**env, **self.env_vars}, input=stdin,
                              capture_output=True, text=True, timeout=30)

    def start(self, env):
        done = self._control(env, ["-d"])
        if done.returncode != 0:
            raise RuntimeError(f"nvidia-cuda-mps-control -d failed: {(done.stderr or done.stdout).strip()}")

    def stop(self, env):
        self._control(env, stdin="quit\n")

    def client_env(self, tenant, gpu_memory):
        return dict(self.env_vars, **client_limits(tenant, gpu_memory))


def client_limits(tenant, gpu_memory):
    """The tenant's compute limit as its active-thread percentage, its quota as its pinned memory."""
    env = {}
    if tenant.limit is not None:
        env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] = str(tenant.limit)
    quota = tenant.quota_bytes(gpu_memory)
    if quota is not None:
        env["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] = f"0={max(1, quota >> 20)}M"
    return env
