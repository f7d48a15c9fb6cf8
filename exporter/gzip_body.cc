#include "exporter/gzip_body.h"

#include <zlib.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>

namespace gpuslice::exporter {
namespace {

std::string Trim(const std::string& s, size_t begin, size_t end) {
  while (begin < end && std::isspace(static_cast<unsigned char>(s[begin]))) ++begin;
  while (end > begin && std::isspace(static_cast<unsigned char>(s[end - 1]))) --end;
  return s.substr(begin, end - begin);
}

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

bool AcceptsGzip(const std::string& accept_encoding) {
  // The quality of "gzip" (or "x-gzip") if named, else of "*" if named; -1 for neither.
  double gzip_q = -1, star_q = -1;
  size_t begin = 0;
  while (begin <= accept_encoding.size()) {
    size_t end = accept_encoding.find(',', begin);
    if (end == std::string::npos) end = accept_encoding.size();
    const std::string item = accept_encoding.substr(begin, end - begin);
    const size_t semicolon = item.find(';');
    const std::string coding = Lower(Trim(item, 0, semicolon == std::string::npos ? item.size() : semicolon));
    double q = 1;
    if (semicolon != std::string::npos) {
      const std::string param = Lower(Trim(item, semicolon + 1, item.size()));
      if (param.rfind("q=", 0) == 0) q = std::strtod(param.c_str() + 2, nullptr);
    }
    if (coding == "gzip" || coding == "x-gzip") {
      gzip_q = std::max(gzip_q, q);
    } else if (coding == "*") {
      star_q = q;
    }
    begin = end + 1;
  }
  return gzip_q >= 0 ? gzip_q > 0 : star_q > 0;
}

bool Gzip(const std::string& text, int level, std::string* out) {
  z_stream z{};
  // windowBits 15 + 16: the gzip header and trailer rather than zlib's.
  if (deflateInit2(&z, level, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) return false;
  out->resize(deflateBound(&z, text.size()));  // one call with Z_FINISH then always completes
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
  z.avail_in = static_cast<uInt>(text.size());
  z.next_out = reinterpret_cast<Bytef*>(out->data());
  z.avail_out = static_cast<uInt>(out->size());
  const int status = deflate(&z, Z_FINISH);
  out->resize(z.total_out);
  deflateEnd(&z);
  return status == Z_STREAM_END;
}

}  // namespace gpuslice::exporter
