// The workload's only kernel, as hand-written PTX so that no CUDA compiler is needed to build
// gpuslice and the same text runs on the simulated driver and, JIT-compiled, on any real GPU
// from Volta on.
//
// spin_ns(u64 ns) occupies one thread until %globaltimer has advanced by `ns` nanoseconds: a kernel
// of known length whatever the GPU's speed. The simulated driver recognises the name and treats the
// launch as occupying the device for exactly `ns`. tests/workload/workload_test.cc checks that
// ptxas accepts the text.
#pragma once

namespace gpuslice::workload {

inline constexpr char kSpinKernelName[] = "spin_ns";

inline constexpr char kSpinKernelPtx[] = R"ptx(
.version 7.0
.target sm_70
.address_size 64

.visible .entry spin_ns(
    .param .u64 spin_ns_param_0
)
{
    .reg .pred  %p<2>;
    .reg .b64   %rd<5>;

    ld.param.u64        %rd1, [spin_ns_param_0];
    mov.u64             %rd2, %globaltimer;
$L__spin:
    mov.u64             %rd3, %globaltimer;
    sub.s64             %rd4, %rd3, %rd2;
    setp.lt.u64         %p1, %rd4, %rd1;
    @%p1 bra            $L__spin;
    ret;
}
)ptx";

}  // namespace gpuslice::workload
