// The one umbrella header of libcompaction.
#pragma once

#include "compaction/client.hpp"
#include "compaction/conninfo.hpp"
#include "compaction/consumer.hpp"
#include "compaction/errors.hpp"
#include "compaction/janitor.hpp"
#include "compaction/message.hpp"
#include "compaction/options.hpp"
#include "compaction/producer.hpp"
#include "compaction/stats.hpp"
#include "compaction/topic.hpp"
#include "compaction/topic_events.hpp"
#include "compaction/tx.hpp"
