// docs/kubernetes.md's install steps, followed as a cluster admin would from a fresh clone, as
// far as there is no cluster and no container engine: the "## Install" section's first `sh`
// block runs in a copy of the repository's files (tracked, and untracked but not ignored: what
// a clone of this tree holds) with `git clone`, `docker` and `kubectl` played by shell functions
// that check and record what they are asked: `docker build` must name a recipe that exists and
// the tag the manifests run, and `kubectl kustomize`/`apply -k` render the admin's kustomization
// with the tests' renderer (and with kubectl itself where it is installed). What `apply` would
// create must hold the overlay's daemon and the exporter, every container on the image pushed.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "common/version.h"
#include "tests/support/kustomize.h"
#include "tests/support/subprocess.h"
#include "tests/support/test_env.h"

namespace gpuslice::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// The first ```sh block after "## Install" in docs/kubernetes.md.
std::string InstallBlock() {
  const std::string doc = ReadFile(SourceDir() + "/docs/kubernetes.md");
  const auto section = doc.find("\n## Install\n");
  if (section == std::string::npos) return "";
  const auto open = doc.find("\n```sh\n", section);
  const auto close = doc.find("\n```\n", open + 1);
  if (open == std::string::npos || close == std::string::npos) return "";
  return doc.substr(open + 7, close - open - 6);
}

// The stand-ins, defined before the block runs. Each records one line per call in $LOG.
constexpr char kStandIns[] = R"SH(
set -e
cd "$WORK"
git() {
  [ "$1" = clone ] || { echo "git $*: only clone is played" >&2; return 1; }
  [ -d "$3" ] || { echo "git clone: no copy at $3" >&2; return 1; }  # the test copied the tree there
  echo "clone $3" >> "$LOG"
}
docker() {
  case "$1" in
    build)
      [ "$2" = -f ] && [ -f "$3" ] || { echo "docker build: no recipe $3" >&2; return 1; }
      [ "$4" = -t ] && [ "$6" = . ] || { echo "docker build: expected -t TAG . after the recipe" >&2; return 1; }
      echo "build $3 $5 $6" >> "$LOG" ;;
    tag|push) echo "$*" >> "$LOG" ;;
    *) echo "docker $1: not played" >&2; return 1 ;;
  esac
}
kubectl() {
  case "$1" in
    kustomize) python3 "$RENDER" "$2" > "$WORK/rendered.json"; echo "kustomize $2" >> "$LOG" ;;
    apply) [ "$2" = -k ] || { echo "kubectl apply: only -k" >&2; return 1; }
           python3 "$RENDER" "$3" > "$WORK/applied.json"; echo "apply $3" >> "$LOG" ;;
    *) echo "kubectl $1: not played" >&2; return 1 ;;
  esac
}
)SH";

TEST(DeployInstallStepsTest, TheDocumentedStepsFromAFreshCloneRenderManifestsOnTheImagePushed) {
  const std::string block = InstallBlock();
  ASSERT_FALSE(block.empty()) << "docs/kubernetes.md has no ```sh block under ## Install";
  const std::string work = "/tmp/gs-install-steps-" + std::to_string(getpid());
  fs::remove_all(work);
  fs::create_directories(work + "/gpuslice");
  const ProcessResult copied =
      gpuslice::testing::Run({"/bin/sh", "-c",
                              "cd \"$1\" && git ls-files -z --cached --others --exclude-standard | "
                              "xargs -0 cp --parents -t \"$2\"",
                              "sh", SourceDir(), work + "/gpuslice"});
  ASSERT_EQ(copied.exit_code, 0) << copied.err;
  std::ofstream(work + "/steps.sh") << kStandIns << block;
  const ProcessResult ran = gpuslice::testing::Run({"/bin/sh", work + "/steps.sh"},
                                                   {"LOG=" + work + "/log", "WORK=" + work, "REPO=" + SourceDir(),
                                                    "RENDER=" + SourceDir() + "/tests/support/kustomize_render.py"});
  ASSERT_EQ(ran.exit_code, 0) << "the steps failed:\n" << ran.out << ran.err << "\n" << block;
  const std::string log = ReadFile(work + "/log");
  const std::string tag = std::string("gpuslice:") + GPUSLICE_VERSION;
  EXPECT_NE(log.find("build deploy/container/Dockerfile " + tag + " .\n"), std::string::npos) << log;
  std::string pushed;
  std::istringstream lines(log);
  for (std::string line; std::getline(lines, line);)
    if (line.starts_with("push ")) pushed = line.substr(5);
  ASSERT_FALSE(pushed.empty()) << log;
  EXPECT_TRUE(pushed.ends_with("/" + tag)) << pushed;

  const json applied = json::parse(ReadFile(work + "/applied.json"), nullptr, false);
  ASSERT_TRUE(applied.is_array()) << log;
  EXPECT_EQ(applied, json::parse(ReadFile(work + "/rendered.json"))) << "kustomize shows what apply creates";
  std::set<std::string> daemons;
  int containers = 0;
  for (const auto& o : applied) {
    if (o.value("kind", "") != "DaemonSet") continue;
    daemons.insert(o["metadata"]["name"]);
    for (const char* key : {"initContainers", "containers"}) {
      for (const auto& c : o["spec"]["template"]["spec"].value(key, json::array())) {
        EXPECT_EQ(c.value("image", ""), pushed) << o["metadata"]["name"] << ": " << c["name"];
        ++containers;
      }
    }
  }
  EXPECT_TRUE(daemons.count("gpuslice-exporter")) << "the base";
  EXPECT_TRUE(daemons.count("gpuslice-device-plugin") || daemons.count("gpuslice-dra-driver")) << "an overlay";
  EXPECT_GE(containers, 3);
  // Where kubectl is installed: the admin's kustomization renders the same with it.
  for (const auto& entry : fs::directory_iterator(work + "/gpuslice")) {
    if (!fs::exists(entry.path() / "kustomization.yaml")) continue;
    std::string error;
    if (const auto reference = KubectlKustomize(entry.path(), &error)) EXPECT_EQ(*reference, applied);
    else EXPECT_EQ(error, "") << "kubectl refused the documented kustomization";
  }
  fs::remove_all(work);
}

}  // namespace
}  // namespace gpuslice::testing
