#include "data/text_input.h"

#include <zlib.h>

#include <nlohmann/json.hpp>
#include <thread>

#include "core/memory.h"
#include "data/utf8.h"

namespace anneal {

namespace {
bool EndsWith(const std::string& s, std::string_view suf) {
  return s.size() >= suf.size() && s.compare(s.size() - suf.size(), suf.size(), suf) == 0;
}

Result<std::string> Gunzip(const std::string& path, std::string_view in) {
  z_stream zs{};
  if (inflateInit2(&zs, 15 + 32) != Z_OK) return Internal("zlib inflateInit2 failed");
  std::string out;
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  zs.avail_in = static_cast<uInt>(in.size());
  char buf[1 << 16];
  int rc;
  do {
    zs.next_out = reinterpret_cast<Bytef*>(buf);
    zs.avail_out = sizeof(buf);
    rc = inflate(&zs, Z_NO_FLUSH);
    if (rc == Z_STREAM_END && zs.avail_in > 0) {  // concatenated gzip members
      out.append(buf, sizeof(buf) - zs.avail_out);
      inflateReset(&zs);
      rc = Z_OK;
      continue;
    }
    if (rc != Z_OK && rc != Z_STREAM_END) {
      inflateEnd(&zs);
      return InvalidInput("input " + path + " is not valid gzip data (" + (zs.msg ? zs.msg : "zlib error") +
                          "): re-download it, or remove the .gz suffix if it is plain text");
    }
    out.append(buf, sizeof(buf) - zs.avail_out);
  } while (rc != Z_STREAM_END);
  inflateEnd(&zs);
  return out;
}
}  // namespace

InputFormat FormatOfPath(const std::string& path) {
  std::string p = EndsWith(path, ".gz") ? path.substr(0, path.size() - 3) : path;
  return EndsWith(p, ".jsonl") || EndsWith(p, ".json") ? InputFormat::kJsonLines : InputFormat::kText;
}

bool IsGzipPath(const std::string& path) { return EndsWith(path, ".gz"); }

Status CheckUtf8(const std::string& what, std::string* s, bool replace) {
  size_t bad = FindInvalidUtf8(*s);
  if (bad == std::string::npos) return Status::Ok();
  if (replace) {
    *s = ReplaceInvalidUtf8(*s);
    return Status::Ok();
  }
  char hex[8];
  std::snprintf(hex, sizeof(hex), "0x%02X", static_cast<unsigned char>((*s)[bad]));
  return InvalidInput(what + " is not valid UTF-8: byte " + hex + " at offset " + std::to_string(bad) +
                      "; convert it to UTF-8 (iconv), or pass --invalid-utf8 replace to substitute U+FFFD");
}

Result<std::string> ReadInputBytes(Env& env, const std::string& path, uint64_t begin, uint64_t end) {
  ANNEAL_ASSIGN_OR_RETURN(auto f, env.OpenForRead(path));
  if (IsGzipPath(path)) {
    begin = 0;
    end = f->Size();
  }
  std::string data(end - begin, '\0');
  ANNEAL_ASSIGN_OR_RETURN(size_t n, f->Read(begin, data.size(), data.data()));
  if (n != data.size()) {
    return IoError("input " + path + " shrank while being read (wanted " + std::to_string(data.size()) +
                   " bytes at " + std::to_string(begin) + ", got " + std::to_string(n) +
                   "); do not change inputs during prep");
  }
  if (IsGzipPath(path)) return Gunzip(path, data);
  return data;
}

Status ForEachDocument(InputFormat format, const std::string& path, uint64_t base_offset, std::string data,
                       bool replace_invalid_utf8, const std::function<void(std::string_view)>& fn) {
  if (format == InputFormat::kText) {
    ANNEAL_RETURN_IF_ERROR(CheckUtf8("input " + path, &data, replace_invalid_utf8));
    if (!data.empty()) fn(data);
    return Status::Ok();
  }
  for (size_t pos = 0; pos < data.size();) {
    size_t nl = data.find('\n', pos);
    if (nl == std::string::npos) nl = data.size();
    std::string line = data.substr(pos, nl - pos);
    uint64_t at = base_offset + pos;
    pos = nl + 1;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    std::string where = "input " + path + " (JSON Lines, line at byte " + std::to_string(at) + ")";
    ANNEAL_RETURN_IF_ERROR(CheckUtf8(where, &line, replace_invalid_utf8));
    nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) {
      return InvalidInput(where + " is not valid JSON: fix the line, or name the file *.txt if it is plain text");
    }
    if (!j.is_object() || !j.contains("text")) {
      return InvalidInput(where + " has no \"text\" field: each line must be an object like {\"text\": \"...\"}");
    }
    if (!j["text"].is_string()) return InvalidInput(where + ": \"text\" must be a string");
    const std::string& text = j["text"].get_ref<const std::string&>();
    if (!text.empty()) fn(text);
  }
  return Status::Ok();
}

Status EncodeParallel(const Tokenizer& tok, std::string_view text, int threads, std::vector<uint32_t>* out) {
  // English averages ~4 bytes a token; reserving avoids regrowing (and re-faulting) large vectors.
  if (threads <= 1 || text.size() < (1u << 16)) {
    out->reserve(out->size() + text.size() / 3);
    AdviseHugePages(out->data() + out->size(), (out->capacity() - out->size()) * sizeof(uint32_t));
    tok.NewEncoder()->Encode(text, out);
    return Status::Ok();
  }
  // Cut points near i * size / threads, at byte c where either
  //   (A) s[c] is ' ' between two ASCII non-whitespace bytes ("word| word"): the piece before ends
  //       at c (no run or contraction takes a following space), and " word" starts at c; or
  //   (B) s[c-1] is '\n' between two ASCII non-whitespace bytes ("end.\n|Next"), s[c] not '/': the
  //       '\n' is a one-character whitespace run followed by a non-space, or the end of a
  //       punctuation piece's newline tail (cl100k's [\r\n]*; o200k's [\r\n/]* would go on into a
  //       '/'), so it ends a piece either way.
  // In both, the pieces on each side are the same whether or not the text goes on, for every
  // pre-tokenizer (data/pretokenize.h).
  auto is_plain = [&](size_t i) {
    unsigned char c = static_cast<unsigned char>(text[i]);
    return c < 0x80 && c != ' ' && !(c >= 0x09 && c <= 0x0D);
  };
  auto safe = [&](size_t c) {
    if (c < 2 || c + 1 >= text.size()) return false;
    if (text[c] == ' ') return is_plain(c - 1) && is_plain(c + 1);
    return text[c - 1] == '\n' && is_plain(c) && text[c] != '/' && is_plain(c - 2);
  };
  std::vector<size_t> cuts{0};
  for (int t = 1; t < threads; ++t) {
    size_t p = std::max(cuts.back(), text.size() * static_cast<size_t>(t) / static_cast<size_t>(threads));
    while (p < text.size() && !safe(p)) ++p;
    p = std::min(p, text.size());
    cuts.push_back(p);
  }
  cuts.push_back(text.size());
  std::vector<std::vector<uint32_t>> parts(cuts.size() - 1);
  std::vector<std::thread> pool;
  for (size_t t = 0; t + 1 < cuts.size(); ++t) {
    pool.emplace_back([&, t] {
      parts[t].reserve((cuts[t + 1] - cuts[t]) / 3 + (1u << 19));  // + 2 MiB: room to align
      AdviseHugePages(parts[t].data(), parts[t].capacity() * sizeof(uint32_t));
      tok.NewEncoder()->Encode(text.substr(cuts[t], cuts[t + 1] - cuts[t]), &parts[t]);
    });
  }
  for (auto& th : pool) th.join();
  size_t total = out->size();
  for (const auto& p : parts) total += p.size();
  out->reserve(total);
  AdviseHugePages(out->data() + out->size(), (out->capacity() - out->size()) * sizeof(uint32_t));
  for (const auto& p : parts) out->insert(out->end(), p.begin(), p.end());
  return Status::Ok();
}

}  // namespace anneal
