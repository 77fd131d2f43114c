// safetensors files (docs/formats/safetensors.md): an 8-byte little-endian header length N, N bytes
// of JSON {"name": {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {str: str}},
// then the data, little-endian, C order. anneal reads them (PyTorch golden data) and writes them
// (checkpoint shards, Hugging Face model files). Dtypes read: F64, F32, BF16, F16, I64, I32, U8, I8,
// BOOL (ReadF64/ReadF32/ReadI32 convert the ones they name; Bytes gives any).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/env.h"
#include "core/status.h"

namespace anneal {

struct TensorEntry {
  std::string dtype;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;  // byte range in the data section
  uint64_t numel() const;
};

class SafeTensorsReader {
 public:
  // Maps the file and parses its header; errors name the file and what is wrong (exit 2).
  static Result<std::unique_ptr<SafeTensorsReader>> Open(Env& env, const std::string& path);
  // The same over a file image in memory (an object fetched from a store); name is for messages.
  static Result<std::unique_ptr<SafeTensorsReader>> FromBytes(std::string bytes, const std::string& name);
  const std::map<std::string, TensorEntry>& tensors() const { return tensors_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  bool Has(const std::string& name) const { return tensors_.count(name) > 0; }
  // The tensor converted to double / float (F32 or F64) or int32 (I32). Errors name the tensor.
  Result<std::vector<double>> ReadF64(const std::string& name) const;
  Result<std::vector<float>> ReadF32(const std::string& name) const;
  Result<std::vector<int32_t>> ReadI32(const std::string& name) const;
  // Raw bytes of a tensor.
  Result<std::string_view> Bytes(const std::string& name) const;

 private:
  Status Parse(uint64_t size);
  std::string path_;
  std::unique_ptr<MappedFile> map_;
  std::string bytes_;
  const char* data_ = nullptr;  // the file image: map_ or bytes_
  uint64_t data_start_ = 0;
  std::map<std::string, TensorEntry> tensors_;
  std::map<std::string, std::string> metadata_;
};

class SafeTensorsWriter {
 public:
  void SetMetadata(const std::string& key, const std::string& value) { metadata_[key] = value; }
  void AddF32(const std::string& name, std::vector<int64_t> shape, const float* data);
  // The same without copying: data must stay valid and unchanged until the image is serialized.
  void AddF32View(const std::string& name, std::vector<int64_t> shape, const float* data);
  void AddBytes(const std::string& name, const std::string& dtype, std::vector<int64_t> shape, std::string bytes);
  // Serialized file image.
  std::string Serialize() const;
  // The same into *out, reusing its memory (a buffer from the previous checkpoint: no fresh pages
  // to fault in); the data is copied once.
  void SerializeTo(std::string* out) const;
  // Bytes Serialize would produce.
  size_t SerializedSize() const;
  // Writes atomically (temporary name, fsync, rename).
  Status Write(Env& env, const std::string& path) const;

 private:
  struct Item {
    std::string name, dtype;
    std::vector<int64_t> shape;
    std::string bytes;
    const char* view = nullptr;  // AddF32View: the data lives elsewhere
    size_t view_size = 0;
    size_t size() const { return view ? view_size : bytes.size(); }
    const char* data() const { return view ? view : bytes.data(); }
  };
  std::vector<Item> items_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace anneal
