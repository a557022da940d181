export { createAdmission, type Need, type Ticket } from './metering.admission';
export { createKeyLimits, type KeyEvents, type KeyLimitsSource } from './metering.key-limits';
export { applyLimits, limitsView, type LimitsView } from './metering.key-limits.input';
export { NO_LIMITS, memberBudgetId, type KeyLimits, type KeyLimitsInput, type KeyPolicy, type MemberBudget, type SpendPeriod } from './metering.key-limits.types';
export { addGenerated, completionCounts, countGenerated, createStreamMeter, deltasOf, hasOutput, noneGenerated, type Chunk, type StreamOutcome, type UsageCounts } from './metering.meter';
export { costOf, estimateCost, minimumCost, completionWithin, requestBound, usdConverter, type EstimateSettings, type Price, type RequestBound } from './metering.pricing';
export { routerUsage } from './metering.tables';
export { countPromptTokens, countTexts, loadTokenizer } from './metering.tokens';
export { createUsageWriter, type UsageDebitor, type UsageRecord } from './metering.usage';
