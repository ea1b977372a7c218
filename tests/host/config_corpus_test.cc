// SPDX-License-Identifier: Apache-2.0
// Runs every file of tests/configs: valid/ must load; each broken/ file must fail with
// every message fragment listed in its "# expect: ..." header lines.
#include <algorithm>
#include <boost/filesystem.hpp>
#include <fstream>

#include "test_util.h"

namespace commhost::test {
namespace {

std::vector<std::string> corpus(const char* sub) {
  std::vector<std::string> files;
  for (const auto& entry : boost::filesystem::directory_iterator(std::string(COMMHOST_TEST_CONFIG_DIR) + "/" + sub))
    if (entry.path().extension() == ".yaml") files.push_back(entry.path().string());
  std::sort(files.begin(), files.end());
  return files;
}

std::vector<std::string> expectations(const std::string& file) {
  std::vector<std::string> out;
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);) {
    const std::string tag = "# expect: ";
    if (line.rfind(tag, 0) == 0) out.push_back(line.substr(tag.size()));
  }
  return out;
}

ConfigOverrides noEnv() {
  ConfigOverrides o;
  o.fromEnvironment = false;
  return o;
}

TEST(ConfigCorpus, ValidFilesLoad) {
  const auto files = corpus("valid");
  ASSERT_GE(files.size(), 3u);
  for (const auto& file : files) {
    auto registry = testRegistry();
    EXPECT_NO_THROW(loadConfigFile(file, *registry, noEnv())) << file;
  }
}

TEST(ConfigCorpus, BrokenFilesFailWithTheirMessages) {
  const auto files = corpus("broken");
  ASSERT_GE(files.size(), 10u);
  for (const auto& file : files) {
    const auto expected = expectations(file);
    ASSERT_FALSE(expected.empty()) << file << " has no '# expect:' line";
    auto registry = testRegistry();
    try {
      loadConfigFile(file, *registry, noEnv());
      ADD_FAILURE() << file << " loaded but should have failed";
    } catch (const ConfigError& e) {
      const std::string message = e.what();
      const std::string name = boost::filesystem::path(file).filename().string();
      for (std::string fragment : expected) {
        const size_t at = fragment.find("FILE");
        if (at != std::string::npos) fragment.replace(at, 4, file);
        EXPECT_NE(message.find(fragment), std::string::npos) << name << ": message lacks '" << fragment << "':\n"
                                                             << message;
      }
    }
  }
}

}  // namespace
}  // namespace commhost::test
