#include "format/kinds.h"

#include <array>

namespace parmon::format {
namespace {

struct KindTable {
  std::array<KindInfo, 65536> infos{};
  KindTable() {
    for (uint32_t i = 0; i < infos.size(); ++i)
      infos[i].id = static_cast<uint16_t>(i);
#define PARMON_KIND_INFO_(name_, id_, nargs_, payload_, time_mask_, arg_names_) \
  static_assert((nargs_) <= kMaxArgs, "too many args for " #name_);             \
  infos[id_] = KindInfo{id_, #name_, nargs_, payload_, time_mask_, arg_names_};
    PARMON_EVENT_KINDS(PARMON_KIND_INFO_)
#undef PARMON_KIND_INFO_
  }
};

}  // namespace

const KindInfo& GetKindInfo(uint16_t id) {
  static const KindTable* table = new KindTable();
  return table->infos[id];
}

}  // namespace parmon::format
