// The two jobs a topic's timers run: the headless sweep
// (Janitor::SweepHeadless) and the log cleaner (Janitor::CompactLog). Both
// report a compaction::CompactResult (the sweep's tombstones_expired is 0)
// and are scheduled, logged and measured alike; what tells them apart is in
// one place, scheduler.cpp.
#pragma once

#include <array>
#include <cstddef>

namespace compactiond {

enum class Job { kSweep, kClean };

inline constexpr std::array<Job, 2> kJobs = {Job::kSweep, Job::kClean};

// The job's index in per-job arrays.
constexpr std::size_t Index(Job job) { return static_cast<std::size_t>(job); }

}  // namespace compactiond
