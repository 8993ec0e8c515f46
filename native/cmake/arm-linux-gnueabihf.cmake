# Cross-compile for 32-bit ARM Linux, hard-float (armv7-a + NEON) with Debian's
# g++-arm-linux-gnueabihf (Thumb-2 by default: our code calls Lite's A32 library
# through normal EABI interworking); ctest runs tests under qemu-arm.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR armv7-a)
set(EDGEKIT_TRIPLE arm-linux-gnueabihf)
set(EDGEKIT_SYSROOT /usr/arm-linux-gnueabihf CACHE PATH "Target libraries (ld-linux-armhf, libc, libstdc++) for qemu's -L")

set(CMAKE_C_COMPILER ${EDGEKIT_TRIPLE}-gcc)
set(CMAKE_CXX_COMPILER ${EDGEKIT_TRIPLE}-g++)
# GCC notes that passing some std::vector<double> iterators changed ABI in GCC 7.1: not our concern.
set(CMAKE_CXX_FLAGS_INIT "-Wno-psabi")
set(CMAKE_FIND_ROOT_PATH ${EDGEKIT_SYSROOT})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)

find_program(EDGEKIT_QEMU qemu-arm)
if(EDGEKIT_QEMU)
  set(CMAKE_CROSSCOMPILING_EMULATOR ${EDGEKIT_QEMU} -L ${EDGEKIT_SYSROOT})
endif()
