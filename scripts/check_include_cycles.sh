#!/usr/bin/env bash
# Fails when the top-level folders of src/ include each other in a cycle, naming the cycle and the #include
# lines that close it. Folder A depends on folder B when a file under src/A/ has `#include "B/..."` and src/B/
# exists (system and third-party headers, and includes within A, are not edges). Plain bash + grep + awk, so it
# runs on a bare Debian 12 (ctest: the `layout` label).
#
#   scripts/check_include_cycles.sh [--graph] [SRC_DIR]
#
# --graph also prints the folder graph on stdout, one line per folder: `A: B C` (A's dependencies, sorted).
# SRC_DIR defaults to the repository's src/. Exit status: 0 without a cycle, 1 with one, 2 on a usage error.
set -euo pipefail

graph=0
src=""
for a in "$@"; do
  case "$a" in
    --graph) graph=1 ;;
    -h|--help) sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "check_include_cycles: unknown option '$a' (try --help)" >&2; exit 2 ;;
    *) [ -z "$src" ] || { echo "check_include_cycles: one SRC_DIR only" >&2; exit 2; }; src="$a" ;;
  esac
done
[ -n "$src" ] || src="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/src"
[ -d "$src" ] || { echo "check_include_cycles: '$src' is not a directory" >&2; exit 2; }
src="${src%/}"

# The folders first (one `dir NAME` line each, so a folder without includes still appears in the graph), then
# every quoted #include as FILE:LINE:TEXT.
{
  find "$src" -mindepth 1 -maxdepth 1 -type d -printf 'dir %f\n' | LC_ALL=C sort
  grep -rHn --include='*.h' --include='*.hpp' --include='*.cpp' --include='*.cc' \
    -E '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$src" | LC_ALL=C sort -t: -k1,1 -k2,2n || true
} | LC_ALL=C awk -v src="$src/" -v graph="$graph" '
  $1 == "dir" && NF == 2 && index($0, ":") == 0 { folder[$2] = 1; order[++n_folders] = $2; next }
  {
    # FILE:LINE:TEXT; FILE is under src/, so its folder is the first path component after it.
    file = $0; sub(/:.*/, "", file)
    rest = substr($0, length(file) + 2)
    line_no = rest; sub(/:.*/, "", line_no)
    text = substr(rest, length(line_no) + 2)
    rel = substr(file, length(src) + 1)
    if (index(rel, "/") == 0) next  # a file directly in src/ belongs to no folder
    from = substr(rel, 1, index(rel, "/") - 1)
    inc = text; sub(/^[^"]*"/, "", inc); sub(/".*/, "", inc)
    if (index(inc, "/") == 0) next
    to = substr(inc, 1, index(inc, "/") - 1)
    if (!(to in folder) || to == from) next
    key = from SUBSEP to
    if (!(key in edge)) { edge[key] = 1; evidence[key] = "src/" rel ":" line_no " #include \"" inc "\"" }
    else ++more[key]
  }

  # Tarjan: strongly connected components; one with two folders or more is a cycle.
  function visit(v,    w, i) {
    index_of[v] = low[v] = ++counter
    stack[++sp] = v; on_stack[v] = 1
    for (i = 1; i <= n_folders; ++i) {
      w = order[i]
      if (!((v SUBSEP w) in edge)) continue
      if (!(w in index_of)) { visit(w); if (low[w] < low[v]) low[v] = low[w] }
      else if (on_stack[w] && index_of[w] < low[v]) low[v] = index_of[w]
    }
    if (low[v] == index_of[v]) {
      ++n_scc
      do { w = stack[sp--]; on_stack[w] = 0; scc[w] = n_scc; ++scc_size[n_scc] } while (w != v)
    }
  }

  # A shortest cycle through s inside its component, by breadth-first search: "s -> ... -> s".
  function cycle_through(s,    head, tail, q, prev, v, w, i, path) {
    head = 1; tail = 0
    for (i = 1; i <= n_folders; ++i) {
      w = order[i]
      if ((s SUBSEP w) in edge && scc[w] == scc[s] && !(w in prev)) { prev[w] = s; q[++tail] = w }
    }
    while (head <= tail) {
      v = q[head++]
      if (v == s) break
      for (i = 1; i <= n_folders; ++i) {
        w = order[i]
        if ((v SUBSEP w) in edge && scc[w] == scc[s] && !(w in prev)) { prev[w] = v; q[++tail] = w }
      }
    }
    path = s; v = prev[s]
    while (v != s) { path = v " -> " path; v = prev[v] }
    return s " -> " path
  }

  END {
    if (graph) {
      for (i = 1; i <= n_folders; ++i) {
        v = order[i]; deps = ""
        for (j = 1; j <= n_folders; ++j) if ((v SUBSEP order[j]) in edge) deps = deps " " order[j]
        print v ":" deps
      }
    }
    for (i = 1; i <= n_folders; ++i) if (!(order[i] in index_of)) visit(order[i])
    bad = 0
    for (i = 1; i <= n_folders; ++i) {
      s = order[i]
      if (scc_size[scc[s]] < 2 || (scc[s] in reported)) continue
      reported[scc[s]] = 1; bad = 1
      members = ""
      for (a = 1; a <= n_folders; ++a)
        if (scc[order[a]] == scc[s]) members = members (members == "" ? "" : ", ") order[a]
      printf "include cycle between the src/ folders %s (e.g. %s); their includes of each other:\n", members,
             cycle_through(s) > "/dev/stderr"
      for (a = 1; a <= n_folders; ++a)
        for (b = 1; b <= n_folders; ++b) {
          key = order[a] SUBSEP order[b]
          if (!(key in edge) || scc[order[a]] != scc[s] || scc[order[b]] != scc[s]) continue
          extra = more[key] ? sprintf(" (and %d more)", more[key]) : ""
          printf "  %s -> %s: %s%s\n", order[a], order[b], evidence[key], extra > "/dev/stderr"
        }
    }
    if (!bad) print "check_include_cycles: no include cycle between the " n_folders " folders of src/" > "/dev/stderr"
    exit bad
  }
'
