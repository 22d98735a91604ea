#include <gtest/gtest.h>

#include <cmath>

#include "compare.h"
#include "errors.h"
#include "helpers.h"
#include "tensor_file.h"

using namespace swc;
using namespace swc_test;

namespace {

// Expects fn to throw swc::Error whose message names `file` and contains `needle`.
template <class F>
void expect_error(F fn, const std::string& file, const std::string& needle) {
  try {
    fn();
    FAIL() << "no error; expected one containing '" << needle << "'";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(file), std::string::npos) << msg;
    EXPECT_NE(msg.find(needle), std::string::npos) << msg;
    EXPECT_EQ(msg.find("Failed"), std::string::npos) << msg;
  }
}

}  // namespace

TEST(Safetensors, ParsesHeaderAndOffsets) {
  TempDir d;
  const std::string p = d.file("a.safetensors");
  write_bytes(p, safetensors_bytes({{"w", "F32", {2, 3}, raw(std::vector<float>(6, 1.5f))},
                                    {"h", "BF16", {4}, raw(std::vector<uint16_t>(4, 0x3f80))}}));
  SafetensorsFile f = read_safetensors(p);
  ASSERT_EQ(f.tensors.size(), 2u);
  const TensorRef* w = f.find("w");
  ASSERT_TRUE(w);
  EXPECT_EQ(*w->dtype, DType::F32);
  EXPECT_EQ(w->shape, (std::vector<uint64_t>{2, 3}));
  EXPECT_EQ(w->offset, f.data_start);
  EXPECT_EQ(w->nbytes, 24u);
  const TensorRef* h = f.find("h");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->offset, f.data_start + 24);
  EXPECT_TRUE(f.warnings.empty());
}

TEST(Safetensors, CorruptAndTruncatedFilesNameFileAndReason) {
  TempDir d;
  const std::string good =
      safetensors_bytes({{"w", "F32", {4}, raw(std::vector<float>{1, 2, 3, 4})}});
  const std::string p = d.file("bad.safetensors");
  write_bytes(p, "");
  expect_error([&] { read_safetensors(p); }, p, "too short");
  write_bytes(p, le64(1000) + "{}");
  expect_error([&] { read_safetensors(p); }, p, "runs past the end of the file");
  write_bytes(p, le64(uint64_t{1} << 40) + "{}");
  expect_error([&] { read_safetensors(p); }, p, "100 MiB limit");
  write_bytes(p, le64(6) + "{\"w\":}");
  expect_error([&] { read_safetensors(p); }, p, "not valid JSON");
  write_bytes(p, good.substr(0, good.size() - 3));  // truncated data
  expect_error([&] { read_safetensors(p); }, p, "past the end of the data section");
  write_bytes(p, safetensors_bytes({{"w", "F32", {5}, raw(std::vector<float>{1, 2, 3, 4})}}));
  expect_error([&] { read_safetensors(p); }, p, "needs 20 bytes");
  write_bytes(p, safetensors_bytes({{"w", "F32", {uint64_t{1} << 62, 8}, ""}}));
  expect_error([&] { read_safetensors(p); }, p, "overflows 64 bits");
  write_bytes(p, safetensors_bytes({{"w", "Q4", {4}, "abcd"}}));
  expect_error([&] { read_safetensors(p); }, p, "unknown dtype 'Q4'");
  expect_error([&] { read_safetensors(d.file("missing.safetensors")); },
               d.file("missing.safetensors"), "cannot open: No such file");
}

TEST(Safetensors, TrailingBytesAreAWarning) {
  TempDir d;
  const std::string p = d.file("t.safetensors");
  write_bytes(p, safetensors_bytes({{"w", "F32", {1}, raw(std::vector<float>{1})}}) + "xx");
  SafetensorsFile f = read_safetensors(p);
  ASSERT_EQ(f.warnings.size(), 1u);
  EXPECT_NE(f.warnings[0].find("2 bytes after the last tensor"), std::string::npos);
}

TEST(Npy, Versions1To3AndDtypes) {
  TempDir d;
  for (int v : {1, 2, 3}) {
    const std::string p = d.file("v" + std::to_string(v) + ".npy");
    write_bytes(p, npy_bytes(v, "<f4", false, {2, 2}, raw(std::vector<float>{1, 2, 3, 4})));
    TensorRef t = read_npy(p);
    EXPECT_EQ(*t.dtype, DType::F32);
    EXPECT_EQ(t.shape, (std::vector<uint64_t>{2, 2}));
    EXPECT_FALSE(t.big_endian);
    EXPECT_EQ(t.nbytes, 16u);
    EXPECT_EQ(t.offset % 64, 0u);
  }
  struct Case {
    const char* descr;
    DType t;
    bool be;
  };
  for (const Case& c : {Case{"|b1", DType::Bool, false}, Case{"|u1", DType::U8, false},
                        Case{"|i1", DType::I8, false}, Case{">i2", DType::I16, true},
                        Case{"<u2", DType::U16, false}, Case{"<i4", DType::I32, false},
                        Case{"<u4", DType::U32, false}, Case{">i8", DType::I64, true},
                        Case{"<u8", DType::U64, false}, Case{"<f2", DType::F16, false},
                        Case{">f8", DType::F64, true}}) {
    const std::string p = d.file("x.npy");
    write_bytes(p, npy_bytes(1, c.descr, false, {3}, std::string(3 * dtype_size(c.t), '\0')));
    TensorRef t = read_npy(p);
    EXPECT_EQ(*t.dtype, c.t) << c.descr;
    EXPECT_EQ(t.big_endian, c.be) << c.descr;
  }
  const std::string p = d.file("s.npy");
  write_bytes(p, npy_bytes(1, "<f8", false, {}, raw(std::vector<double>{7})));
  TensorRef t = read_npy(p);
  EXPECT_TRUE(t.shape.empty());
  EXPECT_EQ(t.numel(), 1u);
}

TEST(Npy, CorruptAndTruncatedFilesNameFileAndReason) {
  TempDir d;
  const std::string p = d.file("bad.npy");
  write_bytes(p, npy_bytes(1, "<f4", false, {4}, raw(std::vector<float>{1, 2, 3})));
  expect_error([&] { read_npy(p); }, p, "only 12 bytes follow the header: file truncated");
  write_bytes(p, "NOTNUMPYATALL");
  expect_error([&] { read_npy(p); }, p, "magic");
  std::string v4 = npy_bytes(1, "<f4", false, {1}, raw(std::vector<float>{1}));
  v4[6] = 4;
  write_bytes(p, v4);
  expect_error([&] { read_npy(p); }, p, "version 4.0 is not supported");
  write_bytes(p, npy_bytes(1, "<c8", false, {1}, std::string(8, '\0')));
  expect_error([&] { read_npy(p); }, p, "'<c8' is not supported");
  const std::string full = npy_bytes(1, "<f4", false, {1}, raw(std::vector<float>{1}));
  write_bytes(p, full.substr(0, 30));
  expect_error([&] { read_npy(p); }, p, "runs past the end of the file");
  std::string bad = npy_bytes(1, "<f4", false, {1}, raw(std::vector<float>{1}));
  bad.replace(bad.find("'shape'"), 7, "'shapX'");
  write_bytes(p, bad);
  expect_error([&] { read_npy(p); }, p, "unexpected key 'shapX'");
}

// A Fortran-ordered big-endian float64 array and a C-ordered little-endian one with the same
// logical values compare bitwise equal; a one-element change is found at the right position.
TEST(Npy, FortranOrderAndBigEndianCompareByLogicalPosition) {
  TempDir d;
  const uint64_t R = 3, C = 5;
  std::vector<double> c_order(R * C);
  for (uint64_t i = 0; i < R * C; ++i) c_order[i] = 0.25 * static_cast<double>(i) + 1;
  std::string f_be;
  for (uint64_t j = 0; j < C; ++j)
    for (uint64_t i = 0; i < R; ++i) {
      uint64_t bits;
      std::memcpy(&bits, &c_order[i * C + j], 8);
      for (int k = 7; k >= 0; --k) f_be += static_cast<char>((bits >> (8 * k)) & 0xff);
    }
  write_bytes(d.file("c.npy"), npy_bytes(1, "<f8", false, {R, C}, raw(c_order)));
  write_bytes(d.file("f.npy"), npy_bytes(2, ">f8", true, {R, C}, f_be));
  Policy pol;
  pol.add_op_flag("*=bitwise");
  Result r = compare_paths(d.file("c.npy"), d.file("f.npy"), pol, Options{});
  ASSERT_EQ(r.entries.size(), 1u);
  EXPECT_EQ(r.entries[0].status, Status::Pass) << r.entries[0].reason;
  EXPECT_EQ(r.exit_code(), 0);
  c_order[1 * C + 3] += 1;
  write_bytes(d.file("c.npy"), npy_bytes(1, "<f8", false, {R, C}, raw(c_order)));
  r = compare_paths(d.file("c.npy"), d.file("f.npy"), pol, Options{});
  EXPECT_EQ(r.entries[0].status, Status::Fail);
  EXPECT_NE(r.entries[0].reason.find("first at [1, 3]"), std::string::npos) << r.entries[0].reason;
  EXPECT_EQ(r.exit_code(), 1);
}
