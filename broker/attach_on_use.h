// A broker attached at its first use rather than when its owner is made. The daemons (device
// plugin, DRA driver) start before any tenant has created the node's state file; an attach that
// fails is tried again at the next use, so they need no restart once it exists.
#pragma once

#include <memory>
#include <string>

#include "broker/broker.h"
#include "common/status.h"

namespace gpuslice::broker {

// Not synchronised: its owner calls Get under its own lock, or from one thread.
class AttachOnUse {
 public:
  explicit AttachOnUse(std::string state_dir) : state_dir_(std::move(state_dir)) {}

  // The broker, attached now if it was not yet; the attach's error when it still fails.
  Result<Broker*> Get() {
    if (!broker_) {
      Result<std::unique_ptr<Broker>> attached = Broker::Attach(state_dir_);
      if (!attached.ok()) return attached.status();
      broker_ = std::move(attached).value();
    }
    return broker_.get();
  }

 private:
  const std::string state_dir_;
  std::unique_ptr<Broker> broker_;
};

}  // namespace gpuslice::broker
