// Stands in for perfetto.cc until the Perfetto exporter lands (the integrator deletes this file
// then): the interface in export.h stays whole, and `parmon export --format perfetto` says why
// it cannot.
#include "export/export.h"

namespace parmon::exporter {

StatusOr<ExportStats> ExportPerfetto(const model::Session&,
                                     const ExportOptions&,
                                     const std::string&) {
  return Status::Error("this parmon was built without the Perfetto exporter");
}

}  // namespace parmon::exporter
