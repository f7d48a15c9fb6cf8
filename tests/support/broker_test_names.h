// The names the broker tests (tests/broker_*_test.cc, in gpuslice::broker) take from
// tests/support/broker_test_util.h, declared once here rather than at the top of each test.
#pragma once

#include "tests/support/broker_test_util.h"

namespace gpuslice::broker {

using ::gpuslice::testing::BrokerTempDir;
using ::gpuslice::testing::ChildGroup;
using ::gpuslice::testing::ErrorOf;
using ::gpuslice::testing::IsOk;
using ::gpuslice::testing::kMiB;
using ::gpuslice::testing::kTestGpuTotal;
using ::gpuslice::testing::kTestUuid;
using ::gpuslice::testing::SecondsSince;
using ::gpuslice::testing::Shared;
using ::gpuslice::testing::ValueOf;

}  // namespace gpuslice::broker
