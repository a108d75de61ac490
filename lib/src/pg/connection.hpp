// The pg layer, the only code that includes libpq: connections and their
// sessions (session.hpp), conninfo and startup options (conninfo.hpp),
// statements and pipelines (exec.hpp), results (result.hpp), errors and
// quoting (errors.hpp), cancelling (cancel.hpp). Elsewhere a connection is
// an opaque pg_conn* handed to these functions, and results are read
// through pg::Result.
#pragma once

#include "pg/cancel.hpp"
#include "pg/conninfo.hpp"
#include "pg/errors.hpp"
#include "pg/exec.hpp"
#include "pg/result.hpp"
#include "pg/session.hpp"
