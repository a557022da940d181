/** A usage row as the router hands it to the usage writer: an anonymous, costless answer of `model` with `promptTokens`. */
import type { UsageRecord } from '../../src/modules/metering/metering.usage';

export const usageRecord = (id: string, promptTokens: number, model = 'm1'): UsageRecord => ({
  id,
  createdAt: new Date(),
  userId: null,
  keyId: null,
  entrypoint: 'chat',
  model,
  backend: `http://${model}.invalid`,
  promptTokens,
  completionTokens: 1,
  cachedTokens: 0,
  reasoningTokens: 0,
  costMicros: 0n,
  costUsdMicros: 0n,
  tokensCounted: true,
  clamped: false,
  latencyMs: 5,
  status: 200,
  streamed: false,
  aborted: false,
  requestId: `request-of-${id}`,
});
