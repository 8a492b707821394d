#include "core/errc.hpp"

namespace actorps {

std::string to_string(errc x) {
  switch (x) {
    case errc::shape_mismatch:
      return "shape_mismatch";
    case errc::unknown_function:
      return "unknown_function";
    case errc::no_shards:
      return "no_shards";
    case errc::step_failed:
      return "step_failed";
    case errc::cancelled:
      return "cancelled";
    case errc::unknown_worker:
      return "unknown_worker";
    case errc::handshake_refused:
      return "handshake_refused";
    case errc::ps_lost:
      return "ps_lost";
    case errc::no_workers:
      return "no_workers";
    case errc::unknown_variable:
      return "unknown_variable";
    case errc::key_out_of_range:
      return "key_out_of_range";
    case errc::bad_message:
      return "bad_message";
    case errc::stale_view:
      return "stale_view";
    case errc::unknown_group:
      return "unknown_group";
    case errc::not_authorized:
      return "not_authorized";
  }
  return "unknown_error";
}

} // namespace actorps
