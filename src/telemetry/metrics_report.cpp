#include "telemetry/metrics_report.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>
#include <iterator>
#include <map>

#include <fmt/format.h>

#include "util/error.h"

namespace moetier::telemetry {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;
constexpr const char* kColors[2] = {"#1f6fb4", "#d6452b"};

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  size_t b = 0;
  while (true) {
    const size_t e = s.find(sep, b);
    out.push_back(s.substr(b, e == std::string_view::npos ? std::string_view::npos : e - b));
    if (e == std::string_view::npos) break;
    b = e + 1;
  }
  return out;
}

std::vector<std::pair<std::string, std::string>> key_values(std::string_view s) {
  std::vector<std::pair<std::string, std::string>> kv;
  for (auto f : split(s, ' ')) {
    const size_t eq = f.find('=');
    if (f.empty() || eq == std::string_view::npos) continue;
    kv.emplace_back(std::string(f.substr(0, eq)), std::string(f.substr(eq + 1)));
  }
  return kv;
}

std::string esc(std::string_view s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '&': o += "&amp;"; break;
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '"': o += "&quot;"; break;
      default: o += c;
    }
  }
  return o;
}

struct Series {
  std::vector<double> y;  // per decode token; NaN = no value
};

// Per decode token: tok/s, running hit rate (%), MiB read.
Series series(const MetricsFile& m, int which) {
  Series s;
  for (const auto& r : m.rows) {
    if (r.prefill) continue;
    double v = NAN;
    if (which == 0) v = r.wall_ms > 0 ? static_cast<double>(r.steps) * 1e3 / r.wall_ms : NAN;
    if (which == 1) v = r.hit_pct >= 0 ? r.hit_pct : NAN;
    if (which == 2) v = static_cast<double>(r.read_bytes) / kMiB;
    s.y.push_back(v);
  }
  return s;
}

std::string nice(double v) {
  if (std::abs(v) >= 100) return fmt::format("{:.0f}", v);
  if (std::abs(v) >= 1) return fmt::format("{:.1f}", v);
  return fmt::format("{:.3g}", v);
}

// One chart: the runs' curves over decode tokens, y from 0 (or the data's minimum when negative) to the maximum.
std::string chart(const std::string& title, const std::string& unit, const std::vector<const MetricsFile*>& runs,
                  int which, int64_t steady_skip) {
  constexpr double W = 760, H = 230, L = 60, R = 20, T = 30, B = 36;
  std::vector<Series> ss;
  double ymax = 0, ymin = 0;
  size_t n = 0;
  for (const auto* m : runs) {
    ss.push_back(series(*m, which));
    n = std::max(n, ss.back().y.size());
    for (double v : ss.back().y)
      if (!std::isnan(v)) ymax = std::max(ymax, v), ymin = std::min(ymin, v);
  }
  if (which == 1) ymax = 100;
  if (ymax <= ymin) ymax = ymin + 1;
  const double xs = n > 1 ? (W - L - R) / static_cast<double>(n - 1) : 0;
  auto px = [&](size_t i) { return L + xs * static_cast<double>(i); };
  auto py = [&](double v) { return T + (H - T - B) * (1.0 - (v - ymin) / (ymax - ymin)); };
  std::string o = fmt::format(
      "<figure><svg class=\"curve\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {0} {1}\" width=\"{0}\" "
      "height=\"{1}\" role=\"img\" aria-label=\"{2}\">\n",
      W, H, esc(title));
  o += fmt::format("<text x=\"{}\" y=\"18\" class=\"title\">{} ({})</text>\n", L, esc(title), esc(unit));
  if (steady_skip > 0 && static_cast<size_t>(steady_skip) < n)
    o += fmt::format("<rect x=\"{:.1f}\" y=\"{}\" width=\"{:.1f}\" height=\"{}\" fill=\"#eee\"><title>warm-up: "
                     "{} tokens</title></rect>\n",
                     L, T, px(static_cast<size_t>(steady_skip)) - L, H - T - B, steady_skip);
  // Axes and gridlines at 0, 50 and 100% of the range.
  for (double f : {0.0, 0.5, 1.0}) {
    const double v = ymin + f * (ymax - ymin);
    o += fmt::format("<line x1=\"{}\" y1=\"{:.1f}\" x2=\"{}\" y2=\"{:.1f}\" stroke=\"#ccc\"/>"
                     "<text x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\" class=\"tick\">{}</text>\n",
                     L, py(v), W - R, py(v), L - 6, py(v) + 4, nice(v));
  }
  o += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" stroke=\"#333\"/>"
                   "<line x1=\"{0}\" y1=\"{2}\" x2=\"{3}\" y2=\"{2}\" stroke=\"#333\"/>\n",
                   L, T, H - B, W - R);
  o += fmt::format("<text x=\"{}\" y=\"{}\" class=\"tick\">0</text><text x=\"{}\" y=\"{}\" text-anchor=\"end\" "
                   "class=\"tick\">{}</text><text x=\"{}\" y=\"{}\" text-anchor=\"middle\" class=\"tick\">decode "
                   "token</text>\n",
                   L, H - B + 16, W - R, H - B + 16, n > 0 ? n - 1 : 0, (L + W - R) / 2, H - 6);
  bool any = false;
  for (size_t k = 0; k < ss.size(); ++k) {
    std::string pts;
    for (size_t i = 0; i < ss[k].y.size(); ++i) {
      if (std::isnan(ss[k].y[i])) continue;
      pts += fmt::format("{:.1f},{:.1f} ", px(i), py(ss[k].y[i]));
    }
    if (pts.empty()) continue;
    any = true;
    o += fmt::format("<polyline class=\"series\" fill=\"none\" stroke=\"{}\" stroke-width=\"1.6\" points=\"{}\"/>\n",
                     kColors[k % 2], pts);
  }
  if (!any)
    o += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" class=\"tick\">no values (-1: {})</text>\n",
                     (L + W - R) / 2, (T + H - B) / 2, which == 1 ? "no expert cache" : "not measured");
  o += "</svg></figure>\n";
  return o;
}

double num(const MetricsFile& m, std::string_view key) {
  const auto v = m.summary_value(key);
  return v.empty() ? 0.0 : std::strtod(v.c_str(), nullptr);
}

// Time split of the steps' wall time: compute (the forward thread's CPU), I/O stall, cache management, other.
std::string split_bar(const MetricsFile& m, size_t k) {
  double wall = 0, comp = 0, stall = 0, mgmt = 0;
  for (const auto& r : m.rows) wall += r.wall_ms, comp += r.compute_ms, stall += r.stall_ms, mgmt += r.mgmt_ms;
  const double other = std::max(0.0, wall - comp - stall - mgmt);
  const double total = std::max(wall, comp + stall + mgmt);
  constexpr double W = 760, BW = 500;  // the bar, px; its label goes to the right
  std::string o = fmt::format(
      "<svg class=\"split\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {0} 44\" width=\"{0}\" height=\"44\">"
      "<text x=\"0\" y=\"14\" class=\"tick\">{1}: {2:.0f} ms in steps</text>\n",
      W, esc(m.name), wall);
  const std::pair<const char*, double> parts[] = {{"compute", comp}, {"I/O stall", stall}, {"cache mgmt", mgmt},
                                                  {"other", other}};
  const char* fills[] = {"#4c9a2a", "#d6452b", "#e0a030", "#bbbbbb"};
  double x = 0;
  for (size_t i = 0; i < 4; ++i) {
    const double w = total > 0 ? BW * parts[i].second / total : 0;
    if (w <= 0) continue;
    o += fmt::format("<rect x=\"{:.1f}\" y=\"20\" width=\"{:.1f}\" height=\"18\" fill=\"{}\" stroke=\"{}\"><title>{} "
                     "{:.1f} ms ({:.1f}%)</title></rect>\n",
                     x, w, fills[i], kColors[k % 2], parts[i].first, parts[i].second,
                     100.0 * parts[i].second / total);
    x += w;
  }
  o += fmt::format("<text x=\"{}\" y=\"34\" class=\"tick\">{:.0f}% compute, {:.0f}% stall, {:.0f}% mgmt</text>",
                   BW + 8, total > 0 ? 100 * comp / total : 0, total > 0 ? 100 * stall / total : 0,
                   total > 0 ? 100 * mgmt / total : 0);
  o += "</svg>\n";
  return o;
}

std::string summary_table(const std::vector<const MetricsFile*>& runs) {
  std::string o = "<table><tr><th></th>";
  for (const auto* m : runs) o += fmt::format("<th>{}</th>", esc(m->name));
  o += "</tr>\n";
  auto row = [&](const char* label, auto f) {
    o += fmt::format("<tr><td>{}</td>", label);
    for (const auto* m : runs) o += fmt::format("<td>{}</td>", f(*m));
    o += "</tr>\n";
  };
  row("prefill tokens, tok/s", [](const MetricsFile& m) {
    const double n = num(m, "prefill_tokens"), ms = num(m, "prefill_ms");
    return fmt::format("{:.0f}, {:.1f}", n, ms > 0 ? n * 1e3 / ms : 0.0);
  });
  row("decode tokens, tok/s", [](const MetricsFile& m) {
    const double n = num(m, "decode_tokens"), ms = num(m, "decode_ms");
    return fmt::format("{:.0f}, {:.1f}", n, ms > 0 ? n * 1e3 / ms : 0.0);
  });
  row("steady decode tok/s (warm-up skipped)", [](const MetricsFile& m) {
    const double n = num(m, "steady_tokens"), ms = num(m, "steady_ms");
    if (num(m, "steady_skip") < 0) return std::string("not reached");
    return fmt::format("{:.1f} (skip {:.0f}, {})", ms > 0 ? n * 1e3 / ms : 0.0, num(m, "steady_skip"),
                       esc(m.summary_value("steady_rule")));
  });
  row("hit rate", [](const MetricsFile& m) {
    const double h = num(m, "hit_pct");
    return h >= 0 ? fmt::format("{:.1f}%", h) : std::string("n/a (no cache)");
  });
  row("MiB read, per decode token", [](const MetricsFile& m) {
    double dec = 0;
    for (const auto& r : m.rows)
      if (!r.prefill) dec += static_cast<double>(r.read_bytes);
    const double n = num(m, "decode_tokens");
    return fmt::format("{:.1f}, {:.2f}", num(m, "read_bytes") / kMiB, n > 0 ? dec / kMiB / n : 0.0);
  });
  row("evictions, MiB re-read",
      [](const MetricsFile& m) { return fmt::format("{:.0f}, {:.1f}", num(m, "evictions"), num(m, "reread_bytes") / kMiB); });
  row("background swap-ins, MiB swapped in", [](const MetricsFile& m) {
    const auto v = m.summary_value("swaps");
    if (v.empty() || num(m, "swaps") < 0) return std::string("n/a (no adaptive tier)");
    return fmt::format("{:.0f}, {:.1f}", num(m, "swaps"), num(m, "swap_bytes") / kMiB);
  });
  row("peak RSS MiB", [](const MetricsFile& m) { return fmt::format("{:.1f}", num(m, "peak_rss_mib")); });
  row("ended", [](const MetricsFile& m) {
    if (m.summary_derived) return std::string("cut short (no summary line: totals from the rows)");
    const auto v = m.summary_value("interrupted");
    if (v.empty() || v == "no") return std::string("as asked");
    return fmt::format("interrupted by {}", esc(v));
  });
  o += "</table>\n";
  return o;
}

}  // namespace

std::string MetricsFile::summary_value(std::string_view key) const {
  for (const auto& [k, v] : summary)
    if (k == key) return v;
  return {};
}

MetricsFile parse_metrics(std::string_view text, std::string_view name) {
  MetricsFile m;
  m.name = std::string(name);
  bool have_version = false, have_header = false;
  int64_t line_no = 0;
  // Columns by name: index of each in the file's header, -1 when absent (only optional columns may be).
  enum Col { kStep, kSteps, kPhase, kWall, kCompute, kIo, kRead, kHit, kStall, kMgmt, kMajflt, kCpu, kRss, kResident,
             kHits, kMisses, kEvictions, kReread, kSwaps, kSwapBytes, kNumCols };
  static constexpr std::string_view kNames[kNumCols] = {
      "step", "steps", "phase", "wall_ms", "compute_ms", "io_ms", "read_bytes", "cache_hit_pct", "stall_ms",
      "mgmt_ms", "majflt", "cpu_ms", "rss_mib", "cache_resident_mib", "hits", "misses", "evictions", "reread_bytes",
      "swaps", "swap_bytes"};
  constexpr int kFirstOptional = kSwaps;  // later additions: a file written before them reads -1
  int idx[kNumCols] = {};
  size_t n_fields = 0;
  std::vector<double> v;
  size_t b = 0;
  while (b < text.size()) {
    size_t e = text.find('\n', b);
    const bool cut = e == std::string_view::npos;  // the last line, without its end of line
    if (cut) e = text.size();
    std::string_view line = text.substr(b, e - b);
    b = e + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) continue;
    if (cut) {
      // The writer ends every line with '\n': a last line without one was cut off mid-write (the run was killed
      // or its disk filled), and even a row that parses may hold a shortened number.
      m.warnings.push_back(fmt::format("{}:{}: the last line was cut off (no end of line): skipped: '{}'", name,
                                       line_no, line.substr(0, 80)));
      break;
    }
    if (line[0] == '#') {
      auto rest = line.substr(1);
      if (!rest.empty() && rest[0] == ' ') rest.remove_prefix(1);
      auto take = [&](std::string_view tag) {
        if (rest.rfind(tag, 0) != 0) return false;
        rest.remove_prefix(tag.size());
        return true;
      };
      if (rest == "moetier_metrics v1") have_version = true;
      else if (take("engine ")) m.engine = std::string(rest);
      else if (take("model ")) m.model = std::string(rest);
      else if (take("config ")) {
        const size_t eq = rest.find('=');
        if (eq != std::string_view::npos) m.config.emplace_back(std::string(rest.substr(0, eq)), std::string(rest.substr(eq + 1)));
      } else if (take("note ")) m.notes.emplace_back(rest);
      else if (take("summary ")) {
        m.summary = key_values(rest);
        // The report converts steady_skip (a count of decode tokens, -1: no steady window) to an integer.
        const std::string skip = m.summary_value("steady_skip");
        double x = 0;
        const auto r = std::from_chars(skip.data(), skip.data() + skip.size(), x);
        if (!skip.empty() && (r.ec != std::errc() || r.ptr != skip.data() + skip.size() || x != std::floor(x) ||
                              x < -1 || x >= 0x1p63))
          fail("{}:{}: steady_skip '{}' is not a whole number from -1 to 2^63", name, line_no, skip);
      }
      continue;
    }
    if (!have_version) fail("{}:{}: not a moetier metrics CSV (no '# moetier_metrics v1' line first)", name, line_no);
    if (!have_header) {
      const auto names = split(line, ',');
      for (int c = 0; c < kNumCols; ++c) {
        const auto it = std::find(names.begin(), names.end(), kNames[c]);
        idx[c] = it == names.end() ? -1 : static_cast<int>(it - names.begin());
        if (idx[c] < 0 && c < kFirstOptional)
          fail("{}:{}: the header has no '{}' column (expected a header like '{}'), found '{}'", name, line_no,
               kNames[c], kColumns, line);
      }
      n_fields = names.size();
      v.assign(n_fields, 0.0);
      have_header = true;
      continue;
    }
    const auto f = split(line, ',');
    if (f.size() != n_fields) fail("{}:{}: expected {} fields, found {}", name, line_no, n_fields, f.size());
    for (size_t i = 0; i < f.size(); ++i) {
      if (static_cast<int>(i) == idx[kPhase]) {
        if (f[i] != "prefill" && f[i] != "decode") fail("{}:{}: phase '{}' is not prefill or decode", name, line_no, f[i]);
        v[i] = f[i] == "prefill" ? 1 : 0;
        continue;
      }
      const auto r = std::from_chars(f[i].data(), f[i].data() + f[i].size(), v[i]);
      // The writer never writes inf or nan (a value not measured is -1); from_chars would read them.
      if (r.ec != std::errc() || r.ptr != f[i].data() + f[i].size() || !std::isfinite(v[i]))
        fail("{}:{}: field {} '{}' is not a number", name, line_no, i + 1, f[i]);
    }
    auto col = [&](Col c) { return idx[c] >= 0 ? v[static_cast<size_t>(idx[c])] : -1.0; };
    // A count column's value as an integer: a whole number from `lo` (-1 where "not measured" is allowed), below
    // 2^63 so that it converts (1e300 or 0.5 would convert to garbage or undefined behaviour).
    auto whole = [&](Col c, double lo) {
      const double x = col(c);
      if (x != std::floor(x) || x < lo || x >= 0x1p63)
        fail("{}:{}: {} '{}' is not a whole number from {} to 2^63", name, line_no, kNames[c],
             f[static_cast<size_t>(idx[c])], lo);
      return static_cast<int64_t>(x);
    };
    StepRow r;
    r.step = whole(kStep, 0);
    r.steps = whole(kSteps, 0);
    r.prefill = col(kPhase) != 0;
    r.wall_ms = col(kWall);
    r.compute_ms = col(kCompute);
    r.io_ms = col(kIo);
    r.read_bytes = static_cast<uint64_t>(whole(kRead, 0));
    r.hit_pct = col(kHit);
    r.stall_ms = col(kStall);
    r.mgmt_ms = col(kMgmt);
    r.majflt = whole(kMajflt, -1);
    r.cpu_ms = col(kCpu);
    r.rss_mib = col(kRss);
    r.cache_resident_mib = col(kResident);
    r.hits = static_cast<uint64_t>(whole(kHits, 0));
    r.misses = static_cast<uint64_t>(whole(kMisses, 0));
    r.evictions = static_cast<uint64_t>(whole(kEvictions, 0));
    r.reread_bytes = static_cast<uint64_t>(whole(kReread, 0));
    r.swaps = idx[kSwaps] >= 0 ? whole(kSwaps, -1) : -1;
    r.swap_bytes = idx[kSwapBytes] >= 0 ? whole(kSwapBytes, -1) : -1;
    m.rows.push_back(r);
  }
  if (!have_version) fail("{}: not a moetier metrics CSV (no '# moetier_metrics v1' line)", name);
  if (!have_header) fail("{}: no CSV header line", name);
  if (m.summary.empty()) {  // a run cut short: derive the totals from the rows
    m.summary = key_values(summary_fields(summarize(m.rows, -1, -1)));
    m.summary_derived = true;
  }
  return m;
}

MetricsFile read_metrics(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("{}: cannot open the metrics CSV", path.string());
  const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  return parse_metrics(text, path.string());
}

std::string render_report(const MetricsFile& run, const MetricsFile* other) {
  std::vector<const MetricsFile*> runs{&run};
  if (other) runs.push_back(other);
  std::string o =
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>moetier report</title>\n<style>"
      "body{font:14px/1.4 sans-serif;margin:24px;color:#222;max-width:820px}"
      "table{border-collapse:collapse;margin:8px 0}td,th{border:1px solid #ccc;padding:3px 8px;text-align:left}"
      "tr.diff td{background:#fff3cd}.title{font:bold 13px sans-serif}.tick{font:11px sans-serif;fill:#555}"
      ".warning{color:#a33}"
      "figure{margin:8px 0}.key{display:inline-block;width:14px;height:4px;vertical-align:middle;margin-right:4px}"
      "</style></head><body>\n";
  o += fmt::format("<h1>moetier run report</h1>\n<p>");
  for (size_t k = 0; k < runs.size(); ++k)
    o += fmt::format("<span class=\"key\" style=\"background:{}\"></span><b>{}</b> — {}, {}<br>\n", kColors[k],
                     esc(runs[k]->name), esc(runs[k]->engine), esc(runs[k]->model));
  o += "</p>\n";
  for (const auto* m : runs)
    for (const auto& w : m->warnings) o += fmt::format("<p class=\"warning\">warning: {}</p>\n", esc(w));
  o += "<h2>Summary</h2>\n" + summary_table(runs);
  o += "<h2>Per decode token</h2>\n<p>Grey: the warm-up left out of the steady tok/s (first run).</p>\n";
  const int64_t skip = static_cast<int64_t>(num(run, "steady_skip"));
  o += chart("decode speed", "tok/s", runs, 0, skip);
  o += chart("running expert-cache hit rate", "%", runs, 1, skip);
  o += chart("expert bytes read", "MiB per token", runs, 2, skip);
  o += "<h2>Time split</h2>\n<p>Of the steps' wall time: compute (the forward thread's CPU time), waiting for expert "
       "reads, cache bookkeeping, and the rest.</p>\n";
  for (size_t k = 0; k < runs.size(); ++k) o += split_bar(*runs[k], k);
  if (other) {
    std::map<std::string, std::pair<std::string, std::string>> all;
    for (const auto& [k, v] : run.config) all[k].first = v;
    for (const auto& [k, v] : other->config) all[k].second = v;
    o += "<h2>Settings that differ</h2>\n<table class=\"differ\"><tr><th>setting</th>";
    o += fmt::format("<th>{}</th><th>{}</th></tr>\n", esc(run.name), esc(other->name));
    int n = 0;
    for (const auto& [k, v] : all)
      if (v.first != v.second) {
        o += fmt::format("<tr class=\"diff\"><td>{}</td><td>{}</td><td>{}</td></tr>\n", esc(k), esc(v.first),
                         esc(v.second));
        ++n;
      }
    if (n == 0) o += "<tr><td colspan=\"3\">none</td></tr>\n";
    o += "</table>\n";
  }
  o += "<h2>Configuration</h2>\n<table class=\"config\"><tr><th>setting</th>";
  for (const auto* m : runs) o += fmt::format("<th>{}</th>", esc(m->name));
  o += "</tr>\n";
  for (const auto& [k, v] : run.config) {
    std::string second;
    if (other)
      for (const auto& [k2, v2] : other->config)
        if (k2 == k) second = v2;
    const bool diff = other && second != v;
    o += fmt::format("<tr{}><td>{}</td><td>{}</td>{}</tr>\n", diff ? " class=\"diff\"" : "", esc(k), esc(v),
                     other ? fmt::format("<td>{}</td>", esc(second)) : std::string());
  }
  o += "</table>\n<h2>Notes</h2>\n<ul>\n";
  for (const auto& n : run.notes) o += fmt::format("<li>{}</li>\n", esc(n));
  o += "</ul>\n</body></html>\n";
  return o;
}

}  // namespace moetier::telemetry
