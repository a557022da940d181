export { consoleRoutes } from './console.routes';
