/**
 * The operator's shell verbs (`cpd users list|disable|enable|promote|demote|password`, `cpd wallet
 * adjust`, `cpd payments refund`) run the same admin service as the HTTP API, in this site's
 * database (same environment as `cpd serve`), and are audited with the actor `cli`. Each prints
 * JSON on success; a refused request prints one line on stderr and exits 1.
 */
import { loadConfig } from '../config';
import { createAccountsService } from '../modules/accounts';
import { createAdminService } from '../modules/admin';
import { createOrgDirectory, createOrgMoneyAudit } from '../modules/orgs';
import { createAuditService } from '../modules/audit';
import { createBillingService } from '../modules/billing';
import { createPricingService } from '../modules/pricing';
import { AppError } from '../platform/errors';
import { migrateForCommand, openForCommand, requireExistingSchema } from './database';

export type Operation = (services: { admin: ReturnType<typeof createAdminService>; accounts: ReturnType<typeof createAccountsService> }) => Promise<unknown>;

/** Opens the database, runs `op` and prints its answer as JSON (nothing for undefined). */
export async function operate(command: string, op: Operation): Promise<void> {
  // These verbs act on a served site: they never create its database (one line, exit 2 instead).
  const ctx = await openForCommand(loadConfig(), { existing: true });
  try {
    await requireExistingSchema(ctx);
    await migrateForCommand(ctx);
    const accounts = createAccountsService(ctx);
    const audit = createAuditService(ctx);
    const billing = createBillingService(ctx, { audit: createOrgMoneyAudit({ audit, emailsOf: accounts.emailsOf }) });
    const admin = createAdminService(ctx, { accounts, billing, audit, orgs: createOrgDirectory(ctx), priceGroups: createPricingService(ctx).groups });
    const answer = await op({ admin, accounts });
    if (answer !== undefined) console.log(JSON.stringify(answer));
  } catch (err) {
    if (!(err instanceof AppError)) throw err;
    console.error(`cpd ${command}: ${err.message}`);
    process.exitCode = 1;
  } finally {
    await ctx.shutdown();
  }
}
