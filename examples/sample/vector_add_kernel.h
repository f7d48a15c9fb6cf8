// The sample's kernel, as hand-written PTX so that the sample builds without a CUDA compiler and
// the same text is JIT-compiled by any real driver from Volta (sm_70) on. It is what nvcc emits,
// tidied, for
//
//   extern "C" __global__ void vector_add(float* c, const float* a, const float* b, unsigned n) {
//     unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
//     if (i < n) c[i] = a[i] + b[i];
//   }
//
// tests/examples/examples_test.cc checks that ptxas accepts it.
#pragma once

namespace gpuslice::examples {

inline constexpr char kVectorAddName[] = "vector_add";

inline constexpr char kVectorAddPtx[] = R"ptx(
.version 7.0
.target sm_70
.address_size 64

.visible .entry vector_add(
    .param .u64 vector_add_param_c,
    .param .u64 vector_add_param_a,
    .param .u64 vector_add_param_b,
    .param .u32 vector_add_param_n
)
{
    .reg .pred  %p<2>;
    .reg .f32   %f<4>;
    .reg .b32   %r<6>;
    .reg .b64   %rd<11>;

    ld.param.u64        %rd1, [vector_add_param_c];
    ld.param.u64        %rd2, [vector_add_param_a];
    ld.param.u64        %rd3, [vector_add_param_b];
    ld.param.u32        %r1, [vector_add_param_n];
    mov.u32             %r2, %ctaid.x;
    mov.u32             %r3, %ntid.x;
    mov.u32             %r4, %tid.x;
    mad.lo.s32          %r5, %r2, %r3, %r4;
    setp.ge.u32         %p1, %r5, %r1;
    @%p1 bra            $L__done;
    cvta.to.global.u64  %rd4, %rd1;
    cvta.to.global.u64  %rd5, %rd2;
    cvta.to.global.u64  %rd6, %rd3;
    mul.wide.u32        %rd7, %r5, 4;
    add.s64             %rd8, %rd5, %rd7;
    add.s64             %rd9, %rd6, %rd7;
    add.s64             %rd10, %rd4, %rd7;
    ld.global.f32       %f1, [%rd8];
    ld.global.f32       %f2, [%rd9];
    add.rn.f32          %f3, %f1, %f2;
    st.global.f32       [%rd10], %f3;
$L__done:
    ret;
}
)ptx";

}  // namespace gpuslice::examples
