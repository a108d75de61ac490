# Installs compactiond.service with the paths of this installation, at
# install time: `cmake --install BUILD --prefix P` (or CPack's staging) sets
# CMAKE_INSTALL_PREFIX then, not at configure time. Included from the
# install(CODE) of daemon/CMakeLists.txt, which sets COMPACTIOND_UNIT_TEMPLATE,
# COMPACTIOND_UNIT_DIR, COMPACTIOND_BINDIR and COMPACTIOND_CONF_DIR (each
# absolute, or relative to the prefix).
foreach(var COMPACTIOND_UNIT_DIR COMPACTIOND_BINDIR COMPACTIOND_CONF_DIR)
  if(IS_ABSOLUTE "${${var}}")
    set(${var}_FULL "${${var}}")
  else()
    set(${var}_FULL "${CMAKE_INSTALL_PREFIX}/${${var}}")
  endif()
endforeach()
set(COMPACTIOND_BINARY "${COMPACTIOND_BINDIR_FULL}/compactiond")
set(COMPACTIOND_CONFIG "${COMPACTIOND_CONF_DIR_FULL}/compactiond.conf")
get_filename_component(_unit_stage "${COMPACTIOND_UNIT_TEMPLATE}" DIRECTORY)
set(_unit_stage "${_unit_stage}/unit-staging")
# string(REPLACE), not configure_file: the unit has @ of its own
# (SystemCallFilter=@system-service).
file(READ "${COMPACTIOND_UNIT_TEMPLATE}" _unit)
string(REPLACE "%COMPACTIOND_BINARY%" "${COMPACTIOND_BINARY}" _unit "${_unit}")
string(REPLACE "%COMPACTIOND_CONFIG%" "${COMPACTIOND_CONFIG}" _unit "${_unit}")
file(WRITE "${_unit_stage}/compactiond.service" "${_unit}")
file(INSTALL DESTINATION "${COMPACTIOND_UNIT_DIR_FULL}" TYPE FILE
     FILES "${_unit_stage}/compactiond.service")
