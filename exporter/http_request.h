// The head of an HTTP/1.x request as gpuslice-exporter reads it: a request line and header fields,
// at most kMaxRequestHead bytes (a longer head is refused, never buffered: a client sending
// gigabytes of header must cost the exporter no more than this). Only what the exporter answers
// by is kept. A pure function of the bytes, so that the server and the tests read heads alike.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace gpuslice::exporter {

inline constexpr size_t kMaxRequestHead = 8192;

struct RequestHead {
  std::string method;  // "GET"
  std::string path;    // "/metrics", the query string cut off
  bool http11 = false;
  bool keep_alive = false;  // HTTP/1.1 unless "Connection: close"; HTTP/1.0 only with "keep-alive"
  bool has_body = false;    // a Content-Length above 0 or any Transfer-Encoding
  std::string accept_encoding;
};

enum class HeadState {
  kIncomplete,  // no blank line yet, and within kMaxRequestHead: read more
  kComplete,    // *head_bytes is the head's length (the blank line included)
  kTooLarge,    // no blank line within kMaxRequestHead bytes: 431
  kMalformed,   // not an HTTP/1.0 or 1.1 request head: 400
};

// Parses the head at the start of `buffer` into *head.
HeadState ParseRequestHead(std::string_view buffer, RequestHead* head, size_t* head_bytes);

}  // namespace gpuslice::exporter
