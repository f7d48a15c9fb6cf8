// ReplaceFile (common/replace_file.h): how the device plugin and the DRA driver write the files
// others read while they run (pods.json, ld.so.preload, CDI specs, the DRA checkpoint).
#include "common/replace_file.h"

#include <dirent.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace gpuslice {
namespace {

class ReplaceFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/gpuslice-replace-file-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
  }
  void TearDown() override {
    for (const std::string& name : Entries()) unlink((dir_ + "/" + name).c_str());
    rmdir(dir_.c_str());
  }
  std::vector<std::string> Entries() const {
    std::vector<std::string> names;
    if (DIR* d = opendir(dir_.c_str())) {
      while (dirent* e = readdir(d)) {
        const std::string name = e->d_name;
        if (name != "." && name != "..") names.push_back(name);
      }
      closedir(d);
    }
    return names;
  }
  static std::string Read(const std::string& path) {
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }
  std::string dir_;
};

TEST_F(ReplaceFileTest, CreatesTheFileAndLeavesNoTemporary) {
  const std::string path = dir_ + "/pods.json";
  ASSERT_TRUE(ReplaceFile(path, "{}\n").ok());
  EXPECT_EQ(Read(path), "{}\n");
  EXPECT_EQ(Entries(), std::vector<std::string>{"pods.json"});
}

TEST_F(ReplaceFileTest, ReplacesTheWholeContentsEvenWithShorterOnes) {
  const std::string path = dir_ + "/spec.json";
  ASSERT_TRUE(ReplaceFile(path, std::string(100000, 'x')).ok());
  struct stat before {};
  ASSERT_EQ(stat(path.c_str(), &before), 0);
  ASSERT_TRUE(ReplaceFile(path, "short").ok());
  EXPECT_EQ(Read(path), "short");
  struct stat after {};
  ASSERT_EQ(stat(path.c_str(), &after), 0);
  // A new inode: a reader holding the old file open keeps reading the old contents whole.
  EXPECT_NE(before.st_ino, after.st_ino);
  EXPECT_EQ(Entries(), std::vector<std::string>{"spec.json"});
}

TEST_F(ReplaceFileTest, AFailureSaysWhyAndLeavesNothingBehind) {
  const Status missing_dir = ReplaceFile(dir_ + "/no-such-dir/file", "x");
  EXPECT_FALSE(missing_dir.ok());
  EXPECT_EQ(missing_dir.message(), "No such file or directory");

  // The rename fails (a directory stands at the path): the temporary is removed, the path kept.
  const std::string path = dir_ + "/taken";
  ASSERT_EQ(mkdir(path.c_str(), 0755), 0);
  const Status taken = ReplaceFile(path, "x");
  EXPECT_FALSE(taken.ok());
  EXPECT_EQ(taken.message(), "Is a directory");
  EXPECT_EQ(Entries(), std::vector<std::string>{"taken"});
  rmdir(path.c_str());
}

// A writer killed between write and rename leaves "<file>.tmp.<pid>": removed when its writer is
// gone (or is the caller, which has not written yet), kept while another live process may be
// writing it, and nothing else of the directory is touched.
TEST_F(ReplaceFileTest, StaleTemporariesOfGoneWritersAreRemovedAndNothingElse) {
  const pid_t gone = fork();
  if (gone == 0) _exit(0);
  ASSERT_GT(gone, 0);
  ASSERT_EQ(waitpid(gone, nullptr, 0), gone);
  const std::string dead = std::to_string(gone);
  for (const std::string& name :
       std::vector<std::string>{"state.json.tmp." + dead, "state.json.tmp." + std::to_string(getpid()),
                                "state.json.tmp.1", "state.json", "state.json.tmp.x", "other.json.tmp." + dead}) {
    std::ofstream(dir_ + "/" + name) << "half";
  }
  std::vector<std::string> removed = RemoveStaleTemporaries(dir_, "state.json");
  std::vector<std::string> expected = {"state.json.tmp." + dead, "state.json.tmp." + std::to_string(getpid())};
  std::sort(removed.begin(), removed.end());
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(removed, expected);
  std::vector<std::string> left = Entries();
  std::sort(left.begin(), left.end());
  // pid 1 runs: its temporary may be being written.
  EXPECT_EQ(left,
            (std::vector<std::string>{"other.json.tmp." + dead, "state.json", "state.json.tmp.1", "state.json.tmp.x"}));
}

}  // namespace
}  // namespace gpuslice
