// COMPACTION_EXPORT marks the public API of libcompaction.
//
// The library is compiled with -fvisibility=hidden and
// -fvisibility-inlines-hidden, so a shared libcompaction.so.0 exports exactly
// the classes and functions marked here (its version script lib/compaction.map
// then gives each the version COMPACTION_0). Exception classes must be marked
// so that their typeinfo is one across the library and the program: a catch in
// the program matches what the library threw. The same attribute serves the
// static library, where it changes nothing.
#pragma once

#if defined(__GNUC__) || defined(__clang__)
#define COMPACTION_EXPORT __attribute__((visibility("default")))
#else
#define COMPACTION_EXPORT
#endif
