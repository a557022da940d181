export { createGatewayService, type GatewayService } from './gateway.service';
export { gatewayEdge, gatewayRoutes } from './gateway.routes';
