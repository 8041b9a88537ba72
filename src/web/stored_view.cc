// StoredView (stored_view.h).
#include "web/stored_view.h"

#include <nlohmann/json.hpp>

#include "model/session.h"

namespace parmon::web {

StatusOr<std::unique_ptr<StoredView>> StoredView::Build(const std::string& path,
                                                        analysis::Results results) {
  model::SessionOptions so;
  auto session = model::Session::Open(path, so);
  if (!session.ok())
    return session.status();
  auto index = TraceIndex::Build(**session);
  if (!index.ok())
    return index.status();
  auto view = std::unique_ptr<StoredView>(new StoredView());
  for (const format::Problem& p : (*session)->reader().problems())
    if (!p.harmless)
      view->problems_.push_back(p.message);
  session->reset();  // the index keeps what it needs
  view->results_ = std::move(results);
  view->index_ = std::move(*index);
  view->api_ = std::make_unique<Api>(*view->index_, view->results_);
  return view;
}

ApiResponse StoredView::Handle(std::string_view target) const {
  ApiResponse r = api_->Handle(target);
  if (r.status != 200 || problems_.empty() || target.substr(0, target.find('?')) != "/api/session")
    return r;
  nlohmann::json body = nlohmann::json::parse(r.body);
  body["problems"] = problems_;
  r.body = body.dump();
  return r;
}

}  // namespace parmon::web
