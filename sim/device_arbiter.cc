#include "sim/device_arbiter.h"

#include <algorithm>

#include "common/clock.h"
#include "common/futex.h"

namespace gpuslice::sim {
namespace {

// How long a waiter sleeps before checking that the owner is still alive. Bounded so that a
// SIGKILLed owner delays the others by at most this much.
constexpr uint64_t kLivenessCheckNs = 5'000'000;

}  // namespace

DeviceArbiter::DeviceArbiter(SimState* state, int ordinal, int slot)
    : state_(state), device_(&state->device(ordinal)), slot_(slot) {}

bool DeviceArbiter::owns() const { return device_->arbiter.owner.load() == static_cast<uint32_t>(slot_ + 1); }

uint64_t DeviceArbiter::turn_started_ns() const { return device_->arbiter.owner_since_ns.load(); }

void DeviceArbiter::RenewTurn() { device_->arbiter.owner_since_ns.store(MonotonicNanos()); }

void DeviceArbiter::Acquire() {
  SimArbiter& a = device_->arbiter;
  const uint32_t me = static_cast<uint32_t>(slot_ + 1);
  if (a.owner.load() == me) return;
  if (a.wants[slot_].exchange(1) == 0) a.waiting.fetch_add(1);
  bool handed = false;
  while (true) {
    const uint32_t seen = a.sequence.load();
    uint32_t owner = a.owner.load();
    if (owner == me) {  // handed to us
      handed = true;
      break;
    }
    if (owner == 0 && a.owner.compare_exchange_strong(owner, me)) break;
    if (owner == 0) continue;
    if (!FutexWait(&a.sequence, seen, kLivenessCheckNs)) {
      // Timed out: the owner may have died holding the device, or be stopped (SIGSTOP, a
      // debugger) in the middle of its turn. The hardware preempts a context at the end of its
      // timeslice whatever its process does; a turn that has overrun two timeslices is one whose
      // process no longer runs, and its kernel is preempted (DeviceRunner credits it only the
      // time it could have run).
      const uint32_t stuck = a.owner.load();
      const uint64_t turn = MonotonicNanos() - a.owner_since_ns.load();
      if (stuck != 0 && stuck != me && turn > 2 * device_->config.timeslice_ns &&
          state_->IsAlive(static_cast<int>(stuck) - 1)) {
        uint32_t expected = stuck;
        if (a.owner.compare_exchange_strong(expected, me)) break;
        continue;
      }
      if (stuck != 0 && stuck != me && !state_->IsAlive(static_cast<int>(stuck) - 1)) {
        state_->ReapDeadProcesses();  // also withdraws the dead process's pending turn
        uint32_t expected = stuck;
        if (a.owner.compare_exchange_strong(expected, 0)) {
          a.sequence.fetch_add(1);
          FutexWakeAll(&a.sequence);
        }
      }
    }
  }
  if (a.wants[slot_].exchange(0) == 1) a.waiting.fetch_sub(1);
  // Handed over, the turn began when the device was given back (HandTo wrote it before handing):
  // the hardware switches contexts then, whenever this process's thread gets a CPU to notice.
  // On a loaded host a waiter wakes milliseconds late, and beginning the turn at its wake left
  // the device idle with this process's kernel queued.
  const uint64_t now = MonotonicNanos();
  a.owner_since_ns.store(handed ? std::min(a.owner_since_ns.load(), now) : now);
  a.handovers.fetch_add(1);
}

bool DeviceArbiter::ShouldYield() const {
  const SimArbiter& a = device_->arbiter;
  if (a.waiting.load() == 0) return false;
  return MonotonicNanos() - a.owner_since_ns.load() >= device_->config.timeslice_ns;
}

std::optional<int> DeviceArbiter::NextWaiter() const {
  const SimArbiter& a = device_->arbiter;
  if (a.waiting.load() == 0) return std::nullopt;
  for (int step = 1; step < kMaxProcesses; ++step) {
    const int candidate = (slot_ + step) % kMaxProcesses;
    if (!a.wants[candidate].load()) continue;
    // A process that exited while one of its threads still ran a kernel (exit() from main beside
    // a launching thread) may have asked for a turn after it unregistered: its context is gone,
    // as on the hardware, so the request is withdrawn rather than the device handed to it (each
    // such hand-over cost every later turn a liveness timeout: the survivor ran 2 ms in 7).
    if (!state_->IsLiveSlot(candidate)) {
      if (device_->arbiter.wants[candidate].exchange(0) == 1) device_->arbiter.waiting.fetch_sub(1);
      continue;
    }
    return candidate;
  }
  return std::nullopt;
}

void DeviceArbiter::HandTo(std::optional<int> next_slot, uint64_t free_since_ns) {
  SimArbiter& a = device_->arbiter;
  // Before the owner changes: the next owner reads it as its turn's start (Acquire).
  a.owner_since_ns.store(std::min(free_since_ns, MonotonicNanos()));
  a.owner.store(next_slot ? static_cast<uint32_t>(*next_slot + 1) : 0);
  a.sequence.fetch_add(1);
  FutexWakeAll(&a.sequence);
}

void DeviceArbiter::Release(uint64_t free_since_ns) {
  if (!owns()) return;
  HandTo(NextWaiter(), free_since_ns);
}

}  // namespace gpuslice::sim
