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
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
  z.avail_in = static_cast<uInt>(text.size());
  // The page compresses ~30:1, so an eighth of it is room enough, grown if not. Not
  // deflateBound's worst case: resize() writes zeros over all of it, which made a megabyte
  // resident (and cost its time) for the ~35 KB that deflate writes.
  out->resize(std::max<size_t>(text.size() / 8, 16 << 10));
  int status;
  do {
    if (z.total_out == out->size()) out->resize(out->size() * 2);
    z.next_out = reinterpret_cast<Bytef*>(out->data() + z.total_out);
    z.avail_out = static_cast<uInt>(out->size() - z.total_out);
    status = deflate(&z, Z_FINISH);
  } while (status == Z_OK);  // with Z_FINISH: the output is full and more is to come
  out->resize(z.total_out);
  deflateEnd(&z);
  return status == Z_STREAM_END;
}

}  // namespace gpuslice::exporter
