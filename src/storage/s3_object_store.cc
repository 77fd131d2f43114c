// The s3:// backend of ObjectStore: the S3 REST API over libcurl, signed with SigV4
// (storage/sigv4.h), path-style addressing against a custom endpoint (ANNEAL_S3_ENDPOINT or
// AWS_ENDPOINT_URL; region AWS_REGION / AWS_DEFAULT_REGION, default us-east-1), credentials from
// AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY / AWS_SESSION_TOKEN. 500, 503 and dropped connections are
// retried with exponential backoff and full jitter (5 attempts); 403 is an authentication error at
// once (exit 2), never retried.
#include <curl/curl.h>

#include <cctype>
#include <chrono>
#include <cstring>
#include <map>
#include <cstdlib>
#include <ctime>
#include <mutex>
#include <random>
#include <thread>

#include "storage/object_store.h"
#include "storage/sigv4.h"

namespace anneal {

namespace {

struct Response {
  long code = 0;
  std::string body;
  std::map<std::string, std::string> headers;  // lower-case names
  std::string curl_error;
};

size_t OnBody(char* p, size_t size, size_t n, void* out) {
  static_cast<std::string*>(out)->append(p, size * n);
  return size * n;
}

size_t OnHeader(char* p, size_t size, size_t n, void* out) {
  std::string line(p, size * n);
  const size_t colon = line.find(':');
  if (colon != std::string::npos) {
    std::string name = line.substr(0, colon);
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    std::string value = line.substr(colon + 1);
    while (!value.empty() && (value.front() == ' ')) value.erase(0, 1);
    while (!value.empty() && (value.back() == '\r' || value.back() == '\n' || value.back() == ' ')) value.pop_back();
    (*static_cast<std::map<std::string, std::string>*>(out))[name] = value;
  }
  return size * n;
}

std::string AmzDate() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y%m%dT%H%M%SZ", &tm);
  return buf;
}

// The text of the first <tag>...</tag> after pos (XML from S3 is flat enough for this).
std::string Tag(const std::string& xml, const std::string& tag, size_t from = 0, size_t* end = nullptr) {
  const std::string open = "<" + tag + ">", close = "</" + tag + ">";
  const size_t a = xml.find(open, from);
  if (a == std::string::npos) return "";
  const size_t b = xml.find(close, a);
  if (b == std::string::npos) return "";
  if (end) *end = b + close.size();
  return xml.substr(a + open.size(), b - a - open.size());
}

std::string XmlUnescape(std::string s) {
  const std::pair<const char*, const char*> kEntities[] = {
      {"&lt;", "<"}, {"&gt;", ">"}, {"&quot;", "\""}, {"&apos;", "'"}, {"&amp;", "&"}};
  for (auto [from, to] : kEntities) {
    for (size_t p = 0; (p = s.find(from, p)) != std::string::npos; p += std::strlen(to)) s.replace(p, std::strlen(from), to);
  }
  return s;
}

class S3ObjectStore : public ObjectStore {
 public:
  S3ObjectStore(std::string endpoint, std::string region, SigV4Credentials creds, std::string bucket, std::string prefix)
      : endpoint_(std::move(endpoint)),
        region_(std::move(region)),
        creds_(std::move(creds)),
        bucket_(std::move(bucket)),
        prefix_(std::move(prefix)) {
    const size_t scheme = endpoint_.find("://");
    host_ = endpoint_.substr(scheme == std::string::npos ? 0 : scheme + 3);
    while (!host_.empty() && host_.back() == '/') host_.pop_back();
  }

  Result<std::string> Get(const std::string& key, uint64_t offset, uint64_t length) override {
    ANNEAL_RETURN_IF_ERROR(ValidateKey(key));
    std::map<std::string, std::string> extra;
    if (offset > 0 || length != kToEnd) {
      if (length == 0) return std::string();
      extra["range"] = "bytes=" + std::to_string(offset) + "-" + (length == kToEnd ? "" : std::to_string(offset + length - 1));
    }
    ANNEAL_ASSIGN_OR_RETURN(Response r, Call("GET", ObjectPath(key), {}, extra, ""));
    if (r.code == 404) return NotFound("no object '" + key + "' in " + Describe());
    if (r.code == 416) return InvalidInput("range starts at byte " + std::to_string(offset) + ", past the end of '" + key + "'");
    if (r.code != 200 && r.code != 206) return Failure("GET", key, r);
    return std::move(r.body);
  }

  Status Put(const std::string& key, std::string_view data) override {
    ANNEAL_RETURN_IF_ERROR(ValidateKey(key));
    ANNEAL_ASSIGN_OR_RETURN(Response r, Call("PUT", ObjectPath(key), {}, {}, data));
    if (r.code != 200) return Failure("PUT", key, r);
    return Status::Ok();
  }

  Result<std::optional<ObjectInfo>> Head(const std::string& key) override {
    ANNEAL_RETURN_IF_ERROR(ValidateKey(key));
    ANNEAL_ASSIGN_OR_RETURN(Response r, Call("HEAD", ObjectPath(key), {}, {}, ""));
    if (r.code == 404) return std::optional<ObjectInfo>();
    if (r.code != 200) return Failure("HEAD", key, r);
    ObjectInfo info;
    info.key = key;
    info.size = std::strtoull(r.headers["content-length"].c_str(), nullptr, 10);
    info.etag = r.headers["etag"];
    return std::optional<ObjectInfo>(info);
  }

  Result<ListPage> List(const std::string& prefix, const std::string& continuation, int max_keys) override {
    if (max_keys < 1) return InvalidInput("list: max_keys must be at least 1");
    std::map<std::string, std::string> q = {{"list-type", "2"}, {"prefix", prefix_ + prefix},
                                            {"max-keys", std::to_string(max_keys)}};
    if (!continuation.empty()) q["continuation-token"] = continuation;
    ANNEAL_ASSIGN_OR_RETURN(Response r, Call("GET", "/" + UriEncode(bucket_, true), q, {}, ""));
    if (r.code != 200) return Failure("LIST", prefix, r);
    ListPage page;
    size_t pos = 0, end = 0;
    for (;;) {
      const std::string c = Tag(r.body, "Contents", pos, &end);
      if (c.empty()) break;
      pos = end;
      ObjectInfo info;
      info.key = XmlUnescape(Tag(c, "Key")).substr(prefix_.size());
      info.size = std::strtoull(Tag(c, "Size").c_str(), nullptr, 10);
      info.etag = XmlUnescape(Tag(c, "ETag"));
      page.objects.push_back(std::move(info));
    }
    if (Tag(r.body, "IsTruncated") == "true") page.next = XmlUnescape(Tag(r.body, "NextContinuationToken"));
    return page;
  }

  Status Delete(const std::string& key) override {
    ANNEAL_RETURN_IF_ERROR(ValidateKey(key));
    ANNEAL_ASSIGN_OR_RETURN(Response r, Call("DELETE", ObjectPath(key), {}, {}, ""));
    if (r.code != 204 && r.code != 200 && r.code != 404) return Failure("DELETE", key, r);
    return Status::Ok();
  }

  std::string Describe() const override {
    return "s3://" + bucket_ + "/" + prefix_ + " at " + endpoint_;
  }

 private:
  std::string ObjectPath(const std::string& key) const {
    return "/" + UriEncode(bucket_, true) + "/" + UriEncode(prefix_ + key, false);
  }

  Status Failure(const std::string& op, const std::string& key, const Response& r) const {
    const std::string code = Tag(r.body, "Code"), msg = Tag(r.body, "Message");
    const std::string what = op + " '" + key + "' on " + Describe() + " failed: HTTP " + std::to_string(r.code) +
                             (code.empty() ? "" : " " + code) + (msg.empty() ? "" : " (" + msg + ")");
    if (r.code == 403) {
      return InvalidInput(what + ": the credentials were refused — check AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY");
    }
    if (code == "NoSuchBucket") return InvalidInput(what + ": create the bucket, or fix the URI");
    if (r.code >= 500 || r.code == 0) return PeerError(what);
    return InvalidInput(what);
  }

  // One signed request, retried on 500/503/connection failures (backoff with full jitter).
  Result<Response> Call(const std::string& method, const std::string& path, const std::map<std::string, std::string>& query,
                        const std::map<std::string, std::string>& extra_headers, std::string_view body) {
    static std::once_flag init;
    std::call_once(init, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
    std::mt19937_64 rng(std::random_device{}());
    Response r;
    for (int attempt = 0; attempt < 5; ++attempt) {
      if (attempt > 0) {
        const double cap = std::min(8.0, 0.1 * (1 << attempt));
        std::this_thread::sleep_for(std::chrono::duration<double>(std::uniform_real_distribution<double>(0, cap)(rng)));
      }
      r = Response();
      SigV4Request req;
      req.method = method;
      req.path = path;
      req.query = query;
      req.payload_sha256 = Sha256Hex(body);
      const std::string date = AmzDate();
      req.headers = {{"host", host_}, {"x-amz-date", date}, {"x-amz-content-sha256", req.payload_sha256}};
      for (const auto& [k, v] : extra_headers) req.headers[k] = v;
      const SigV4Result sig = SigV4Sign(req, creds_, date, region_);
      std::string url = endpoint_ + path;
      bool first = true;
      for (const auto& [k, v] : query) {
        url.append(first ? "?" : "&").append(UriEncode(k, true)).append("=").append(UriEncode(v, true));
        first = false;
      }
      CURL* c = curl_easy_init();
      curl_slist* hs = nullptr;
      for (const auto& [k, v] : req.headers) {
        if (k != "host") hs = curl_slist_append(hs, (k + ": " + v).c_str());
      }
      if (!creds_.session_token.empty()) hs = curl_slist_append(hs, ("x-amz-security-token: " + creds_.session_token).c_str());
      hs = curl_slist_append(hs, ("Authorization: " + sig.authorization).c_str());
      hs = curl_slist_append(hs, "Expect:");
      curl_easy_setopt(c, CURLOPT_URL, url.c_str());
      curl_easy_setopt(c, CURLOPT_HTTPHEADER, hs);
      curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, OnBody);
      curl_easy_setopt(c, CURLOPT_WRITEDATA, &r.body);
      curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, OnHeader);
      curl_easy_setopt(c, CURLOPT_HEADERDATA, &r.headers);
      curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
      curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 10L);
      if (method == "HEAD") {
        curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
      } else if (method == "PUT") {
        curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, "PUT");
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body.data());
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
      } else if (method != "GET") {
        curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method.c_str());
      }
      const CURLcode rc = curl_easy_perform(c);
      if (rc == CURLE_OK) curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r.code);
      else r.curl_error = curl_easy_strerror(rc);
      curl_slist_free_all(hs);
      curl_easy_cleanup(c);
      if (rc == CURLE_OK && r.code < 500) return r;
    }
    if (!r.curl_error.empty()) {
      return PeerError(method + " " + path + " on " + endpoint_ + " failed after 5 attempts: " + r.curl_error +
                       " (is the S3 endpoint up? ANNEAL_S3_ENDPOINT)");
    }
    return r;  // a 5xx after the last retry: the caller names it
  }

  std::string endpoint_, region_;
  SigV4Credentials creds_;
  std::string bucket_, prefix_, host_;
};

std::string EnvOr(const char* a, const char* b, const std::string& fallback) {
  if (const char* v = std::getenv(a); v && *v) return v;
  if (b) {
    if (const char* v = std::getenv(b); v && *v) return v;
  }
  return fallback;
}

}  // namespace

Result<std::unique_ptr<ObjectStore>> OpenS3ObjectStore(const std::string& uri) {
  // s3://bucket[/prefix]
  const std::string rest = uri.substr(5);
  const size_t slash = rest.find('/');
  const std::string bucket = rest.substr(0, slash);
  std::string prefix = slash == std::string::npos ? "" : rest.substr(slash + 1);
  if (bucket.empty()) return InvalidInput("S3 URI '" + uri + "' names no bucket: use s3://bucket/prefix");
  if (!prefix.empty() && prefix.back() != '/') prefix += '/';
  const std::string endpoint = EnvOr("ANNEAL_S3_ENDPOINT", "AWS_ENDPOINT_URL", "");
  if (endpoint.empty()) {
    return InvalidInput("s3:// needs an endpoint: set ANNEAL_S3_ENDPOINT (or AWS_ENDPOINT_URL), e.g. http://127.0.0.1:7480");
  }
  SigV4Credentials c{EnvOr("AWS_ACCESS_KEY_ID", nullptr, ""), EnvOr("AWS_SECRET_ACCESS_KEY", nullptr, ""),
                     EnvOr("AWS_SESSION_TOKEN", nullptr, "")};
  if (c.access_key.empty() || c.secret_key.empty()) {
    return InvalidInput("s3:// needs credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY");
  }
  return std::unique_ptr<ObjectStore>(
      new S3ObjectStore(endpoint, EnvOr("AWS_REGION", "AWS_DEFAULT_REGION", "us-east-1"), c, bucket, prefix));
}

}  // namespace anneal
