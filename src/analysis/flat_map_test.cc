// FlatMap against std::unordered_map as the oracle: random inserts, finds and erasures over a
// small key range (long probe runs, erasures inside them, wrap-around at the table's end) and
// keys that all land in a few home slots.
#include "analysis/flat_map.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <unordered_map>

namespace parmon::analysis {
namespace {

struct Mixed {
  size_t operator()(uint64_t k) const { return static_cast<size_t>(k * 0x9E3779B97F4A7C15ull); }
};
struct Clumped {  // every key homes on one of four slots
  size_t operator()(uint64_t k) const { return static_cast<size_t>(k % 4) * 5; }
};

template <typename Hash>
void AgainstOracle(uint64_t key_range, int steps) {
  FlatMap<uint64_t, uint32_t, Hash> map;
  std::unordered_map<uint64_t, uint32_t> oracle;
  std::mt19937_64 rng(42);
  for (int step = 0; step < steps; ++step) {
    const uint64_t key = rng() % key_range;
    const uint32_t value = static_cast<uint32_t>(rng());
    switch (rng() % 3) {
      case 0: {
        auto [held, inserted] = map.TryEmplace(key, value);
        auto [it, oracle_inserted] = oracle.try_emplace(key, value);
        ASSERT_EQ(inserted, oracle_inserted) << step;
        ASSERT_EQ(*held, it->second) << step;
        break;
      }
      case 1:
        ASSERT_EQ(map.Erase(key), oracle.erase(key) == 1) << step;
        break;
      default: {
        const uint32_t* held = map.Find(key);
        auto it = oracle.find(key);
        ASSERT_EQ(held != nullptr, it != oracle.end()) << step;
        if (held) {
          ASSERT_EQ(*held, it->second) << step;
        }
      }
    }
    ASSERT_EQ(map.size(), oracle.size()) << step;
  }
  size_t seen = 0;
  map.ForEach([&](uint64_t key, uint32_t value) {
    ++seen;
    ASSERT_EQ(oracle.at(key), value);
  });
  EXPECT_EQ(seen, oracle.size());
  EXPECT_GT(seen, 0u);
}

TEST(FlatMap, MatchesUnorderedMap) {
  AgainstOracle<Mixed>(64, 200000);
  AgainstOracle<Mixed>(100000, 200000);
}

TEST(FlatMap, CollidingKeysSurviveErasureInTheirRun) {
  AgainstOracle<Clumped>(200, 100000);
}

}  // namespace
}  // namespace parmon::analysis
