// The fault kernel of `compute --fault-after`: one thread stores through a null pointer, which a
// real GPU reports as CUDA_ERROR_ILLEGAL_ADDRESS and which breaks the context for good (under MPS
// on Volta and later, every client's context on that GPU). The simulated driver recognises the
// name and faults the same way (docs/simulator.md, Faults). Hand-written PTX, as spin_ns.
#pragma once

namespace gpuslice::workload {

inline constexpr char kFaultKernelName[] = "fault_illegal_address";

inline constexpr char kFaultKernelPtx[] = R"ptx(
.version 7.0
.target sm_70
.address_size 64

.visible .entry fault_illegal_address()
{
    .reg .b32   %r<2>;
    .reg .b64   %rd<2>;

    mov.u64             %rd1, 0;
    mov.u32             %r1, 1;
    st.global.u32       [%rd1], %r1;
    ret;
}
)ptx";

}  // namespace gpuslice::workload
