# Cross-compile for 64-bit ARM Linux (glibc) with Debian's g++-aarch64-linux-gnu;
# ctest runs the test binaries under qemu-aarch64 with the cross sysroot.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(EDGEKIT_TRIPLE aarch64-linux-gnu)
set(EDGEKIT_SYSROOT /usr/aarch64-linux-gnu CACHE PATH "Target libraries (ld-linux, libc, libstdc++) for qemu's -L")

set(CMAKE_C_COMPILER ${EDGEKIT_TRIPLE}-gcc)
set(CMAKE_CXX_COMPILER ${EDGEKIT_TRIPLE}-g++)
set(CMAKE_FIND_ROOT_PATH ${EDGEKIT_SYSROOT})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)

find_program(EDGEKIT_QEMU qemu-aarch64)
if(EDGEKIT_QEMU)
  set(CMAKE_CROSSCOMPILING_EMULATOR ${EDGEKIT_QEMU} -L ${EDGEKIT_SYSROOT})
endif()
