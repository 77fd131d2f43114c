#include "core/crypto.h"

#include <openssl/evp.h>
#include <openssl/crypto.h>
#include <openssl/hmac.h>

#include <cstdio>
#include <cstdlib>

#include "core/check.h"

namespace anneal {

namespace {
std::string Hex(const unsigned char* p, size_t n) {
  static const char* kDigits = "0123456789abcdef";
  std::string s(2 * n, '0');
  for (size_t i = 0; i < n; ++i) {
    s[2 * i] = kDigits[p[i] >> 4];
    s[2 * i + 1] = kDigits[p[i] & 15];
  }
  return s;
}
}  // namespace

std::string HexLower(std::string_view bytes) {
  return Hex(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size());
}

std::string Md5(std::string_view data) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(data.data(), data.size(), md, &len, EVP_md5(), nullptr);
  return std::string(reinterpret_cast<char*>(md), len);
}

std::string Sha256Hex(std::string_view data) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(data.data(), data.size(), md, &len, EVP_sha256(), nullptr);
  return Hex(md, len);
}

Sha256Stream::Sha256Stream() : ctx_(EVP_MD_CTX_new()) { EVP_DigestInit_ex(static_cast<EVP_MD_CTX*>(ctx_), EVP_sha256(), nullptr); }
Sha256Stream::~Sha256Stream() { EVP_MD_CTX_free(static_cast<EVP_MD_CTX*>(ctx_)); }
void Sha256Stream::Update(std::string_view data) { EVP_DigestUpdate(static_cast<EVP_MD_CTX*>(ctx_), data.data(), data.size()); }
std::string Sha256Stream::Hex() {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_DigestFinal_ex(static_cast<EVP_MD_CTX*>(ctx_), md, &len);
  return anneal::Hex(md, len);
}

std::string HmacSha256(std::string_view key, std::string_view data) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), reinterpret_cast<const unsigned char*>(data.data()),
       data.size(), md, &len);
  return std::string(reinterpret_cast<const char*>(md), len);
}

std::string Base64Encode(std::string_view bytes) {
  std::string out(4 * ((bytes.size() + 2) / 3), '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(bytes.data()), static_cast<int>(bytes.size()));
  out.resize(static_cast<size_t>(n));
  return out;
}

std::string Base64Decode(std::string_view text, bool* ok) {
  if (ok) *ok = false;
  if (text.size() % 4 != 0) return "";
  std::string out(3 * text.size() / 4, '\0');
  const int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(text.data()), static_cast<int>(text.size()));
  if (n < 0) return "";
  size_t len = static_cast<size_t>(n);  // EVP_DecodeBlock counts the padding as zero bytes
  if (!text.empty() && text.back() == '=') --len;
  if (text.size() > 1 && text[text.size() - 2] == '=') --len;
  out.resize(len);
  if (ok) *ok = true;
  return out;
}

std::string RandomHex(size_t bytes) {
  std::string raw(bytes, '\0');
  FILE* f = std::fopen("/dev/urandom", "rb");
  const size_t got = f ? std::fread(raw.data(), 1, bytes, f) : 0;
  if (f) std::fclose(f);
  ANNEAL_CHECK(got == bytes, "the system's random source (/dev/urandom) gave fewer bytes than asked");
  return HexLower(raw);
}

bool EqualInConstantTime(std::string_view a, std::string_view b) {
  return a.size() == b.size() && (a.empty() || CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0);
}

}  // namespace anneal
