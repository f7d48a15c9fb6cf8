#include "dra/device_health.h"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

#include "common/mutex_lock.h"

namespace gpuslice::dra {
namespace {

// NVIDIA's application errors (its device plugin's default list of XIDs to skip): the program
// that caused them fails, the GPU goes on.
constexpr unsigned long long kApplicationXids[] = {13, 31, 43, 45, 68, 109};

// A label value: at most 63 of [A-Za-z0-9-_.], starting and ending with an alphanumeric.
std::string LabelValue(std::string text) {
  for (char& c : text) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') c = '-';
  }
  text.resize(std::min<size_t>(text.size(), 63));
  while (!text.empty() && !std::isalnum(static_cast<unsigned char>(text.back()))) text.pop_back();
  return text;
}

bool SameCondition(const DeviceCondition& a, const DeviceCondition& b) {
  return a.healthy == b.healthy && a.hard == b.hard && a.reason == b.reason && a.message == b.message;
}

}  // namespace

bool CriticalXid(unsigned long long xid) {
  return std::find(std::begin(kApplicationXids), std::end(kApplicationXids), xid) == std::end(kApplicationXids);
}

void DeviceHealth::Observe(const std::vector<NodeDevice>& devices, const std::map<std::string, DeviceProblem>& problems,
                           int64_t now) {
  MutexLock lock(&mutex_);
  devices_ = devices;
  problems_ = problems;
  // A GPU with an XID that stopped answering and answers again went through a reset.
  for (auto it = xids_.begin(); it != xids_.end();) {
    bool failing = false;
    for (const auto& d : devices_) failing = failing || (d.gpu.index == it->first && problems_.count(d.name));
    if (failing) failed_since_xid_.insert(it->first);
    if (!failing && failed_since_xid_.count(it->first)) {
      failed_since_xid_.erase(it->first);
      it = xids_.erase(it);
    } else {
      ++it;
    }
  }
  Recompute(now);
}

void DeviceHealth::RecordXid(int gpu, unsigned long long xid, int64_t now) {
  if (!CriticalXid(xid)) return;
  MutexLock lock(&mutex_);
  xids_[gpu] = xid;
  failed_since_xid_.erase(gpu);
  Recompute(now);
}

void DeviceHealth::Recompute(int64_t now) {
  std::map<std::string, DeviceCondition> next;
  for (const auto& d : devices_) {
    DeviceCondition c;
    c.checked = now;
    if (auto p = problems_.find(d.name); p != problems_.end()) {
      c.healthy = false;
      c.hard = p->second.lost;
      c.reason = p->second.lost ? "gpu-lost" : "nvml-error";
      c.message = p->second.message;
    } else if (auto x = xids_.find(d.gpu.index); x != xids_.end()) {
      c.healthy = false;
      c.hard = true;
      c.reason = LabelValue(fmt::format("xid-{}", x->second));
      c.message = fmt::format("XID {} on GPU {}: unhealthy until the GPU is reset or the driver restarts", x->second,
                              d.gpu.index);
    }
    next[d.name] = c;
  }
  bool changed = next.size() != conditions_.size();
  for (const auto& [name, c] : next) {
    auto old = conditions_.find(name);
    changed = changed || old == conditions_.end() || !SameCondition(old->second, c);
  }
  conditions_ = std::move(next);
  if (changed) {
    ++version_;
    changed_.SignalAll();
  }
}

std::map<std::string, DeviceCondition> DeviceHealth::Conditions() const {
  MutexLock lock(&mutex_);
  return conditions_;
}

uint64_t DeviceHealth::version() const {
  MutexLock lock(&mutex_);
  return version_;
}

void DeviceHealth::WaitForChange(uint64_t seen, std::chrono::milliseconds timeout) const {
  MutexLock lock(&mutex_);
  changed_.WaitFor(&mutex_, timeout, [&]() REQUIRES(mutex_) { return version_ != seen || stopping_; });
}

bool DeviceHealth::stopped() const {
  MutexLock lock(&mutex_);
  return stopping_;
}

void DeviceHealth::Stop() {
  MutexLock lock(&mutex_);
  stopping_ = true;
  changed_.SignalAll();
}

}  // namespace gpuslice::dra
