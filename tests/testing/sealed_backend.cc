#include "testing/sealed_backend.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>

namespace anneal::testing {

class SealedBackend::Alloc final : public Allocator {
 public:
  explicit Alloc(SealedBackend* b) : b_(b) {}
  Device device() const override { return Device::Cpu(); }
  Result<void*> Allocate(size_t bytes, const std::string& what) override {
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    const size_t len = (bytes + page - 1) / page * page;
    // A fresh anonymous mapping is zeroed; it is born sealed unless an op is running.
    void* p = mmap(nullptr, len, b_->depth_ > 0 ? PROT_READ | PROT_WRITE : PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1,
                   0);
    if (p == MAP_FAILED) return Status(Code::kInternal, "sealed backend: mmap of " + what + " failed");
    regions_[p] = len;
    return p;
  }
  void Free(void* p, size_t) override {
    auto it = regions_.find(p);
    if (it == regions_.end()) std::abort();
    munmap(p, it->second);
    regions_.erase(it);
  }
  std::map<void*, size_t> regions_;

 private:
  SealedBackend* b_;
};

SealedBackend::SealedBackend(std::string name, Backend& inner)
    : name_(std::move(name)), inner_(inner), alloc_(new Alloc(this)) {}

SealedBackend::~SealedBackend() { delete alloc_; }

Allocator& SealedBackend::allocator() { return *alloc_; }
size_t SealedBackend::regions() const { return alloc_->regions_.size(); }

void SealedBackend::Protect(int prot) {
  for (const auto& [p, len] : alloc_->regions_) {
    if (mprotect(p, len, prot) != 0) std::abort();
  }
}

SealedBackend::Open::Open(SealedBackend* b) : b_(b) {
  if (b_->depth_++ == 0) b_->Protect(PROT_READ | PROT_WRITE);
}
SealedBackend::Open::~Open() {
  if (--b_->depth_ == 0) b_->Protect(PROT_NONE);
}

void SealedBackend::CopyFromHost(const TV& dst, const void* src, const Stream& s) {
  if (OnCopyStream(s)) {
    queue_.push_back([this, dst, src] { CopyFromHost(dst, src, Stream{}); });
    return;
  }
  Open o(this);
  inner_.CopyFromHost(dst, src, s);
}
void SealedBackend::CopyToHost(void* dst, const TV& src, const Stream& s) {
  if (OnCopyStream(s)) {
    queue_.push_back([this, dst, src] { CopyToHost(dst, src, Stream{}); });
    return;
  }
  Open o(this);
  inner_.CopyToHost(dst, src, s);
}

Stream SealedBackend::CopyStream() { return deferred_ ? Stream{&queue_, device()} : DefaultStream(); }

// An event on the copy stream is the number of copies queued before it (+1, so that it is never the
// empty handle): waiting for it runs them.
Event SealedBackend::RecordEvent(const Stream& s) {
  if (!OnCopyStream(s)) return Event{nullptr, device()};
  return Event{reinterpret_cast<void*>(static_cast<uintptr_t>(queue_.size() + 1)), device()};
}
void SealedBackend::WaitEvent(const Stream& /*s*/, const Event& e) {
  if (e.handle) RunQueued(reinterpret_cast<uintptr_t>(e.handle) - 1);
}
void SealedBackend::Synchronize(const Stream& s) {
  if (OnCopyStream(s)) RunQueued(queue_.size());
}
void SealedBackend::RunQueued(size_t upto) {
  while (ran_ < upto) queue_[ran_++]();
}

// Every op: unseal, count, run the inner backend's op, seal.
#define ANNEAL_SEALED(call)          \
  if (OnCopyStream(s)) std::abort(); \
  Open o(this);                      \
  ++ops_;                            \
  return inner_.call

void SealedBackend::EmbeddingForward(const Stream& s, const TV& out, const TV& tokens, const TV& wte, const TV& wpe) {
  ANNEAL_SEALED(EmbeddingForward(s, out, tokens, wte, wpe));
}
void SealedBackend::EmbeddingBackward(const Stream& s, const TV& dwte, const TV& dwpe, const TV& dout,
                                      const TV& tokens) {
  ANNEAL_SEALED(EmbeddingBackward(s, dwte, dwpe, dout, tokens));
}
void SealedBackend::VocabEmbeddingForward(const Stream& s, const TV& rows, const TV& tokens, const TV& wte_slice,
                                          int64_t v0) {
  ANNEAL_SEALED(VocabEmbeddingForward(s, rows, tokens, wte_slice, v0));
}
void SealedBackend::VocabEmbeddingBackward(const Stream& s, const TV& dwte_slice, const TV& dwpe, const TV& dall,
                                           const TV& tokens, int64_t v0, int T) {
  ANNEAL_SEALED(VocabEmbeddingBackward(s, dwte_slice, dwpe, dall, tokens, v0, T));
}
void SealedBackend::AddPositions(const Stream& s, const TV& out, const TV& wpe, int64_t row0, int T) {
  ANNEAL_SEALED(AddPositions(s, out, wpe, row0, T));
}
void SealedBackend::LayerNormForward(const Stream& s, const TV& out, const TV& mean, const TV& rstd, const TV& inp,
                                     const TV& w, const TV& b) {
  ANNEAL_SEALED(LayerNormForward(s, out, mean, rstd, inp, w, b));
}
void SealedBackend::LayerNormBackward(const Stream& s, const TV& dinp, const TV& dw, const TV& db, const TV& dout,
                                      const TV& inp, const TV& w, const TV& mean, const TV& rstd) {
  ANNEAL_SEALED(LayerNormBackward(s, dinp, dw, db, dout, inp, w, mean, rstd));
}
void SealedBackend::ResidualLayerNormForward(const Stream& s, const TV& resid, const TV& out, const TV& mean,
                                             const TV& rstd, const TV& a, const TV& b, const TV& w, const TV& bias) {
  ANNEAL_SEALED(ResidualLayerNormForward(s, resid, out, mean, rstd, a, b, w, bias));
}
void SealedBackend::LinearForward(const Stream& s, const TV& out, const TV& inp, const TV& w, const TV& bias,
                                  const TV& gelu_out) {
  ANNEAL_SEALED(LinearForward(s, out, inp, w, bias, gelu_out));
}
void SealedBackend::LinearBackward(const Stream& s, const TV& dinp, const TV& dw, const TV& dbias, const TV& dout,
                                   const TV& inp, const TV& w) {
  ANNEAL_SEALED(LinearBackward(s, dinp, dw, dbias, dout, inp, w));
}
void SealedBackend::BiasAdd(const Stream& s, const TV& out, const TV& bias) { ANNEAL_SEALED(BiasAdd(s, out, bias)); }
void SealedBackend::AttentionForward(const Stream& s, const TV& out, const TV& lse, const TV& q, const TV& k,
                                     const TV& v, int H) {
  ANNEAL_SEALED(AttentionForward(s, out, lse, q, k, v, H));
}
void SealedBackend::AttentionBackward(const Stream& s, const TV& dq, const TV& dk, const TV& dv, const TV& dout,
                                      const TV& q, const TV& k, const TV& v, const TV& out, const TV& lse, int H) {
  ANNEAL_SEALED(AttentionBackward(s, dq, dk, dv, dout, q, k, v, out, lse, H));
}
void SealedBackend::AttentionDecode(const Stream& s, const TV& out, const TV& q, const TV& kcache, const TV& vcache,
                                    const TV& scores, int H) {
  ANNEAL_SEALED(AttentionDecode(s, out, q, kcache, vcache, scores, H));
}
void SealedBackend::RmsNormForward(const Stream& s, const TV& out, const TV& rstd, const TV& inp, const TV& w,
                                   float eps) {
  ANNEAL_SEALED(RmsNormForward(s, out, rstd, inp, w, eps));
}
void SealedBackend::RmsNormBackward(const Stream& s, const TV& dinp, const TV& dw, const TV& dout, const TV& inp,
                                    const TV& w, const TV& rstd) {
  ANNEAL_SEALED(RmsNormBackward(s, dinp, dw, dout, inp, w, rstd));
}
void SealedBackend::Rotary(const Stream& s, const TV& x, const TV& cos, const TV& sin, int H, bool inverse) {
  ANNEAL_SEALED(Rotary(s, x, cos, sin, H, inverse));
}
void SealedBackend::SwiGluForward(const Stream& s, const TV& out, const TV& gate, const TV& up) {
  ANNEAL_SEALED(SwiGluForward(s, out, gate, up));
}
void SealedBackend::SwiGluBackward(const Stream& s, const TV& dgate, const TV& dup, const TV& gate, const TV& up,
                                   const TV& dout) {
  ANNEAL_SEALED(SwiGluBackward(s, dgate, dup, gate, up, dout));
}
void SealedBackend::GeluForward(const Stream& s, const TV& out, const TV& inp) { ANNEAL_SEALED(GeluForward(s, out, inp)); }
void SealedBackend::GeluBackward(const Stream& s, const TV& dinp, const TV& inp, const TV& dout) {
  ANNEAL_SEALED(GeluBackward(s, dinp, inp, dout));
}
void SealedBackend::ResidualForward(const Stream& s, const TV& out, const TV& a, const TV& b) {
  ANNEAL_SEALED(ResidualForward(s, out, a, b));
}
void SealedBackend::Accumulate(const Stream& s, const TV& dst, const TV& src) { ANNEAL_SEALED(Accumulate(s, dst, src)); }
double SealedBackend::CrossEntropy(const Stream& s, const TV& logits, const TV& losses, const TV& targets, int V,
                                   float dscale) {
  ANNEAL_SEALED(CrossEntropy(s, logits, losses, targets, V, dscale));
}
void SealedBackend::VocabLossStats(const Stream& s, const TV& stats, const TV& logits, const TV& targets, int64_t v0,
                                   int nreal) {
  ANNEAL_SEALED(VocabLossStats(s, stats, logits, targets, v0, nreal));
}
double SealedBackend::VocabLossCombine(const Stream& s, const TV& logits, const TV& losses, const TV& row_loss,
                                       const TV& gathered, const TV& targets, int64_t v0, int nreal, float dscale) {
  ANNEAL_SEALED(VocabLossCombine(s, logits, losses, row_loss, gathered, targets, v0, nreal, dscale));
}
double SealedBackend::SumSquares(const Stream& s, const TV& g) { ANNEAL_SEALED(SumSquares(s, g)); }
void SealedBackend::Scale(const Stream& s, const TV& g, float f) { ANNEAL_SEALED(Scale(s, g, f)); }
void SealedBackend::AdamW(const Stream& s, const TV& p, const TV& g, const TV& m, const TV& v, float lr, float beta1,
                          float beta2, float eps, float wd, int t) {
  ANNEAL_SEALED(AdamW(s, p, g, m, v, lr, beta1, beta2, eps, wd, t));
}
void SealedBackend::Zero(const Stream& s, const TV& x) { ANNEAL_SEALED(Zero(s, x)); }
void SealedBackend::Copy(const Stream& s, const TV& dst, const TV& src) { ANNEAL_SEALED(Copy(s, dst, src)); }

#undef ANNEAL_SEALED

}  // namespace anneal::testing
