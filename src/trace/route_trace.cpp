#include "trace/route_trace.h"

#include <charconv>
#include <cmath>
#include <system_error>

#include <fmt/format.h>

#include "util/error.h"

namespace moetier::trace {

namespace {

constexpr std::string_view kVersionLine = "# route_trace v1";
constexpr std::string_view kCsvHeader = "turn,phase,step,layer,slot,expert,weight,residency,expert_bytes";
// The shortest layer line, with its end of line: "# layer=0 expert_bytes=0 dense_bytes=0\n".
constexpr size_t kShortestLayerLine = 39;

// Cursor over one line with the file name and line number for errors.
struct LineCtx {
  std::string_view name;
  size_t line_no;
};

template <class T>
T parse_int(std::string_view s, const LineCtx& c, std::string_view what) {
  T v{};
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size()) {
    fail("{}:{}: {} must be an integer, got '{}'", c.name, c.line_no, what, s);
  }
  return v;
}

// `key=value` among space-separated tokens of a comment line; empty when absent.
std::string_view find_value(std::string_view line, std::string_view key) {
  size_t pos = 0;
  while ((pos = line.find(key, pos)) != std::string_view::npos) {
    const bool starts_token = pos == 0 || line[pos - 1] == ' ';
    if (starts_token && pos + key.size() < line.size() && line[pos + key.size()] == '=') {
      const size_t b = pos + key.size() + 1;
      const size_t e = line.find(' ', b);
      return line.substr(b, e == std::string_view::npos ? std::string_view::npos : e - b);
    }
    pos += key.size();
  }
  return {};
}

template <class T>
T required_int(std::string_view line, std::string_view key, const LineCtx& c) {
  const std::string_view v = find_value(line, key);
  if (v.empty()) fail("{}:{}: expected '{}=' on this header line", c.name, c.line_no, key);
  return parse_int<T>(v, c, key);
}

}  // namespace

RouteTrace parse_route_trace(std::string_view text, std::string_view name) {
  RouteTrace t;
  TraceHeader& h = t.header;
  bool seen_version = false, seen_model = false, seen_csv = false;
  std::vector<uint8_t> layer_seen;
  size_t pos = 0;
  LineCtx c{name, 0};
  t.rows.reserve(text.size() / 40);  // a row is ~40 bytes
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    ++c.line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) continue;
    if (line[0] == '#') {
      if (!seen_version) {
        if (line != kVersionLine) fail("{}:{}: expected '{}' as the first line, got '{}'", name, c.line_no,
                                       kVersionLine, line);
        seen_version = true;
      } else if (seen_csv && (line.starts_with("# model=") || line.starts_with("# layer=") ||
                              line.starts_with("# cache "))) {
        // Rows already read were checked against the header; a header line among them would change it.
        fail("{}:{}: header line after the CSV header (header lines come first): '{}'", name, c.line_no, line);
      } else if (line.starts_with("# model=")) {
        if (seen_model) fail("{}:{}: a second '# model=' line (a trace has one)", name, c.line_no);
        const size_t arch = line.find(" arch=");
        if (arch == std::string_view::npos) fail("{}:{}: expected ' arch=' after the model path", name, c.line_no);
        h.model = std::string(line.substr(8, arch - 8));
        h.arch = std::string(find_value(line, "arch"));
        h.n_moe_layers = required_int<int32_t>(line, "n_layer", c);
        h.n_expert = required_int<int32_t>(line, "n_expert", c);
        h.n_expert_used = required_int<int32_t>(line, "n_expert_used", c);
        if (h.n_moe_layers <= 0 || h.n_expert <= 0 || h.n_expert_used <= 0 || h.n_expert_used > h.n_expert) {
          fail("{}:{}: expected n_layer > 0, n_expert > 0 and 0 < n_expert_used <= n_expert, got {}, {}, {}", name,
               c.line_no, h.n_moe_layers, h.n_expert, h.n_expert_used);
        }
        // Every layer needs a '# layer=' line of at least kShortestLayerLine bytes: a count the text cannot hold is
        // refused before the per-layer table is sized by it (n_layer=366666666 in a 200-byte file asked for 6 GB).
        if (static_cast<uint64_t>(h.n_moe_layers) > text.size() / kShortestLayerLine) {
          fail("{}:{}: n_layer={} needs as many '# layer=' lines, more than a file of {} bytes holds", name,
               c.line_no, h.n_moe_layers, text.size());
        }
        h.layers.assign(static_cast<size_t>(h.n_moe_layers), TraceLayer{});
        layer_seen.assign(static_cast<size_t>(h.n_moe_layers), 0);
        seen_model = true;
      } else if (line.starts_with("# layer=")) {
        if (!seen_model) fail("{}:{}: layer line before the model line", name, c.line_no);
        const auto l = required_int<int32_t>(line, "layer", c);
        if (l < 0 || l >= h.n_moe_layers) {
          fail("{}:{}: layer {} out of range [0, {})", name, c.line_no, l, h.n_moe_layers);
        }
        if (layer_seen[l]) fail("{}:{}: a second '# layer={}' line", name, c.line_no, l);
        h.layers[l].expert_bytes = required_int<uint64_t>(line, "expert_bytes", c);
        h.layers[l].dense_bytes = required_int<uint64_t>(line, "dense_bytes", c);
        layer_seen[l] = 1;
      } else if (line.starts_with("# cache ")) {
        if (h.cache) fail("{}:{}: a second '# cache' line", name, c.line_no);
        TraceCache tc;
        tc.slot_bytes = required_int<uint64_t>(line, "slot_bytes", c);
        tc.n_batch = required_int<int64_t>(line, "n_batch", c);
        const auto guard = required_int<int32_t>(line, "cliff_guard", c);
        if (tc.slot_bytes == 0 || tc.n_batch <= 0 || (guard != 0 && guard != 1)) {
          fail("{}:{}: expected slot_bytes > 0, n_batch > 0 and cliff_guard 0 or 1 on the cache line, got {}, {}, {}",
               name, c.line_no, tc.slot_bytes, tc.n_batch, guard);
        }
        tc.cliff_guard = guard == 1;
        h.cache = tc;
      }  // any other comment is ignored
      continue;
    }
    if (!seen_csv) {
      if (line != kCsvHeader) fail("{}:{}: expected the CSV header '{}', got '{}'", name, c.line_no, kCsvHeader, line);
      if (!seen_model) fail("{}:{}: the '# model=' header line is missing before the CSV header", name, c.line_no);
      for (size_t l = 0; l < layer_seen.size(); ++l) {
        if (!layer_seen[l]) fail("{}:{}: header has no '# layer={}' line", name, c.line_no, l);
      }
      seen_csv = true;
      continue;
    }
    // A row: 9 comma-separated fields.
    std::string_view f[9];
    size_t b = 0;
    for (int i = 0; i < 9; ++i) {
      const size_t e = line.find(',', b);
      if ((e == std::string_view::npos) != (i == 8)) {
        fail("{}:{}: expected 9 comma-separated fields ({}), got '{}'", name, c.line_no, kCsvHeader, line);
      }
      f[i] = line.substr(b, i == 8 ? std::string_view::npos : e - b);
      b = e + 1;
    }
    TraceRow r;
    r.turn = parse_int<int32_t>(f[0], c, "turn");
    const auto phase = parse_int<int32_t>(f[1], c, "phase");
    if (phase != 0 && phase != 1) fail("{}:{}: phase must be 0 (prefill) or 1 (decode), got {}", name, c.line_no, phase);
    r.phase = static_cast<uint8_t>(phase);
    r.step = parse_int<int64_t>(f[2], c, "step");
    r.layer = parse_int<int32_t>(f[3], c, "layer");
    if (r.layer < 0 || r.layer >= h.n_moe_layers) {
      fail("{}:{}: layer {} out of range [0, {})", name, c.line_no, r.layer, h.n_moe_layers);
    }
    r.slot = parse_int<int32_t>(f[4], c, "slot");
    r.expert = parse_int<int32_t>(f[5], c, "expert");
    if (r.expert < 0 || r.expert >= h.n_expert) fail("{}:{}: expert {} out of range [0, {})", name, c.line_no,
                                                     r.expert, h.n_expert);
    if (f[6] == "nan" || f[6] == "-nan" || f[6] == "NaN") {
      r.weight = std::nanf("");
    } else {
      float w = 0.0f;
      const auto [p, ec] = std::from_chars(f[6].data(), f[6].data() + f[6].size(), w);
      if (ec != std::errc() || p != f[6].data() + f[6].size()) {
        fail("{}:{}: weight must be a number or nan, got '{}'", name, c.line_no, f[6]);
      }
      r.weight = w;
    }
    const auto res = parse_int<int32_t>(f[7], c, "residency");
    if (res < 0 || res > 2) fail("{}:{}: residency must be 0, 1 or 2, got {}", name, c.line_no, res);
    r.residency = static_cast<Residency>(res);
    r.expert_bytes = parse_int<uint64_t>(f[8], c, "expert_bytes");
    t.rows.push_back(r);
  }
  if (!seen_csv) fail("{}: no CSV header '{}' found (not a route_trace v1 file?)", name, kCsvHeader);
  return t;
}

RouteTrace read_route_trace(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("{}: cannot open route trace", path.string());
  std::string text;
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  if (size < 0) fail("{}: cannot read route trace size", path.string());
  text.resize(static_cast<size_t>(size));
  in.seekg(0);
  if (!in.read(text.data(), size)) fail("{}: read failed", path.string());
  return parse_route_trace(text, path.string());
}

std::string format_route_header(const TraceHeader& h) {
  std::string s;
  s += kVersionLine;
  s += '\n';
  s += fmt::format("# model={} arch={} n_layer={} n_expert={} n_expert_used={}\n", h.model, h.arch,
                   h.n_moe_layers, h.n_expert, h.n_expert_used);
  for (size_t l = 0; l < h.layers.size(); ++l) {
    s += fmt::format("# layer={} expert_bytes={} dense_bytes={}\n", l, h.layers[l].expert_bytes,
                     h.layers[l].dense_bytes);
  }
  if (h.cache) {
    s += fmt::format("# cache slot_bytes={} n_batch={} cliff_guard={}\n", h.cache->slot_bytes, h.cache->n_batch,
                     h.cache->cliff_guard ? 1 : 0);
  }
  s += kCsvHeader;
  s += '\n';
  return s;
}

namespace {

// Appends decimal text of an integer; to_chars cannot fail with a 24-byte buffer for 64-bit values.
template <class T>
void put_int(std::string& out, T v) {
  char buf[24];
  const auto res = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, res.ptr);
}

}  // namespace

void append_route_row(std::string& out, const TraceRow& r) {
  put_int(out, r.turn);
  out += ',';
  put_int(out, static_cast<int>(r.phase));
  out += ',';
  put_int(out, r.step);
  out += ',';
  put_int(out, r.layer);
  out += ',';
  put_int(out, r.slot);
  out += ',';
  put_int(out, r.expert);
  out += ',';
  if (std::isnan(r.weight)) {
    out += "nan";
  } else {
    // The shortest text that reads back as the same float: what %.6g gave for weights recorded that way, and
    // exact for any other float.
    char buf[32];
    const auto res = std::to_chars(buf, buf + sizeof buf, r.weight);
    out.append(buf, res.ptr);
  }
  out += ',';
  put_int(out, static_cast<int>(r.residency));
  out += ',';
  put_int(out, r.expert_bytes);
  out += '\n';
}

void write_route_trace(const std::filesystem::path& path, const RouteTrace& trace) {
  RouteTraceWriter w(path, trace.header);
  for (const TraceRow& r : trace.rows) w.add(r);
  w.close();
}

RouteTraceWriter::RouteTraceWriter(const std::filesystem::path& path, const TraceHeader& header)
    : path_(path), out_(path, std::ios::binary | std::ios::trunc) {
  if (!out_) fail("{}: cannot create route trace", path_.string());
  buf_ = format_route_header(header);
}

RouteTraceWriter::~RouteTraceWriter() {
  try {
    if (out_.is_open()) close();
  } catch (const Error&) {
    // Destructors must not throw; callers who care call close().
  }
}

void RouteTraceWriter::add(const TraceRow& row) {
  append_route_row(buf_, row);
  if (buf_.size() >= (1u << 20)) flush();  // 1 MiB batches
}

void RouteTraceWriter::flush() {
  out_.write(buf_.data(), static_cast<std::streamsize>(buf_.size()));
  if (!out_) fail("{}: write failed", path_.string());
  buf_.clear();
}

void RouteTraceWriter::close() {
  flush();
  out_.close();
  if (out_.fail()) fail("{}: close failed", path_.string());
}

}  // namespace moetier::trace
