# SPDX-License-Identifier: Apache-2.0
# Debian packages with CPack (`cpack -G DEB` in a BUILD_SHARED_LIBS=ON build
# configured with CMAKE_INSTALL_PREFIX=/usr; deploy/debian/build.sh does it):
#   libcompaction0     component runtime: libcompaction.so.0 (shlibs, ldconfig)
#   libcompaction-dev  component dev: headers, libcompaction.so, libcompaction.a,
#                      CMake package, pkg-config file
#   compactiond        component daemon: binary, man page, conffile
#                      /etc/compactiond/compactiond.conf, systemd unit, system
#                      user (postinst), Prometheus/Grafana examples
# Each package also gets /usr/share/doc/<name>/{copyright,changelog.Debian.gz}.
set(COMPACTION_DEB_RELEASE 1)
set(DEB_DIR ${PROJECT_SOURCE_DIR}/deploy/debian)
set(DEB_OUT ${PROJECT_BINARY_DIR}/debian)

# The changelog, compressed reproducibly (gzip -n: no name, no time stamp).
set(CPACK_DEBIAN_PACKAGE_RELEASE ${COMPACTION_DEB_RELEASE})
configure_file(${DEB_DIR}/changelog.in ${DEB_OUT}/changelog.Debian @ONLY)
find_program(GZIP_EXECUTABLE gzip REQUIRED)
add_custom_command(OUTPUT ${DEB_OUT}/changelog.Debian.gz
  COMMAND ${GZIP_EXECUTABLE} -9nkf ${DEB_OUT}/changelog.Debian
  DEPENDS ${DEB_OUT}/changelog.Debian VERBATIM)
add_custom_target(deb_changelog ALL DEPENDS ${DEB_OUT}/changelog.Debian.gz)
foreach(pair runtime:libcompaction0 dev:libcompaction-dev daemon:compactiond)
  string(REPLACE ":" ";" pair "${pair}")
  list(GET pair 0 component)
  list(GET pair 1 package)
  install(FILES ${DEB_DIR}/copyright ${DEB_OUT}/changelog.Debian.gz
    DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/doc/${package} COMPONENT ${component})
endforeach()

# Maintainer scripts and conffiles under the names dpkg wants.
foreach(f postinst prerm postrm conffiles)
  configure_file(${DEB_DIR}/compactiond.${f} ${DEB_OUT}/compactiond/${f} COPYONLY)
endforeach()
foreach(f triggers postinst postrm)
  configure_file(${DEB_DIR}/libcompaction0.${f} ${DEB_OUT}/libcompaction0/${f} COPYONLY)
endforeach()

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME compaction)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT
  "libcompaction maintainers <maintainers@users.noreply.a-seed-b5804136.example>")
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL runtime dev daemon)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
# Apache-2.0 (LICENSE; deploy/debian/copyright says so in Debian's
# machine-readable format, which is where a .deb carries its license). The
# SPDX identifier for generators that have a license field (RPM), and the
# text for those that show it.
set(CPACK_RPM_PACKAGE_LICENSE Apache-2.0)
set(CPACK_RESOURCE_FILE_LICENSE ${PROJECT_SOURCE_DIR}/LICENSE)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# compactiond needs libcompaction.so.0 from this build; its dependency on
# libcompaction0 is declared below (dpkg-shlibdeps finds no package for it).
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS ${PROJECT_BINARY_DIR}/lib)
set(DEB_SELF "${PROJECT_VERSION}-${COMPACTION_DEB_RELEASE}")

set(CPACK_DEBIAN_RUNTIME_PACKAGE_NAME libcompaction0)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_SECTION libs)
# shlibs for the packages that have shared objects (libcompaction0 only):
# "libcompaction 0 libcompaction0 (>= 0.1.0-1)".
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS_POLICY ">=")
# ldconfig runs through dpkg's trigger; the maintainer scripts CPack would
# write instead (calling ldconfig) are replaced by ones that do nothing else.
set(CPACK_DEBIAN_RUNTIME_PACKAGE_CONTROL_EXTRA
  ${DEB_OUT}/libcompaction0/triggers ${DEB_OUT}/libcompaction0/postinst
  ${DEB_OUT}/libcompaction0/postrm)
set(CPACK_DEBIAN_RUNTIME_DESCRIPTION
"compacted topics on PostgreSQL - shared library
libcompaction keeps compacted topics (the latest message per key, like a
compacted log) in PostgreSQL tables, with a compaction head that a
transaction can lock, read and advance together with its own writes.
.
This package contains the shared library.")

set(CPACK_DEBIAN_DEV_PACKAGE_NAME libcompaction-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS
  "libcompaction0 (= ${DEB_SELF}), nlohmann-json3-dev (>= 3.11), libpq-dev")
set(CPACK_DEBIAN_DEV_DESCRIPTION
"compacted topics on PostgreSQL - development files
libcompaction keeps compacted topics (the latest message per key, like a
compacted log) in PostgreSQL tables, with a compaction head that a
transaction can lock, read and advance together with its own writes.
.
This package contains the C++20 headers, the static library, the CMake
package (find_package(compaction)) and the pkg-config file.")

set(CPACK_DEBIAN_DAEMON_PACKAGE_NAME compactiond)
set(CPACK_DEBIAN_DAEMON_PACKAGE_SECTION database)
set(CPACK_DEBIAN_DAEMON_PACKAGE_DEPENDS "libcompaction0 (= ${DEB_SELF}), adduser")
set(CPACK_DEBIAN_DAEMON_PACKAGE_CONTROL_EXTRA
  ${DEB_OUT}/compactiond/postinst ${DEB_OUT}/compactiond/prerm
  ${DEB_OUT}/compactiond/postrm ${DEB_OUT}/compactiond/conffiles)
set(CPACK_DEBIAN_DAEMON_PACKAGE_CONTROL_STRICT_PERMISSION ON)
set(CPACK_DEBIAN_DAEMON_DESCRIPTION
"janitor and metrics exporter for libcompaction topics
compactiond deletes the expired headless rows of every compacted topic
registered with libcompaction, in short batches that never wait on a locked
key, and exports Prometheus metrics (/metrics, /healthz, /readyz).
.
The package installs a sandboxed systemd unit (not enabled: set the database
in /etc/compactiond/compactiond.conf first), creates the compactiond system
user, and ships Prometheus alert rules and a Grafana dashboard as examples.")

include(CPack)
