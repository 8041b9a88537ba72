// Stands in for the OTF2 exporter when the OTF2 library was not found at configure time.
#include "export/export.h"

namespace parmon::exporter {

StatusOr<ExportStats> ExportOtf2(const model::Session&, const ExportOptions&, const std::string&) {
  return Status::Error(
      "this parmon was built without OTF2 (install libopen-trace-format2-dev and reconfigure)");
}

}  // namespace parmon::exporter
