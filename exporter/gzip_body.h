// The /metrics page compressed by the exporter itself. Debian's compiled cpp-httplib (0.11)
// compresses text bodies at zlib's default level 6 (and with brotli at its slowest quality when a
// client offers "br"), which cannot be configured: on the 1 MB page of 64 tenants on 8 GPUs that
// alone broke the 5 ms scrape target. Level 1 costs a third as much for a page a little larger
// (docs/observability.md, "Cost"). main.cc hands the result to httplib as a content provider of
// known length, which httplib sends as it is.
#pragma once

#include <string>

namespace gpuslice::exporter {

// zlib's fastest level: deflate's matching is what costs, and the page's repeated label sets
// compress well even so.
constexpr int kGzipLevel = 1;

// Whether an Accept-Encoding header value lets the response be gzip-encoded (RFC 9110 12.5.3):
// "gzip", "x-gzip" or "*" with a quality above 0; an explicit "gzip;q=0" refuses it even when
// "*" is offered. An empty or missing header means identity only (what curl sends by default).
bool AcceptsGzip(const std::string& accept_encoding);

// `text` in the gzip format (RFC 1952) at `level`; false only if zlib fails (out of memory).
bool Gzip(const std::string& text, int level, std::string* out);

}  // namespace gpuslice::exporter
