// The state directory (GPUSLICE_STATE_DIR) is checked before the file in it is trusted: owned by
// root or the user, not world-writable (1777 included), reached through a path resolved once and
// checked component by component (no ancestor that others could rename it in). Anything else is
// refused with one line naming the variable, the directory and what would be valid. The non-root
// cases run gpuslice-broker-test-client as nobody (setpriv), as an unprivileged tenant would.
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "broker/broker.h"
#include "tests/support/broker_test_names.h"
#include "tests/support/subprocess.h"
#include "tests/support/test_env.h"

namespace gpuslice::broker {
namespace {

constexpr uid_t kNobody = 65534;
constexpr uid_t kStranger = 12345;  // a user that is neither root nor nobody
constexpr char kSetpriv[] = "/usr/bin/setpriv";

class BrokerStateDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(dir_.root().empty());
    ASSERT_EQ(chmod(dir_.root().c_str(), 0755), 0);  // traversable by the unprivileged runs
  }

  std::string MakeDir(const std::string& path, mode_t mode, uid_t owner = 0, gid_t group = 0) {
    EXPECT_TRUE(std::filesystem::create_directory(path)) << path;
    EXPECT_EQ(chmod(path.c_str(), mode), 0);
    if (geteuid() == 0) {
      EXPECT_EQ(chown(path.c_str(), owner, group), 0);
    }
    return path;
  }

  // Attach in this process; its error ("" when it attached).
  static std::string AttachError(const std::string& dir) {
    Result<std::unique_ptr<Broker>> broker = Broker::Attach(dir);
    if (broker.ok()) return "";
    const std::string& error = broker.message();
    EXPECT_FALSE(error.empty());
    EXPECT_EQ(error.find('\n'), std::string::npos) << "one line: " << error;
    return error;
  }

  // The broker test client as nobody: its exit code and stderr.
  ::gpuslice::testing::ProcessResult AttachAsNobody(const std::string& dir) {
    return ::gpuslice::testing::Run(
        {kSetpriv, "--reuid=" + std::to_string(kNobody), "--regid=" + std::to_string(kNobody), "--clear-groups",
         ::gpuslice::testing::BinDir() + "/gpuslice-broker-test-client", "--state", dir, "--tenant", "t"});
  }

  bool CanDropPrivileges() const { return geteuid() == 0 && access(kSetpriv, X_OK) == 0; }

  BrokerTempDir dir_;
};

TEST_F(BrokerStateDirTest, WorldWritableStateDirectoryIsRefusedStickyOrNot) {
  for (mode_t mode : {0777, 01777, 0773}) {
    const std::string dir = dir_.root() + "/ww" + std::to_string(mode);
    MakeDir(dir, mode);
    const std::string error = AttachError(dir);
    EXPECT_NE(error.find("refusing state directory " + dir + " (GPUSLICE_STATE_DIR)"), std::string::npos) << error;
    EXPECT_NE(error.find("world-writable"), std::string::npos) << error;
    EXPECT_NE(error.find("0770"), std::string::npos) << "says what would be valid: " << error;
    EXPECT_FALSE(std::filesystem::exists(dir + "/gpuslice.state")) << "nothing is created in it";
  }
}

TEST_F(BrokerStateDirTest, ControlGroupWritableDirectoryOfRootIsAccepted) {
  const std::string dir = MakeDir(dir_.root() + "/shared", 02770);
  EXPECT_EQ(AttachError(dir), "");
}

TEST_F(BrokerStateDirTest, DirectoryOwnedByAnotherUserIsRefused) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to give a directory away";
  const std::string dir = MakeDir(dir_.root() + "/theirs", 0770, kStranger, 0);
  const std::string error = AttachError(dir);
  EXPECT_NE(error.find("owned by uid " + std::to_string(kStranger)), std::string::npos) << error;
  EXPECT_NE(error.find("neither root nor this user"), std::string::npos) << error;
}

TEST_F(BrokerStateDirTest, SymbolicLinkIsResolvedAndItsTargetChecked) {
  const std::string real = MakeDir(dir_.root() + "/real", 0770);
  const std::string link = dir_.root() + "/link";
  std::filesystem::create_directory_symlink(real, link);
  std::string error;
  auto broker = ValueOf(Broker::Attach(link));
  ASSERT_TRUE(broker);
  EXPECT_EQ(broker->path(), real + "/gpuslice.state") << "the resolved path is used from then on";
  broker.reset();

  const std::string open = MakeDir(dir_.root() + "/open", 01777);
  const std::string link_to_open = dir_.root() + "/link-to-open";
  std::filesystem::create_directory_symlink(open, link_to_open);
  error = AttachError(link_to_open);
  EXPECT_NE(error.find(link_to_open), std::string::npos) << "names the variable's value: " << error;
  EXPECT_NE(error.find("world-writable"), std::string::npos) << error;
}

TEST_F(BrokerStateDirTest, AncestorOthersCanWriteIsRefusedUnlessSticky) {
  const std::string open_parent = MakeDir(dir_.root() + "/open-parent", 0777);
  const std::string dir = MakeDir(open_parent + "/state", 0770);
  std::string error = AttachError(dir);
  EXPECT_NE(error.find(open_parent + " (mode 0777) is writable by others without the sticky bit"), std::string::npos)
      << error;
  // Sticky, as /tmp: others cannot rename what is in it.
  ASSERT_EQ(chmod(open_parent.c_str(), 01777), 0);
  EXPECT_EQ(AttachError(dir), "");
}

TEST_F(BrokerStateDirTest, MissingStateDirectoryIsCreatedInACheckedParentOnly) {
  const std::string open_parent = MakeDir(dir_.root() + "/open-parent", 0777);
  const std::string error = AttachError(open_parent + "/new");
  EXPECT_NE(error.find("writable by others without the sticky bit"), std::string::npos) << error;
  EXPECT_FALSE(std::filesystem::exists(open_parent + "/new")) << "nothing is created in an unchecked parent";
  EXPECT_EQ(AttachError(dir_.root() + "/fresh"), "");
  EXPECT_EQ(std::filesystem::status(dir_.root() + "/fresh").permissions(), std::filesystem::perms(0770));
}

TEST_F(BrokerStateDirTest, UnprivilegedUserAcceptsItsOwnDirectory) {
  if (!CanDropPrivileges()) GTEST_SKIP() << "needs root and " << kSetpriv << " to run as nobody";
  const std::string dir = MakeDir(dir_.root() + "/nobodys", 0700, kNobody, kNobody);
  const auto r = AttachAsNobody(dir);
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

TEST_F(BrokerStateDirTest, UnprivilegedUserAcceptsRootsGroupDirectory) {
  if (!CanDropPrivileges()) GTEST_SKIP() << "needs root and " << kSetpriv << " to run as nobody";
  const std::string dir = MakeDir(dir_.root() + "/roots", 02770, 0, kNobody);
  const auto r = AttachAsNobody(dir);
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

TEST_F(BrokerStateDirTest, UnprivilegedUserRefusesAnotherUsersDirectoryItCouldWrite) {
  if (!CanDropPrivileges()) GTEST_SKIP() << "needs root and " << kSetpriv << " to run as nobody";
  // Writable by nobody through its group, but owned by a stranger, who could swap the file.
  const std::string dir = MakeDir(dir_.root() + "/strangers", 0770, kStranger, kNobody);
  const auto r = AttachAsNobody(dir);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("owned by uid " + std::to_string(kStranger) + ", neither root nor this user (uid " +
                       std::to_string(kNobody) + ")"),
            std::string::npos)
      << r.err;
}

TEST_F(BrokerStateDirTest, UnprivilegedUserRefusesAWorldWritableDirectory) {
  if (!CanDropPrivileges()) GTEST_SKIP() << "needs root and " << kSetpriv << " to run as nobody";
  const std::string dir = MakeDir(dir_.root() + "/everyones", 01777, 0, 0);
  const auto r = AttachAsNobody(dir);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("world-writable (mode 1777)"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(dir + "/gpuslice.state"));
}

}  // namespace
}  // namespace gpuslice::broker
