// align_ops: an op present in one run only must not shift the pairing of later calls.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "align.h"

namespace {

struct Seq {
  std::vector<std::string> keys, names;
  std::vector<int> id;  // the identity of each op, to check which ones got paired
};

void push(Seq& s, const std::string& name, const std::string& shape, int id) {
  s.names.push_back(name);
  s.keys.push_back(name + "|" + shape);
  s.id.push_back(id);
}

// Pairs as (id in A, id in B); -1 where one side lacks the op. Checks the merged order keeps each
// side's own order and covers every op exactly once.
std::vector<std::pair<int, int>> run(const Seq& a, const Seq& b) {
  const auto pairs = swc::align_ops(a.keys, a.names, b.keys, b.names);
  std::vector<std::pair<int, int>> out;
  int64_t na = -1, nb = -1;
  for (const auto& p : pairs) {
    if (p.a >= 0) {
      EXPECT_EQ(p.a, ++na);
    }
    if (p.b >= 0) {
      EXPECT_EQ(p.b, ++nb);
    }
    out.emplace_back(p.a >= 0 ? a.id[p.a] : -1, p.b >= 0 ? b.id[p.b] : -1);
  }
  EXPECT_EQ(na + 1, static_cast<int64_t>(a.keys.size()));
  EXPECT_EQ(nb + 1, static_cast<int64_t>(b.keys.size()));
  return out;
}

TEST(Align, ExtraOpInOneRunPairsEveryOtherCall) {
  // B runs one extra add_ on a weight first; A's add_ calls must pair with B's later add_ calls.
  Seq a, b;
  push(b, "add_", "[64,64]", 100);
  for (int i = 0; i < 5; ++i)
    for (Seq* s : {&a, &b}) {
      push(*s, "addmm", "[2,64]", 10 * i);
      push(*s, "add_", "[2,64]", 10 * i + 1);
    }
  const auto got = run(a, b);
  int paired = 0;
  for (const auto& p : got) {
    if (p.first >= 0 && p.second >= 0) {
      EXPECT_EQ(p.first, p.second);
      ++paired;
    }
  }
  EXPECT_EQ(paired, 10);
  EXPECT_EQ(got.front(), std::make_pair(-1, 100));
}

TEST(Align, ChangedShapeIsStillPairedByName) {
  Seq a, b;
  push(a, "mm", "[2,3]", 0), push(b, "mm", "[2,3]", 0);
  push(a, "gather", "[4]", 1), push(b, "gather", "[5]", 1);  // shapes differ: compared, fails
  push(a, "sum", "[4]", 2), push(b, "sum", "[5]", 2);
  for (const auto& p : run(a, b)) EXPECT_EQ(p.first, p.second);
}

TEST(Align, RandomEditsRecoverTheCommonOps) {
  // Fresh random programs each run; B deletes and inserts ops with keys A never has. Every op
  // the two share must be paired with itself, and nothing else paired.
  std::random_device rd;
  const unsigned seed = rd();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  for (int trial = 0; trial < 50; ++trial) {
    Seq a, b;
    const int n = 1 + rng() % 400;
    for (int i = 0; i < n; ++i) {
      const std::string name = "op" + std::to_string(rng() % 6);
      const std::string shape = std::to_string(rng() % 3);
      push(a, name, shape, i);
      if (rng() % 10) push(b, name, shape, i);  // 10% deleted in B
      if (rng() % 20 == 0) push(b, "extra" + std::to_string(rng() % 3), "x", 100000 + i);
    }
    size_t kept = 0;
    for (int id : b.id) kept += id < 100000;
    size_t paired = 0;
    for (const auto& p : run(a, b)) {
      if (p.first < 0 || p.second < 0) continue;
      // A paired op is the same op, or a same-key twin (keys repeat; either pairing is minimal).
      EXPECT_EQ(a.keys[p.first],
                b.keys[std::find(b.id.begin(), b.id.end(), p.second) - b.id.begin()]);
      ++paired;
    }
    EXPECT_EQ(paired, kept);  // a minimal edit script keeps every op B did not delete
  }
}

TEST(Align, TooManyEditsFallsBackToNames) {
  Seq a, b;
  for (int i = 0; i < 50; ++i) push(a, "op", "a" + std::to_string(i), i);
  for (int i = 0; i < 50; ++i) push(b, "op", "b" + std::to_string(i), i);
  const auto pairs = swc::align_ops(a.keys, a.names, b.keys, b.names, /*max_edits=*/10);
  ASSERT_EQ(pairs.size(), 50u);
  for (const auto& p : pairs) EXPECT_EQ(p.a, p.b);
}

}  // namespace
