// AWS Signature Version 4 for S3 requests (the signing the S3 client of src/storage needs; written by
// hand because no Debian library does it without pulling in an SDK — docs/architecture.md).
//
// Sign() builds the canonical request (method, URI-encoded path, sorted query, sorted lower-cased
// headers, signed header list, payload hash), the string to sign (AWS4-HMAC-SHA256, timestamp,
// scope date/region/service/aws4_request, SHA-256 of the canonical request), derives the signing key
// (HMAC-SHA256 chain from "AWS4" + secret over date, region, service, "aws4_request") and returns the
// Authorization header value. Pure functions of their inputs (the time is passed in): thread-safe.
#pragma once

#include <map>
#include <string>
#include <string_view>

namespace anneal {

struct SigV4Credentials {
  std::string access_key;
  std::string secret_key;
  std::string session_token;  // AWS_SESSION_TOKEN; empty when none (sent as x-amz-security-token)
};

struct SigV4Request {
  std::string method;                          // "GET", "PUT", ...
  std::string path;                            // "/bucket/key" as sent, already URI-encoded (UriEncode)
  std::map<std::string, std::string> query;    // decoded names and values; encoded while signing
  std::map<std::string, std::string> headers;  // every header to sign (host, x-amz-date, x-amz-content-sha256, ...)
  std::string payload_sha256;                  // hex SHA-256 of the body, or "UNSIGNED-PAYLOAD"
};

struct SigV4Result {
  std::string authorization;     // the Authorization header value
  std::string canonical_request;  // for error messages when a server rejects the signature
  std::string string_to_sign;
};

// amz_date: "YYYYMMDDTHHMMSSZ" (the request's x-amz-date); region e.g. "us-east-1"; service "s3".
SigV4Result SigV4Sign(const SigV4Request& r, const SigV4Credentials& c, const std::string& amz_date,
                      const std::string& region, const std::string& service = "s3");

// S3's URI encoding: unreserved characters (A-Z a-z 0-9 - _ . ~) kept, everything else %XX
// (uppercase); '/' kept when encode_slash is false (object key paths).
std::string UriEncode(std::string_view s, bool encode_slash);

}  // namespace anneal
