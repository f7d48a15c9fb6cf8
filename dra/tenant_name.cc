#include "dra/tenant_name.h"

#include <openssl/evp.h>

#include <algorithm>
#include <iterator>
#include <string_view>

#include <fmt/format.h>

namespace gpuslice::dra {
namespace {

constexpr size_t kMaxTenant = 63;   // the shim's GPUSLICE_TENANT
constexpr size_t kHashDigits = 20;  // 80 bits
constexpr size_t kKeptPrefix = kMaxTenant - 1 - kHashDigits;

bool LowerAlphanumeric(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

// A DNS label (a namespace) or a DNS subdomain (a claim's name), as the API server requires.
bool KubernetesName(std::string_view name, bool dots_allowed) {
  if (name.empty() || !LowerAlphanumeric(name.front()) || !LowerAlphanumeric(name.back())) return false;
  for (const char c : name) {
    if (!LowerAlphanumeric(c) && c != '-' && !(dots_allowed && c == '.')) return false;
  }
  return true;
}

bool TenantCharacter(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
}

// The SHA-256 of the two names, length-prefixed so that no other pair gives the same input.
std::string HashDigits(const std::string& claim_namespace, const std::string& claim_name) {
  const std::string input = fmt::format("{}:{}/{}", claim_namespace.size(), claim_namespace, claim_name);
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  if (EVP_Digest(input.data(), input.size(), digest, &length, EVP_sha256(), nullptr) != 1) length = 0;
  std::string hex;
  for (unsigned int i = 0; i < length && hex.size() < kHashDigits; ++i)
    fmt::format_to(std::back_inserter(hex), "{:02x}", digest[i]);
  // EVP_Digest does not fail for SHA-256 over memory. Were it to, the '!' makes a name the shim's
  // parser refuses: the claim fails rather than sharing a shorter, collision-prone name.
  if (hex.size() != kHashDigits) hex = "!sha256-failed";
  return hex;
}

}  // namespace

std::string TenantName(const std::string& claim_namespace, const std::string& claim_name) {
  std::string tenant = fmt::format("{}.{}", claim_namespace, claim_name);
  if (tenant.size() <= kMaxTenant && KubernetesName(claim_namespace, false) && KubernetesName(claim_name, true)) {
    return tenant;
  }
  tenant.resize(std::min(tenant.size(), kKeptPrefix));
  for (char& c : tenant) {
    if (!TenantCharacter(c)) c = '-';
  }
  return fmt::format("{}_{}", tenant, HashDigits(claim_namespace, claim_name));
}

}  // namespace gpuslice::dra
