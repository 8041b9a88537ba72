#include "format/kinds.h"

#include <array>

namespace parmon::format {
namespace {

using KindTable = std::array<KindInfo, 65536>;

// Built by the compiler: a table filled at start-up would write all of its 2 MB, and every
// `parmon` command (a `parmon record -- true` among them) would pay 512 page faults for it. As a
// constant, only the pages of the kinds looked up are ever touched.
constexpr KindTable MakeKindTable() {
  KindTable infos{};
  for (uint32_t i = 0; i < infos.size(); ++i)
    infos[i].id = static_cast<uint16_t>(i);
#define PARMON_KIND_INFO_(name_, id_, nargs_, payload_, time_mask_, arg_names_) \
  static_assert((nargs_) <= kMaxArgs, "too many args for " #name_);             \
  infos[id_] = KindInfo{id_, #name_, nargs_, payload_, time_mask_, arg_names_};
  PARMON_EVENT_KINDS(PARMON_KIND_INFO_)
#undef PARMON_KIND_INFO_
  for (size_t i = 0; i < std::size(kKindDeltas); ++i) {
    KindInfo& k = infos[kKindDeltas[i].id];
    // A kind of the table, of several args, none of them both a time and a difference (a
    // constant expression: a wrong entry fails the build).
    if (!k.name || k.nargs < 2 || (kKindDeltas[i].mask & k.time_mask) != 0 ||
        (kKindDeltas[i].mask >> k.nargs) != 0)
      throw "kKindDeltas: not a kind whose args can be differences";
    k.delta_mask = kKindDeltas[i].mask;
    k.delta_slot = static_cast<uint8_t>(i);
  }
  return infos;
}

constexpr KindTable kKindTable = MakeKindTable();

}  // namespace

const KindInfo& GetKindInfo(uint16_t id) {
  return kKindTable[id];
}

}  // namespace parmon::format
