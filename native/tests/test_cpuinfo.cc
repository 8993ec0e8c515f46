#include "edgekit/cpuinfo.h"
#include "harness.h"

using edgekit::classify_cpuinfo;

namespace {

std::string board(const std::vector<std::string>& parts) {
  std::string text;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    text += "processor\t: " + std::to_string(i) + "\nBogoMIPS\t: 108.00\nFeatures\t: fp asimd\n"
            "CPU implementer\t: 0x41\nCPU architecture: 8\nCPU variant\t: 0x0\nCPU part\t: " + parts[i] +
            "\nCPU revision\t: 3\n\n";
  }
  return text + "Hardware\t: BCM2835\nRevision\t: c03111\n";
}

}  // namespace

EK_TEST(cpuinfo, raspberry_pi_4_is_neon) {
  const auto r = classify_cpuinfo(board({"0xd08", "0xd08", "0xd08", "0xd08"}), 4, true);
  EK_CHECK_EQ(r.parts, (std::vector<std::string>{"0xd08", "0xd08", "0xd08", "0xd08"}));
  EK_CHECK(r.core_types[0] == edgekit::CoreType::a72);
  EK_CHECK(!r.dot_capable);
  EK_CHECK_EQ(r.int8_kernel_path(), std::string("neon"));
}

EK_TEST(cpuinfo, cortex_a55_board_is_dotprod_when_the_library_has_it) {
  const auto text = board({"0xd05", "0xd05", "0xd05", "0xd05"});
  EK_CHECK_EQ(classify_cpuinfo(text, 4, true).int8_kernel_path(), std::string("dotprod"));
  // the armv7hf runtime is built WITH_ARM_DOTPROD=OFF: the same cores take the NEON path
  EK_CHECK_EQ(classify_cpuinfo(text, 4, false).int8_kernel_path(), std::string("neon"));
}

EK_TEST(cpuinfo, big_little_needs_every_core_dot_capable) {
  // Snapdragon 865-like: A55 x4 + A77 x4 -> dot; 845-like: A55 (0x803) + A75 (0x802) -> not,
  // because Lite's has_dot() list leaves out A75.
  EK_CHECK_EQ(classify_cpuinfo(board({"0xd05", "0xd05", "0xd0d", "0xd0d"}), 4, true).int8_kernel_path(),
              std::string("dotprod"));
  EK_CHECK_EQ(classify_cpuinfo(board({"0x803", "0x803", "0x802", "0x802"}), 4, true).int8_kernel_path(),
              std::string("neon"));
  EK_CHECK_EQ(classify_cpuinfo(board({"0xd05", "0xd03"}), 2, true).int8_kernel_path(), std::string("neon"));
}

EK_TEST(cpuinfo, missing_cores_repeat_the_last_listed) {
  const auto r = classify_cpuinfo(board({"0xd05"}), 8, true);
  EK_CHECK_EQ(r.cores, 8);
  EK_CHECK(r.core_types[7] == edgekit::CoreType::a55);
  EK_CHECK(r.dot_capable);
}

EK_TEST(cpuinfo, x86_host_text_means_unknown_cores) {
  const std::string x86 = "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R)\n\n";
  const auto r = classify_cpuinfo(x86, 2, true);
  EK_CHECK(r.parts.empty());
  EK_CHECK(r.core_types[0] == edgekit::CoreType::unknown);
  EK_CHECK_EQ(r.int8_kernel_path(), std::string("neon"));
  EK_CHECK_EQ(classify_cpuinfo("", 0, true).cores, 1);
}

EK_TEST(cpuinfo, part_lines_parse_like_lites_sscanf) {
  EK_CHECK(classify_cpuinfo("CPU part : 0xd05\n", 1, true).dot_capable);
  EK_CHECK(classify_cpuinfo("CPU part\t:\t0xD05\n", 1, true).dot_capable);
  // a line that mentions "part" but is no CPU part line still counts as an unknown core
  const auto r = classify_cpuinfo("departure: yes\nCPU part\t: 0xd05\n", 2, true);
  EK_CHECK(r.core_types[0] == edgekit::CoreType::unknown);
  EK_CHECK(!r.dot_capable);
}

EK_TEST(cpuinfo, part_table_matches_lite) {
  using edgekit::CoreType;
  using edgekit::core_type_for_part;
  EK_CHECK(core_type_for_part(0xd03) == CoreType::a53);
  EK_CHECK(core_type_for_part(0x805) == CoreType::a55);
  EK_CHECK(core_type_for_part(0xd40) == CoreType::a76);
  EK_CHECK(core_type_for_part(0xd44) == CoreType::x1);
  EK_CHECK(core_type_for_part(0xd0b) == CoreType::unknown);  // Cortex-A76AE/A78C etc. are unknown to v2.13-rc
  int dot = 0;
  for (const auto& e : edgekit::lite_part_table()) dot += edgekit::lite_dot_capable(e.core);
  EK_CHECK_EQ(dot, 11);  // A55 x3 ids, A76 x2, A77, A78, X1, X2, A510, A710
  EK_CHECK_EQ(std::string(edgekit::core_type_name(CoreType::a510)), std::string("A510"));
}

EK_TEST(cpuinfo, report_json) {
  auto r = classify_cpuinfo(board({"0xd05"}), 1, true);
  r.arch = "aarch64";
  const auto j = r.to_json();
  EK_CHECK_EQ(j.at("int8_kernel_path").as_string(), std::string("dotprod"));
  EK_CHECK_EQ(j.at("parts").at(0).as_string(), std::string("0xd05"));
  EK_CHECK_EQ(j.at("core_types").at(0).as_string(), std::string("A55"));
}
