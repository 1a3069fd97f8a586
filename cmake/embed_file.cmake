# Writes a C++ source defining `std::string_view <FUNC>()` over the bytes of INPUT, in namespace NS: how a file
# of the tree (the monitor page's HTML) becomes part of the binary. Run as
#   cmake -DINPUT=... -DOUTPUT=... -DNS=... -DFUNC=... -P embed_file.cmake
file(READ "${INPUT}" hex HEX)
string(LENGTH "${hex}" n_hex)
math(EXPR n_bytes "${n_hex} / 2")
string(REGEX REPLACE "(..)" "'\\\\x\\1'," bytes "${hex}")
file(WRITE "${OUTPUT}.tmp"
  "// Generated from ${INPUT} by cmake/embed_file.cmake: do not edit.\n"
  "#include <string_view>\n"
  "namespace ${NS} {\n"
  "namespace {\nconstexpr char kBytes[] = {${bytes} '\\0'};\n}  // namespace\n"
  "std::string_view ${FUNC}() { return {kBytes, ${n_bytes}}; }\n"
  "}  // namespace ${NS}\n")
file(COPY_FILE "${OUTPUT}.tmp" "${OUTPUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUTPUT}.tmp")
