#include "model/layer_parallel.h"

namespace anneal {

void WholeModelLayers::RowLinear(float* out, const float* inp, const float* w, const float* b, int N, int K, float*) {
  const int C = c_.n_embd;
  be_.LinearForward(st_, F(out, N, C), F(inp, N, K), F(w, C, K), F(b, C));
}

void WholeModelLayers::EmbeddingForward(float* input, const int32_t* tokens, const float* wte, const float* wpe, int B,
                                        int T, float*) {
  const int C = c_.n_embd;
  be_.EmbeddingForward(st_, TensorView::F32(input, {B, T, C}, be_.device()),
                       TensorView::I32(tokens, {B, T}, be_.device()), F(wte, c_.padded_vocab, C),
                       F(wpe, T, C));
}

void WholeModelLayers::EmbeddingBackward(float* dwte, float* dwpe, const float* dresidual, const int32_t* tokens, int B,
                                         int T) {
  const int C = c_.n_embd;
  be_.EmbeddingBackward(st_, F(dwte, c_.padded_vocab, C), F(dwpe, c_.max_seq_len, C),
                        TensorView::F32(dresidual, {B, T, C}, be_.device()),
                        TensorView::I32(tokens, {B, T}, be_.device()));
}

double WholeModelLayers::Loss(float* logits, float* losses, const int32_t* targets, int N, float dscale) {
  return be_.CrossEntropy(st_, F(logits, N, c_.padded_vocab), F(losses, N), TensorView::I32(targets, {N}, be_.device()),
                          c_.vocab_size, dscale);
}

void WholeModelLayers::LayerNormBackward(float* dinp, float* dw, float* db, const float* dout, const float* inp,
                                         const float* w, const float* mean, const float* rstd, int rows) {
  const int C = c_.n_embd;
  be_.LayerNormBackward(st_, F(dinp, rows, C), F(dw, C), F(db, C), F(dout, rows, C), F(inp, rows, C), F(w, C),
                        F(mean, rows), F(rstd, rows));
}

}  // namespace anneal
