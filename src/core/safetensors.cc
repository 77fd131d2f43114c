#include "core/safetensors.h"

#include <climits>
#include <cstring>
#include <nlohmann/json.hpp>

#include "core/bounded_parse.h"

namespace anneal {

using nlohmann::json;

namespace {
size_t DtypeSize(const std::string& d) {
  if (d == "F64" || d == "I64") return 8;
  if (d == "F32" || d == "I32") return 4;
  if (d == "BF16" || d == "F16") return 2;
  if (d == "U8" || d == "I8" || d == "BOOL") return 1;
  return 0;
}
}  // namespace

uint64_t TensorEntry::numel() const {
  uint64_t n = 1;
  for (auto d : shape) n *= static_cast<uint64_t>(d);
  return n;
}

Result<std::unique_ptr<SafeTensorsReader>> SafeTensorsReader::Open(Env& env, const std::string& path) {
  auto r = std::unique_ptr<SafeTensorsReader>(new SafeTensorsReader());
  r->path_ = path;
  ANNEAL_ASSIGN_OR_RETURN(r->map_, env.Map(path, Env::MapMode::kLazy));
  r->data_ = r->map_->data();
  ANNEAL_RETURN_IF_ERROR(r->Parse(r->map_->size()));
  return r;
}

Result<std::unique_ptr<SafeTensorsReader>> SafeTensorsReader::FromBytes(std::string bytes, const std::string& name) {
  auto r = std::unique_ptr<SafeTensorsReader>(new SafeTensorsReader());
  r->path_ = name;
  r->bytes_ = std::move(bytes);
  r->data_ = r->bytes_.data();
  ANNEAL_RETURN_IF_ERROR(r->Parse(r->bytes_.size()));
  return r;
}

namespace {

// A JSON list of whole numbers in [0, int64 max] (a float there was undefined behaviour through
// get<std::vector<int64_t>>(); a negative one wrapped as a uint64 offset).
bool Wholes(const json& v, std::vector<int64_t>* out) {
  if (!v.is_array()) return false;
  out->clear();
  for (const json& x : v) {
    int64_t i = 0;
    if (!JsonIntIn(x, 0, INT64_MAX, &i)) return false;
    out->push_back(i);
  }
  return true;
}

}  // namespace

Status SafeTensorsReader::Parse(uint64_t size) {
  SafeTensorsReader* r = this;
  const std::string& path = path_;
  auto bad = [&](const std::string& m) { return InvalidInput("safetensors file " + path + ": " + m); };
  if (size < 8) return bad("shorter than its 8-byte header length: truncated");
  uint64_t n;
  std::memcpy(&n, r->data_, 8);
  if (n > size - 8) return bad("header length " + std::to_string(n) + " exceeds the file: truncated or corrupt");
  json h = json::parse(std::string_view(r->data_ + 8, n), nullptr, false);
  if (!h.is_object()) return bad("header is not a JSON object: corrupt");
  r->data_start_ = 8 + n;
  const uint64_t data_size = size - r->data_start_;
  for (auto it = h.begin(); it != h.end(); ++it) {
    if (it.key() == "__metadata__") {
      if (!it.value().is_object()) return bad("__metadata__ is not an object");
      for (auto m = it.value().begin(); m != it.value().end(); ++m) {
        if (m.value().is_string()) r->metadata_[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    TensorEntry e;
    try {
      e.dtype = it.value().at("dtype").get<std::string>();
      std::vector<int64_t> off;
      if (!Wholes(it.value().at("shape"), &e.shape)) return bad("tensor " + it.key() + ": shape must be a list of whole numbers >= 0");
      if (!Wholes(it.value().at("data_offsets"), &off) || off.size() != 2) {
        return bad("tensor " + it.key() + ": data_offsets must be [begin, end], whole numbers >= 0");
      }
      e.begin = static_cast<uint64_t>(off[0]);
      e.end = static_cast<uint64_t>(off[1]);
    } catch (const std::exception& ex) {
      return bad("tensor " + it.key() + ": " + ex.what());
    }
    const size_t es = DtypeSize(e.dtype);
    if (es == 0) return bad("tensor " + it.key() + " has unsupported dtype " + e.dtype);
    uint64_t n = es;
    for (int64_t d : e.shape) {
      if (d < 0 || __builtin_mul_overflow(n, static_cast<uint64_t>(d), &n)) {
        return bad("tensor " + it.key() + " has a negative or overflowing shape");
      }
    }
    if (e.end < e.begin || e.end > data_size || e.end - e.begin != e.numel() * es) {
      return bad("tensor " + it.key() + " has byte range [" + std::to_string(e.begin) + ", " + std::to_string(e.end) +
                 ") that does not fit its shape or the file: truncated or corrupt");
    }
    r->tensors_[it.key()] = std::move(e);
  }
  return Status::Ok();
}

Result<std::string_view> SafeTensorsReader::Bytes(const std::string& name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) return NotFound("safetensors file " + path_ + " has no tensor " + name);
  return std::string_view(data_ + data_start_ + it->second.begin, it->second.end - it->second.begin);
}

Result<std::vector<double>> SafeTensorsReader::ReadF64(const std::string& name) const {
  ANNEAL_ASSIGN_OR_RETURN(std::string_view b, Bytes(name));
  const std::string& dt = tensors_.at(name).dtype;
  std::vector<double> out;
  if (dt == "F64") {
    out.resize(b.size() / 8);
    if (!out.empty()) std::memcpy(out.data(), b.data(), out.size() * 8);  // an empty tensor has no data()
  } else if (dt == "F32") {
    out.resize(b.size() / 4);
    for (size_t i = 0; i < out.size(); ++i) {
      float f;
      std::memcpy(&f, b.data() + 4 * i, 4);
      out[i] = f;
    }
  } else {
    return InvalidInput("tensor " + name + " in " + path_ + " is " + dt + ", not a float");
  }
  return out;
}

Result<std::vector<float>> SafeTensorsReader::ReadF32(const std::string& name) const {
  ANNEAL_ASSIGN_OR_RETURN(std::vector<double> d, ReadF64(name));
  return std::vector<float>(d.begin(), d.end());
}

Result<std::vector<int32_t>> SafeTensorsReader::ReadI32(const std::string& name) const {
  ANNEAL_ASSIGN_OR_RETURN(std::string_view b, Bytes(name));
  if (tensors_.at(name).dtype != "I32") return InvalidInput("tensor " + name + " in " + path_ + " is not I32");
  std::vector<int32_t> out(b.size() / 4);
  if (!out.empty()) std::memcpy(out.data(), b.data(), out.size() * 4);
  return out;
}

void SafeTensorsWriter::AddF32(const std::string& name, std::vector<int64_t> shape, const float* data) {
  size_t n = 1;
  for (auto d : shape) n *= static_cast<size_t>(d);
  AddBytes(name, "F32", std::move(shape), std::string(reinterpret_cast<const char*>(data), n * 4));
}

void SafeTensorsWriter::AddF32View(const std::string& name, std::vector<int64_t> shape, const float* data) {
  size_t n = 1;
  for (auto d : shape) n *= static_cast<size_t>(d);
  Item it{name, "F32", std::move(shape), std::string(), reinterpret_cast<const char*>(data), n * 4};
  items_.push_back(std::move(it));
}

void SafeTensorsWriter::AddBytes(const std::string& name, const std::string& dtype, std::vector<int64_t> shape,
                                 std::string bytes) {
  items_.push_back({name, dtype, std::move(shape), std::move(bytes)});
}

std::string SafeTensorsWriter::Serialize() const {
  std::string out;
  SerializeTo(&out);
  return out;
}

size_t SafeTensorsWriter::SerializedSize() const {
  json h = json::object();
  uint64_t off = 0;
  for (const auto& it : items_) {
    h[it.name] = {{"dtype", it.dtype}, {"shape", it.shape}, {"data_offsets", {off, off + it.size()}}};
    off += it.size();
  }
  if (!metadata_.empty()) h["__metadata__"] = metadata_;
  const size_t header = (h.dump().size() + 8 + 7) / 8 * 8;
  return header + off;
}

void SafeTensorsWriter::SerializeTo(std::string* out) const {
  json h = json::object();
  uint64_t off = 0;
  for (const auto& it : items_) {
    h[it.name] = {{"dtype", it.dtype}, {"shape", it.shape}, {"data_offsets", {off, off + it.size()}}};
    off += it.size();
  }
  if (!metadata_.empty()) h["__metadata__"] = metadata_;
  std::string header = h.dump();
  while ((8 + header.size()) % 8 != 0) header.push_back(' ');
  const uint64_t n = header.size();
  out->resize(8 + n + off);
  char* p = out->data();
  std::memcpy(p, &n, 8);
  std::memcpy(p + 8, header.data(), n);
  p += 8 + n;
  for (const auto& it : items_) {
    std::memcpy(p, it.data(), it.size());
    p += it.size();
  }
}

Status SafeTensorsWriter::Write(Env& env, const std::string& path) const { return env.WriteFileAtomic(path, Serialize()); }

}  // namespace anneal
