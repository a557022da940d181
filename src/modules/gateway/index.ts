export { createGatewayService, type GatewayService } from './gateway.service';
export { gatewayCostHeader, gatewayRoutes } from './gateway.routes';
