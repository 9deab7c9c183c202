#include "kv_connector/kv_connector_factory.h"

#include "common/logging.h"
#include "kv_connector/multi_connector.h"
#include "kv_connector/pd_connector.h"
#include "kv_connector/pool_connector.h"

namespace tandem {

std::unique_ptr<KvConnector> CreateKvConnector(const KvConnectorContext& context) {
  const EngineOptions& o = *context.options;
  std::vector<std::unique_ptr<KvConnector>> connectors;
  if (o.kv_transfer.producer || o.kv_transfer.consumer) connectors.push_back(std::make_unique<PdConnector>(context));
  if (o.pool.enabled) {
    if (!o.enable_prefix_caching) {
      TANDEM_LOG(WARNING) << "the KV pool connector needs prefix caching (block hashes); it is off";
    } else {
      connectors.push_back(std::make_unique<PoolConnector>(context));
    }
  }
  if (connectors.empty()) return nullptr;
  if (connectors.size() == 1) return std::move(connectors.front());
  return std::make_unique<MultiConnector>(std::move(connectors));
}

}  // namespace tandem
