// The s3:// backend of ObjectStore: the S3 REST API over libcurl, signed with SigV4
// (storage/sigv4.h); endpoint, region, credentials and path- or virtual-host addressing as the AWS
// CLI finds them (storage/aws_config.h). 500, 503 (SlowDown), dropped, reset, truncated and stalled
// responses are retried with exponential backoff and full jitter, at most ANNEAL_S3_MAX_ATTEMPTS (6)
// times within ANNEAL_S3_RETRY_BUDGET_S (300 s: a saturated server can stall a large part past the
// 30 s stall limit twice); 403 is an authentication error at once (exit 2),
// never retried. Objects above ANNEAL_S3_MULTIPART_MB (64) go up as multipart uploads of
// ANNEAL_S3_PART_MB (16) parts on ANNEAL_S3_PART_THREADS (4) threads. At most
// ANNEAL_S3_MAX_PER_PREFIX (16) requests run at once per key prefix.
#include <curl/curl.h>

#include <atomic>
#include <condition_variable>

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
#include "storage/aws_config.h"
#include "core/crypto.h"
#include "storage/s3_stats.h"
#include "storage/s3_xml.h"
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
  auto* r = static_cast<Response*>(out);
  if (r->body.empty()) {  // the whole body in one allocation (no regrowth copies of a large object)
    auto it = r->headers.find("content-length");
    if (it != r->headers.end()) r->body.reserve(std::strtoull(it->second.c_str(), nullptr, 10));
  }
  r->body.append(p, size * n);
  return size * n;
}

size_t OnHeader(char* p, size_t size, size_t n, void* out) {
  out = &static_cast<Response*>(out)->headers;
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

// At most `cap` requests at once per key prefix (the key up to its last '/'): S3 throttles per prefix,
// and one checkpoint's many parts should not starve the data channel's reads.
class PrefixLimiter {
 public:
  explicit PrefixLimiter(int cap) : cap_(cap) {}
  class Hold {
   public:
    Hold(PrefixLimiter* l, std::string p) : l_(l), p_(std::move(p)) {
      std::unique_lock<std::mutex> lk(l_->mu_);
      l_->cv_.wait(lk, [&] { return l_->in_use_[p_] < l_->cap_; });
      ++l_->in_use_[p_];
    }
    ~Hold() {
      std::lock_guard<std::mutex> lk(l_->mu_);
      if (--l_->in_use_[p_] == 0) l_->in_use_.erase(p_);
      l_->cv_.notify_all();
    }
    Hold(const Hold&) = delete;
    Hold& operator=(const Hold&) = delete;

   private:
    PrefixLimiter* l_;
    std::string p_;
  };
  static std::string PrefixOf(const std::string& key) {
    const size_t slash = key.rfind('/');
    return slash == std::string::npos ? "" : key.substr(0, slash);
  }

 private:
  int cap_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, int> in_use_;
};

int EnvInt(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::max(1, std::atoi(v)) : fallback;
}

double EnvDouble(const char* name, double fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::max(0.0, std::atof(v)) : fallback;
}

class S3ObjectStore : public ObjectStore {
 public:
  S3ObjectStore(AwsSettings settings, std::string bucket, std::string prefix, Clock& clock)
      : clock_(clock),
        endpoint_(settings.endpoint),
        region_(settings.region),
        creds_{settings.access_key, settings.secret_key, settings.session_token},
        virtual_host_(settings.virtual_host),
        credentials_from_(settings.credentials_from),
        bucket_(std::move(bucket)),
        prefix_(std::move(prefix)),
        limiter_(EnvInt("ANNEAL_S3_MAX_PER_PREFIX", 16)),
        max_attempts_(EnvInt("ANNEAL_S3_MAX_ATTEMPTS", 6)),
        retry_budget_s_(EnvDouble("ANNEAL_S3_RETRY_BUDGET_S", 300)),
        stall_s_(EnvInt("ANNEAL_S3_STALL_S", 30)),
        multipart_bytes_(static_cast<uint64_t>(EnvDouble("ANNEAL_S3_MULTIPART_MB", 64) * (1 << 20))),
        part_bytes_(std::max<uint64_t>(5 << 20, static_cast<uint64_t>(EnvDouble("ANNEAL_S3_PART_MB", 16) * (1 << 20)))),
        part_threads_(EnvInt("ANNEAL_S3_PART_THREADS", 4)) {
    const size_t scheme = endpoint_.find("://");
    scheme_ = scheme == std::string::npos ? "http://" : endpoint_.substr(0, scheme + 3);
    host_ = endpoint_.substr(scheme == std::string::npos ? 0 : scheme + 3);
    while (!host_.empty() && host_.back() == '/') host_.pop_back();
    if (virtual_host_) host_ = bucket_ + "." + host_;
  }

  Result<std::string> Get(const std::string& key, uint64_t offset, uint64_t length) override {
    return GetImpl(key, offset, length, "");
  }

  Result<std::string> GetIfMatch(const std::string& key, const std::string& etag, uint64_t offset,
                                 uint64_t length) override {
    return GetImpl(key, offset, length, etag);
  }

  Status Put(const std::string& key, std::string_view data) override {
    ANNEAL_RETURN_IF_ERROR(ValidateKey(key));
    if (data.size() > multipart_bytes_) return PutMultipart(key, data);
    PrefixLimiter::Hold hold(&limiter_, PrefixLimiter::PrefixOf(key));
    ANNEAL_ASSIGN_OR_RETURN(Response r, Call("PUT", ObjectPath(key), {}, {}, data));
    if (r.code != 200) return Failure("PUT", key, r);
    return Status::Ok();
  }

  Result<std::optional<ObjectInfo>> Head(const std::string& key) override {
    ANNEAL_RETURN_IF_ERROR(ValidateKey(key));
    PrefixLimiter::Hold hold(&limiter_, PrefixLimiter::PrefixOf(key));
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
    ANNEAL_ASSIGN_OR_RETURN(Response r, Call("GET", BucketPath(), q, {}, ""));
    if (r.code != 200) return Failure("LIST", prefix, r);
    return s3xml::ParseListPage(r.body, prefix_);
  }

  Status Delete(const std::string& key) override {
    ANNEAL_RETURN_IF_ERROR(ValidateKey(key));
    PrefixLimiter::Hold hold(&limiter_, PrefixLimiter::PrefixOf(key));
    ANNEAL_ASSIGN_OR_RETURN(Response r, Call("DELETE", ObjectPath(key), {}, {}, ""));
    if (r.code != 204 && r.code != 200 && r.code != 404) return Failure("DELETE", key, r);
    return Status::Ok();
  }

  std::string Describe() const override {
    return "s3://" + bucket_ + "/" + prefix_ + " at " + endpoint_ + (virtual_host_ ? " (virtual-host addressing)" : "");
  }

 private:
  Clock& clock_;  // the retries' backoff and budget
  Result<std::string> GetImpl(const std::string& key, uint64_t offset, uint64_t length, const std::string& etag) {
    ANNEAL_RETURN_IF_ERROR(ValidateKey(key));
    std::map<std::string, std::string> extra;
    if (offset > 0 || length != kToEnd) {
      if (length == 0) return std::string();
      extra["range"] = "bytes=" + std::to_string(offset) + "-" + (length == kToEnd ? "" : std::to_string(offset + length - 1));
    }
    if (!etag.empty()) extra["if-match"] = etag;
    PrefixLimiter::Hold hold(&limiter_, PrefixLimiter::PrefixOf(key));
    ANNEAL_ASSIGN_OR_RETURN(Response r, Call("GET", ObjectPath(key), {}, extra, ""));
    if (r.code == 404) return NotFound("no object '" + key + "' in " + Describe());
    if (r.code == 416) return InvalidInput("range starts at byte " + std::to_string(offset) + ", past the end of '" + key + "'");
    if (r.code == 412) {
      return PeerError("object '" + key + "' in " + Describe() + " changed while it was being read (its ETag is no longer " +
                       etag + "): another writer replaced it; read it again from the start");
    }
    if (r.code != 200 && r.code != 206) return Failure("GET", key, r);
    // Servers that ignore If-Match still name the version they sent.
    if (!etag.empty() && !r.headers["etag"].empty() && r.headers["etag"] != etag) {
      return PeerError("object '" + key + "' in " + Describe() + " changed while it was being read (ETag " +
                       r.headers["etag"] + ", not " + etag + "): another writer replaced it; read it again from the start");
    }
    return std::move(r.body);
  }

  // Parts of part_bytes_ uploaded by part_threads_ threads; any failure aborts the upload (no
  // orphaned parts left billed and invisible). CompleteMultipartUpload is retried by Call; if a retry
  // finds the upload gone (NoSuchUpload: the first attempt completed but its answer was lost), the
  // object is accepted only if HEAD shows this upload's size and multipart ETag.
  Status PutMultipart(const std::string& key, std::string_view data) {
    ANNEAL_ASSIGN_OR_RETURN(Response r, Call("POST", ObjectPath(key), {{"uploads", ""}}, {}, ""));
    if (r.code != 200) return Failure("CreateMultipartUpload", key, r);
    const std::string upload = s3xml::Unescape(s3xml::Tag(r.body, "UploadId"));
    if (upload.empty()) return PeerError("CreateMultipartUpload '" + key + "' on " + Describe() + " returned no UploadId");
    const size_t nparts = (data.size() + part_bytes_ - 1) / part_bytes_;
    std::vector<std::string> etags(nparts), md5s(nparts);
    std::vector<Status> errors(nparts);
    std::atomic<size_t> next{0};
    auto worker = [&] {
      for (size_t i; (i = next.fetch_add(1)) < nparts;) {
        const std::string_view part = data.substr(i * part_bytes_, part_bytes_);
        md5s[i] = Md5(part);
        PrefixLimiter::Hold hold(&limiter_, PrefixLimiter::PrefixOf(key));
        auto pr = Call("PUT", ObjectPath(key), {{"partNumber", std::to_string(i + 1)}, {"uploadId", upload}}, {}, part);
        if (!pr.ok()) {
          errors[i] = pr.status();
        } else if (pr->code != 200) {
          errors[i] = Failure("UploadPart " + std::to_string(i + 1), key, *pr);
        } else {
          etags[i] = pr->headers["etag"];
        }
        if (!errors[i].ok()) next = nparts;  // stop handing out parts
      }
    };
    std::vector<std::thread> threads;
    for (int t = 0; t < std::min<int>(part_threads_, static_cast<int>(nparts)); ++t) threads.emplace_back(worker);
    for (auto& t : threads) t.join();
    for (size_t i = 0; i < nparts; ++i) {
      if (!errors[i].ok() || etags[i].empty()) {
        (void)Call("DELETE", ObjectPath(key), {{"uploadId", upload}}, {}, "");  // AbortMultipartUpload
        if (errors[i].ok()) return PeerError("part " + std::to_string(i + 1) + " of '" + key + "' was not sent; upload aborted");
        return Status(errors[i].code(), errors[i].message() + " (multipart upload aborted)");
      }
    }
    std::string xml = "<CompleteMultipartUpload>";
    std::string all_md5;
    for (size_t i = 0; i < nparts; ++i) {
      xml += "<Part><PartNumber>" + std::to_string(i + 1) + "</PartNumber><ETag>" + etags[i] + "</ETag></Part>";
      all_md5 += md5s[i];
    }
    xml += "</CompleteMultipartUpload>";
    const std::string expect_etag = "\"" + HexLower(Md5(all_md5)) + "-" + std::to_string(nparts) + "\"";
    bool answer_lost = false;
    auto cr = Call("POST", ObjectPath(key), {{"uploadId", upload}}, {}, xml, /*complete=*/true, &answer_lost);
    if (cr.ok() && cr->code == 200 && cr->body.find("<Error>") == std::string::npos) return Status::Ok();
    if (answer_lost) {
      // An earlier attempt's answer was lost and a retry failed (S3: NoSuchUpload; some servers: 500):
      // the upload may have completed. Accept the object only if it is this upload: its size, and its
      // ETag as S3 computes it for multipart objects (MD5 of the parts' MD5s, "-N") or, for servers
      // that give multipart objects a plain MD5, the MD5 of the whole.
      ANNEAL_ASSIGN_OR_RETURN(auto info, Head(key));
      if (info && info->size == data.size() &&
          (info->etag == expect_etag || info->etag == "\"" + HexLower(Md5(data)) + "\"")) {
        return Status::Ok();
      }
      return PeerError("CompleteMultipartUpload of '" + key + "' on " + Describe() +
                       " found the upload gone, and the object there is not this upload (size " +
                       (info ? std::to_string(info->size) : std::string("none")) + ", ETag " +
                       (info ? info->etag : std::string("none")) + "; expected " + std::to_string(data.size()) + " and " +
                       expect_etag + ")");
    }
    (void)Call("DELETE", ObjectPath(key), {{"uploadId", upload}}, {}, "");
    if (!cr.ok()) return cr.status();
    return Failure("CompleteMultipartUpload", key, *cr);
  }

  std::string BucketPath() const { return virtual_host_ ? "/" : "/" + UriEncode(bucket_, true); }
  std::string ObjectPath(const std::string& key) const {
    return (virtual_host_ ? "" : "/" + UriEncode(bucket_, true)) + "/" + UriEncode(prefix_ + key, false);
  }

  Status Failure(const std::string& op, const std::string& key, const Response& r) const {
    const s3xml::ErrorBody e = s3xml::ParseError(r.body);
    const std::string& code = e.code;
    const std::string& msg = e.message;
    std::string what = op + " '" + key + "' on " + Describe() + " failed: HTTP " + std::to_string(r.code);
    if (!code.empty()) what += " " + code;
    if (!msg.empty()) what += " (" + msg + ")";
    // The server's id for the request, which its operators need to trace it.
    auto rid = r.headers.find("x-amz-request-id");
    const std::string id = rid != r.headers.end() ? rid->second : e.request_id;
    if (!id.empty()) what += " [request id " + id + "]";
    if (r.code == 403) {
      return InvalidInput(what + ": the credentials were refused (they came from " + credentials_from_ +
                          ") — check the access key and secret, and the bucket's permissions");
    }
    if (code == "NoSuchBucket") return InvalidInput(what + ": create the bucket, or fix the URI");
    if (r.code >= 500 || r.code == 0) return PeerError(what);
    return InvalidInput(what);
  }

  // The request's header lines, signed (SigV4) at this moment.
  std::vector<std::string> SignedHeaders(const std::string& method, const std::string& path,
                                         const std::map<std::string, std::string>& query,
                                         const std::map<std::string, std::string>& extra_headers,
                                         const std::string& payload_sha) const {
    SigV4Request req;
    req.method = method;
    req.path = path;
    req.query = query;
    req.payload_sha256 = payload_sha;
    const std::string date = AmzDate();
    req.headers = {{"host", host_}, {"x-amz-date", date}, {"x-amz-content-sha256", req.payload_sha256}};
    if (!creds_.session_token.empty()) req.headers["x-amz-security-token"] = creds_.session_token;
    for (const auto& [k, v] : extra_headers) req.headers[k] = v;
    const SigV4Result sig = SigV4Sign(req, creds_, date, region_);
    std::vector<std::string> lines;
    for (const auto& [k, v] : req.headers) {
      if (k != "host") lines.push_back(k + ": " + v);
    }
    lines.push_back("Authorization: " + sig.authorization);
    lines.push_back("Expect:");
    return lines;
  }

  std::string UrlOf(const std::string& path, const std::map<std::string, std::string>& query) const {
    std::string url = scheme_ + host_ + path;
    bool first = true;
    for (const auto& [k, v] : query) {
      url.append(first ? "?" : "&").append(UriEncode(k, true)).append("=").append(UriEncode(v, true));
      first = false;
    }
    return url;
  }

  // One HTTP exchange through curl, its answer into *r (code 0 when it got none).
  CURLcode Perform(const std::string& method, const std::string& url, const std::vector<std::string>& headers,
                   std::string_view body, Response* r) const {
    CURL* c = curl_easy_init();
    curl_slist* hs = nullptr;
    for (const std::string& h : headers) hs = curl_slist_append(hs, h.c_str());
    curl_easy_setopt(c, CURLOPT_URL, url.c_str());
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hs);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, OnBody);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, r);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, OnHeader);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, r);
    curl_easy_setopt(c, CURLOPT_BUFFERSIZE, 512L * 1024);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 10L);
    // A response that stalls (under 1 byte/s for stall_s_) counts as a dropped connection: retried.
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, static_cast<long>(stall_s_));
    if (method == "HEAD") {
      curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
    } else if (method == "PUT" || method == "POST") {
      curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method.c_str());
      curl_easy_setopt(c, CURLOPT_POSTFIELDS, body.data());
      curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
    } else if (method != "GET") {
      curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method.c_str());
    }
    const CURLcode rc = curl_easy_perform(c);
    if (rc == CURLE_OK) curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r->code);
    else r->curl_error = curl_easy_strerror(rc);
    curl_slist_free_all(hs);
    curl_easy_cleanup(c);
    return rc;
  }

  // One signed request, retried on 500, 503 (SlowDown) and failed, reset, truncated or stalled
  // connections, with exponential backoff and full jitter, within max_attempts_ and
  // retry_budget_s_. For CompleteMultipartUpload (complete), an attempt that got no answer sets
  // *lost_answer: the upload may have completed, and the caller checks before failing.
  Result<Response> Call(const std::string& method, const std::string& path, const std::map<std::string, std::string>& query,
                        const std::map<std::string, std::string>& extra_headers, std::string_view body,
                        bool complete = false, bool* lost_answer = nullptr) {
    static std::once_flag init;
    std::call_once(init, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
    thread_local std::mt19937_64 rng(std::random_device{}());
    const double start = clock_.Monotonic();
    const std::string payload_sha = Sha256Hex(body);
    Response r;
    int attempt = 0;
    S3Counters& counted = S3ProcessCounters();
    for (; attempt < max_attempts_; ++attempt) {
      if (attempt > 0) {
        const double cap = std::min(10.0, 0.1 * (1 << std::min(attempt, 10)));
        const double sleep = std::uniform_real_distribution<double>(0, cap)(rng);
        const double spent = clock_.Monotonic() - start;
        if (spent + sleep > retry_budget_s_) break;
        clock_.SleepFor(sleep);
      }
      r = Response();
      const CURLcode rc = Perform(method, UrlOf(path, query), SignedHeaders(method, path, query, extra_headers, payload_sha),
                                  body, &r);
      ++counted.requests;
      if (attempt > 0) ++counted.retries;
      if (r.code == 503) ++counted.throttled;
      counted.bytes_sent += body.size();
      counted.bytes_received += r.body.size();
      // A body shorter than its Content-Length fails in curl (CURLE_PARTIAL_FILE): retried too.
      if (rc != CURLE_OK && complete && lost_answer) *lost_answer = true;  // the server may have acted
      if (rc == CURLE_OK && r.code < 500) {
        // S3 may answer CompleteMultipartUpload 200 with an error inside the body: retried.
        if (!(complete && r.code == 200 && r.body.find("<Error>") != std::string::npos)) return r;
      }
    }
    ++counted.failures;
    if (!r.curl_error.empty()) {
      return PeerError(method + " " + path + " on " + endpoint_ + " failed after " + std::to_string(attempt) +
                       " attempt(s): " + r.curl_error + " (is the S3 endpoint up? ANNEAL_S3_ENDPOINT)");
    }
    return r;  // a 5xx after the last retry: the caller names it
  }

  std::string endpoint_, region_;
  SigV4Credentials creds_;
  bool virtual_host_;
  std::string credentials_from_;
  std::string bucket_, prefix_, host_, scheme_;
  PrefixLimiter limiter_;
  int max_attempts_;
  double retry_budget_s_;
  int stall_s_;
  uint64_t multipart_bytes_, part_bytes_;
  int part_threads_;
};

}  // namespace

Result<std::unique_ptr<ObjectStore>> OpenS3ObjectStore(const std::string& uri, const StorageVars& vars, Clock& clock) {
  // s3://bucket[/prefix]
  const std::string rest = uri.substr(5);
  const size_t slash = rest.find('/');
  const std::string bucket = rest.substr(0, slash);
  std::string prefix = slash == std::string::npos ? "" : rest.substr(slash + 1);
  if (bucket.empty()) return InvalidInput("S3 URI '" + uri + "' names no bucket: use s3://bucket/prefix");
  if (!prefix.empty() && prefix.back() != '/') prefix += '/';
  ANNEAL_ASSIGN_OR_RETURN(AwsSettings settings, ResolveAwsSettings([&](const char* name) -> const char* {
    auto it = vars.find(name);
    return it != vars.end() ? it->second.c_str() : std::getenv(name);
  }));
  return std::unique_ptr<ObjectStore>(new S3ObjectStore(std::move(settings), bucket, prefix, clock));
}

}  // namespace anneal
