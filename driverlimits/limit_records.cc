#include "driverlimits/limit_records.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "common/replace_file.h"

namespace gpuslice::driverlimits {
namespace {

constexpr char kSuffix[] = ".json";

bool FileNamePart(const std::string& text) {
  if (text.empty() || text.size() > 128 || text[0] == '.') return false;
  for (char c : text) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
                    c == '_' || c == '.';
    if (!ok) return false;
  }
  return true;
}

std::string RecordPath(const std::string& state_dir, const LimitRecord& record) {
  return RecordsDir(state_dir) + "/" + record.container + "." + record.gpu_uuid + kSuffix;
}

}  // namespace

std::string RecordsDir(const std::string& state_dir) { return state_dir + "/driver-limits"; }

Status WriteRecord(const std::string& state_dir, const LimitRecord& record) {
  if (!FileNamePart(record.container) || !FileNamePart(record.gpu_uuid)) {
    return Status::InvalidArgument("container ID '" + record.container + "' or GPU '" + record.gpu_uuid +
                                   "' is not 1 to 128 of A-Z a-z 0-9 . _ -");
  }
  const std::string dir = RecordsDir(state_dir);
  if (mkdir(dir.c_str(), 0750) != 0 && errno != EEXIST)
    return Status::Error("cannot create " + dir + ": " + std::strerror(errno));
  const nlohmann::json json = {{"container", record.container}, {"tenant", record.tenant}, {"gpu", record.gpu_uuid},
                               {"cgroup", record.cgroup},       {"soft", record.soft},     {"hard", record.hard}};
  const std::string path = RecordPath(state_dir, record);
  if (Status written = ReplaceFile(path, json.dump() + "\n"); !written.ok())
    return Status::Error("cannot write " + path + ": " + written.message());
  return Status::Ok();
}

std::vector<LimitRecord> ReadRecords(const std::string& state_dir) {
  std::vector<LimitRecord> records;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(RecordsDir(state_dir), error)) {
    if (!entry.is_regular_file(error) || entry.path().extension() != kSuffix) continue;
    std::ifstream in(entry.path());
    std::ostringstream text;
    text << in.rdbuf();
    const nlohmann::json json = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
    if (!json.is_object()) continue;
    LimitRecord record;
    record.container = json.value("container", "");
    record.tenant = json.value("tenant", "");
    record.gpu_uuid = json.value("gpu", "");
    record.cgroup = json.value("cgroup", "");
    if (!json.contains("soft") || !json["soft"].is_number_unsigned() || !json.contains("hard") ||
        !json["hard"].is_number_unsigned() || record.cgroup.empty() || record.gpu_uuid.empty())
      continue;
    record.soft = json["soft"].get<uint64_t>();
    record.hard = json["hard"].get<uint64_t>();
    records.push_back(std::move(record));
  }
  return records;
}

std::vector<LimitRecord> RecordsOf(const std::string& state_dir, const std::string& container) {
  std::vector<LimitRecord> mine;
  for (LimitRecord& record : ReadRecords(state_dir))
    if (record.container == container) mine.push_back(std::move(record));
  return mine;
}

Status RemoveRecord(const std::string& state_dir, const LimitRecord& record) {
  const std::string path = RecordPath(state_dir, record);
  if (std::remove(path.c_str()) != 0 && errno != ENOENT)
    return Status::Error("cannot remove " + path + ": " + std::strerror(errno));
  return Status::Ok();
}

}  // namespace gpuslice::driverlimits
