// CreateKvConnector: the connectors an engine's options ask for, as the engine's
// EngineOptions::kv_connector_factory (engine/kv_connector.h is all the engine sees).
//
// Thread safety: a pure function of its context; called once per engine, at its start.
#pragma once

#include <memory>

#include "engine/kv_connector.h"

namespace tandem {

// `context.options` asks for: a producer or consumer (kv_transfer) -> PdConnector; the
// pool -> PoolConnector (needs prefix caching: without it a warning and none); both ->
// a MultiConnector of the PD connector then the pool's (a pull wins over a lookup).
// Null when none.
std::unique_ptr<KvConnector> CreateKvConnector(const KvConnectorContext& context);

}  // namespace tandem
