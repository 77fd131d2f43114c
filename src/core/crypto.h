// SHA-256, HMAC-SHA256 and MD5 (OpenSSL's, the one user of it), for S3 signatures (storage/sigv4), token hashes and package
// checksums (control/, cli/) and webhook signatures (control/webhooks).
#pragma once

#include <string>
#include <string_view>

namespace anneal {

// Lower-case hex SHA-256 of data.
std::string Sha256Hex(std::string_view data);
// Lower-case hex of raw bytes (a digest or MAC).
std::string HexLower(std::string_view bytes);
// SHA-256 of data fed in pieces (a streamed upload): Update as it arrives, then Hex once.
class Sha256Stream {
 public:
  Sha256Stream();
  ~Sha256Stream();
  Sha256Stream(const Sha256Stream&) = delete;
  Sha256Stream& operator=(const Sha256Stream&) = delete;
  void Update(std::string_view data);
  std::string Hex();

 private:
  void* ctx_;  // EVP_MD_CTX
};
// Raw MD5 (16 bytes): S3's Content-MD5 and ETags, never for security.
std::string Md5(std::string_view data);
// Raw HMAC-SHA256 (32 bytes).
std::string HmacSha256(std::string_view key, std::string_view data);
// Whether a == b, in a time that depends on their length only (OpenSSL's CRYPTO_memcmp): for a mac
// or a secret compared with what an untrusted peer sent.
bool EqualInConstantTime(std::string_view a, std::string_view b);
// Standard base64 (with padding), for bytes in JSON (anneal exec's streams). Decoding malformed
// text gives "" and *ok = false.
std::string Base64Encode(std::string_view bytes);
std::string Base64Decode(std::string_view text, bool* ok = nullptr);
// Lower-case hex of `bytes` bytes from /dev/urandom (tokens, idempotency keys); aborts when the
// system has no randomness rather than issue guessable secrets.
std::string RandomHex(size_t bytes);

}  // namespace anneal
