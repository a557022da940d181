export { createGatewayService, type GatewayService } from './gateway.service';
export { gatewayRoutes } from './gateway.routes';
