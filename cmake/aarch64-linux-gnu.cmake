# Cross-compiling for 64-bit ARM Linux (phones' and ARM laptops' CPUs) with Debian's cross toolchain
# (g++-aarch64-linux-gnu) against the multiarch :arm64 development packages (scripts/test-arm64.sh installs both).
# The binaries run here under qemu-user: CMAKE_CROSSCOMPILING_EMULATOR lets ctest and gtest's test discovery start
# them, and the binfmt_misc entry the script registers lets a test start the CLI binary itself.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
# Headers and CMake packages that are the same for every architecture (CLI11, nlohmann-json) live in /usr; the
# arm64 libraries in /usr/lib/aarch64-linux-gnu, which find_package and find_library reach through the library
# architecture. Programs (glslc, the host's tools) are the build machine's.
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu /usr)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE BOTH)
# pkg-config must read the arm64 .pc files only, never the build machine's.
set(ENV{PKG_CONFIG_LIBDIR} /usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig)
set(ENV{PKG_CONFIG_PATH} "")
find_program(MOETIER_QEMU_AARCH64 qemu-aarch64-static)
if(MOETIER_QEMU_AARCH64)
  set(CMAKE_CROSSCOMPILING_EMULATOR ${MOETIER_QEMU_AARCH64})
endif()
