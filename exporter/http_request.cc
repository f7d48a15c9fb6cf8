#include "exporter/http_request.h"

#include <cctype>

namespace gpuslice::exporter {
namespace {

bool EqualsIgnoringCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i]))) return false;
  return true;
}

std::string_view Trim(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t' || text.back() == '\r')) text.remove_suffix(1);
  return text;
}

// Whether a comma-separated header value holds `token` (any case).
bool HasToken(std::string_view value, std::string_view token) {
  while (!value.empty()) {
    const size_t comma = value.find(',');
    if (EqualsIgnoringCase(Trim(value.substr(0, comma)), token)) return true;
    if (comma == std::string_view::npos) break;
    value.remove_prefix(comma + 1);
  }
  return false;
}

bool ParseRequestLine(std::string_view line, RequestHead* head) {
  const size_t first = line.find(' ');
  const size_t last = line.rfind(' ');
  if (first == std::string_view::npos || first == last) return false;
  head->method = std::string(line.substr(0, first));
  std::string_view target = line.substr(first + 1, last - first - 1);
  const std::string_view version = line.substr(last + 1);
  if (head->method.empty() || target.empty() || target.front() != '/') return false;
  for (char c : head->method)
    if (!std::isupper(static_cast<unsigned char>(c))) return false;
  for (char c : target)
    if (static_cast<unsigned char>(c) <= ' ' || static_cast<unsigned char>(c) >= 0x7f) return false;
  if (version == "HTTP/1.1") head->http11 = true;
  else if (version != "HTTP/1.0") return false;
  head->path = std::string(target.substr(0, target.find('?')));
  return true;
}

bool ParseField(std::string_view line, RequestHead* head, bool* connection_close, bool* connection_keep_alive) {
  const size_t colon = line.find(':');
  if (colon == std::string_view::npos || colon == 0) return false;
  const std::string_view name = line.substr(0, colon);
  for (char c : name)
    if (c == ' ' || c == '\t') return false;  // RFC 9112: no space before the colon
  const std::string_view value = Trim(line.substr(colon + 1));
  if (EqualsIgnoringCase(name, "Connection")) {
    *connection_close = *connection_close || HasToken(value, "close");
    *connection_keep_alive = *connection_keep_alive || HasToken(value, "keep-alive");
  } else if (EqualsIgnoringCase(name, "Content-Length")) {
    if (value.empty()) return false;
    for (char c : value)
      if (!std::isdigit(static_cast<unsigned char>(c))) return false;
    if (value.find_first_not_of('0') != std::string_view::npos) head->has_body = true;
  } else if (EqualsIgnoringCase(name, "Transfer-Encoding")) {
    head->has_body = true;
  } else if (EqualsIgnoringCase(name, "Accept-Encoding")) {
    head->accept_encoding = std::string(value);
  }
  return true;
}

}  // namespace

HeadState ParseRequestHead(std::string_view buffer, RequestHead* head, size_t* head_bytes) {
  // A head ends at the first empty line (CRLF CRLF; a bare LF is accepted as RFC 9112 allows).
  size_t end = std::string_view::npos, after = 0;
  for (size_t at = buffer.find('\n'); at != std::string_view::npos; at = buffer.find('\n', at + 1)) {
    if (at + 1 < buffer.size() && buffer[at + 1] == '\n') {
      end = at + 1, after = at + 2;
      break;
    }
    if (at + 2 < buffer.size() && buffer[at + 1] == '\r' && buffer[at + 2] == '\n') {
      end = at + 1, after = at + 3;
      break;
    }
  }
  if (end == std::string_view::npos)
    return buffer.size() >= kMaxRequestHead ? HeadState::kTooLarge : HeadState::kIncomplete;
  if (after > kMaxRequestHead) return HeadState::kTooLarge;
  *head = RequestHead();
  *head_bytes = after;
  std::string_view rest = buffer.substr(0, end);
  bool first = true, close = false, keep_alive = false;
  while (!rest.empty()) {
    const size_t newline = rest.find('\n');
    std::string_view line = rest.substr(0, newline);
    rest.remove_prefix(newline == std::string_view::npos ? rest.size() : newline + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (first ? !ParseRequestLine(line, head) : !ParseField(line, head, &close, &keep_alive))
      return HeadState::kMalformed;
    first = false;
  }
  if (first) return HeadState::kMalformed;
  head->keep_alive = head->http11 ? !close : keep_alive && !close;
  return HeadState::kComplete;
}

}  // namespace gpuslice::exporter
