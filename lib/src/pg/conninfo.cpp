#include "pg/conninfo.hpp"

#include <libpq-fe.h>

#include "compaction/errors.hpp"

namespace compaction::pg {

ConnParams ParseConninfo(const std::string& conninfo, const char* operation) {
  // libpq's parse errors quote the offending text, which can be a password:
  // say only that it is wrong.
  char* parse_error = nullptr;
  PQconninfoOption* parsed = PQconninfoParse(conninfo.c_str(), &parse_error);
  PQfreemem(parse_error);
  if (parsed == nullptr) {
    throw InvalidArgument(
        operation, "conninfo is not a valid libpq connection string or URI");
  }
  ConnParams params;
  for (PQconninfoOption* o = parsed; o->keyword != nullptr; ++o) {
    if (o->val != nullptr) params[o->keyword] = o->val;
  }
  PQconninfoFree(parsed);
  return params;
}

}  // namespace compaction::pg
