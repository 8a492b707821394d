# Imported targets for the dependencies of actorps that ship no CMake config
# of their own, defined the same way for the build (CMakeLists.txt) and for
# projects that use the installed package (actorpsConfig.cmake):
# - CAF 0.17 from Debian's libcaf-dev: caf::core, caf::io (see the shared
#   caf-0.17-notes.md, section 2);
# - libcsv from Debian's libcsv-dev: actorps::csv;
# - cpp-httplib from Debian's libcpp-httplib-dev (a compiled library whose
#   header must see the definitions it was built with, those of its
#   cpp-httplib.pc: OpenSSL, zlib and Brotli support): actorps::httplib.
# Needs CMake 3.18 (REQUIRED in find_path / find_library).

find_package(Threads REQUIRED)

if(NOT TARGET caf::core)
  find_path(CAF_INCLUDE_DIR caf/all.hpp REQUIRED)
  find_library(CAF_CORE_LIBRARY caf_core REQUIRED)
  find_library(CAF_IO_LIBRARY caf_io REQUIRED)
  add_library(caf::core INTERFACE IMPORTED)
  target_include_directories(caf::core SYSTEM INTERFACE ${CAF_INCLUDE_DIR})
  target_link_libraries(caf::core INTERFACE ${CAF_CORE_LIBRARY} Threads::Threads)
  add_library(caf::io INTERFACE IMPORTED)
  target_link_libraries(caf::io INTERFACE ${CAF_IO_LIBRARY} caf::core)
endif()

if(NOT TARGET actorps::csv)
  find_path(CSV_INCLUDE_DIR csv.h REQUIRED)
  find_library(CSV_LIBRARY csv REQUIRED)
  add_library(actorps::csv INTERFACE IMPORTED)
  target_include_directories(actorps::csv SYSTEM INTERFACE ${CSV_INCLUDE_DIR})
  target_link_libraries(actorps::csv INTERFACE ${CSV_LIBRARY})
endif()

if(NOT TARGET actorps::httplib)
  find_package(OpenSSL 1.1.1 REQUIRED)
  find_path(HTTPLIB_INCLUDE_DIR httplib.h REQUIRED)
  find_library(HTTPLIB_LIBRARY cpp-httplib REQUIRED)
  add_library(actorps::httplib INTERFACE IMPORTED)
  target_include_directories(actorps::httplib SYSTEM INTERFACE ${HTTPLIB_INCLUDE_DIR})
  target_compile_definitions(actorps::httplib INTERFACE
    CPPHTTPLIB_OPENSSL_SUPPORT CPPHTTPLIB_ZLIB_SUPPORT CPPHTTPLIB_BROTLI_SUPPORT)
  target_link_libraries(actorps::httplib INTERFACE ${HTTPLIB_LIBRARY}
    OpenSSL::SSL OpenSSL::Crypto Threads::Threads)
endif()
