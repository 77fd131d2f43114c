#include "data/byte_level.h"

#include <array>
#include <cstdint>

#include "data/utf8.h"

namespace anneal {

namespace {

struct Alphabet {
  std::array<uint32_t, 256> byte_to_cp{};
  std::array<int16_t, 512> cp_to_byte{};
  Alphabet() {
    cp_to_byte.fill(-1);
    uint32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      byte_to_cp[b] = printable ? static_cast<uint32_t>(b) : next++;
      cp_to_byte[byte_to_cp[b]] = static_cast<int16_t>(b);
    }
  }
};

const Alphabet& TheAlphabet() {
  static const Alphabet a;
  return a;
}

}  // namespace

std::string ByteLevelText(std::string_view bytes) {
  const Alphabet& a = TheAlphabet();
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char b : bytes) {
    const uint32_t cp = a.byte_to_cp[b];  // < 0x144: one or two UTF-8 bytes
    if (cp < 0x80) {
      out.push_back(static_cast<char>(cp));
    } else {
      out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
  }
  return out;
}

bool ByteLevelBytes(std::string_view text, std::string* bytes) {
  const Alphabet& a = TheAlphabet();
  bytes->clear();
  for (size_t i = 0; i < text.size();) {
    uint32_t cp;
    size_t len;
    if (!DecodeUtf8(text, i, &cp, &len) || cp >= 512 || a.cp_to_byte[cp] < 0) return false;
    bytes->push_back(static_cast<char>(a.cp_to_byte[cp]));
    i += len;
  }
  return true;
}

}  // namespace anneal
