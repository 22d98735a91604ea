// Offsets and sizes past 4 GiB, without allocating or writing 4 GiB: the files are sparse.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>

#include "compare.h"
#include "errors.h"
#include "helpers.h"
#include "tensor_file.h"

using namespace swc;

namespace {
constexpr uint64_t kBig = (uint64_t{5} << 30) + 12;  // 5 GiB + 12: not a multiple of 4 GiB

// A safetensors file whose first tensor is a 5 GiB uint8 hole and whose second tensor, `small`,
// starts past 4 GiB. Returns false when the filesystem cannot make the file.
bool make_sparse(const std::string& path, const std::vector<float>& small) {
  nlohmann::ordered_json h;
  h["hole"] = {{"dtype", "U8"}, {"shape", {kBig}}, {"data_offsets", {uint64_t{0}, kBig}}};
  h["small"] = {{"dtype", "F32"},
                {"shape", {small.size()}},
                {"data_offsets", {kBig, kBig + 4 * small.size()}}};
  std::string hs = h.dump();
  while (hs.size() % 8) hs += ' ';
  const std::string head = swc_test::le64(hs.size()) + hs;
  const int fd = ::open(path.c_str(), O_CREAT | O_TRUNC | O_WRONLY, 0644);
  if (fd < 0) return false;
  bool ok = ::pwrite(fd, head.data(), head.size(), 0) == static_cast<ssize_t>(head.size());
  const off_t off = static_cast<off_t>(head.size() + kBig);
  ok = ok &&
       ::pwrite(fd, small.data(), 4 * small.size(), off) == static_cast<ssize_t>(4 * small.size());
  ::close(fd);
  return ok;
}
}  // namespace

TEST(Large, TensorPast4GiBIsReadAndCompared) {
  swc_test::TempDir d;
  const std::vector<float> va = {1, 2, 3, 4}, vb = {1, 2, 3.5f, 4};
  if (!make_sparse(d.file("a.safetensors"), va) || !make_sparse(d.file("b.safetensors"), vb))
    GTEST_SKIP() << "cannot create a sparse 5 GiB file here";
  SafetensorsFile f = read_safetensors(d.file("a.safetensors"));
  const TensorRef* s = f.find("small");
  ASSERT_TRUE(s);
  EXPECT_EQ(s->offset, f.data_start + kBig);
  EXPECT_GT(s->offset, uint64_t{1} << 32);
  EXPECT_EQ(f.find("hole")->nbytes, kBig);
  std::vector<float> back(4);
  FileReader r(d.file("a.safetensors"));
  r.read_at(s->offset, back.data(), 16);
  EXPECT_EQ(back, va);

  Policy pol;
  pol.add_op_flag("*=bitwise");
  Options opt;
  opt.tensor_glob = "small";
  Result res = compare_paths(d.file("a.safetensors"), d.file("b.safetensors"), pol, opt);
  ASSERT_EQ(res.entries.size(), 1u);
  EXPECT_EQ(res.entries[0].status, Status::Fail);
  EXPECT_NE(res.entries[0].reason.find("1 of 4 elements differ bitwise; first at [2]: a=3 b=3.5"),
            std::string::npos)
      << res.entries[0].reason;
}

TEST(Large, SizeOver4GiBIsNotTruncated) {
  swc_test::TempDir d;
  const uint64_t n = (uint64_t{1} << 31) + 1;  // float32 x n = 8 GiB + 4 bytes
  const std::string p = d.file("big.safetensors");
  nlohmann::ordered_json h;
  h["x"] = {{"dtype", "F32"}, {"shape", {n}}, {"data_offsets", {uint64_t{0}, 4 * n}}};
  std::string hs = h.dump();
  while (hs.size() % 8) hs += ' ';
  swc_test::write_bytes(p, swc_test::le64(hs.size()) + hs);
  if (::truncate(p.c_str(), static_cast<off_t>(8 + hs.size() + 4 * n)) != 0)
    GTEST_SKIP() << "no sparse files here";
  SafetensorsFile f = read_safetensors(p);
  EXPECT_EQ(f.tensors[0].nbytes, 4 * n);
  EXPECT_EQ(f.tensors[0].numel(), n);
  // One byte short: the truncation is detected and reported with exact 64-bit sizes.
  ASSERT_EQ(::truncate(p.c_str(), static_cast<off_t>(8 + hs.size() + 4 * n - 1)), 0);
  try {
    read_safetensors(p);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(std::to_string(4 * n)), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("file truncated"), std::string::npos) << e.what();
  }
}

// Streams a whole 5 GiB (sparse) pair through the engine: opt-in, it reads 10 GiB.
TEST(Large, FullStreamOver4GiB) {
  if (!std::getenv("SW_BIG_TESTS")) GTEST_SKIP() << "set SW_BIG_TESTS=1 to stream 2 x 5 GiB";
  swc_test::TempDir d;
  if (!make_sparse(d.file("a.safetensors"), {1, 2}) ||
      !make_sparse(d.file("b.safetensors"), {1, 2}))
    GTEST_SKIP() << "cannot create a sparse 5 GiB file here";
  Policy pol;
  Result res = compare_paths(d.file("a.safetensors"), d.file("b.safetensors"), pol, Options{});
  ASSERT_EQ(res.entries.size(), 2u);
  for (const Entry& e : res.entries)
    EXPECT_EQ(e.status, Status::Pass) << e.name << ": " << e.reason;
  EXPECT_EQ(res.entries[0].metrics->n, kBig);
  EXPECT_GT(res.engine.bytes_a, uint64_t{5} << 30);
  EXPECT_LT(peak_rss_bytes(), uint64_t{512} << 20);
}
