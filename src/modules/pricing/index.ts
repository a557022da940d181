export { createPricingService, type GpuPrice, type ModelPrice, type PricingService } from './pricing.service';
export { pricingRoutes } from './pricing.routes';
export { PRICE_UNITS, type PriceUnit } from './pricing.schemas';
export { pricingPages } from './pricing.pages';
