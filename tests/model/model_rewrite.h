// Copies of an oracle model with edited metadata, for the tests that check what a bad value does at load: the
// edit applied, the tensors copied as they are (or one declared and written with half its rows), and the error
// load_model gives.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "gguf/writer.h"
#include "model/model.h"
#include "test_support.h"
#include "util/error.h"

namespace moetier::test {

// Writes `src` to tmp_dir(`folder`)/`out_name` with `edit_md` applied to the metadata and, for the tensor named
// `shrink` (if any), only half of its rows declared and written. `edit_data` (if given) may change a tensor's bytes
// (a copy of them) before they are written.
inline std::filesystem::path rewrite_model(
    const std::filesystem::path& src_path, const std::string& folder, const std::string& out_name,
    const std::function<void(gguf::Metadata&)>& edit_md, const std::string& shrink = "",
    const std::function<void(const gguf::TensorInfo&, std::vector<uint8_t>&)>& edit_data = {}) {
  const gguf::GgufModel src = gguf::GgufModel::open(src_path);
  const std::filesystem::path out = tmp_dir(folder) / out_name;
  gguf::GgufWriter w(out);
  gguf::Metadata md = src.metadata();
  edit_md(md);
  w.set_metadata(md);
  for (const auto& t : src.tensors()) {
    gguf::TensorSpec spec{t.name, t.type, std::vector<int64_t>(t.ne.begin(), t.ne.begin() + t.n_dims)};
    if (t.name == shrink) spec.ne[1] /= 2;
    w.add_tensor(spec);
  }
  for (const auto& t : src.tensors()) {
    const uint64_t n = t.name == shrink ? t.n_bytes / 2 : t.n_bytes;
    if (edit_data) {
      std::vector<uint8_t> bytes(t.data, t.data + n);
      edit_data(t, bytes);
      w.write_tensor_data(std::span<const uint8_t>(bytes));
    } else {
      w.write_tensor_data(std::span<const uint8_t>(t.data, n));
    }
  }
  w.finish();
  return out;
}

// The message load_model (context 64) fails with on `path`, or "(no error)".
inline std::string load_error(const std::filesystem::path& path) {
  const gguf::GgufModel f = gguf::GgufModel::open(path);
  try {
    model::load_model(f, model::ModelOptions{.n_ctx = 64});
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace moetier::test
