// The gpuslice tenant of a claim (its containers' GPUSLICE_TENANT): every container of every pod
// that shares the claim shares its booking, and no two claims share a tenant, whatever they are
// named.
#pragma once

#include <string>

namespace gpuslice::dra {

// "<namespace>.<name>" when that is at most the shim's 63 characters and the two are Kubernetes
// names (a namespace is a DNS label, without '.', so the name splits one way only). Otherwise its
// first 42 characters, with any character a tenant name cannot hold made '-', then '_' and 20 hex
// digits of the SHA-256 of the namespace and name: no Kubernetes name holds '_', so a shortened
// name never equals a whole one, and two shortened names are equal only for an 80-bit collision
// of SHA-256, which nobody can aim for.
std::string TenantName(const std::string& claim_namespace, const std::string& claim_name);

}  // namespace gpuslice::dra
