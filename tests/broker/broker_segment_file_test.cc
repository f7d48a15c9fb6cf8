// The state file fails closed: anything but a compatible, non-world-writable regular file is
// refused with one line naming the file and what would be valid. Creation sets the modes
// explicitly, whatever the umask.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdio>
#include <filesystem>
#include <random>
#include <vector>

#include "broker/broker.h"
#include "broker/segment_layout.h"
#include "broker/snapshot.h"
#include "tests/support/broker_test_names.h"

namespace gpuslice::broker {
namespace {

mode_t ModeOf(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(stat(path.c_str(), &st), 0) << path;
  return st.st_mode & 07777;
}

void WriteAt(const std::string& path, off_t offset, const void* data, size_t size) {
  const int fd = open(path.c_str(), O_WRONLY);
  ASSERT_GE(fd, 0) << path;
  ASSERT_EQ(pwrite(fd, data, size, offset), static_cast<ssize_t>(size));
  close(fd);
}

class BrokerSegmentFileTest : public ::testing::Test {
 protected:
  // Creates a valid state file (with one tenant holding memory) and lets it go.
  void CreateValidFile() {
    std::string error;
    auto broker = ValueOf(Broker::Attach(dir_.state_dir()));
    ASSERT_TRUE(broker);
    ASSERT_TRUE(IsOk(broker->Register("alpha")));
    ASSERT_TRUE(IsOk(broker->OpenLedger(kTestUuid, kTestGpuTotal, kMiB)));
  }

  // Attach must fail; returns its message.
  std::string AttachError() {
    std::string error;
    error = ErrorOf(Broker::Attach(dir_.state_dir()));
    EXPECT_NE(error.find(dir_.state_file()), std::string::npos) << "the message names the file: " << error;
    EXPECT_EQ(error.find('\n'), std::string::npos) << "one line: " << error;
    EXPECT_FALSE(Broker::AttachExisting(dir_.state_dir()).ok());
    return error;
  }

  BrokerTempDir dir_;
};

TEST_F(BrokerSegmentFileTest, CreatedDirectoryIs0770AndFileIs0660WhateverTheUmask) {
  const mode_t old_umask = umask(077);
  Result<std::unique_ptr<Broker>> broker = Broker::Attach(dir_.state_dir());
  umask(old_umask);
  ASSERT_TRUE(IsOk(broker));
  EXPECT_EQ(ModeOf(dir_.state_dir()), 0770u);
  EXPECT_EQ(ModeOf(dir_.state_file()), 0660u);
  EXPECT_EQ((*broker)->path(), dir_.state_file());
}

TEST_F(BrokerSegmentFileTest, ExistingFileKeepsItsStricterMode) {
  CreateValidFile();
  ASSERT_EQ(chmod(dir_.state_file().c_str(), 0600), 0);
  std::string error;
  EXPECT_TRUE(IsOk(Broker::Attach(dir_.state_dir())));
  EXPECT_EQ(ModeOf(dir_.state_file()), 0600u);
}

TEST_F(BrokerSegmentFileTest, WorldWritableFileIsRefused) {
  CreateValidFile();
  ASSERT_EQ(chmod(dir_.state_file().c_str(), 0666), 0);
  const std::string error = AttachError();
  EXPECT_NE(error.find("world-writable"), std::string::npos) << error;
  EXPECT_NE(error.find("0660"), std::string::npos) << error;
}

TEST_F(BrokerSegmentFileTest, FileWithAnotherMagicIsRefused) {
  CreateValidFile();
  const uint64_t magic = 0x0123456789abcdefULL;
  WriteAt(dir_.state_file(), offsetof(SegmentHeader, magic), &magic, sizeof magic);
  const std::string error = AttachError();
  EXPECT_NE(error.find("not a gpuslice state file"), std::string::npos) << error;
}

TEST_F(BrokerSegmentFileTest, FileOfAnotherLayoutVersionIsRefusedNamingBoth) {
  CreateValidFile();
  const uint32_t version = kLayoutVersion + 1;
  WriteAt(dir_.state_file(), offsetof(SegmentHeader, layout_version), &version, sizeof version);
  const std::string error = AttachError();
  EXPECT_NE(error.find("layout version " + std::to_string(kLayoutVersion + 1)), std::string::npos) << error;
  EXPECT_NE(error.find("version " + std::to_string(kLayoutVersion) + " only"), std::string::npos) << error;
}

TEST_F(BrokerSegmentFileTest, TruncatedFileIsRefused) {
  CreateValidFile();
  ASSERT_EQ(truncate(dir_.state_file().c_str(), sizeof(Segment) / 2), 0);
  const std::string error = AttachError();
  EXPECT_NE(error.find(std::to_string(sizeof(Segment) / 2) + " bytes"), std::string::npos) << error;
  EXPECT_NE(error.find(std::to_string(sizeof(Segment))), std::string::npos) << "the valid size: " << error;
}

TEST_F(BrokerSegmentFileTest, FileShorterThanAHeaderIsRefused) {
  std::filesystem::create_directory(dir_.state_dir());
  const int fd = open(dir_.state_file().c_str(), O_CREAT | O_WRONLY, 0660);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(write(fd, "gpu", 3), 3);
  close(fd);
  const std::string error = AttachError();
  EXPECT_NE(error.find("truncated"), std::string::npos) << error;
}

TEST_F(BrokerSegmentFileTest, GarbageIsRefused) {
  std::filesystem::create_directory(dir_.state_dir());
  std::vector<uint8_t> garbage(sizeof(Segment));
  std::mt19937_64 random(42);
  for (auto& byte : garbage) byte = static_cast<uint8_t>(random() | 1);
  const int fd = open(dir_.state_file().c_str(), O_CREAT | O_WRONLY, 0660);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(write(fd, garbage.data(), garbage.size()), static_cast<ssize_t>(garbage.size()));
  close(fd);
  const std::string error = AttachError();
  EXPECT_NE(error.find("not a gpuslice state file"), std::string::npos) << error;
}

TEST_F(BrokerSegmentFileTest, HeaderCountsOutOfRangeAreRefusedAsCorrupt) {
  CreateValidFile();
  const uint32_t count = kMaxProcesses + 1;
  WriteAt(dir_.state_file(), offsetof(SegmentHeader, process_high_water), &count, sizeof count);
  const std::string error = AttachError();
  EXPECT_NE(error.find("corrupt"), std::string::npos) << error;
  EXPECT_NE(error.find("1025"), std::string::npos) << error;
}

TEST_F(BrokerSegmentFileTest, HeaderClaimingAnotherSizeIsRefused) {
  CreateValidFile();
  const uint64_t size = sizeof(Segment) * 2;
  WriteAt(dir_.state_file(), offsetof(SegmentHeader, segment_size), &size, sizeof size);
  const std::string error = AttachError();
  EXPECT_NE(error.find("header says " + std::to_string(size)), std::string::npos) << error;
}

TEST_F(BrokerSegmentFileTest, DirectoryInPlaceOfTheFileIsRefused) {
  std::filesystem::create_directories(dir_.state_file());
  const std::string error = AttachError();
  EXPECT_NE(error.find("regular file"), std::string::npos) << error;
}

TEST_F(BrokerSegmentFileTest, SymbolicLinkInPlaceOfTheFileIsRefused) {
  BrokerTempDir elsewhere;
  std::string error;
  ASSERT_TRUE(IsOk(Broker::Attach(elsewhere.state_dir())));
  std::filesystem::create_directory(dir_.state_dir());
  std::filesystem::create_symlink(elsewhere.state_file(), dir_.state_file());
  error = AttachError();
  EXPECT_NE(error.find("symbolic link"), std::string::npos) << error;
}

TEST_F(BrokerSegmentFileTest, FileAbandonedByACreatorThatDiedIsInitialisedAgain) {
  // A creator killed after sizing the file but before storing the magic leaves zeros.
  std::filesystem::create_directory(dir_.state_dir());
  const int fd = open(dir_.state_file().c_str(), O_CREAT | O_RDWR, 0660);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(ftruncate(fd, sizeof(Segment)), 0);
  close(fd);
  std::string error = Broker::AttachExisting(dir_.state_dir()).message();
  EXPECT_NE(error.find("not initialised"), std::string::npos) << error;
  auto broker = ValueOf(Broker::Attach(dir_.state_dir()));
  ASSERT_TRUE(broker);
  EXPECT_TRUE(IsOk(broker->Register("alpha")));
}

// What a creator killed halfway wrote is gone, and the file is not filled in to do it: it is
// 15 MiB, of which a node touches what its tenants use (docs/broker.md, "Size").
TEST_F(BrokerSegmentFileTest, FileAbandonedWithPartialWritesStartsAgainFromZerosAndStaysSparse) {
  std::filesystem::create_directory(dir_.state_dir());
  const int fd = open(dir_.state_file().c_str(), O_CREAT | O_RDWR, 0660);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(ftruncate(fd, sizeof(Segment)), 0);
  close(fd);
  const uint64_t garbage = 0x5a5a5a5a5a5a5a5aULL;
  const off_t last_ledger = offsetof(Segment, ledgers) + sizeof(LedgerEntry) * (kMaxLedgers - 1);
  const off_t last_process = offsetof(Segment, processes) + sizeof(ProcessEntry) * (kMaxProcesses - 1);
  for (off_t at : {off_t{offsetof(SegmentHeader, gpu_high_water)}, last_process, last_ledger})
    WriteAt(dir_.state_file(), at, &garbage, sizeof garbage);

  std::string error;
  auto broker = ValueOf(Broker::Attach(dir_.state_dir()));
  ASSERT_TRUE(broker);
  ASSERT_TRUE(IsOk(broker->Register("alpha")));
  ASSERT_TRUE(IsOk(broker->OpenLedger(kTestUuid, kTestGpuTotal, kMiB)));

  const int reader = open(dir_.state_file().c_str(), O_RDONLY);
  ASSERT_GE(reader, 0);
  for (off_t at : {last_process, last_ledger}) {
    uint64_t value = 1;
    ASSERT_EQ(pread(reader, &value, sizeof value, at), static_cast<ssize_t>(sizeof value));
    EXPECT_EQ(value, 0u) << "at offset " << at;
  }
  struct stat st {};
  ASSERT_EQ(fstat(reader, &st), 0);
  close(reader);
  EXPECT_EQ(static_cast<uint64_t>(st.st_size), sizeof(Segment));
  // Header, GPU table, one tenant, one process slot, one ledger: 48 KiB when measured (tmpfs).
  std::printf("state file: %llu KiB allocated\n", static_cast<unsigned long long>(st.st_blocks) / 2);
  EXPECT_LT(static_cast<uint64_t>(st.st_blocks) * 512, 256 * 1024u) << "blocks allocated to the state file";
}

TEST_F(BrokerSegmentFileTest, AttachExistingOnAMissingDirectoryExplainsItself) {
  Result<std::unique_ptr<Broker>> attached = Broker::AttachExisting(dir_.state_dir());
  ASSERT_FALSE(attached.ok());
  std::string error = attached.message();
  EXPECT_NE(error.find(dir_.state_dir()), std::string::npos) << error;
  EXPECT_NE(error.find("does not exist"), std::string::npos) << error;
  EXPECT_EQ(attached.status().code(), Status::Code::kNotFound);
  EXPECT_FALSE(std::filesystem::exists(dir_.state_dir())) << "AttachExisting never creates anything";
  Result<Snapshot> snapshot = TakeSnapshot(dir_.state_dir());
  EXPECT_FALSE(snapshot.ok());
  EXPECT_NE(snapshot.message().find("does not exist"), std::string::npos) << snapshot.message();
}

TEST_F(BrokerSegmentFileTest, AttachExistingOnAnEmptyDirectoryExplainsItself) {
  std::filesystem::create_directory(dir_.state_dir());
  Result<std::unique_ptr<Broker>> attached = Broker::AttachExisting(dir_.state_dir());
  ASSERT_FALSE(attached.ok());
  const std::string& error = attached.message();
  EXPECT_NE(error.find("no state file " + dir_.state_file()), std::string::npos) << error;
  EXPECT_FALSE(std::filesystem::exists(dir_.state_file()));
}

TEST_F(BrokerSegmentFileTest, MissingParentDirectoryIsAClearError) {
  std::string error;
  error = ErrorOf(Broker::Attach(dir_.root() + "/no/such/parent"));
  EXPECT_NE(error.find("cannot create state directory"), std::string::npos) << error;
}

TEST_F(BrokerSegmentFileTest, StateDirectoryThatIsAFileIsRefused) {
  const int fd = open(dir_.state_dir().c_str(), O_CREAT | O_WRONLY, 0660);
  ASSERT_GE(fd, 0);
  close(fd);
  std::string error;
  error = ErrorOf(Broker::Attach(dir_.state_dir()));
  EXPECT_NE(error.find("not a directory"), std::string::npos) << error;
}

TEST_F(BrokerSegmentFileTest, ReaderWithoutWritePermissionGetsAReadOnlySnapshot) {
  CreateValidFile();
  ASSERT_EQ(chmod(dir_.state_file().c_str(), 0444), 0);
  ASSERT_EQ(chmod(dir_.state_dir().c_str(), 0775), 0);
  ASSERT_EQ(chmod(dir_.root().c_str(), 0755), 0);
  const pid_t child = ::gpuslice::testing::ForkChild([&] {
    // Root may write any file: become nobody so that only the read-only path remains.
    if (geteuid() == 0 && (setgid(65534) != 0 || setuid(65534) != 0)) return 3;
    Result<Snapshot> taken = TakeSnapshot(dir_.state_dir());
    if (!taken.ok()) {
      std::fprintf(stderr, "%s\n", taken.message().c_str());
      return 1;
    }
    const Snapshot& snapshot = *taken;
    Result<std::unique_ptr<Broker>> broker = Broker::AttachExisting(dir_.state_dir());
    if (!broker.ok() || (*broker)->Register("alpha").ok()) return 4;  // a reader cannot register
    return snapshot.gpus.size() == 1 && snapshot.gpus[0].tenants.size() == 1 ? 0 : 5;
  });
  EXPECT_EQ(::gpuslice::testing::WaitChild(child), 0);
}

}  // namespace
}  // namespace gpuslice::broker
