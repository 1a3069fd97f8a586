#include "model/recurrent_state.h"

#include <algorithm>

#include "util/error.h"

namespace moetier::model {

RecurrentState::RecurrentState(int64_t n_layer, int64_t conv_elems, int64_t ssm_elems)
    : conv_elems_(conv_elems),
      ssm_elems_(ssm_elems),
      conv_(static_cast<size_t>(n_layer * conv_elems)),
      ssm_(static_cast<size_t>(n_layer * ssm_elems)),
      pos_(static_cast<size_t>(n_layer), 0) {}

void RecurrentState::begin(int64_t l, int64_t pos) {
  const auto i = static_cast<size_t>(l);
  if (pos == 0) {
    std::fill_n(conv(l), conv_elems_, 0.0f);
    std::fill_n(ssm(l), ssm_elems_, 0.0f);
    pos_[i] = 0;
    return;
  }
  if (pos != pos_[i]) {
    fail(
        "internal error: recurrent layer {} has read {} tokens but was asked to continue at position {} (a "
        "recurrent state cannot be rewound; see Model::can_keep)",
        l, pos_[i], pos);
  }
}

}  // namespace moetier::model
