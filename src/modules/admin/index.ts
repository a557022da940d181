export { createAdminService, type AdminService } from './admin.service';
export { adminRoutes } from './admin.routes';
