// Each published device's health, as NVML reports it: what the health stream tells the kubelet
// (dra/health_service.h) and what the ResourceSlice's taints say (dra/resource_slice.h).
//
// The rules. A device is unhealthy while NVML does not answer for it (its handle, UUID or memory
// cannot be read: a GPU fallen off the bus, one that needs a reset, or another NVML error), and
// healthy again once it answers. A critical XID error (every XID but those of NVIDIA's list of
// application errors, which the faulting program causes and survives: 13, 31, 43, 45, 68, 109)
// makes every device of its GPU unhealthy until the GPU is seen to go through a reset (NVML
// stops answering for it, then answers again) or the driver restarts: after a double-bit ECC
// error (XID 48) the GPU still answers NVML but must not take new work. A lost GPU, one that
// needs a reset and a critical XID are hard failures: their taint may be NoExecute
// (--hard-failure-taint); other NVML errors are not.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "common/cond_var.h"
#include "common/mutex.h"
#include "common/thread_annotations.h"
#include "dra/node_devices.h"

namespace gpuslice::dra {

// What one poll found wrong with a device (NVML's line), and whether NVML says it is gone or in
// need of a reset.
struct DeviceProblem {
  std::string message;
  bool lost = false;
};

struct DeviceCondition {
  bool healthy = true;
  bool hard = false;    // a hard failure (the rules above)
  std::string reason;   // the taint's value, a label value: "gpu-lost", "xid-48", "nvml-error"
  std::string message;  // one line for people: NVML's error, or the XID
  int64_t checked = 0;  // Unix seconds of the check this condition comes from
};

// Whether an XID is one a GPU does not survive (the rules above).
bool CriticalXid(unsigned long long xid);

class DeviceHealth {
 public:
  // A poll: every published device, and the problems found (by device name; absent: healthy).
  void Observe(const std::vector<NodeDevice>& devices, const std::map<std::string, DeviceProblem>& problems,
               int64_t now);
  // An XID event for the GPU of NVML index `gpu`; a critical one marks its devices unhealthy.
  void RecordXid(int gpu, unsigned long long xid, int64_t now);

  std::map<std::string, DeviceCondition> Conditions() const;
  // Grows with every change of a condition; WaitForChange returns when it passes `seen`, after
  // `timeout`, or at Stop().
  uint64_t version() const;
  void WaitForChange(uint64_t seen, std::chrono::milliseconds timeout) const;
  void Stop();  // the driver is stopping: waits return, streams end
  bool stopped() const;

 private:
  void Recompute(int64_t now) REQUIRES(mutex_);

  mutable Mutex mutex_;
  mutable CondVar changed_;
  std::vector<NodeDevice> devices_ GUARDED_BY(mutex_);
  std::map<std::string, DeviceProblem> problems_ GUARDED_BY(mutex_);
  std::map<int, unsigned long long> xids_ GUARDED_BY(mutex_);  // GPU index -> its critical XID
  std::set<int> failed_since_xid_ GUARDED_BY(mutex_);          // GPUs seen not answering since
  std::map<std::string, DeviceCondition> conditions_ GUARDED_BY(mutex_);
  uint64_t version_ GUARDED_BY(mutex_) = 0;
  bool stopping_ GUARDED_BY(mutex_) = false;
};

}  // namespace gpuslice::dra
