#include "model/layer_parallel.h"

namespace anneal {

void WholeModelLayers::RowLinear(DevPtr out, DevPtr inp, DevPtr w, DevPtr b, int N, int K, DevPtr) {
  const int C = c_.n_embd;
  be_.LinearForward(st_, F(out, N, C), F(inp, N, K), F(w, C, K), Opt(b, C));
}

void WholeModelLayers::EmbeddingForward(DevPtr input, const int32_t* tokens, DevPtr wte, DevPtr wpe, int B,
                                        int T, DevPtr) {
  const int C = c_.n_embd;
  if (!wpe.p) {  // no learned positions: the token rows alone
    be_.VocabEmbeddingForward(st_, F(input, static_cast<int64_t>(B) * T, C),
                              TensorView::I32(tokens, {static_cast<int64_t>(B) * T}, be_.device()),
                              F(wte, c_.padded_vocab, C), 0);
    return;
  }
  be_.EmbeddingForward(st_, TensorView(input.p, input.t, {B, T, C}, be_.device()),
                       TensorView::I32(tokens, {B, T}, be_.device()), F(wte, c_.padded_vocab, C),
                       F(wpe, T, C));
}

void WholeModelLayers::EmbeddingBackward(DevPtr dwte, DevPtr dwpe, DevPtr dresidual, const int32_t* tokens, int B,
                                         int T) {
  const int C = c_.n_embd;
  if (!dwpe.p) {  // no learned positions
    be_.VocabEmbeddingBackward(st_, F(dwte, c_.padded_vocab, C), TensorView(), F(dresidual, static_cast<int64_t>(B) * T, C),
                               TensorView::I32(tokens, {static_cast<int64_t>(B) * T}, be_.device()), 0, T);
    return;
  }
  be_.EmbeddingBackward(st_, F(dwte, c_.padded_vocab, C), F(dwpe, c_.max_seq_len, C),
                        TensorView(dresidual.p, dresidual.t, {B, T, C}, be_.device()),
                        TensorView::I32(tokens, {B, T}, be_.device()));
}

double WholeModelLayers::Loss(DevPtr logits, DevPtr losses, const int32_t* targets, int N, float dscale) {
  return be_.CrossEntropy(st_, F(logits, N, c_.padded_vocab), F(losses, N), TensorView::I32(targets, {N}, be_.device()),
                          c_.vocab_size, dscale);
}

void WholeModelLayers::NormBackward(NormKind kind, DevPtr dinp, DevPtr dw, DevPtr db, DevPtr dout, DevPtr inp,
                                    DevPtr w, DevPtr mean, DevPtr rstd, int rows) {
  const int C = c_.n_embd;
  if (kind == NormKind::kRmsNorm) {
    be_.RmsNormBackward(st_, F(dinp, rows, C), F(dw, C), F(dout, rows, C), F(inp, rows, C), F(w, C), F(rstd, rows));
    return;
  }
  be_.LayerNormBackward(st_, F(dinp, rows, C), F(dw, C), F(db, C), F(dout, rows, C), F(inp, rows, C), F(w, C),
                        F(mean, rows), F(rstd, rows));
}

}  // namespace anneal
