// FlatMap: a hash table for the MPI analyzer's per-message lookups (sends in flight by match
// key, nonblocking sends by request), which run several times per message. std::unordered_map
// allocates a node per entry (one malloc and free per nonblocking send) and reduces each hash
// modulo a prime (a division); here entries sit in one array of power-of-two size, probed
// linearly from the hash's low bits, at most half full. Erasing shifts the following entries of
// the probe run back (no tombstones), so a table whose keys come and go stays as fast as a fresh
// one. Pointers to values are valid until the next insertion or erasure.
#ifndef PARMON_SRC_ANALYSIS_FLAT_MAP_H_
#define PARMON_SRC_ANALYSIS_FLAT_MAP_H_

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace parmon::analysis {

template <typename K, typename V, typename Hash>
class FlatMap {
 public:
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }

  V* Find(const K& key) {
    if (size_ == 0)
      return nullptr;
    for (size_t i = Home(key);; i = (i + 1) & mask_) {
      Slot& s = slots_[i];
      if (!s.used)
        return nullptr;
      if (s.key == key)
        return &s.value;
    }
  }
  // The value of key, inserted as `value` when absent; second: whether it was inserted.
  std::pair<V*, bool> TryEmplace(const K& key, V value) {
    if (2 * (size_ + 1) > slots_.size())
      Grow();
    for (size_t i = Home(key);; i = (i + 1) & mask_) {
      Slot& s = slots_[i];
      if (!s.used) {
        s.used = true;
        s.key = key;
        s.value = std::move(value);
        ++size_;
        return {&s.value, true};
      }
      if (s.key == key)
        return {&s.value, false};
    }
  }
  bool Erase(const K& key) {
    if (size_ == 0)
      return false;
    size_t i = Home(key);
    for (;; i = (i + 1) & mask_) {
      if (!slots_[i].used)
        return false;
      if (slots_[i].key == key)
        break;
    }
    // Backward shift: an entry after the hole moves into it unless its home lies cyclically in
    // (hole, entry], where a probe from its home would not pass the hole.
    size_t hole = i;
    for (size_t j = (i + 1) & mask_; slots_[j].used; j = (j + 1) & mask_) {
      const size_t home = Home(slots_[j].key);
      const bool stays = hole <= j ? (hole < home && home <= j) : (hole < home || home <= j);
      if (stays)
        continue;
      slots_[hole] = std::move(slots_[j]);
      hole = j;
    }
    slots_[hole] = Slot{};
    --size_;
    return true;
  }
  // fn(key, value) for every entry, in no particular order.
  template <typename Fn>
  void ForEach(Fn&& fn) {
    for (Slot& s : slots_)
      if (s.used)
        fn(static_cast<const K&>(s.key), s.value);
  }

 private:
  struct Slot {
    K key{};
    V value{};
    bool used = false;
  };
  size_t Home(const K& key) const { return Hash{}(key)&mask_; }
  void Grow() {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(old.empty() ? 16 : 2 * old.size(), Slot{});
    mask_ = slots_.size() - 1;
    size_ = 0;
    for (Slot& s : old)
      if (s.used)
        TryEmplace(s.key, std::move(s.value));
  }
  std::vector<Slot> slots_;
  size_t mask_ = 0;
  size_t size_ = 0;
};

}  // namespace parmon::analysis

#endif  // PARMON_SRC_ANALYSIS_FLAT_MAP_H_
