// WorkerPool: the only place blocking database calls run. A fixed set of
// threads (sized to the client's connection pool, so the library never has
// more callers than connections); each job's result is posted back to the
// io_context, where all daemon state lives.
//
// Lifetime: owned by the App; Join() before the io_context is destroyed.
// Thread safety: Submit may be called from any thread.
#pragma once

#include <exception>
#include <optional>
#include <utility>

#include "daemon/asio.hpp"

namespace compactiond {

template <class T>
struct Outcome {
  std::optional<T> value;
  std::exception_ptr error;  // set instead of value when the job threw
  bool ok() const { return !error; }
};

class WorkerPool {
 public:
  WorkerPool(asio::io_context& io, int threads) : io_(io), pool_(threads) {}
  ~WorkerPool() { Join(); }
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  // Runs work() on a worker thread, then done(Outcome) on the io_context.
  template <class Work, class Done>
  void Submit(Work work, Done done) {
    asio::post(pool_, [&io = io_, work = std::move(work),
                       done = std::move(done)]() mutable {
      using R = decltype(work());
      Outcome<R> out;
      try {
        out.value.emplace(work());
      } catch (...) {
        out.error = std::current_exception();
      }
      asio::post(io, [done = std::move(done), out = std::move(out)]() mutable {
        done(std::move(out));
      });
    });
  }

  // Waits for queued jobs to finish and the threads to exit.
  void Join() { pool_.join(); }

 private:
  asio::io_context& io_;
  asio::thread_pool pool_;
};

}  // namespace compactiond
