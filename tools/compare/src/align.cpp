#include "align.h"

#include <algorithm>
#include <unordered_map>

namespace swc {
namespace {

std::vector<int> intern(const std::vector<std::string>& v,
                        std::unordered_map<std::string, int>& ids) {
  std::vector<int> out(v.size());
  for (size_t i = 0; i < v.size(); ++i)
    out[i] = ids.emplace(v[i], static_cast<int>(ids.size())).first->second;
  return out;
}

// Myers' O((N+M)D) shortest edit script. Returns the matched (i, j) pairs in order, or false
// when more than max_d edits are needed. The trace keeps one diagonal band per edit count, so
// memory is O(D^2) ints.
bool myers(const int* a, int n, const int* b, int m, size_t max_d,
           std::vector<std::pair<int, int>>& matched) {
  const int dmax = static_cast<int>(std::min<size_t>(max_d, static_cast<size_t>(n) + m));
  std::vector<int> v(2 * static_cast<size_t>(dmax) + 3, 0);
  const int off = dmax + 1;
  std::vector<std::vector<int>> trace;
  for (int d = 0; d <= dmax; ++d) {
    bool done = false;
    for (int k = -d; k <= d; k += 2) {
      const bool down = k == -d || (k != d && v[off + k - 1] < v[off + k + 1]);
      int x = down ? v[off + k + 1] : v[off + k - 1] + 1;
      int y = x - k;
      while (x < n && y < m && a[x] == b[y]) ++x, ++y;
      v[off + k] = x;
      if (x >= n && y >= m) done = true;
      if (done) break;
    }
    trace.emplace_back(v.begin() + off - d, v.begin() + off + d + 1);
    if (!done) continue;
    // Walk back from (n, m): each edit step is preceded by a snake of matches.
    std::vector<std::pair<int, int>> rev;
    int x = n, y = m;
    for (int e = d; e > 0; --e) {
      const std::vector<int>& prev = trace[e - 1];  // band [-(e-1), e-1]
      const int k = x - y;
      auto at = [&](int kk) { return prev[kk + e - 1]; };
      const bool down = k == -e || (k != e && at(k - 1) < at(k + 1));
      const int pk = down ? k + 1 : k - 1;
      const int px = at(pk), py = px - pk;
      const int sx = down ? px : px + 1;  // where the snake after the edit starts
      while (x > sx && y > sx - k) rev.emplace_back(--x, --y);
      x = px;
      y = py;
    }
    while (x > 0 && y > 0) rev.emplace_back(--x, --y);
    matched.assign(rev.rbegin(), rev.rend());
    return true;
  }
  return false;
}

// Longest common subsequence of two short stretches (by name), appended in order; greedy in
// order when the table would be large.
void pair_by_name(const std::vector<int>& na, int a0, int a1, const std::vector<int>& nb, int b0,
                  int b1, std::vector<std::pair<int, int>>& out) {
  const size_t n = a1 - a0, m = b1 - b0;
  if (!n || !m) return;
  if (n * m > (size_t{1} << 22)) {
    int j = b0;
    for (int i = a0; i < a1 && j < b1; ++i) {
      int k = j;
      while (k < b1 && nb[k] != na[i]) ++k;
      if (k < b1) out.emplace_back(i, k), j = k + 1;
    }
    return;
  }
  std::vector<uint32_t> t((n + 1) * (m + 1), 0);
  auto T = [&](size_t i, size_t j) -> uint32_t& { return t[i * (m + 1) + j]; };
  for (size_t i = n; i-- > 0;)
    for (size_t j = m; j-- > 0;)
      T(i, j) = na[a0 + i] == nb[b0 + j] ? T(i + 1, j + 1) + 1 : std::max(T(i + 1, j), T(i, j + 1));
  for (size_t i = 0, j = 0; i < n && j < m;) {
    if (na[a0 + i] == nb[b0 + j])
      out.emplace_back(a0 + static_cast<int>(i++), b0 + static_cast<int>(j++));
    else if (T(i + 1, j) >= T(i, j + 1))
      ++i;
    else
      ++j;
  }
}

}  // namespace

std::vector<OpPair> align_ops(const std::vector<std::string>& keys_a,
                              const std::vector<std::string>& names_a,
                              const std::vector<std::string>& keys_b,
                              const std::vector<std::string>& names_b, size_t max_edits) {
  std::unordered_map<std::string, int> kid, nid;
  const std::vector<int> ka = intern(keys_a, kid), kb = intern(keys_b, kid);
  const std::vector<int> na = intern(names_a, nid), nb = intern(names_b, nid);
  const int n = static_cast<int>(ka.size()), m = static_cast<int>(kb.size());
  // Common prefix and suffix cost nothing and keep the edit search small.
  int pre = 0;
  while (pre < n && pre < m && ka[pre] == kb[pre]) ++pre;
  int suf = 0;
  while (suf < n - pre && suf < m - pre && ka[n - 1 - suf] == kb[m - 1 - suf]) ++suf;
  std::vector<std::pair<int, int>> mid;
  if (!myers(ka.data() + pre, n - pre - suf, kb.data() + pre, m - pre - suf, max_edits, mid))
    mid.clear();  // too different: the name pass below pairs the whole middle
  std::vector<std::pair<int, int>> anchors;
  for (int i = 0; i < pre; ++i) anchors.emplace_back(i, i);
  for (const auto& p : mid) anchors.emplace_back(p.first + pre, p.second + pre);
  for (int i = 0; i < suf; ++i) anchors.emplace_back(n - suf + i, m - suf + i);
  // Fill the unpaired stretches between anchors by name.
  std::vector<std::pair<int, int>> all;
  int pa = 0, pb = 0;
  for (size_t k = 0; k <= anchors.size(); ++k) {
    const int ea = k < anchors.size() ? anchors[k].first : n;
    const int eb = k < anchors.size() ? anchors[k].second : m;
    pair_by_name(na, pa, ea, nb, pb, eb, all);
    if (k < anchors.size()) all.push_back(anchors[k]);
    pa = ea + 1;
    pb = eb + 1;
  }
  // Merge: one-sided ops of A, then of B, before the next pair.
  std::vector<OpPair> out;
  out.reserve(n + m);
  int ia = 0, ib = 0;
  for (const auto& p : all) {
    while (ia < p.first) out.push_back({ia++, -1});
    while (ib < p.second) out.push_back({-1, ib++});
    out.push_back({ia++, ib++});
  }
  while (ia < n) out.push_back({ia++, -1});
  while (ib < m) out.push_back({-1, ib++});
  return out;
}

}  // namespace swc
