export { createAuditService, type AuditActor, type AuditEntry, type AuditService } from './audit.service';
