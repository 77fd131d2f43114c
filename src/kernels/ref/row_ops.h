// The reference arithmetic of the ops the KernelTable (kernels/ops.h) does not hold: the
// vocabulary-parallel embedding and loss, positions, bias, cached decode attention, rotary embeddings,
// SwiGLU and accumulation. Both host backends ("ref" and "cpu") run exactly these: every row (or
// element) is computed by itself, in a fixed order, so kernels/host_backend.cc may hand a range
// [r0, r1) to each of its threads and no split changes a bit. Each function is named as its op in
// OpName() (tensor/backend.cc). Shapes and conventions as in kernels/ops.h; f32 buffers, i32 tokens,
// f64 loss statistics.
#pragma once

#include <cstddef>
#include <cstdint>

namespace anneal::row_ops {

// rows [r0, r1) of out (N,C) = wte_slice[tokens - v0] where the token is in [v0, v0 + Vl), else 0.
void vocab_embedding_forward(float* out, const int32_t* tokens, const float* wte_slice, int64_t v0, int Vl, int C,
                             int r0, int r1);
// dwte_slice[tokens - v0] += dall (rows of the slice's tokens); dwpe[n % T] += dall when dwpe is not
// null. A row of dwte may repeat: all N rows, one thread, row order.
void vocab_embedding_backward(float* dwte_slice, float* dwpe, const float* dall, const int32_t* tokens, int64_t v0,
                              int Vl, int N, int C, int T);
// rows [r0, r1) of out (R,C) += wpe[(row0 + n) % T]
void add_positions(float* out, const float* wpe, int64_t row0, int T, int C, int r0, int r1);
// rows [r0, r1) of out (N,OC) += bias (OC)
void bias_add(float* out, const float* bias, int OC, int r0, int r1);
// One position's attention over `rows` cached positions: q (C = H*hs), kcache and vcache rows of
// stride ks and vs holding the key/value heads (group query heads each), scores (rows) scratch,
// out (C). Whole, one thread.
void attention_decode(float* out, const float* q, const float* kcache, int64_t ks, const float* vcache, int64_t vs,
                      float* scores, int rows, int H, int hs, int group);
// Rows [r0, r1) of x (B*T, C = H*hs) rotated in place by cos, sin (T, hs/2), each pair in double and
// rounded once; inverse rotates back.
void rotary(float* x, const float* cos, const float* sin, int T, int H, int hs, bool inverse, int r0, int r1);
// elements [i0, i1): out = silu(gate) * up
void swiglu_forward(float* out, const float* gate, const float* up, int64_t i0, int64_t i1);
// elements [i0, i1): dgate = dout * up * silu'(gate); dup = dout * silu(gate)
void swiglu_backward(float* dgate, float* dup, const float* gate, const float* up, const float* dout, int64_t i0,
                     int64_t i1);
// elements [i0, i1): dst += src
void accumulate(float* dst, const float* src, int64_t i0, int64_t i1);
// Rows [r0, r1) of a vocabulary slice's logits (N,Vl), nreal real columns from v0: stats (N,2) =
// (log-sum-exp of the row's real columns, or -inf with none; the target's logit if the slice holds
// it, else 0).
void vocab_loss_stats(double* stats, const float* logits, const int32_t* targets, int64_t v0, int nreal, int Vl,
                      int r0, int r1);
// Rows [r0, r1): the tp slices' stats gathered (tp, N, 2), combined in rank order into row_loss
// (N,2; [2i] = the row's loss) and losses (N); when dscale != 0 the slice's logits become their
// gradient dscale * (softmax - onehot), 0 in the padding columns.
void vocab_loss_combine(float* logits, float* losses, double* row_loss, const double* gathered, const int32_t* targets,
                        int64_t v0, int nreal, int Vl, int N, int tp, float dscale, int r0, int r1);

}  // namespace anneal::row_ops
