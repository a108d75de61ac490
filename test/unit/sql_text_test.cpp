#include "sql_text.hpp"

#include <catch2/catch.hpp>

using compaction::sql::Render;

TEST_CASE("the SQL renderer replaces each placeholder") {
  CHECK(Render("CREATE TABLE {schema}.message_{id} ({id})",
               {{"{schema}", "\"s\""}, {"{id}", "42"}}) ==
        "CREATE TABLE \"s\".message_42 (42)");
  CHECK(Render("{id}{id}", {{"{id}", "7"}}) == "77");
  CHECK(Render("no placeholders { } {x}", {{"{id}", "7"}}) ==
        "no placeholders { } {x}");
  CHECK(Render("", {{"{id}", "7"}}).empty());
}

TEST_CASE("the SQL renderer never rescans a substituted value") {
  // A schema named {id} stays "{id}": before the single pass, the topic id
  // was substituted into it and the tables landed in another schema.
  CHECK(Render("{schema}.compaction_head_{id}",
               {{"{schema}", "\"{id}\""}, {"{id}", "9"}}) ==
        "\"{id}\".compaction_head_9");
  CHECK(Render("{id} {schema}", {{"{id}", "{schema}"}, {"{schema}", "x"}}) ==
        "{schema} x");
}
