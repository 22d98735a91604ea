// Aligns the op sequences of two runs of the same program, so that an op present in one run
// only (a perturbation, an extra optimizer step, a filtered op) does not shift the pairing of
// every later call of the same op.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace swc {

// One step of the alignment: indices into the two sequences, -1 on the side that lacks the op.
struct OpPair {
  int64_t a = -1, b = -1;
};

// Pairs ops in two stages. First a shortest edit script (Myers) over the full keys, which keeps
// runs of identical ops together; then, inside each stretch that the script left unpaired on
// both sides, ops with the same name are paired in order (longest common subsequence), so an op
// whose shapes changed is still compared (and fails) instead of being reported one-sided.
// Returns the pairs in a merged execution order: each one-sided op sits where it ran.
// Past max_edits differences the first stage gives up and pairs by name alone.
std::vector<OpPair> align_ops(const std::vector<std::string>& keys_a,
                              const std::vector<std::string>& names_a,
                              const std::vector<std::string>& keys_b,
                              const std::vector<std::string>& names_b, size_t max_edits = 3000);

}  // namespace swc
